#include "server/service_rollout.h"

#include <algorithm>

namespace arbiter::server {

std::string_view ReplicaPhaseName(ReplicaPhase p) {
  switch (p) {
    case ReplicaPhase::kPending:
      return "pending";
    case ReplicaPhase::kStarting:
      return "starting";
    case ReplicaPhase::kReady:
      return "ready";
    case ReplicaPhase::kDraining:
      return "draining";
  }
  return "pending";
}

std::map<int64_t, int32_t> DesiredReplicas(int32_t replicas,
                                           const std::vector<TrafficSplit>& traffic) {
  std::map<int64_t, int32_t> out;
  for (const TrafficSplit& t : traffic) {
    if (replicas <= 0 || t.percent <= 0) {
      out[t.revision] += 0;
      continue;
    }
    // ceil(replicas x p / 100), at least 1.
    const int64_t want = (int64_t{replicas} * t.percent + 99) / 100;
    out[t.revision] += static_cast<int32_t>(std::max<int64_t>(1, want));
  }
  return out;
}

namespace {

int32_t DesiredOf(const std::map<int64_t, int32_t>& desired, int64_t revision) {
  auto it = desired.find(revision);
  return it == desired.end() ? 0 : it->second;
}

// The order surplus replicas go in: those that serve nothing first (pending, then starting),
// then ready ones; within each, the oldest revision, then the newest job (the last started).
int PhaseRank(ReplicaPhase p) {
  switch (p) {
    case ReplicaPhase::kPending:
      return 0;
    case ReplicaPhase::kStarting:
      return 1;
    default:
      return 2;
  }
}

}  // namespace

RolloutPlan PlanRollout(int32_t replicas, const RolloutSpec& rollout,
                        const std::vector<TrafficSplit>& traffic,
                        const std::vector<ReplicaView>& live, bool may_start) {
  RolloutPlan plan;
  plan.desired = DesiredReplicas(replicas, traffic);
  int32_t desired_total = 0;
  for (const auto& [rev, n] : plan.desired) desired_total += n;

  // 1. Count what runs: per revision (not draining), in all, and ready.
  std::map<int64_t, int32_t> count;
  int32_t total = 0;
  int32_t ready_total = 0;
  for (const ReplicaView& r : live) {
    if (r.phase == ReplicaPhase::kDraining) continue;
    ++count[r.revision];
    ++total;
    if (r.phase == ReplicaPhase::kReady) ++ready_total;
  }

  // 2. Surplus: replicas of revisions beyond what they want, in the order they should go.
  std::vector<const ReplicaView*> surplus;
  {
    std::map<int64_t, std::vector<const ReplicaView*>> by_rev;
    for (const ReplicaView& r : live) {
      if (r.phase != ReplicaPhase::kDraining) by_rev[r.revision].push_back(&r);
    }
    for (auto& [rev, list] : by_rev) {
      const int32_t extra = static_cast<int32_t>(list.size()) - DesiredOf(plan.desired, rev);
      if (extra <= 0) continue;
      std::sort(list.begin(), list.end(), [](const ReplicaView* a, const ReplicaView* b) {
        if (PhaseRank(a->phase) != PhaseRank(b->phase)) {
          return PhaseRank(a->phase) < PhaseRank(b->phase);
        }
        return a->job > b->job;
      });
      surplus.insert(surplus.end(), list.begin(), list.begin() + extra);
    }
    std::stable_sort(surplus.begin(), surplus.end(),
                     [](const ReplicaView* a, const ReplicaView* b) {
                       if (PhaseRank(a->phase) != PhaseRank(b->phase)) {
                         return PhaseRank(a->phase) < PhaseRank(b->phase);
                       }
                       return a->revision < b->revision;
                     });
  }

  // 3. Take out surplus replicas: those not ready at once (they serve nothing); a ready one only
  //    while ready_total - 1 >= desired_total - max_unavailable.
  for (const ReplicaView* r : surplus) {
    if (r->phase == ReplicaPhase::kReady) {
      if (ready_total - 1 < desired_total - rollout.max_unavailable) continue;
      --ready_total;
    }
    plan.drain.push_back(r->job);
    --count[r->revision];
    --total;
  }

  // 4. Start what revisions lack, newest revision first (the rollout's target), while
  //    total < desired_total + max_surge.
  if (!may_start) return plan;
  for (auto it = plan.desired.rbegin(); it != plan.desired.rend(); ++it) {
    const auto& [rev, want] = *it;
    for (int32_t have = count[rev]; have < want; ++have) {
      if (total >= desired_total + rollout.max_surge) return plan;
      plan.start.push_back(rev);
      ++total;
    }
  }
  return plan;
}

std::vector<RouteWeight> RouteWeights(const std::vector<TrafficSplit>& traffic,
                                      const std::map<int64_t, int32_t>& desired,
                                      const std::map<int64_t, int32_t>& ready) {
  std::map<int64_t, double> weight;
  std::map<int64_t, int32_t> target;
  for (const TrafficSplit& t : traffic) target[t.revision] += t.percent;
  auto ready_of = [&ready](int64_t rev) {
    auto it = ready.find(rev);
    return it == ready.end() ? 0 : it->second;
  };
  // weight(r) = p(r) x min(1, ready(r) / desired(r)) for the revisions with p > 0.
  double sum = 0;
  for (const auto& [rev, p] : target) {
    if (p <= 0) continue;
    const int32_t want = DesiredOf(desired, rev);
    const int32_t have = ready_of(rev);
    const double f =
        want <= 0 ? (have > 0 ? 1.0 : 0.0) : std::min(1.0, static_cast<double>(have) / want);
    weight[rev] = p * f;
    sum += p * f;
  }
  // The rest goes to revisions without a target share that still have ready replicas, by their
  // ready count: traffic leaves an old revision only as the new one becomes ready.
  int32_t others = 0;
  for (const auto& [rev, n] : ready) {
    auto t = target.find(rev);
    if (n > 0 && (t == target.end() || t->second <= 0)) others += n;
  }
  for (const auto& [rev, n] : ready) {
    auto t = target.find(rev);
    if (n <= 0 || (t != target.end() && t->second > 0)) continue;
    weight[rev] = others > 0 && sum < 100 ? (100 - sum) * n / others : 0;
  }
  std::vector<RouteWeight> out;
  for (const auto& [rev, w] : weight) out.push_back({rev, w});
  return out;
}

DurationMs ReplaceBackoffMs(int32_t failures) {
  if (failures <= 0) return 0;
  DurationMs b = 1000;
  for (int32_t i = 1; i < failures && b < 60000; ++i) b *= 2;
  return std::min<DurationMs>(b, 60000);
}

bool RollbackTarget(const std::vector<TrafficSplit>& traffic, const std::vector<int64_t>& revisions,
                    int64_t latest, int64_t* out) {
  // The revision that has the most traffic now (the latest when traffic is empty).
  int64_t top = latest;
  int32_t best = -1;
  for (const TrafficSplit& t : traffic) {
    if (t.percent > best || (t.percent == best && t.revision > top)) {
      best = t.percent;
      top = t.revision;
    }
  }
  bool found = false;
  for (int64_t r : revisions) {
    if (r < top && (!found || r > *out)) {
      *out = r;
      found = true;
    }
  }
  return found;
}

std::vector<TrafficSplit> LatestTraffic(int64_t latest) { return {{latest, 100}}; }

}  // namespace arbiter::server

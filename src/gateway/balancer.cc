#include "gateway/balancer.h"

#include <algorithm>
#include <cstdint>
#include <map>

namespace arbiter::gateway {

const Service* Table::FindByName(std::string_view name) const {
  const auto it = by_name.find(std::string(name));
  return it == by_name.end() ? nullptr : it->second;
}

const Service* Table::FindByHost(std::string_view host) const {
  if (by_host.empty()) return nullptr;
  const auto it = by_host.find(std::string(host));
  return it == by_host.end() ? nullptr : it->second;
}

std::shared_ptr<const Table> BuildTable(const RouteTable& spec, const Table* previous,
                                        const Resolver& resolve, Stats& stats, int shards,
                                        uint64_t* next_serial) {
  // What survives from the previous table: replicas by (id, address), services by name.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Replica>> old_replicas;
  std::map<std::string, std::shared_ptr<ServiceShared>> old_services;
  if (previous != nullptr) {
    for (const auto& s : previous->services) {
      old_services[s->name] = s->shared;
      for (const Revision& r : s->revisions) {
        for (const auto& rep : r.replicas) old_replicas[{rep->id, rep->address}] = rep;
      }
    }
  }
  auto table = std::make_shared<Table>();
  table->version = spec.version;
  table->loaded = true;
  for (const ServiceRoute& sr : spec.services) {
    auto s = std::make_unique<Service>();
    s->name = sr.name;
    s->tenant = sr.tenant;
    s->max_concurrency = sr.max_concurrency;
    s->queue_max = sr.queue_max;
    s->queue_timeout_ms = sr.queue_timeout_ms;
    const auto shared = old_services.find(sr.name);
    s->shared = shared != old_services.end() ? shared->second : std::make_shared<ServiceShared>();
    double best_percent = -1;
    for (const RevisionRoute& rr : sr.revisions) {
      Revision r;
      r.revision = rr.revision;
      r.label = std::to_string(rr.revision);
      r.percent = rr.percent;
      for (const ReplicaRoute& rep : rr.replicas) {
        std::shared_ptr<Replica> replica;
        const auto old = old_replicas.find({rep.id, rep.address});
        if (old != old_replicas.end()) {
          replica = old->second;
        } else {
          replica = std::make_shared<Replica>();
          replica->id = rep.id;
          replica->address = rep.address;
          replica->serial = ++*next_serial;
          if (!resolve(rep.address, replica.get())) replica->addr_len = 0;
        }
        if (replica->addr_len == 0) continue;  // never routable
        r.replicas.push_back(std::move(replica));
      }
      for (int i = 0; i < shards; ++i) {
        r.counters.push_back(stats.Counters(i, sr.name, rr.revision));
      }
      if (rr.percent > best_percent) {
        best_percent = rr.percent;
        s->unrouted_revision = rr.revision;
      }
      s->revisions.push_back(std::move(r));
    }
    for (int i = 0; i < shards; ++i) {
      s->unrouted_counters.push_back(stats.Counters(i, sr.name, s->unrouted_revision));
    }
    // Weights: the percents of the revisions with replicas, renormalised; when they are all 0
    // (the server lists replicas of revisions without traffic only while no other has any),
    // by replica count.
    double total = 0;
    for (const Revision& r : s->revisions) {
      if (r.replicas.empty()) continue;
      s->routable.push_back(&r);
      total += r.percent;
    }
    for (const Revision* r : s->routable) {
      s->routable_weights.push_back(total > 0 ? r->percent / total
                                              : static_cast<double>(r->replicas.size()));
    }
    if (total <= 0) {
      double n = 0;
      for (const double w : s->routable_weights) n += w;
      for (double& w : s->routable_weights) w /= n;
    }
    for (const std::string& h : sr.hosts) table->by_host[h] = s.get();
    table->by_name[s->name] = s.get();
    table->services.push_back(std::move(s));
  }
  return table;
}

const Revision* PickRevision(const Service& service, double u) {
  const size_t n = service.routable.size();
  if (n == 0) return nullptr;
  double acc = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    acc += service.routable_weights[i];
    if (u < acc) return service.routable[i];
  }
  return service.routable[n - 1];
}

namespace {

bool UnderLimit(const Replica& r, int64_t max) {
  return max <= 0 || r.outstanding.load(std::memory_order_relaxed) < max;
}

// One more outstanding request on `r` unless that passes `max`.
bool TryTake(Replica& r, int64_t max) {
  if (max <= 0) {
    r.outstanding.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  int64_t cur = r.outstanding.load(std::memory_order_relaxed);
  while (cur < max) {
    if (r.outstanding.compare_exchange_weak(cur, cur + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

}  // namespace

Acquired AcquireReplica(const Revision& revision, int64_t max_concurrency, int64_t now_ms,
                        const Replica* exclude, uint64_t random) {
  Acquired out;
  const auto& reps = revision.replicas;
  const size_t n = reps.size();
  if (n == 0) return out;
  // Candidates: not excluded and not ejected; when none is left but ejected ones, those.
  bool any_healthy = false;
  for (const auto& r : reps) {
    if (r.get() == exclude) continue;
    out.any_candidate = true;
    if (!r->Ejected(now_ms)) {
      any_healthy = true;
      break;
    }
  }
  if (!out.any_candidate) return out;
  auto candidate = [&](const Replica& r) {
    return &r != exclude && (!any_healthy || !r.Ejected(now_ms)) && UnderLimit(r, max_concurrency);
  };
  // Bounded: every failed TryTake means another thread took the last slot of that replica.
  for (size_t attempt = 0; attempt < n + 2; ++attempt) {
    const uint64_t x = random + attempt * 0x9e3779b97f4a7c15ULL;
    constexpr size_t kNone = SIZE_MAX;
    size_t best = kNone;
    auto consider = [&](size_t i) {
      const Replica& r = *reps[i];
      if (!candidate(r)) return;
      if (best == kNone || r.outstanding.load(std::memory_order_relaxed) <
                               reps[best]->outstanding.load(std::memory_order_relaxed)) {
        best = i;
      }
    };
    // 1. Two at random, the less loaded.
    const size_t a = static_cast<size_t>(x % n);
    consider(a);
    if (n > 1) {
      size_t b = static_cast<size_t>((x >> 32) % (n - 1));
      if (b >= a) ++b;
      consider(b);
    }
    // 2. Neither can take it: the least loaded of all, scanning from a random start.
    if (best == kNone) {
      for (size_t k = 0; k < n; ++k) consider((a + k) % n);
    }
    if (best == kNone) return out;  // every candidate is at max_concurrency
    if (TryTake(*reps[best], max_concurrency)) {
      out.replica = reps[best];
      return out;
    }
  }
  return out;
}

}  // namespace arbiter::gateway

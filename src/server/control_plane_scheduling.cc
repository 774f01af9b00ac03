// ControlPlane: the scheduler driver (copy inputs, run the core, apply decisions) and the execution
// reports of the nodes.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <utility>

#include "api/agent_codec.h"
#include "api/job_codec.h"
#include "api/json_writer.h"
#include "core/budget/budget.h"
#include "server/admissibility.h"
#include "server/control_plane.h"
#include "server/control_plane_compiled.h"
#include "server/control_plane_helpers.h"
#include "server/dependencies.h"
#include "server/log_runs.h"
#include "server/reports.h"

namespace arbiter::server {

using nlohmann::json;
// --- Scheduling -------------------------------------------------------------------------------

namespace {

// A spread group per service, by name (the group of a service's replicas: they prefer distinct
// nodes and racks); interned per cycle, 0 for jobs of no service.
struct SpreadGroups {
  std::map<std::string, uint32_t> ids;
  uint32_t Of(const JobEntry& j) {
    if (!j.spec.service) return 0;
    return ids.try_emplace(j.spec.service->name, static_cast<uint32_t>(ids.size() + 1))
        .first->second;
  }
};

}  // namespace

core::PendingJob PendingJobOf(const JobEntry& j, QueueId q, const core::Cluster& cluster,
                              std::vector<core::Constraints>* constraints_out) {
  std::vector<core::Constraints>& constraints = *constraints_out;
  const PriorityClass* pc = j.priority_class;
  core::PendingJob p;
  p.id = j.spec.id;
  p.queue = q;
  p.priority = pc != nullptr ? pc->value : 0;
  p.preemptible = j.spec.preemptible.value_or(pc == nullptr || pc->preemptible);
  p.preempts_anywhere = pc != nullptr && pc->preempts_anywhere;
  p.distinct_nodes = j.spec.distinct_nodes;
  p.type = j.spec.type;
  p.tasks = j.spec.tasks;
  p.resources = j.spec.resources;
  for (const std::string& m : j.spec.gpu_models) p.models.push_back(cluster.FindModel(m));
  if (!j.spec.node_selector.empty() || !j.spec.tolerations.empty() || !j.spec.nodes.empty() ||
      !j.spec.exclude_nodes.empty() || j.spec.exclusive) {
    constraints.push_back(cluster.MakeConstraints(j.spec.node_selector, j.spec.tolerations));
    cluster.AddNodeConstraints(j.spec.nodes, j.spec.exclude_nodes, j.spec.exclusive,
                               &constraints.back());
    p.constraints = static_cast<uint32_t>(constraints.size() - 1);
  }
  p.walltime = SecondsToMs(j.spec.walltime_seconds);
  p.submit_time = j.spec.submit_time;
  p.not_before = j.not_before;
  if (pc != nullptr) p.grace_period = SecondsToMs(pc->grace_period_seconds);
  if (j.spec.grace_period_seconds) p.grace_period = SecondsToMs(*j.spec.grace_period_seconds);
  if (!j.spec.container_image.empty()) p.image = cluster.FindImage(j.spec.container_image);
  return p;
}

namespace {

// The core's view of a job holding capacity; false when a node of its placement is gone.
bool RunningJobOf(const JobEntry& j, QueueId q, bool orphan, const core::Cluster& cluster,
                  const core::QuotaTree& tree, core::RunningJob* out) {
  const PriorityClass* pc = j.priority_class;
  core::RunningJob& r = *out;
  r.id = j.spec.id;
  r.queue = q;
  r.priority = pc != nullptr ? pc->value : 0;
  r.preemptible = !orphan && j.spec.preemptible.value_or(pc == nullptr || pc->preemptible);
  r.model = cluster.FindModel(j.gpu_model);
  r.resources = j.spec.resources;
  r.exclusive = j.spec.exclusive;
  r.start_time = j.started_at > 0 ? j.started_at : j.updated_at;
  r.walltime = SecondsToMs(j.spec.walltime_seconds);
  if (pc != nullptr) {
    r.min_runtime = SecondsToMs(pc->min_runtime_seconds);
    r.grace_period = SecondsToMs(pc->grace_period_seconds);
  }
  if (j.spec.grace_period_seconds) r.grace_period = SecondsToMs(*j.spec.grace_period_seconds);
  r.terminating = j.state == JobState::kPreempting || j.stopping;
  // Its last checkpoint as its node saw it (only of this run: an older one was before its start).
  if (j.last_checkpoint_ms > r.start_time) r.last_checkpoint = j.last_checkpoint_ms;
  for (const std::string& name : j.preempted_queues) {
    QueueId pq;
    if (tree.Find(name, &pq)) r.preempted_queues.push_back(pq);
  }
  bool mapped = true;
  for (const PlacedTask& t : j.placement) {
    core::TaskPlacement tp;
    if (!cluster.FindNode(t.node, &tp.node)) {
      mapped = false;
      break;
    }
    const core::NodeInfo& info = cluster.node(tp.node);
    for (size_t g = 0; g < t.gpu_indices.size(); ++g) {
      for (uint16_t s = 0; s < info.gpu_count; ++s) {
        if (cluster.gpus()[info.gpu_begin + s].index != t.gpu_indices[g]) continue;
        tp.gpus.push_back({s, static_cast<int16_t>(t.gpu_milli[g]),
                           g < t.gpu_memory_mib.size() ? t.gpu_memory_mib[g] : 0});
      }
    }
    tp.cpu_milli = t.cpu_milli;
    tp.memory_mib = t.memory_mib;
    r.tasks.push_back(std::move(tp));
  }
  return mapped && !r.tasks.empty();
}

}  // namespace

// The admissions are durable: their nodes may start them now (AssignmentsFor skipped them), so
// a crash before the commit never leaves a task running for a job the store still has pending.
void ControlPlane::MarkDecisionsDurable(const core::CycleResult& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const core::Admission& a : result.admissions) {
      auto it = jobs_.all.find(a.job.value());
      if (it == jobs_.all.end() || it->second.dispatchable) continue;
      it->second.dispatchable = true;
      TouchNodesLocked(it->second);
    }
    // Likewise the preemptions: victims stop only once their preemption is durable.
    for (const core::PreemptionDecision& d : result.preemptions) {
      for (JobId v : d.victims) {
        auto it = jobs_.all.find(v.value());
        if (it == jobs_.all.end() || !it->second.stop_unpublished) continue;
        it->second.stop_unpublished = false;
        TouchNodesLocked(it->second);
      }
    }
  }
}

Result<size_t> ControlPlane::RunSchedulingCycle() {
  const auto t0 = std::chrono::steady_clock::now();
  // Quota requests whose `until` has passed are undone first (docs/approvals.md).
  ARBITER_RETURN_IF_ERROR(ExpireQuotaRequests().status());
  core::CycleInput in;
  std::vector<core::PendingJob> pending;
  std::vector<uint64_t> pending_ids;
  std::vector<JobEntry*> pending_entries;
  std::vector<core::RunningJob> running;
  std::vector<core::Constraints> constraints(1);
  std::vector<core::Nomination> nominations;
  std::vector<core::TenantBudget> budgets;
  std::vector<std::pair<QueueId, DurationMs>> lend_limits;
  std::shared_ptr<Compiled> compiled;
  std::shared_future<Status> promoted;
  const TimeMs now = now_();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    compiled = compiled_;
    const core::Cluster& cluster = compiled->cluster;
    const core::QuotaTree& tree = compiled->tree;
    store::WriteBatch b;
    std::optional<SingletonIndex> singletons;
    SpreadGroups spread;
    // Throttled arrays: their elements holding resources, counted at the first pending one.
    ArrayThrottle throttle([this](uint64_t array) {
      int32_t holding = 0;
      for (uint64_t e : jobs_.arrays.at(array).elements) {
        holding += jobs_.all.at(e).holds_capacity() ? 1 : 0;
      }
      return holding;
    });
    for (auto at = jobs_.active.begin(); at != jobs_.active.end();) {
      const uint64_t id = at->first;
      JobEntry& j = *at->second;
      if (IsFinal(j.state) && !j.stopping) {
        at = jobs_.active.erase(at);  // finished for good: later cycles pass it by
        continue;
      }
      ++at;
      if (ExpireApprovalLocked(j, &b)) continue;
      if (j.state == JobState::kRetryWait && j.not_before <= now) {
        RecordTransitionLocked(j, JobState::kPending, "retry backoff over", &b);
      }
      // Finished jobs (most of a long-lived server's) are passed over before any lookup.
      const bool is_pending = j.state == JobState::kPending || j.state == JobState::kRetryWait;
      if (!is_pending && !(j.holds_capacity() && !j.placement.empty())) continue;
      if (is_pending && !j.spec.depends_on.empty() &&
          HoldForDependenciesLocked(j, &singletons, &b)) {
        continue;
      }
      if (j.resolved_generation != compiled->generation) {
        auto pit = compiled->classes.find(j.spec.priority_class);
        j.priority_class = pit != compiled->classes.end() ? &pit->second : nullptr;
        j.queue_found = tree.Find(j.spec.queue, &j.queue_id);
        j.resolved_generation = compiled->generation;
      }
      // A job whose queue the configuration deleted (pruned: cancelled, its tasks still stopping)
      // keeps its GPUs until its node reports them free: counted against the root, so nothing
      // else is placed on them, and never a preemption victim.
      const bool orphan = !j.queue_found;
      if (orphan && is_pending) continue;
      // In ascending ids: an array's lower indices take its places first. An element in its retry
      // backoff cannot start this cycle and takes none (the core gives it Backoff).
      if (is_pending && j.spec.array.max_running > 0 && j.not_before <= now &&
          HoldForArrayThrottleLocked(j, &throttle)) {
        continue;
      }
      const QueueId q = orphan ? core::QuotaTree::kRoot : j.queue_id;
      if (is_pending) {
        pending.push_back(PendingJobOf(j, q, cluster, &constraints));
        if (j.spec.service) {
          pending.back().spread = spread.Of(j);
          // A fixed port: two replicas cannot listen on it on one node.
          const ServiceEntry* svc = services_.Find(j.spec.service->name);
          const ServiceRevision* rev =
              svc != nullptr ? svc->service.FindRevision(j.spec.service->revision) : nullptr;
          pending.back().spread_distinct = rev != nullptr && rev->port != 0;
        }
        pending_ids.push_back(id);
        pending_entries.push_back(&j);
      } else if (j.holds_capacity() && !j.placement.empty()) {
        core::RunningJob r;
        if (RunningJobOf(j, q, orphan, cluster, tree, &r)) {
          r.spread = spread.Of(j);
          running.push_back(std::move(r));
        }
      }
    }
    nominations = nominations_;
    budgets = BudgetsLocked(now);
    // Services' reclaim deadlines: their queue lends its idle guarantee only within the shortest.
    for (const auto& [name, e] : services_.all) {
      const int64_t deadline = e.service.spec.reclaim_deadline_seconds;
      QueueId q;
      if (deadline <= 0 || !tree.Find(e.service.spec.queue, &q)) continue;
      auto it = std::find_if(lend_limits.begin(), lend_limits.end(),
                             [&](const auto& l) { return l.first == q; });
      if (it == lend_limits.end()) {
        lend_limits.emplace_back(q, SecondsToMs(deadline));
      } else {
        it->second = std::min(it->second, SecondsToMs(deadline));
      }
    }
    if (!b.empty()) promoted = store_->WriteAsync(std::move(b));
  }
  if (promoted.valid()) ARBITER_RETURN_IF_ERROR(promoted.get());

  in.cluster = &compiled->cluster;
  in.tree = &compiled->tree;
  in.running = &running;
  in.pending = &pending;
  in.constraints = &constraints;
  in.nominations = &nominations;
  in.budgets = budgets.empty() ? nullptr : &budgets;
  in.lend_grace_limits = lend_limits.empty() ? nullptr : &lend_limits;
  in.now = now;
  core::CycleResult result = core::RunCycle(in, *compiled->profile);

  std::shared_future<Status> done;
  size_t admitted = 0;
  // The cycle's input, published for the expected starts (start_estimates.h): its vectors are
  // moved, not copied; the one it replaces is freed after the lock.
  std::shared_ptr<const CycleSnapshot> replaced;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.cycles;
    stats_.last_cycle_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    metrics_.SchedulingCycle(stats_.last_cycle_seconds);
    if (compiled != compiled_) return size_t{0};  // configuration changed meanwhile: next cycle
    store::WriteBatch b;
    ApplyCycleLocked(in, result, pending_ids, pending_entries, &b);
    auto snapshot = std::make_shared<CycleSnapshot>();
    snapshot->cluster = std::shared_ptr<const core::Cluster>(compiled, &compiled->cluster);
    snapshot->tree = std::shared_ptr<const core::QuotaTree>(compiled, &compiled->tree);
    snapshot->profile = std::shared_ptr<const core::Profile>(compiled, compiled->profile.get());
    snapshot->running = std::move(running);
    snapshot->pending = std::move(pending);
    snapshot->constraints = std::move(constraints);
    snapshot->nominations = std::move(nominations);
    snapshot->now = now;
    replaced = std::exchange(last_cycle_, std::move(snapshot));
    admitted = result.admissions.size();
    stats_.admissions += admitted;
    if (!b.empty()) done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.valid() ? done.get() : Status::Ok();
  MarkDecisionsDurable(result);
  ARBITER_RETURN_IF_ERROR(committed);
  return admitted;
}

bool ControlPlane::HoldForDependenciesLocked(JobEntry& j, std::optional<SingletonIndex>* singletons,
                                             store::WriteBatch* b) {
  uint64_t blocker = 0;
  const bool singleton =
      std::any_of(j.spec.depends_on.begin(), j.spec.depends_on.end(),
                  [](const Dependency& d) { return d.type == DependencyType::kSingleton; });
  if (singleton) {
    if (!*singletons) {
      singletons->emplace();
      // In ascending ids: the first job of each key is its earliest.
      for (const auto& [id, e] : jobs_.active) {
        if (IsFinal(e->state) && !e->stopping) continue;
        (*singletons)->try_emplace({e->spec.tenant, e->spec.user, e->spec.name}, id);
      }
    }
    auto it = (*singletons)->find({j.spec.tenant, j.spec.user, j.spec.name});
    if (it != (*singletons)->end() && it->second < j.spec.id.value()) blocker = it->second;
  }
  const DependencyVerdict v = EvaluateDependencies(
      j.spec.depends_on,
      [this](uint64_t id) -> std::optional<DependedJob> {
        // A finished job that left memory is read back (and its array with it).
        const JobEntry* found = FindJobLocked(id);
        if (found == nullptr) return std::nullopt;
        // An array's id stands for all its jobs, as in Slurm: started once any has, ended once
        // all have, succeeded only if all did (else as its first job that did not).
        auto a = jobs_.arrays.find(id);
        if (a == jobs_.arrays.end()) {
          const JobEntry& e = *found;
          return DependedJob{e.state, e.started_at > 0, IsFinal(e.state) && !e.stopping};
        }
        DependedJob all{JobState::kSucceeded, false, true};
        bool other = false;  // a job that did not succeed (or has not ended) sets the state
        for (uint64_t element : a->second.elements) {
          const JobEntry& e = jobs_.all.at(element);
          const bool ended = IsFinal(e.state) && !e.stopping;
          all.started |= e.started_at > 0;
          all.ended &= ended;
          if (!other && !(ended && e.state == JobState::kSucceeded)) {
            all.state = e.state;
            other = true;
          }
        }
        return all;
      },
      blocker);
  if (v.kind == DependencyVerdict::Kind::kMet) return false;
  if (v.kind == DependencyVerdict::Kind::kNever) {
    StopJobLocked(j, JobState::kCancelled, v.message, b);
    return true;
  }
  if (!j.verdict || j.verdict->code != core::VerdictCode::kDependency ||
      j.verdict->message != v.message) {
    core::Verdict verdict;
    verdict.job = j.spec.id;
    verdict.code = core::VerdictCode::kDependency;
    verdict.message = v.message;
    j.verdict = std::move(verdict);
  }
  return true;
}

bool ControlPlane::HoldForArrayThrottleLocked(JobEntry& j, ArrayThrottle* throttle) {
  std::string why;
  if (throttle->Offer(j.spec.array.id, j.spec.array.max_running, &why)) return false;
  if (!j.verdict || j.verdict->code != core::VerdictCode::kArrayThrottled ||
      j.verdict->message != why) {
    core::Verdict verdict;
    verdict.job = j.spec.id;
    verdict.code = core::VerdictCode::kArrayThrottled;
    verdict.message = std::move(why);
    j.verdict = std::move(verdict);
  }
  return true;
}

void ControlPlane::ApplyCycleLocked(const core::CycleInput& in, core::CycleResult& r,
                                    const std::vector<uint64_t>& pending_ids,
                                    const std::vector<JobEntry*>& pending_entries,
                                    store::WriteBatch* b) {
  const core::Cluster& cluster = *in.cluster;
  const core::QuotaTree& tree = *in.tree;
  PrePullsLocked(cluster, r.reservations);
  for (const core::Admission& a : r.admissions) {
    auto it = jobs_.all.find(a.job.value());
    if (it == jobs_.all.end() || it->second.state != JobState::kPending) continue;
    JobEntry& j = it->second;
    j.placement.clear();
    for (const core::TaskPlacement& t : a.tasks) {
      const core::NodeInfo& info = cluster.node(t.node);
      PlacedTask p;
      p.node = info.name;
      for (const core::GpuShare& g : t.gpus) {
        p.gpu_indices.push_back(cluster.gpus()[info.gpu_begin + g.slot].index);
        p.gpu_milli.push_back(g.milli);
        p.gpu_memory_mib.push_back(g.memory_mib);
      }
      p.cpu_milli = t.cpu_milli;
      p.memory_mib = t.memory_mib;
      j.placement.push_back(std::move(p));
    }
    j.gpu_model = a.model == core::kNoModel ? "" : cluster.models()[a.model.value()].name;
    j.verdict.reset();
    j.task_state.assign(j.placement.size(), 0);
    j.task_exit.assign(j.placement.size(), 0);
    j.stopping = false;
    j.stop_cause.clear();
    ++j.attempt;
    j.dispatchable = false;  // until the admission is committed (RunSchedulingCycle)
    j.held_since = now_();
    j.task_nodes.clear();
    for (const PlacedTask& t : j.placement) j.task_nodes.push_back(t.node);
    std::string reason = a.borrowing() ? "admitted on borrowed capacity" : "admitted";
    if (a.best_effort) reason += " at best-effort priority (budget spent)";
    RecordTransitionLocked(j, JobState::kAdmitted, reason, b,
                           AdmissionDetail(j.attempt, j.task_nodes));
    std::erase_if(nominations_, [&](const core::Nomination& n) { return n.preemptor == a.job; });
  }
  for (const core::PreemptionDecision& d : r.preemptions) {
    std::vector<std::string> victim_queues;
    for (QueueId q : d.victim_queues) victim_queues.push_back(tree.node(q).name);
    for (JobId v : d.victims) {
      auto it = jobs_.all.find(v.value());
      if (it == jobs_.all.end() || !HoldsResources(it->second.state)) continue;
      it->second.stopping = true;
      it->second.stop_cause = "preempt";
      it->second.stop_unpublished = true;
      RecordTransitionLocked(it->second, JobState::kPreempting,
                             fmt::format("preempted by job {} ({})", d.preemptor.value(),
                                         core::PreemptionReasonName(d.reason)),
                             b);
      metrics_.JobPreempted(it->second.spec.tenant, it->second.spec.queue,
                            core::PreemptionReasonName(d.reason));
    }
    auto p = jobs_.all.find(d.preemptor.value());
    if (p != jobs_.all.end()) {
      for (const std::string& q : victim_queues) {
        if (std::find(p->second.preempted_queues.begin(), p->second.preempted_queues.end(), q) ==
            p->second.preempted_queues.end()) {
          p->second.preempted_queues.push_back(q);
        }
      }
    }
    nominations_.push_back({d.preemptor, d.victims, d.tasks, d.model});
  }
  for (JobId id : r.finished_nominations) {
    std::erase_if(nominations_, [&](const core::Nomination& n) { return n.preemptor == id; });
  }
  // A verdict for each pending job: found by binary search in the input's ids, not in jobs_.all.
  for (core::Verdict& v : r.verdicts) {
    const auto at = std::lower_bound(pending_ids.begin(), pending_ids.end(), v.job.value());
    if (at != pending_ids.end() && *at == v.job.value()) {
      pending_entries[static_cast<size_t>(at - pending_ids.begin())]->verdict = std::move(v);
    } else if (auto it = jobs_.all.find(v.job.value()); it != jobs_.all.end()) {
      it->second.verdict = std::move(v);
    }
  }
}

// --- Execution --------------------------------------------------------------------------------

void ControlPlane::SetNodeTelemetry(const std::string& node, const std::string& discovery,
                                    const std::vector<GpuTelemetry>& gpus) {
  json telemetry = json::array();
  for (const GpuTelemetry& g : gpus) telemetry.push_back(api::GpuTelemetryToJson(g));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.all.find(node);
  if (it == nodes_.all.end()) return;
  NodeEntry& e = it->second;
  if (!e.status.is_object()) e.status = json::object();
  e.status["gpu_discovery"] = discovery;
  e.status["gpus"] = std::move(telemetry);
  e.last_heartbeat = now_();
  e.status["last_heartbeat"] = e.last_heartbeat;
}

void ControlPlane::SetNodeStatus(const std::string& node, const std::string& key,
                                 const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.all.find(node);
  if (it == nodes_.all.end()) return;
  if (!it->second.status.is_object()) it->second.status = json::object();
  it->second.status[key] = value;
}

void ControlPlane::NoteReportedResourcesLocked(const Node& reported) {
  auto& r = nodes_.reported[reported.name];
  const std::pair<int64_t, int64_t> now{reported.cpu_milli, reported.memory_mib};
  if (r != now) {
    r = now;
    dirty_ = true;
  }
}

void ControlPlane::SetTaskLimits(const TaskLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  task_limits_ = limits;
  dirty_ = true;  // the tenants' default ceilings are compiled into the quota tree
}

void ControlPlane::SetNodeTimeout(DurationMs ms) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_.timeout_ms = ms;
}

bool ControlPlane::HasGpuModel(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::any_of(config_.gpu_models.begin(), config_.gpu_models.end(),
                     [&](const GpuModel& m) { return m.name == name; });
}

void ControlPlane::SetBuiltinNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  nodes_.builtin = name;
}

Status ControlPlane::RegisterNode(const Node& node, const std::string& address) {
  ARBITER_RETURN_IF_ERROR(ValidateNode(node, "node"));
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.builtin = node.name;
    auto it = nodes_.all.find(node.name);
    if (it != nodes_.all.end() && it->second.from_config) {
      it->second.last_heartbeat = now_();
      it->second.address = address;
      NoteReportedResourcesLocked(node);
      return Status::Ok();  // configured statically: the config is the truth
    }
    NodeEntry e{node, false, now_()};
    e.address = address;
    if (it != nodes_.all.end()) e.status = it->second.status;
    if (it != nodes_.all.end() && it->second.node.state != NodeState::kDown) {
      e.node.state = it->second.node.state;  // keep cordoned/draining
    }
    nodes_.all[node.name] = e;
    dirty_ = true;
    store::WriteBatch b;
    b.PutNode(
        {node.name, NodeToJson(e.node).dump(), std::string(NodeStateName(e.node.state)), now_()});
    PushEventLocked("node", {{"name", node.name}, {"state", NodeStateName(e.node.state)}});
    done = store_->WriteAsync(std::move(b));
  }
  return done.get();
}

std::vector<TaskAssignment> ControlPlane::AssignmentsFor(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskAssignment> out;
  for (auto at = jobs_.placed.begin(); at != jobs_.placed.end();) {
    const uint64_t id = at->first;
    const JobEntry& j = *at->second;
    if (!j.holds_capacity() || j.placement.empty()) {
      at = jobs_.placed.erase(at);  // released: no node has work for it any more
      continue;
    }
    ++at;
    if (!j.dispatchable) continue;
    const bool stop = (j.stopping || j.state == JobState::kPreempting) && !j.stop_unpublished;
    bool here = false;
    for (const PlacedTask& p : j.placement) here |= p.node == node;
    if (!here) continue;
    const RunAs run_as = RunAsLocked(j.spec.tenant, j.spec.user);
    for (size_t t = 0; t < j.placement.size(); ++t) {
      if (j.placement[t].node != node) continue;
      if (t < j.task_state.size() && j.task_state[t] == 2) continue;  // already exited
      TaskAssignment a;
      a.job = id;
      a.task = static_cast<int32_t>(t);
      a.attempt = j.attempt;
      a.run = !stop;
      auto pc = compiled_->classes.find(j.spec.priority_class);
      a.grace_ms = SecondsToMs(j.spec.grace_period_seconds.value_or(
          pc != compiled_->classes.end() ? pc->second.grace_period_seconds : 30));
      a.deadline = j.spec.walltime_seconds > 0 && j.started_at > 0
                       ? j.started_at + SecondsToMs(j.spec.walltime_seconds)
                       : 0;
      a.spec = j.spec;
      if (!j.spec.container_image.empty()) {
        a.image_pull_auth = ImagePullAuthLocked(j.spec.tenant, j.spec.container_image).value_or("");
        a.image_insecure = ImageInsecureLocked(j.spec.tenant, j.spec.container_image);
      }
      if (j.spec.array.id != 0) {
        auto arr = jobs_.arrays.find(j.spec.array.id);
        if (arr != jobs_.arrays.end()) a.array_bounds = arr->second.bounds;
      }
      a.run_as = run_as;
      a.gpus = j.placement[t].gpu_indices;
      a.restarts = j.restarts + j.preemptions;
      a.master_node = j.placement[0].node;
      for (const auto& p : j.placement) a.nodes.push_back(p.node);
      // One MASTER_ADDR for every rank: the address of the first task's node as its agent (or
      // the built-in node) gave it, else its name.
      if (auto m = nodes_.all.find(a.master_node);
          m != nodes_.all.end() && !m->second.address.empty()) {
        a.master_addr = m->second.address;
      }
      a.started = t < j.task_state.size() && j.task_state[t] == 1;
      a.step_key = HmacHex(step_secret_, fmt::format("step:{}:{}", id, j.attempt));
      out.push_back(std::move(a));
    }
  }
  return out;
}

void ControlPlane::ReportTaskStarted(uint64_t job, int32_t task, uint64_t attempt) {
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.all.find(job);
    if (it == jobs_.all.end()) return;
    JobEntry& j = it->second;
    if (task < 0 || static_cast<size_t>(task) >= j.task_state.size()) return;
    if (attempt != j.attempt || j.task_state[static_cast<size_t>(task)] != 0) return;  // applied
    j.task_state[static_cast<size_t>(task)] = 1;
    store::WriteBatch b;
    if (j.state == JobState::kAdmitted)
      RecordTransitionLocked(j, JobState::kStarting, "dispatched", &b);
    const bool all =
        std::all_of(j.task_state.begin(), j.task_state.end(), [](int32_t s) { return s >= 1; });
    if (all && j.state == JobState::kStarting) {
      j.started_at = now_();
      RecordTransitionLocked(j, JobState::kRunning, "all tasks started", &b);
    } else {
      b.PutJob(JobRecordLocked(j));
    }
    done = store_->WriteAsync(std::move(b));
  }
  done.get();
  PublishStops({job});
}

void ControlPlane::ReportTaskExited(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                    bool timed_out) {
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.all.find(job);
    if (it == jobs_.all.end()) return;
    JobEntry& j = it->second;
    if (task < 0 || static_cast<size_t>(task) >= j.task_state.size()) return;
    if (attempt != j.attempt || j.task_state[static_cast<size_t>(task)] == 2) return;  // applied
    j.task_state[static_cast<size_t>(task)] = 2;
    j.task_exit[static_cast<size_t>(task)] = exit_code;
    store::WriteBatch b;
    if (!j.stopping && timed_out) {
      j.stopping = true;
      j.stop_cause = "timeout";
      j.stop_unpublished = true;
    } else if (!j.stopping && exit_code != 0) {
      // One failed task fails its gang: the others are stopped.
      j.stopping = true;
      j.stop_cause = "failed";
      j.exit_code = exit_code;
      j.stop_unpublished = true;
    }
    // The job ends once every task has exited. A task that never started counts only when the
    // job is being stopped: its node then reports it exited before start, or is lost.
    const bool all = std::all_of(j.task_state.begin(), j.task_state.end(),
                                 [&](int32_t s) { return s == 2 || (s == 0 && j.stopping); });
    if (all) {
      FinishExecutionLocked(j, &b);
    } else {
      b.PutJob(JobRecordLocked(j));
    }
    done = store_->WriteAsync(std::move(b));
  }
  done.get();
  // A failed task stops its gang, a lost one its job: the other nodes learn it once committed.
  PublishStops({job});
}

std::vector<core::TenantBudget> ControlPlane::BudgetsLocked(TimeMs now) {
  const core::QuotaTree& tree = compiled_->tree;
  std::vector<core::TenantBudget> out(tree.size());
  bool any = false;
  for (const api::TenantConfig& t : config_.tenants) {
    if (!t.budget || t.budget->gpu_hours <= 0) continue;
    QueueId id;
    if (!tree.Find(t.name, &id)) continue;
    any = true;
    const TimeMs start = reports::BudgetPeriod(t.budget->period, now).first;
    auto& closed = closed_usage_[t.name];
    if (closed.first != start) {
      // A new period (or the first look since start): recount from the stored records.
      closed = {start, 0};
      auto records = store_->Usage(start, now);
      if (records.ok()) {
        for (const store::UsageRecord& u : *records) {
          if (u.tenant == t.name) {
            closed.second += u.gpu_milli * (u.end_ms - std::max(u.start_ms, start));
          }
        }
      }
    }
    // Plus what running jobs have held so far in this period.
    int64_t used = closed.second;
    for (const auto& [jid, entry] : jobs_.active) {
      const JobEntry& j = *entry;
      if (j.spec.tenant != t.name || !j.holds_capacity()) continue;
      const TimeMs held = j.held_since > 0   ? j.held_since
                          : j.started_at > 0 ? j.started_at
                                             : j.updated_at;
      const TimeMs since = std::max(start, held);
      for (const PlacedTask& p : j.placement) {
        for (int32_t m : p.gpu_milli) used += m * std::max<TimeMs>(0, now - since);
      }
    }
    webhooks_->BudgetUse(t.name, t.budget->period, start, used,
                         static_cast<double>(t.budget->gpu_hours));
    core::TenantUsage u;
    u.gpu_milli_ms = used;
    core::TenantBudget& b = out[id.value()];
    b.exhausted = core::BudgetSpent(u, t.budget->gpu_hours);
    b.on_exhausted = t.budget->on_exhausted == "best-effort" ? core::BudgetPolicy::kBestEffort
                                                             : core::BudgetPolicy::kBlock;
  }
  if (!any) out.clear();
  return out;
}

void ControlPlane::ReportTaskFailed(uint64_t job, int32_t task, uint64_t attempt, int32_t exit_code,
                                    const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobEntry* j = jobs_.Find(job);
    if (j != nullptr && attempt == j->attempt && !IsFinal(j->state) && j->fail_reason.empty()) {
      j->fail_reason = reason;
    }
  }
  ReportTaskExited(job, task, attempt, exit_code, false);
}

void ControlPlane::ReportTaskNote(uint64_t job, int32_t /*task*/, uint64_t attempt,
                                  const std::string& message, const std::string& image_digest) {
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobEntry* j = jobs_.Find(job);
    if (j == nullptr || attempt != j->attempt || IsFinal(j->state)) return;
    store::WriteBatch b;
    if (!image_digest.empty() && image_digest != j->image_digest) {
      j->image_digest = image_digest;
      b.PutJob(JobRecordLocked(*j));
    }
    if (!message.empty()) {
      // An event of the job that changes no state ("pulling IMAGE: 40%").
      const std::string state(JobStateName(j->state));
      store::JobEventRecord e{0, job, now_(), state, state, message, ""};
      AppendJobFactsLocked(*j, e, &b);
      // A run that reaches running again restarts what a preemption would lose (as the events
      // say): stored with the job.
      if (j->state == JobState::kRunning) b.PutJob(JobRecordLocked(*j));
      b.AppendJobEvent(std::move(e));
      PushJobEventLocked(*j, state, state, message);
    }
    done = store_->WriteAsync(std::move(b));
  }
  done.get();
}

void ControlPlane::PrePullsLocked(const core::Cluster& cluster,
                                  const std::vector<core::Reservation>& reservations) {
  // A queue head reserved on nodes that lack its image: they pull it now, so that its start is
  // not delayed by the pull when the capacity frees.
  std::map<std::string, std::vector<ImagePull>> pulls;
  for (const core::Reservation& res : reservations) {
    auto it = jobs_.all.find(res.job.value());
    if (it == jobs_.all.end() || it->second.spec.container_image.empty()) continue;
    const std::string& image = it->second.spec.container_image;
    const uint32_t id = cluster.FindImage(image);
    for (const core::TaskPlacement& t : res.tasks) {
      if (id != core::kNoImage && cluster.ImageSizeOn(t.node, id) >= 0) continue;
      std::vector<ImagePull>& v = pulls[cluster.node(t.node).name];
      if (std::none_of(v.begin(), v.end(), [&](const ImagePull& p) { return p.image == image; })) {
        const std::string& tenant = it->second.spec.tenant;
        v.push_back({image, ImagePullAuthLocked(tenant, image).value_or(""),
                     ImageInsecureLocked(tenant, image)});
      }
    }
  }
  pre_pulls_ = std::move(pulls);
}

std::vector<ImagePull> ControlPlane::ImagesToPull(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pre_pulls_.find(node);
  return it == pre_pulls_.end() ? std::vector<ImagePull>{} : it->second;
}

void ControlPlane::ReportImages(const std::string& node, const std::vector<NodeImage>& images) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeImagesLocked(node, images);
}

void ControlPlane::NodeImagesLocked(const std::string& node, const std::vector<NodeImage>& images) {
  NodeEntry* e = nodes_.Find(node);
  if (e == nullptr) return;
  std::vector<NodeImage> kept = images;
  if (kept.size() > kMaxNodeImages) kept.resize(kMaxNodeImages);
  if (!e->status.is_object()) e->status = nlohmann::json::object();
  if (kept == e->node.images && e->status.contains("images")) return;
  if (kept != e->node.images) {
    e->node.images = std::move(kept);
    dirty_ = true;  // the cluster the cycle sees has the node's images (image-locality)
  }
  e->status["images"] = api::NodeImagesToJson(e->node.images);
}

void ControlPlane::ReportTaskCheckpointed(uint64_t job, int32_t /*task*/, uint64_t attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  JobEntry* j = jobs_.Find(job);
  if (j == nullptr || attempt != j->attempt || IsFinal(j->state)) return;
  j->last_checkpoint_ms = std::max(j->last_checkpoint_ms, now_());
}

void ControlPlane::ReportTaskLost(uint64_t job, int32_t task, uint64_t attempt) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.all.find(job);
    if (it == jobs_.all.end()) return;
    JobEntry& j = it->second;
    if (task < 0 || static_cast<size_t>(task) >= j.task_state.size()) return;
    if (attempt != j.attempt || j.task_state[static_cast<size_t>(task)] == 2) return;  // applied
    if (!j.stopping) {
      j.stopping = true;
      j.stop_cause = "lost";
      j.stop_unpublished = true;  // published once ReportTaskExited has committed the loss
    }
  }
  ReportTaskExited(job, task, attempt, 137, false);
}

// Every task is gone: decide the job's next state from why it stopped.
void ControlPlane::FinishExecutionLocked(JobEntry& j, store::WriteBatch* b) {
  const std::string cause = j.stop_cause;
  const std::string fail_reason = std::move(j.fail_reason);
  j.fail_reason.clear();
  // Metering: the interval during which each task held its resources, from the admission of this
  // run to their release, recorded exactly once: here, in the batch that clears the placement
  // (cost from the model's price per GPU-hour). Jobs stored before held_since existed fall back
  // to the start of the run.
  const TimeMs held_since = j.held_since > 0   ? j.held_since
                            : j.started_at > 0 ? j.started_at
                                               : j.updated_at;
  int64_t price = 0;
  for (const GpuModel& m : config_.gpu_models) {
    if (m.name == j.gpu_model) price = m.price_milli_per_hour;
  }
  for (size_t t = 0; t < j.placement.size(); ++t) {
    const PlacedTask& p = j.placement[t];
    store::UsageRecord u;
    u.job_id = j.spec.id.value();
    u.task = static_cast<int32_t>(t);
    u.tenant = j.spec.tenant;
    u.queue = j.spec.queue;
    u.user = j.spec.user;
    u.job_type = std::string(JobTypeName(j.spec.type));
    u.gpu_model = j.gpu_model;
    for (int32_t m : p.gpu_milli) u.gpu_milli += m;
    for (int64_t m : p.gpu_memory_mib) u.gpu_memory_mib += m;
    u.start_ms = held_since;
    u.end_ms = std::max(held_since, now_());
    // cost (millionths) = milli-GPU x ms x price (milli per GPU-hour) x 1000 / (1000 x 3.6e6)
    __extension__ using I128 = __int128;
    u.cost_micro = static_cast<int64_t>(static_cast<I128>(u.gpu_milli) * (u.end_ms - u.start_ms) *
                                        price / 3600000);
    auto& closed = closed_usage_[u.tenant];
    if (u.end_ms >= closed.first)
      closed.second += u.gpu_milli * (u.end_ms - std::max(u.start_ms, closed.first));
    b->AppendUsage(std::move(u));
  }
  j.placement.clear();
  j.task_state.clear();
  j.held_since = 0;
  j.stopping = false;
  j.stop_cause.clear();
  const TimeMs now = now_();
  if (j.state == JobState::kSuspended && cause == "requeue") {
    RecordTransitionLocked(j, JobState::kPending, "requeued: its processes are gone", b);
    return;
  }
  if (j.state == JobState::kCancelled || j.state == JobState::kSuspended) {
    b->PutJob(JobRecordLocked(j));  // already in its final or held state; resources now free
    return;
  }
  if (cause == "preempt" || j.state == JobState::kPreempting) {
    ++j.preemptions;
    RecordTransitionLocked(j, JobState::kPreempted, "stopped for a preemption", b);
    RecordTransitionLocked(j, JobState::kPending, "requeued after preemption", b);
    return;
  }
  if (j.state == JobState::kAdmitted)
    RecordTransitionLocked(j, JobState::kStarting, "dispatched", b);
  j.finished_at = now;
  if (cause == "lost") {
    RecordTransitionLocked(j, JobState::kLost, "its processes are gone (node restarted or down)",
                           b);
    if (j.restarts < j.spec.retry.max_retries) {
      ++j.restarts;
      const int64_t backoff = RetryBackoffSeconds(j.spec.retry, j.restarts);
      j.not_before = now + SecondsToMs(backoff);
      j.finished_at = 0;
      RecordTransitionLocked(
          j, JobState::kRetryWait,
          fmt::format("retry {} of {} in {} s", j.restarts, j.spec.retry.max_retries, backoff), b);
    } else {
      RecordTransitionLocked(j, JobState::kFailed, "lost, and no retries left", b);
    }
    return;
  }
  if (cause == "timeout") {
    RecordTransitionLocked(j, JobState::kTimedOut,
                           fmt::format("walltime of {} s reached", j.spec.walltime_seconds), b);
    return;
  }
  int32_t code = 0;
  for (int32_t c : j.task_exit) {
    if (c != 0) {
      code = c;
      break;
    }
  }
  if (!j.exit_code || code != 0) j.exit_code = code;
  if (code == 0 && cause.empty()) {
    RecordTransitionLocked(j, JobState::kSucceeded, "all tasks exited 0", b);
    return;
  }
  RecordTransitionLocked(
      j, JobState::kFailed,
      fail_reason.empty() ? fmt::format("a task exited with code {}", code) : fail_reason, b);
  if (ShouldRetry(j.spec.retry, j.restarts, code)) {
    ++j.restarts;
    const int64_t backoff = RetryBackoffSeconds(j.spec.retry, j.restarts);
    j.not_before = now + SecondsToMs(backoff);
    j.finished_at = 0;
    RecordTransitionLocked(
        j, JobState::kRetryWait,
        fmt::format("retry {} of {} in {} s", j.restarts, j.spec.retry.max_retries, backoff), b);
  }
}

}  // namespace arbiter::server

// ControlPlane: the job history. Memory holds the live jobs and a window of recently finished
// ones; finished jobs beyond it leave memory (EvictFinishedJobs, on the scheduler thread) and are
// read back from the store when asked for (docs/architecture.md, "What memory holds").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <unordered_set>

#include "api/job_codec.h"
#include "server/control_plane.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

Result<JobEntry> ControlPlane::JobEntryFromRecord(const store::JobRecord& r) const {
  auto spec = api::ParseStoredJob(r.spec_json);
  if (!spec.ok()) {
    return Internal(fmt::format("stored job {} is unreadable: {}", r.id, spec.status().ToString()));
  }
  JobEntry j;
  j.spec = std::move(spec).value();
  if (Status st = api::ParseSecretEnv(r.secret_env_json, &j.spec); !st.ok()) {
    return Internal(
        fmt::format("stored job {} has unreadable secret_env: {}", r.id, st.ToString()));
  }
  j.request_digest = r.request_digest;
  j.spec_json = std::make_shared<const std::string>(r.spec_json);
  j.spec.id = JobId(r.id);
  j.spec.tenant = r.tenant;
  j.spec.user = r.user;
  j.spec.submit_time = r.submitted_at_ms;
  j.idempotency_key = r.idempotency_key;
  try {
    const json s = json::parse(r.status_json.empty() ? "{}" : r.status_json);
    j.state = ParseJobState(s.value("state", r.state)).value_or(JobState::kPending);
    j.reason = s.value("reason", "");
    j.updated_at = s.value("updated_at", r.updated_at_ms);
    j.started_at = s.value("started_at", TimeMs{0});
    j.finished_at = s.value("finished_at", TimeMs{0});
    if (s.contains("exit_code") && !s["exit_code"].is_null()) {
      j.exit_code = s["exit_code"].get<int32_t>();
    }
    j.restarts = s.value("restarts", 0);
    j.preemptions = s.value("preemptions", 0);
    j.not_before = s.value("not_before", TimeMs{0});
    j.gpu_model = s.value("gpu_model", "");
    j.preempted_queues = s.value("preempted_queues", std::vector<std::string>{});
    j.stopping = s.value("stopping", false);
    j.stop_cause = s.value("stop_cause", "");
    j.approval_rule = s.value("approval_rule", "");
    j.task_state = s.value("task_state", std::vector<int32_t>{});
    j.task_exit = s.value("task_exit", std::vector<int32_t>{});
    j.attempt = s.value("attempt", uint64_t{0});
    j.held_since = s.value("held_since", TimeMs{0});
    if (s.contains("pending_since")) j.pending_since = s["pending_since"].get<TimeMs>();
    if (s.contains("running_since")) j.running_since = s["running_since"].get<TimeMs>();
    // Jobs stored before the report facts: their last transition is when they entered.
    if (!s.contains("pending_since") && j.state == JobState::kPending) {
      j.pending_since = j.updated_at;
    }
    if (!s.contains("running_since") && j.state == JobState::kRunning) {
      j.running_since = j.updated_at;
    }
    j.task_nodes = s.value("task_nodes", std::vector<std::string>{});
    j.image_digest = s.value("image_digest", "");
    for (const json& t : s.value("placement", json::array())) {
      PlacedTask p;
      p.node = t.at("node").get<std::string>();
      p.gpu_indices = t.value("gpu_indices", std::vector<int32_t>{});
      p.gpu_milli = t.value("gpu_milli", std::vector<int32_t>{});
      p.gpu_memory_mib = t.value("gpu_memory_mib", std::vector<int64_t>{});
      p.cpu_milli = t.value("cpu_milli", int64_t{0});
      p.memory_mib = t.value("memory_mib", int64_t{0});
      j.placement.push_back(std::move(p));
    }
  } catch (const std::exception& e) {
    return Internal(fmt::format("stored job {} has an unreadable status: {}", r.id, e.what()));
  }
  return j;
}

JobEntry& ControlPlane::InsertJobLocked(uint64_t id, JobEntry j) {
  if (!j.idempotency_key.empty()) {
    jobs_.by_key[j.spec.tenant + "/" + j.spec.user + "/" + j.idempotency_key] = id;
  }
  JobEntry& entry = jobs_.all.emplace(id, std::move(j)).first->second;
  if (!IsFinal(entry.state) || entry.stopping) jobs_.active.emplace(id, &entry);
  if (entry.holds_capacity() && !entry.placement.empty()) jobs_.placed.emplace(id, &entry);
  if (entry.spec.array.id != 0) jobs_.arrays[entry.spec.array.id].elements.push_back(id);
  return entry;
}

JobEntry* ControlPlane::FindJobLocked(uint64_t id) {
  if (JobEntry* j = jobs_.Find(id)) return j;
  if (!history_in_store_ || id == 0 || id >= jobs_.next_id) return nullptr;
  auto r = store_->GetJob(id);
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kNotFound) {
      spdlog::warn("job {}: cannot read it from the store: {}", id, r.status().ToString());
    }
    return nullptr;
  }
  auto j = JobEntryFromRecord(*r);
  if (!j.ok()) {
    spdlog::warn("{}", j.status().ToString());
    return nullptr;
  }
  const uint64_t array = j->spec.array.id;
  const int32_t size = j->spec.array.size;
  InsertJobLocked(id, std::move(j).value());
  if (array != 0) CompleteArrayLocked(array, size);
  return jobs_.Find(id);
}

void ControlPlane::CompleteArrayLocked(uint64_t array, int32_t size) {
  auto a = jobs_.arrays.find(array);
  if (a != jobs_.arrays.end() && a->second.elements.size() >= static_cast<size_t>(size)) return;
  // Its elements' ids are consecutive from the array's, one per element.
  store::JobQuery q;
  q.after_id = array - 1;
  q.before_id = array + static_cast<uint64_t>(std::max(1, size));
  q.limit = static_cast<size_t>(std::max(1, size));
  auto rows = store_->ListJobs(q);
  if (!rows.ok()) {
    spdlog::warn("array {}: cannot read it from the store: {}", array, rows.status().ToString());
  } else {
    for (const store::JobRecord& row : *rows) {
      if (jobs_.Find(row.id) != nullptr) continue;
      auto e = JobEntryFromRecord(row);
      if (!e.ok() || e->spec.array.id != array) continue;
      InsertJobLocked(row.id, std::move(e).value());
    }
  }
  a = jobs_.arrays.find(array);
  if (a == jobs_.arrays.end()) return;
  std::sort(a->second.elements.begin(), a->second.elements.end());
  a->second.elements.erase(std::unique(a->second.elements.begin(), a->second.elements.end()),
                           a->second.elements.end());
  std::vector<int64_t> indices;
  for (uint64_t e : a->second.elements) indices.push_back(jobs_.all.at(e).spec.array.index);
  a->second.bounds = BoundsOf(indices);
}

uint64_t ControlPlane::JobByKeyLocked(const std::string& tenant, const std::string& user,
                                      const std::string& key) {
  auto it = jobs_.by_key.find(tenant + "/" + user + "/" + key);
  if (it != jobs_.by_key.end()) return it->second;
  if (!history_in_store_) return 0;
  auto r = store_->JobByIdempotencyKey(tenant, user, key);
  if (!r.ok()) {
    if (r.status().code() != StatusCode::kNotFound) {
      spdlog::warn("idempotency key: cannot read the store: {}", r.status().ToString());
    }
    return 0;
  }
  return FindJobLocked(r->id) != nullptr ? r->id : 0;
}

size_t ControlPlane::JobsInMemory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.all.size();
}

size_t ControlPlane::EvictFinishedJobs() {
  struct Candidate {
    uint64_t id;
    TimeMs updated_at;
  };
  std::vector<Candidate> evict;
  std::shared_future<Status> barrier;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // 1. The finished jobs memory may drop: ended (no process left, no stop to publish), not
    //    holding capacity, not a replica a service still follows.
    std::unordered_set<uint64_t> replicas;
    for (const auto& [name, e] : services_.all) {
      for (const auto& [id, st] : e.replicas) replicas.insert(id);
    }
    std::vector<Candidate> finished;
    std::map<uint64_t, size_t> array_finished;  // array id -> its finished elements
    for (const auto& [id, j] : jobs_.all) {
      if (!IsFinal(j.state) || j.stopping || j.stop_unpublished || jobs_.placed.count(id) > 0 ||
          replicas.count(id) > 0) {
        continue;
      }
      finished.push_back({id, j.updated_at});
      if (j.spec.array.id != 0) ++array_finished[j.spec.array.id];
    }
    // 2. Keep the latest `finished_max` finished within the age; the rest leaves.
    std::sort(finished.begin(), finished.end(), [](const Candidate& a, const Candidate& b) {
      return a.updated_at != b.updated_at ? a.updated_at > b.updated_at : a.id > b.id;
    });
    const TimeMs oldest =
        window_.finished_max_age_ms > 0 ? now_() - window_.finished_max_age_ms : 0;
    const size_t keep = static_cast<size_t>(std::max<int64_t>(0, window_.finished_max));
    for (size_t i = 0; i < finished.size(); ++i) {
      if (i < keep && finished[i].updated_at >= oldest) continue;
      evict.push_back(finished[i]);
    }
    // 3. An array leaves whole: only once every element of it may leave.
    std::map<uint64_t, size_t> array_evicted;
    for (const Candidate& c : evict) {
      const JobEntry& j = jobs_.all.at(c.id);
      if (j.spec.array.id != 0) ++array_evicted[j.spec.array.id];
    }
    std::erase_if(evict, [&](const Candidate& c) {
      const uint64_t array = jobs_.all.at(c.id).spec.array.id;
      if (array == 0) return false;
      auto a = jobs_.arrays.find(array);
      return a == jobs_.arrays.end() || array_evicted[array] != a->second.elements.size();
    });
    if (evict.empty()) return 0;
    // Everything enqueued so far, these jobs' last records included, is committed before any
    // of them leaves memory.
    barrier = store_->WriteAsync(store::WriteBatch{});
  }
  if (Status st = barrier.get(); !st.ok()) {
    spdlog::warn("finished jobs stay in memory: the store did not commit: {}", st.ToString());
    return 0;
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Changed meanwhile (a retry, a late report): it stays until the next step looks again, and so
  // does the rest of its array.
  auto unchanged = [this](const Candidate& c) {
    const JobEntry* j = jobs_.Find(c.id);
    return j != nullptr && IsFinal(j->state) && !j->stopping && !j->stop_unpublished &&
           j->updated_at == c.updated_at && jobs_.placed.count(c.id) == 0;
  };
  std::set<uint64_t> kept_arrays;
  for (const Candidate& c : evict) {
    const JobEntry* j = jobs_.Find(c.id);
    if (j != nullptr && j->spec.array.id != 0 && !unchanged(c))
      kept_arrays.insert(j->spec.array.id);
  }
  size_t dropped = 0;
  for (const Candidate& c : evict) {
    if (!unchanged(c)) continue;
    auto it = jobs_.all.find(c.id);
    const JobEntry& j = it->second;
    const uint64_t array = j.spec.array.id;
    if (array != 0 && kept_arrays.count(array) > 0) continue;
    if (!j.idempotency_key.empty()) {
      auto k = jobs_.by_key.find(j.spec.tenant + "/" + j.spec.user + "/" + j.idempotency_key);
      if (k != jobs_.by_key.end() && k->second == c.id) jobs_.by_key.erase(k);
    }
    if (array != 0) jobs_.arrays.erase(array);  // its elements all leave with it
    jobs_.active.erase(c.id);
    jobs_.all.erase(it);
    ++dropped;
  }
  if (dropped > 0) history_in_store_ = true;
  return dropped;
}

}  // namespace arbiter::server

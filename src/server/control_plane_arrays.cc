// ControlPlane: job arrays (Slurm's): an array's submission, expanded into one job per index in one
// durable batch; the array as the API shows it; actions on all its elements in one batch; its
// throttle. The throttle itself is applied by the scheduling driver (control_plane_scheduling.cc).
#include <fmt/format.h>

#include <algorithm>

#include "api/job_codec.h"
#include "common/check.h"
#include "server/control_plane.h"
#include "server/control_plane_compiled.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// The most bytes of spec text an array may store in all (its elements' texts): a 1 MiB body
// must not become gigabytes of jobs.
constexpr size_t kMaxArraySpecBytes = size_t{256} << 20;

// "8 succeeded, 2 cancelled": how many elements are in each state.
std::string StatesText(const json& states) {
  std::string out;
  for (const auto& [state, n] : states.items()) {
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n.get<int64_t>(), state);
  }
  return out;
}

}  // namespace

Result<ControlPlane::Submitted> ControlPlane::SubmitArray(const Principal& p, JobSpec spec,
                                                          const api::ArrayRequest& array,
                                                          const std::string& idem_key,
                                                          bool* created) {
  *created = false;
  ARBITER_RETURN_IF_ERROR(MaySubmit(p));
  const std::vector<int64_t>& indices = array.expanded;
  if (indices.empty()) return InvalidArgument("array.indices", "no indices");
  ApplyTaskMinimums(&spec);
  spec.array = {};
  auto base = std::make_shared<const std::string>(api::JobSpecJsonText(spec));
  if (base->size() * indices.size() > kMaxArraySpecBytes) {
    return InvalidArgument(
        "array.indices",
        fmt::format("{} jobs of {} bytes each are more than an array may hold ({} MiB in all): "
                    "use fewer indices, or a smaller job (a script that reads its input from "
                    "files)",
                    indices.size(), base->size(), kMaxArraySpecBytes >> 20));
  }
  // The same indices written another way ("0-3" or "0,1,2,3") are the same submission.
  const std::string digest =
      idem_key.empty() ? ""
                       : RequestDigest(fmt::format("{}\narray {}%{}", *base,
                                                   ArrayIndicesText(indices), array.max_running),
                                       spec);
  std::shared_future<Status> done;
  Submitted out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    const std::string asked = spec.queue;
    ARBITER_RETURN_IF_ERROR(CheckSubmissionLocked(p, spec));
    ARBITER_RETURN_IF_ERROR(CheckReplayLocked(spec.tenant, p.user, idem_key, digest, ""));
    if (!idem_key.empty()) {
      // A repeated submission: the array it made (read back if it left memory).
      if (const uint64_t made = JobByKeyLocked(spec.tenant, p.user, idem_key); made != 0) {
        out.id = made;
        out.body = JobTextLocked(jobs_.all.at(out.id), p);
        done = store_->WriteAsync(store::WriteBatch{});  // a barrier: it may not be durable yet
      }
    }
    if (out.id == 0) {
      // The stored text names the queue the default or alias resolved to.
      if (spec.queue != asked)
        base = std::make_shared<const std::string>(api::JobSpecJsonText(spec));
      store::WriteBatch b;
      b.Reserve(2 * indices.size() + 1);  // each job and its first event, one audit record
      const JobArrayElement first{jobs_.next_id, 0, static_cast<int32_t>(indices.size()),
                                  array.max_running};
      JobArrayEntry& entry = jobs_.arrays[first.id];
      entry.elements.reserve(indices.size());
      entry.bounds = BoundsOf(indices);
      for (size_t k = 0; k < indices.size(); ++k) {
        JobArrayElement e = first;
        e.index = indices[k];
        JobSpec element;
        if (k + 1 < indices.size()) {
          element = spec;
        } else {
          element = std::move(spec);  // the last one takes it
        }
        element.array = e;
        auto text = std::make_shared<const std::string>(api::ElementSpecText(*base, e));
        bool added = false;
        // The key (and the digest it is checked against) is the first element's: the array's.
        const uint64_t id =
            AddJobLocked(p, std::move(element), std::move(text), k == 0 ? idem_key : "",
                         k == 0 ? digest : "", &b, &added, /*audit=*/false);
        ARBITER_CHECK(id == first.id + k, "an array's elements have consecutive ids");
        entry.elements.push_back(id);
      }
      b.AppendAudit({0, now_(), p.user, "array.submit", fmt::format("array/{}", first.id), "ok",
                     json{{"size", indices.size()}, {"max_running", array.max_running}}.dump(),
                     p.token_id, p.source, jobs_.all.at(first.id).spec.tenant});
      out.id = first.id;
      out.body = JobTextLocked(jobs_.all.at(out.id), p);
      done = store_->WriteAsync(std::move(b));
      *created = true;
      if (wake_scheduler_) wake_scheduler_();
    }
  }
  const Status committed = done.get();
  if (!committed.ok()) *created = false;
  ARBITER_RETURN_IF_ERROR(committed);
  return out;
}

Result<const std::vector<uint64_t>*> ControlPlane::FindArrayLocked(const Principal& p, uint64_t id,
                                                                   std::string_view audit_action) {
  auto a = jobs_.arrays.find(id);
  if (a == jobs_.arrays.end() && FindJobLocked(id) != nullptr) {
    a = jobs_.arrays.find(id);  // an array that had left memory, read back whole
  }
  const JobEntry* first = a == jobs_.arrays.end() ? nullptr : jobs_.Find(id);
  if (first == nullptr || !CanReadTenantLocked(p, first->spec.tenant)) {
    // Another tenant's array looks missing to the caller; the audit log says what it was.
    if (first != nullptr && !audit_action.empty()) {
      Audit(p, fmt::format("array.{}", audit_action), fmt::format("array/{}", id),
            "denied: another tenant's array");
    }
    return NotFoundError(fmt::format("array {} not found", id));
  }
  return &a->second.elements;
}

json ControlPlane::ArrayJsonLocked(uint64_t id) const {
  const JobArrayEntry& a = jobs_.arrays.at(id);
  const JobSpec& first = jobs_.all.at(id).spec;
  std::vector<int64_t> indices;
  indices.reserve(a.elements.size());
  std::map<std::string, int64_t> states;
  for (uint64_t e : a.elements) {
    const JobEntry& j = jobs_.all.at(e);
    indices.push_back(j.spec.array.index);
    ++states[std::string(JobStateName(j.state))];
  }
  return {{"id", id},
          {"name", first.name},
          {"tenant", first.tenant},
          {"user", first.user},
          {"queue", first.queue},
          {"indices", ArrayIndicesText(indices)},
          {"size", first.array.size},
          {"max_running", first.array.max_running},
          {"states", states}};
}

Result<json> ControlPlane::GetArray(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  std::lock_guard<std::mutex> lock(mu_);
  auto found = FindArrayLocked(p, id, "");
  if (!found.ok()) return found.status();
  return ArrayJsonLocked(id);
}

Result<json> ControlPlane::ArrayAction(const Principal& p, uint64_t id, std::string_view action) {
  if (p.role == Role::kNode) return Forbidden("nodes may not act on jobs");
  std::shared_future<Status> done;
  std::vector<uint64_t> changed;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = FindArrayLocked(p, id, action);
    if (!found.ok()) return found.status();
    // One submission: every element has the first one's tenant and user.
    ARBITER_RETURN_IF_ERROR(CanActOnJobLocked(p, jobs_.all.at(id)));
    store::WriteBatch b;
    for (uint64_t e : **found) {
      JobEntry& j = jobs_.all.at(e);
      auto to = ActionTargetLocked(j, action);
      if (!to.ok() && to.status().code() != StatusCode::kConflict) return to.status();
      if (!to.ok()) continue;  // not for this element: left as it is
      ApplyActionLocked(p, j, action, *to, &b);
      changed.push_back(e);
    }
    if (changed.empty()) {
      return Status(StatusCode::kConflict,
                    fmt::format("array {} has no element to {}: its elements are {}", id, action,
                                StatesText(ArrayJsonLocked(id)["states"])));
    }
    b.AppendAudit({0, now_(), p.user, fmt::format("array.{}", action), fmt::format("array/{}", id),
                   "ok", json{{"changed", changed.size()}}.dump(), p.token_id, p.source,
                   jobs_.all.at(id).spec.tenant});
    out = ArrayJsonLocked(id);
    out["changed"] = changed;
    done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.get();
  PublishStops(changed);  // even after a failed write: memory, which the nodes follow, has them
  ARBITER_RETURN_IF_ERROR(committed);
  return out;
}

Result<json> ControlPlane::SetArrayThrottle(const Principal& p, uint64_t id, int32_t max_running) {
  if (p.role == Role::kNode) return Forbidden("nodes may not act on jobs");
  if (max_running < 0 || max_running > kMaxArrayRunning) {
    return InvalidArgument("max_running", fmt::format("must be between 0 (no limit) and {}, got {}",
                                                      kMaxArrayRunning, max_running));
  }
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = FindArrayLocked(p, id, "throttle");
    if (!found.ok()) return found.status();
    ARBITER_RETURN_IF_ERROR(CanActOnJobLocked(p, jobs_.all.at(id)));
    store::WriteBatch b;
    b.Reserve((*found)->size() + 1);
    // Every element's spec says the limit, so that each one's job object and record carry it.
    for (uint64_t e : **found) {
      JobEntry& j = jobs_.all.at(e);
      if (j.spec.array.max_running == max_running) continue;
      j.spec.array.max_running = max_running;
      j.spec_json = std::make_shared<const std::string>(api::ElementSpecText(
          j.spec_json ? *j.spec_json : api::JobSpecJsonText(j.spec), j.spec.array));
      b.PutJob(JobRecordLocked(j));
    }
    b.AppendAudit({0, now_(), p.user, "array.throttle", fmt::format("array/{}", id), "ok",
                   json{{"max_running", max_running}}.dump(), p.token_id, p.source,
                   jobs_.all.at(id).spec.tenant});
    out = ArrayJsonLocked(id);
    done = store_->WriteAsync(std::move(b));
    if (wake_scheduler_) wake_scheduler_();  // a higher limit may start more now
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

}  // namespace arbiter::server

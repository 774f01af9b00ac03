#include "server/log_runs.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "api/json_writer.h"

namespace arbiter::server {

namespace {

// "a task exited with code 3" (the failure's reason, control_plane_scheduling.cc): "a retry
// (exit 3)"; another reason: "a retry".
std::string RetryAfterFailure(const std::string& reason) {
  constexpr std::string_view kPrefix = "a task exited with code ";
  if (reason.rfind(kPrefix, 0) == 0) {
    return fmt::format("a retry (exit {})", reason.substr(kPrefix.size()));
  }
  return "a retry";
}

// Why a run ended, as the next run's separator says it, from the first event that ends it.
std::string EndedBy(const store::JobEventRecord& e) {
  const std::string& to = e.to_state;
  if (to == "preempting" || to == "preempted") return "preemption";
  if (to == "lost") return "the node was lost";
  if (to == "failed") return RetryAfterFailure(e.reason);
  if (to == "timed-out") return "a timeout";
  // Slurm's requeue stops a job as suspended, then queues it again.
  if (to == "suspended") return e.reason.rfind("requeue by ", 0) == 0 ? "requeue" : "a suspend";
  if (to == "cancelled") return "a cancel";
  if (to == "succeeded") return "success";
  return "";
}

}  // namespace

std::vector<RunHistory> RunsFromEvents(const std::vector<store::JobEventRecord>& events,
                                       int32_t task) {
  std::vector<RunHistory> out;
  std::string cause;   // why the latest run ended
  bool ended = false;  // its end is known
  for (const store::JobEventRecord& e : events) {
    if (e.to_state == "admitted") {
      RunHistory r;
      r.attempt = out.empty() ? 1 : out.back().attempt + 1;
      const auto detail = nlohmann::json::parse(e.detail_json, nullptr, false);
      if (detail.is_object()) {
        r.attempt = detail.value("attempt", r.attempt);
        const auto nodes = detail.find("nodes");
        if (nodes != detail.end() && nodes->is_array() && task >= 0 &&
            static_cast<size_t>(task) < nodes->size() && (*nodes)[task].is_string()) {
          r.node = (*nodes)[task].get<std::string>();
        }
      }
      if (!out.empty()) r.after = cause;
      out.push_back(std::move(r));
      cause.clear();
      ended = false;
      continue;
    }
    if (out.empty()) continue;
    // A run the user sent back to the queue (the retry action, "retry by NAME") was requeued,
    // however it ended; an automatic retry keeps the cause (a failure, a lost node).
    if (e.to_state == "retry-wait" && e.reason.rfind("retry by ", 0) == 0) {
      cause = "requeue";
      ended = true;
      continue;
    }
    if (ended) continue;
    std::string why = EndedBy(e);
    if (why.empty()) continue;
    cause = std::move(why);
    ended = true;
  }
  return out;
}

std::string AdmissionDetail(uint64_t attempt, const std::vector<std::string>& task_nodes) {
  std::string out;
  api::JsonWriter w(&out);
  w.BeginObject().Field("attempt", attempt).Field("nodes", task_nodes).EndObject();
  return out;
}

std::string RunSeparator(uint64_t attempt, std::string_view after) {
  if (after.empty()) return fmt::format("--- run {} ---\n", attempt);
  return fmt::format("--- run {}, after {} ---\n", attempt, after);
}

}  // namespace arbiter::server

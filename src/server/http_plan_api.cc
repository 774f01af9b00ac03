// POST /api/v1/plan and POST /api/v1/plan/capacity (admins): what-if replays of the recorded
// history (plan/whatif.h, docs/simulator.md). The inputs are copied from the control plane, then
// the replays run on the request's thread, off the control plane's lock.
#include <fmt/format.h>
#include <httplib.h>

#include <set>
#include <string>

#include "api/errors.h"
#include "common/duration.h"
#include "common/time.h"
#include "plan/whatif.h"
#include "server/control_plane_helpers.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// The longest period one request replays.
constexpr int64_t kMaxPeriodMs = 366LL * 86'400'000;
// The most changes one request tries (each is a replay, and so is all of them together).
constexpr size_t kMaxChanges = 16;

// "90s", "30m", "12h", "7d", "2w" (a whole number, 0 included, and a unit).
Result<int64_t> ParseDuration(const json& v, const char* field) {
  const Status bad = InvalidArgument(
      field, fmt::format("must be a duration such as 90s, 30m, 12h, 7d or 2w, got {}", v.dump()));
  if (!v.is_string()) return bad;
  const auto ms = ParseDurationUnitsMs(v.get<std::string>());
  if (!ms) return bad;
  return *ms;
}

// What the body may change in how the history replays; unset: as configured and measured.
struct ReplayKnobs {
  int64_t cycle_interval_ms = 0;  // 0: the server's
  int64_t stop_latency_ms = -1;   // -1: as the period's preemptions took (History)
};

// The body's cycle_interval_ms (10 ms to an hour) and stop_latency_ms (0 to an hour).
Result<ReplayKnobs> ParseKnobs(const json& body) {
  ReplayKnobs k;
  if (body.contains("cycle_interval_ms")) {
    const json& c = body["cycle_interval_ms"];
    if (!c.is_number_integer() || c.get<int64_t>() < 10 || c.get<int64_t>() > 3'600'000) {
      return InvalidArgument("cycle_interval_ms", "must be a whole number from 10 to 3600000");
    }
    k.cycle_interval_ms = c.get<int64_t>();
  }
  if (body.contains("stop_latency_ms")) {
    const json& c = body["stop_latency_ms"];
    if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > 3'600'000) {
      return InvalidArgument("stop_latency_ms", "must be a whole number from 0 to 3600000");
    }
    k.stop_latency_ms = c.get<int64_t>();
  }
  return k;
}

void ApplyKnobs(const ReplayKnobs& k, plan::History* h) {
  if (k.cycle_interval_ms > 0) h->cycle_interval_ms = k.cycle_interval_ms;
  if (k.stop_latency_ms >= 0) {
    h->stop_latency_ms = k.stop_latency_ms;
    h->stop_latency_samples = 0;
  }
}

Status CheckKeys(const json& body, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [key, value] : body.items()) {
    if (allowed.count(key) == 0) {
      std::string names;
      for (const std::string& a : allowed) names += (names.empty() ? "" : ", ") + a;
      return InvalidArgument(where + key, fmt::format("unknown field; the fields are {}", names));
    }
  }
  return Status::Ok();
}

// A string or a list of strings.
Result<std::vector<std::string>> Strings(const json& body, const char* key) {
  std::vector<std::string> out;
  if (!body.contains(key)) return out;
  const json& v = body[key];
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
  if (!v.is_array()) {
    return InvalidArgument(key, "must be a string or a list of strings");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return InvalidArgument(fmt::format("{}[{}]", key, i), "must be a string");
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

// The period: until (RFC 3339; default now) and since (a duration back from until; default 30d).
Status ParsePeriod(const json& body, int64_t now, int64_t* since, int64_t* until) {
  *until = now;
  if (body.contains("until")) {
    const json& u = body["until"];
    std::optional<int64_t> ms;
    if (u.is_string()) ms = ParseRfc3339Ms(u.get<std::string>());
    if (!ms) {
      return InvalidArgument("until", fmt::format("must be an RFC 3339 time "
                                                  "(2026-11-10T08:00:00Z) or a date, got {}",
                                                  u.dump()));
    }
    *until = *ms;
  }
  int64_t back = 30 * 86'400'000LL;
  if (body.contains("since")) {
    auto d = ParseDuration(body["since"], "since");
    if (!d.ok()) return d.status();
    back = *d;
  }
  if (back <= 0) return InvalidArgument("since", "the period must be longer than 0");
  if (back > kMaxPeriodMs) {
    return InvalidArgument("since", "at most 366d of history is replayed at once");
  }
  *since = *until - back;
  return Status::Ok();
}

Result<plan::CapacityQuery> ParseCapacity(const json& c, const std::string& where) {
  if (!c.is_object()) return InvalidArgument(where.empty() ? "" : "capacity", "must be an object");
  plan::CapacityQuery q;
  const std::string prefix = where.empty() ? "" : where + ".";
  if (!c.contains("model") || !c["model"].is_string()) {
    return InvalidArgument(prefix + "model", "give the GPU model of the nodes to add (a string)");
  }
  q.model = c["model"].get<std::string>();
  if (!c.contains("target_wait_p90")) {
    return InvalidArgument(prefix + "target_wait_p90", "give the target p90 wait (1h)");
  }
  auto t = ParseDuration(c["target_wait_p90"], (prefix + "target_wait_p90").c_str());
  if (!t.ok()) return InvalidArgument(prefix + "target_wait_p90", t.status().message());
  q.target_wait_p90_ms = *t;
  for (const char* key : {"max_nodes", "gpus_per_node"}) {
    if (!c.contains(key)) continue;
    if (!c[key].is_number_integer() || c[key].get<int64_t>() < 1 || c[key].get<int64_t>() > 10000) {
      return InvalidArgument(prefix + key, "must be a whole number from 1 to 10000");
    }
    (std::string(key) == "max_nodes" ? q.max_nodes : q.gpus_per_node) =
        static_cast<int32_t>(c[key].get<int64_t>());
  }
  return q;
}

}  // namespace

void HttpApi::RegisterPlanRoutes(const RouteFn& route) {
  route("POST", "/api/v1/plan", "/api/v1/plan",
        "What-if on recorded history (admins): since (30d), until, add_nodes, remove_nodes, quota, "
        "policy, cycle_interval_ms, stop_latency_ms, jobs (per-job waits), format=json|html, or "
        "capacity {model, "
        "target_wait_p90, "
        "max_nodes, gpus_per_node}",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (p.role != Role::kAdmin) {
            return SendError(res, Forbidden("only admins may replay the cluster's history"));
          }
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          if (!body->is_object()) {
            return SendError(res, InvalidArgument("", "the body must be a JSON object"));
          }
          const std::set<std::string> keys = {"since",
                                              "until",
                                              "add_nodes",
                                              "remove_nodes",
                                              "quota",
                                              "policy",
                                              "cycle_interval_ms",
                                              "format",
                                              "capacity",
                                              "stop_latency_ms",
                                              "jobs"};
          if (Status st = CheckKeys(*body, keys, ""); !st.ok()) return SendError(res, st);
          int64_t since = 0, until = 0;
          if (Status st = ParsePeriod(*body, cp_->Now(), &since, &until); !st.ok()) {
            return SendError(res, st);
          }
          const std::string format = body->value("format", "json");
          if (format != "json" && format != "html") {
            return SendError(res, InvalidArgument("format", "must be json or html"));
          }
          if (body->contains("jobs") && !(*body)["jobs"].is_boolean()) {
            return SendError(res, InvalidArgument("jobs", "must be true or false"));
          }
          const bool with_jobs = body->value("jobs", false);
          std::vector<plan::Change> changes;
          for (const char* key : {"add_nodes", "remove_nodes", "quota", "policy"}) {
            auto values = Strings(*body, key);
            if (!values.ok()) return SendError(res, values.status());
            for (size_t i = 0; i < values->size(); ++i) {
              const std::string field = fmt::format("{}[{}]", key, i);
              const std::string& v = (*values)[i];
              const std::string_view k = key;
              Result<plan::Change> c = k == "add_nodes" ? plan::ParseAddNodes(v, field)
                                       : k == "quota"   ? plan::ParseQuota(v, field)
                                       : k == "remove_nodes"
                                           ? Result<plan::Change>(plan::RemoveNode(v))
                                           : Result<plan::Change>(plan::UsePolicy(v));
              if (!c.ok()) return SendError(res, c.status());
              changes.push_back(std::move(*c));
            }
          }
          if (changes.size() > kMaxChanges) {
            return SendError(res, InvalidArgument("add_nodes", fmt::format("at most {} changes at "
                                                                           "once",
                                                                           kMaxChanges)));
          }
          plan::History h;
          auto knobs = ParseKnobs(*body);
          if (!knobs.ok()) return SendError(res, knobs.status());
          if (Status st = cp_->PlanHistory(p, since, until, &h); !st.ok()) {
            return SendError(res, st);
          }
          ApplyKnobs(*knobs, &h);
          if (body->contains("capacity")) {
            if (!changes.empty()) {
              return SendError(res, InvalidArgument("capacity",
                                                    "give capacity or changes, not "
                                                    "both"));
            }
            auto q = ParseCapacity((*body)["capacity"], "capacity");
            if (!q.ok()) return SendError(res, q.status());
            auto a = plan::FindCapacity(h, *q);
            if (!a.ok()) return SendError(res, a.status());
            return SendJson(res, 200, plan::CapacityAnswerJson(*a, *q));
          }
          auto r = plan::ReplayHistory(h, plan::VariantsOf(changes));
          if (!r.ok()) return SendError(res, r.status());
          if (format == "html") {
            res.status = 200;
            res.set_content(plan::PlanHtml(*r, "arbiter plan replay"), "text/html; charset=utf-8");
            return;
          }
          SendJson(res, 200, plan::PlanReportJson(*r, with_jobs));
        });
  route("POST", "/api/v1/plan/capacity", "/api/v1/plan/capacity",
        "The fewest nodes of a GPU model that bring every queue's replayed p90 wait within a "
        "target (admins): since (30d), until, model, target_wait_p90, max_nodes, gpus_per_node",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (p.role != Role::kAdmin) {
            return SendError(res, Forbidden("only admins may replay the cluster's history"));
          }
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          if (!body->is_object()) {
            return SendError(res, InvalidArgument("", "the body must be a JSON object"));
          }
          const std::set<std::string> keys = {"since",
                                              "until",
                                              "model",
                                              "target_wait_p90",
                                              "max_nodes",
                                              "gpus_per_node",
                                              "cycle_interval_ms",
                                              "stop_latency_ms"};
          if (Status st = CheckKeys(*body, keys, ""); !st.ok()) return SendError(res, st);
          int64_t since = 0, until = 0;
          if (Status st = ParsePeriod(*body, cp_->Now(), &since, &until); !st.ok()) {
            return SendError(res, st);
          }
          json c = *body;
          for (const char* k : {"since", "until", "cycle_interval_ms", "stop_latency_ms"})
            c.erase(k);
          auto q = ParseCapacity(c, "");
          if (!q.ok()) return SendError(res, q.status());
          plan::History h;
          auto knobs = ParseKnobs(*body);
          if (!knobs.ok()) return SendError(res, knobs.status());
          if (Status st = cp_->PlanHistory(p, since, until, &h); !st.ok()) {
            return SendError(res, st);
          }
          ApplyKnobs(*knobs, &h);
          auto a = plan::FindCapacity(h, *q);
          if (!a.ok()) return SendError(res, a.status());
          SendJson(res, 200, plan::CapacityAnswerJson(*a, *q));
        });
}

}  // namespace arbiter::server

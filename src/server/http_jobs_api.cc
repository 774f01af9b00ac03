// The jobs' routes: submission, listing, one job, its events and why, actions; the event stream.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "api/config_codec.h"
#include "api/errors.h"
#include "api/job_codec.h"
#include "common/time.h"
#include "model/job_array.h"
#include "net/http_params.h"
#include "server/http_api.h"
#include "server/quota_requests.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// {"max_running": N}
Result<int32_t> ParseThrottleBody(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return InvalidArgument("", "the body must be a JSON object: {\"max_running\": N}");
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "max_running") {
      return InvalidArgument(key, "unknown field; the body is {\"max_running\": N}");
    }
  }
  const auto it = j.find("max_running");
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0 ||
      it->get<int64_t>() > kMaxArrayRunning) {
    return InvalidArgument("max_running", fmt::format("must be a whole number from 0 (no limit) "
                                                      "to {}",
                                                      kMaxArrayRunning));
  }
  return static_cast<int32_t>(it->get<int64_t>());
}

// An approval decision's body: empty, or {"comment": "..."}.
Result<std::string> ParseDecisionBody(const std::string& body) {
  if (body.empty()) return std::string();
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return InvalidArgument("", "the body must be empty or a JSON object: {\"comment\": \"...\"}");
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "comment") {
      return InvalidArgument(key, "unknown field; the body is {\"comment\": \"...\"}");
    }
  }
  const auto it = j.find("comment");
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string()) return InvalidArgument("comment", "must be a string");
  return it->get<std::string>();
}

// "a,b" -> {"a", "b"}; empty items are dropped.
std::vector<std::string> CommaList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<JobFilter> HttpApi::ParseJobFilter(const httplib::Request& req) {
  JobFilter f;
  f.tenants = CommaList(req.get_param_value("tenant"));
  f.queues = CommaList(req.get_param_value("queue"));
  f.states = CommaList(req.get_param_value("state"));
  f.users = CommaList(req.get_param_value("user"));
  f.types = CommaList(req.get_param_value("type"));
  if (req.has_param("q")) {
    const std::string q = req.get_param_value("q");
    if (q.size() > 200) {
      return InvalidArgument("q", fmt::format("must be at most 200 characters, got {}", q.size()));
    }
    for (char c : q) f.text += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  auto active = net::QueryBool(req, "active");
  if (!active.ok()) return active.status();
  f.active = *active;
  for (auto [name, out] : {std::pair{"since", &f.since}, std::pair{"until", &f.until}}) {
    if (!req.has_param(name)) continue;
    const std::optional<int64_t> ms = ParseRfc3339Ms(req.get_param_value(name));
    if (!ms || *ms <= 0) {
      return InvalidArgument(name,
                             fmt::format("'{}' is not an RFC 3339 time (2024-05-01T12:00:00Z)",
                                         req.get_param_value(name)));
    }
    *out = *ms;
  }
  if (req.has_param("array")) {
    auto a = ParseId(req.get_param_value("array"), "array");
    if (!a.ok()) return a.status();
    f.array = *a;
  }
  if (req.has_param("index")) {
    auto i = ParseId(req.get_param_value("index"), "index");
    if (!i.ok() || *i > static_cast<uint64_t>(kMaxArrayIndex)) {
      return InvalidArgument("index",
                             fmt::format("must be an array index, 0 to {}", kMaxArrayIndex));
    }
    if (f.array == 0) return InvalidArgument("index", "needs array: ?array=ID&index=N");
    f.index = static_cast<int64_t>(*i);
  }
  if (req.has_param("cursor")) {
    auto c = ParseId(req.get_param_value("cursor"), "cursor");
    if (!c.ok()) return c.status();
    f.after_id = *c;
  }
  if (req.has_param("limit")) {
    auto l = ParseId(req.get_param_value("limit"), "limit");
    if (!l.ok() || *l < 1 || *l > 1000) {
      return InvalidArgument("limit", "must be between 1 and 1000");
    }
    f.limit = *l;
  }
  return f;
}

void HttpApi::RegisterJobRoutes(const RouteFn& route) {
  // Jobs.
  route("POST", "/api/v1/jobs", "/api/v1/jobs",
        "Submit a job, or a job array with \"array\": {\"indices\": \"0-99:2\", "
        "\"max_running\": 8} (one job per index; answers its first element, whose id is the "
        "array's); Idempotency-Key header honoured",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          std::optional<api::ArrayRequest> array;
          auto spec = api::ParseJobSubmission(req.body, &array);
          if (!spec.ok()) return SendError(res, spec.status());
          bool created = false;
          const std::string key = req.get_header_value("Idempotency-Key");
          auto r = array ? cp_->SubmitArray(p, std::move(spec).value(), *array, key, &created)
                         : cp_->SubmitJob(p, std::move(spec).value(), key, &created);
          if (!r.ok()) return SendError(res, r.status());
          res.set_header("Location", fmt::format("/api/v1/jobs/{}", r->id));
          SendJsonText(res, created ? 201 : 200, std::move(r->body));
        });
  route("POST", "/api/v1/jobs/batch", "/api/v1/jobs/batch",
        "Submit up to 1000 jobs in one durable batch, all or nothing: {\"jobs\": [job, ...]} "
        "answers {\"items\": [job, ...]} (Idempotency-Key header honoured: job i gets KEY#i)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto specs = api::ParseJobBatch(req.body);
          if (!specs.ok()) return SendError(res, specs.status());
          bool created = false;
          auto r = cp_->SubmitJobs(p, std::move(specs).value(),
                                   req.get_header_value("Idempotency-Key"), &created);
          if (!r.ok()) return SendError(res, r.status());
          SendJsonText(res, created ? 201 : 200, std::move(r).value());
        });
  route("GET", "/api/v1/jobs", "/api/v1/jobs",
        "List jobs; filters tenant, queue, state, user, type (each a comma-separated list), "
        "array (a job array's elements) and index (with array), active=true (not ended), since and "
        "until (RFC 3339: jobs not ended before since, "
        "submitted by until); cursor pagination (cursor, limit)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto f = ParseJobFilter(req);
          if (!f.ok()) return SendError(res, f.status());
          auto r = cp_->ListJobs(p, std::move(f).value());
          if (!r.ok()) return SendError(res, r.status());
          SendJsonText(res, 200, std::move(r).value());
        });
  route("GET", "/api/v1/jobs/{id}", R"(/api/v1/jobs/(\d+))", "Get a job",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          Reply(res, cp_->GetJob(p, *id));
        });
  route("GET", "/api/v1/jobs/{id}/events", R"(/api/v1/jobs/(\d+)/events)",
        "A job's history of state changes with reasons",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          Reply(res, cp_->JobEvents(p, *id));
        });
  route("GET", "/api/v1/jobs/{id}/why", R"(/api/v1/jobs/(\d+)/why)",
        "Why a job is pending: verdict code, message, position, estimated start",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          Reply(res, cp_->WhyPending(p, *id));
        });
  for (const char* action : {"cancel", "suspend", "resume", "retry", "requeue"}) {
    route("POST", fmt::format("/api/v1/jobs/{{id}}/{}", action),
          fmt::format(R"(/api/v1/jobs/(\d+)/{})", action), fmt::format("{} a job", action),
          [this, action](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            auto id = ParseId(req.matches[1], "id");
            if (!id.ok()) return SendError(res, id.status());
            Reply(res, cp_->JobAction(p, *id, action));
          });
  }
  for (const char* action : {"approve", "reject"}) {
    route("POST", fmt::format("/api/v1/jobs/{{id}}/{}", action),
          fmt::format(R"(/api/v1/jobs/(\d+)/{})", action),
          fmt::format("{} a job awaiting approval, with an optional {{\"comment\": \"...\"}} "
                      "(its rule's approvers or admins; never its own submitter)",
                      action),
          [this, action](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            auto id = ParseId(req.matches[1], "id");
            if (!id.ok()) return SendError(res, id.status());
            auto comment = ParseDecisionBody(req.body);
            if (!comment.ok()) return SendError(res, comment.status());
            Reply(res,
                  cp_->DecideApproval(p, *id, std::string_view(action) == "approve", *comment));
          });
  }
  route("GET", "/api/v1/approvals", "/api/v1/approvals",
        "The jobs and services awaiting approval that the caller may approve or reject (each "
        "item's kind: job or service)",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListApprovals(p));
        });
  for (const char* action : {"approve", "reject"}) {
    route("POST", fmt::format("/api/v1/services/{{name}}/{}", action),
          fmt::format(R"(/api/v1/services/([A-Za-z0-9._-]+)/{})", action),
          fmt::format("{} a service awaiting approval, with an optional {{\"comment\": \"...\"}} "
                      "(its rule's approvers or admins; never its own creator)",
                      action),
          [this, action](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            auto comment = ParseDecisionBody(req.body);
            if (!comment.ok()) return SendError(res, comment.status());
            Reply(res, cp_->DecideServiceApproval(p, req.matches[1],
                                                  std::string_view(action) == "approve", *comment));
          });
  }

  // Quota requests (docs/approvals.md): a temporary rise of a queue's guaranteed amounts.
  route("POST", "/api/v1/quota-requests", "/api/v1/quota-requests",
        "Ask for more guaranteed capacity for a queue of the caller's tenant until a time: "
        "{queue, guaranteed: {gpu: 16}, until, reason}; admins decide",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto in = ParseQuotaRequestBody(req.body, cp_->Now());
          if (!in.ok()) return SendError(res, in.status());
          Reply(res, cp_->CreateQuotaRequest(p, std::move(in).value()), 201);
        });
  route("GET", "/api/v1/quota-requests", "/api/v1/quota-requests",
        "The quota requests of the caller's tenant (admins: all), newest first",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListQuotaRequests(p));
        });
  route("GET", "/api/v1/quota-requests/{id}", R"(/api/v1/quota-requests/(\d+))",
        "One quota request: its state, the configuration diff it made, its revert",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          Reply(res, cp_->GetQuotaRequest(p, *id));
        });
  for (const char* action : {"approve", "reject"}) {
    route("POST", fmt::format("/api/v1/quota-requests/{{id}}/{}", action),
          fmt::format(R"(/api/v1/quota-requests/(\d+)/{})", action),
          fmt::format("{} a pending quota request, with an optional {{\"comment\": \"...\"}} "
                      "(admins; never its requester)",
                      action),
          [this, action](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            auto id = ParseId(req.matches[1], "id");
            if (!id.ok()) return SendError(res, id.status());
            auto comment = ParseDecisionBody(req.body);
            if (!comment.ok()) return SendError(res, comment.status());
            Reply(res,
                  cp_->DecideQuotaRequest(p, *id, std::string_view(action) == "approve", *comment));
          });
  }

  // Job arrays: their id is their first element's.
  route("GET", "/api/v1/arrays/{id}", R"(/api/v1/arrays/(\d+))",
        "A job array: name, tenant, user, queue, indices, size, max_running, elements per state",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          Reply(res, cp_->GetArray(p, *id));
        });
  for (const char* action : {"cancel", "suspend", "resume", "retry", "requeue"}) {
    route("POST", fmt::format("/api/v1/arrays/{{id}}/{}", action),
          fmt::format(R"(/api/v1/arrays/(\d+)/{})", action),
          fmt::format("{} every element of a job array it applies to, in one durable batch; the "
                      "array with \"changed\": the ids acted on (409: none)",
                      action),
          [this, action](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            auto id = ParseId(req.matches[1], "id");
            if (!id.ok()) return SendError(res, id.status());
            Reply(res, cp_->ArrayAction(p, *id, action));
          });
  }
  route("POST", "/api/v1/arrays/{id}/throttle", R"(/api/v1/arrays/(\d+)/throttle)",
        "Change how many elements of a job array may hold resources at once: {\"max_running\": "
        "N} (0: no limit; Slurm's ArrayTaskThrottle); answers the array",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          auto max_running = ParseThrottleBody(req.body);
          if (!max_running.ok()) return SendError(res, max_running.status());
          Reply(res, cp_->SetArrayThrottle(p, *id, *max_running));
        });

  // Server-sent events.
  route("GET", "/api/v1/events", "/api/v1/events",
        "Server-sent events of job and node changes (since=SEQ to resume)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (p.role == Role::kNode) {
            return SendError(
                res, Status(StatusCode::kPermissionDenied, "nodes may not read the event stream"));
          }
          uint64_t since = cp_->last_event_seq();
          if (req.has_param("since")) {
            auto s = ParseId(req.get_param_value("since"), "since");
            if (!s.ok()) return SendError(res, s.status());
            since = *s;
          }
          auto seq = std::make_shared<uint64_t>(since);
          const Principal who = p;
          res.set_header("Cache-Control", "no-cache");
          res.set_chunked_content_provider(
              "text/event-stream", [this, seq, who](size_t, httplib::DataSink& sink) {
                if (stopping_) return false;
                for (const ServerEvent& e : cp_->EventsAfter(*seq, 1000)) {
                  *seq = e.seq;
                  if (who.role != Role::kAdmin && !e.tenant.empty() && e.tenant != who.tenant) {
                    continue;
                  }
                  const std::string msg =
                      fmt::format("id: {}\nevent: {}\ndata: {}\n\n", e.seq, e.kind, e.data);
                  if (!sink.write(msg.data(), msg.size())) return false;
                }
                const std::string ping = ": keep-alive\n\n";
                return sink.write(ping.data(), ping.size()) && !stopping_;
              });
        });
}

}  // namespace arbiter::server

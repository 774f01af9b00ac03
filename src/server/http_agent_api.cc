// The node agents' routes: register, heartbeat, the assignment watch.
#include <fmt/format.h>
#include <httplib.h>

#include "api/agent_codec.h"
#include "api/errors.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

Result<uint64_t> ParseUint(const std::string& s, const char* field, uint64_t max) {
  uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 19;
  for (char c : s) {
    ok = ok && c >= '0' && c <= '9';
    if (ok) v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || v > max) {
    return InvalidArgument(field, fmt::format("must be an integer between 0 and {}", max));
  }
  return v;
}

Status NodeOnly(const Principal& p) {
  if (p.role == Role::kNode) return Status::Ok();
  return {StatusCode::kPermissionDenied,
          fmt::format("only node tokens may use the agent routes; {} holds a {} token", p.user,
                      RoleName(p.role))};
}

}  // namespace

void HttpApi::RegisterAgentRoutes(const RouteFn& route) {
  route("POST", "/api/v1/agent/register", "/api/v1/agent/register",
        "Node agents (node tokens): register a node with its capacity, GPUs, labels and log port",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (Status st = NodeOnly(p); !st.ok()) return SendError(res, st);
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          auto reg = api::ParseAgentRegistration(*body);
          if (!reg.ok()) return SendError(res, reg.status());
          auto r = cp_->RegisterAgent(p, std::move(reg).value(), req.remote_addr);
          if (!r.ok()) return SendError(res, r.status());
          res.set_content(r->dump(), "application/json");
        });
  route("POST", "/api/v1/agent/heartbeat", "/api/v1/agent/heartbeat",
        "Node agents (node tokens): telemetry and task reports in, the node's assignments out",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (Status st = NodeOnly(p); !st.ok()) return SendError(res, st);
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          auto hb = api::ParseAgentHeartbeat(*body);
          if (!hb.ok()) return SendError(res, hb.status());
          auto r = cp_->Heartbeat(p, *hb);
          if (!r.ok()) return SendError(res, r.status());
          res.set_content(r->dump(), "application/json");
        });
  route("GET", "/api/v1/agent/watch", "/api/v1/agent/watch",
        "Node agents (node tokens): returns when the node's assignments may have changed from "
        "version=V (from a heartbeat or an earlier watch), or after wait_ms (default 10000, at "
        "most 60000); answers the current version",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (Status st = NodeOnly(p); !st.ok()) return SendError(res, st);
          const std::string node = req.get_param_value("node");
          if (node.empty()) {
            return SendError(res, InvalidArgument("node", "is required: the node's name"));
          }
          auto version = ParseUint(req.get_param_value("version"), "version", uint64_t{1} << 62);
          if (!version.ok()) return SendError(res, version.status());
          uint64_t wait_ms = 10000;
          if (req.has_param("wait_ms")) {
            auto w = ParseUint(req.get_param_value("wait_ms"), "wait_ms", 60000);
            if (!w.ok()) return SendError(res, w.status());
            wait_ms = *w;
          }
          auto r = cp_->WatchAssignments(p, node, *version, static_cast<DurationMs>(wait_ms));
          if (!r.ok()) return SendError(res, r.status());
          res.set_content(json{{"version", *r}}.dump(), "application/json");
        });
}

}  // namespace arbiter::server

// Online services (docs/services.md): the service objects and their actions, and the gateways'
// routes (a long poll) and stats.
#include <fmt/format.h>
#include <httplib.h>

#include <string>

#include "api/service_codec.h"
#include "model/service.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr const char* kNamePattern = R"(/api/v1/services/([A-Za-z0-9._-]+))";

// A whole number in [0, max]; the field named in the error.
Result<uint64_t> ParseCount(const std::string& s, const char* field, uint64_t max) {
  uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 19;
  for (char c : s) {
    if (c < '0' || c > '9') {
      ok = false;
      break;
    }
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!ok || v > max) {
    return InvalidArgument(
        field, fmt::format("must be a whole number between 0 and {}, got '{}'", max, s));
  }
  return v;
}

}  // namespace

void HttpApi::RegisterServiceRoutes(const RouteFn& route) {
  route("POST", "/api/v1/services", "/api/v1/services",
        "Create a service (its replicas start at once); 409 when the name is taken",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto spec = api::ParseServiceJson(req.body);
          if (!spec.ok()) return SendError(res, spec.status());
          Reply(res, cp_->CreateService(p, std::move(spec).value()), 201);
        });
  route("GET", "/api/v1/services", "/api/v1/services",
        "List the services the caller may read (?tenant=T: only T's), with their replicas",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->ListServices(p, req.get_param_value("tenant")));
        });
  route("GET", "/api/v1/services/{name}", kNamePattern,
        "Get a service: its spec, revisions, traffic and replicas",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->GetService(p, req.matches[1]));
        });
  route("PUT", "/api/v1/services/{name}", kNamePattern,
        "Replace a service's spec; a change of template or port makes a new revision, rolled "
        "out by the rollout rules",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto spec = api::ParseServiceJson(req.body);
          if (!spec.ok()) return SendError(res, spec.status());
          Reply(res, cp_->ReplaceService(p, req.matches[1], std::move(spec).value()));
        });
  route("DELETE", "/api/v1/services/{name}", kNamePattern, "Delete a service and stop its replicas",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->DeleteService(p, req.matches[1]));
        });
  route("POST", "/api/v1/services/{name}/scale", std::string(kNamePattern) + "/scale",
        "Set a service's replicas: {\"replicas\": N}, or an autoscaling service's range: "
        "{\"min\": A, \"max\": B}",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto n = api::ParseScaleBody(req.body);
          if (!n.ok()) return SendError(res, n.status());
          Reply(res, cp_->ScaleService(p, req.matches[1], *n));
        });
  route("POST", "/api/v1/services/{name}/traffic", std::string(kNamePattern) + "/traffic",
        "Split a service's traffic between revisions: {\"traffic\": [{\"revision\", "
        "\"percent\"}]} summing to 100",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto t = api::ParseTrafficBody(req.body);
          if (!t.ok()) return SendError(res, t.status());
          Reply(res, cp_->SetServiceTraffic(p, req.matches[1], std::move(t).value()));
        });
  route("POST", "/api/v1/services/{name}/rollback", std::string(kNamePattern) + "/rollback",
        "Send all traffic to the revision before the one that serves most of it",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (!req.body.empty()) {
            auto body = ParseJsonBody(req);
            if (!body.ok()) return SendError(res, body.status());
            if (!body->is_object() || !body->empty()) {
              return SendError(res, InvalidArgument("", "the body must be {} or empty"));
            }
          }
          Reply(res, cp_->RollbackService(p, req.matches[1]));
        });

  // The gateways'.
  route("GET", "/api/v1/gateway/routes", "/api/v1/gateway/routes",
        "Gateways (admin or node tokens): the routing table; returns when its version differs "
        "from after=V, or after wait_ms (default 0, at most 60000)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          uint64_t after = 0;
          if (req.has_param("after")) {
            auto a = ParseCount(req.get_param_value("after"), "after", uint64_t{1} << 62);
            if (!a.ok()) return SendError(res, a.status());
            after = *a;
          }
          uint64_t wait_ms = 0;
          if (req.has_param("wait_ms")) {
            auto w = ParseCount(req.get_param_value("wait_ms"), "wait_ms", 60000);
            if (!w.ok()) return SendError(res, w.status());
            wait_ms = *w;
          }
          auto r = cp_->GatewayRoutes(p, after, static_cast<DurationMs>(wait_ms));
          if (!r.ok()) return SendError(res, r.status());
          SendJsonText(res, 200, std::move(r).value());
        });
  route("POST", "/api/v1/gateway/stats", "/api/v1/gateway/stats",
        "Gateways (admin or node tokens): request counts and latency histograms of a window, "
        "per service revision, added to the serving minutes",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (p.role != Role::kAdmin && p.role != Role::kNode) {
            return SendError(res, Status(StatusCode::kPermissionDenied,
                                         "the gateway's stats take an admin token or a node "
                                         "(gateway) token"));
          }
          auto stats = ParseGatewayStats(req.body);
          if (!stats.ok()) return SendError(res, stats.status());
          Reply(res, cp_->RecordGatewayStats(p, *stats));
        });
  route("POST", "/api/v1/gateway/load", "/api/v1/gateway/load",
        "Gateways (admin or node tokens): each service's requests in flight or waiting and "
        "requests per second over the last second, what autoscaling decides by",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (p.role != Role::kAdmin && p.role != Role::kNode) {
            return SendError(res, Status(StatusCode::kPermissionDenied,
                                         "the gateway's load reports take an admin token or a "
                                         "node (gateway) token"));
          }
          auto load = ParseGatewayLoad(req.body);
          if (!load.ok()) return SendError(res, load.status());
          Reply(res, cp_->RecordGatewayLoad(p, *load));
        });
}

}  // namespace arbiter::server

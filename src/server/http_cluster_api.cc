// The cluster's shape: nodes and their actions, the configuration.
#include <fmt/format.h>
#include <httplib.h>

#include <string>

#include "api/config_codec.h"
#include "api/errors.h"
#include "api/job_codec.h"
#include "net/http_params.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

void HttpApi::RegisterClusterRoutes(const RouteFn& route) {
  // Nodes.
  route("GET", "/api/v1/nodes", "/api/v1/nodes", "List nodes",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListNodes(p));
        });
  route("GET", "/api/v1/nodes/{name}", R"(/api/v1/nodes/([A-Za-z0-9._-]+))",
        "Get a node and the jobs on it",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->GetNode(p, req.matches[1]));
        });
  for (const char* action : {"cordon", "drain", "uncordon"}) {
    route("POST", fmt::format("/api/v1/nodes/{{name}}/{}", action),
          fmt::format(R"(/api/v1/nodes/([A-Za-z0-9._-]+)/{})", action),
          fmt::format("{} a node; optional body {{\"reason\": \"...\"}} (shown with the node "
                      "until it is ready)",
                      action),
          [this, action](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            std::string reason;
            if (!req.body.empty()) {
              auto body = ParseJsonBody(req);
              if (!body.ok()) return SendError(res, body.status());
              if (!body->is_object()) {
                return SendError(res, InvalidArgument("", "the body must be a JSON object"));
              }
              const json r = body->value("reason", json(""));
              if (!r.is_string() || r.get<std::string>().size() > 256) {
                return SendError(res, InvalidArgument("reason",
                                                      "must be a string of at most 256 "
                                                      "characters"));
              }
              reason = r.get<std::string>();
            }
            Reply(res, cp_->NodeAction(p, req.matches[1], action, reason));
          });
  }

  // Configuration.
  route(
      "PUT", "/api/v1/config", "/api/v1/config",
      "Make the server match a YAML configuration; ?dry_run=true returns the diff only",
      [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
        auto c = api::ParseConfigYaml(req.body);
        if (!c.ok()) return SendError(res, c.status());
        auto dry_run = net::QueryBool(req, "dry_run");
        if (!dry_run.ok()) return SendError(res, dry_run.status());
        const bool dry = *dry_run;
        auto prune = net::QueryBool(req, "prune");
        if (!prune.ok()) return SendError(res, prune.status());
        auto applied = cp_->ApplyConfig(p, *c, dry, *prune);
        if (!applied.ok()) return SendError(res, applied.status());
        json changes = json::array();
        for (const api::ConfigChange& ch : applied->changes) {
          changes.push_back(
              {{"kind", ch.kind}, {"name", ch.name}, {"action", ch.action}, {"detail", ch.detail}});
        }
        json affected = json::array();
        for (const ControlPlane::AffectedJob& a : applied->affected) {
          affected.push_back({{"id", a.id},
                              {"tenant", a.tenant},
                              {"queue", a.queue},
                              {"user", a.user},
                              {"state", a.state},
                              {"because", a.because}});
        }
        SendJson(res, 200,
                 {{"dry_run", dry},
                  {"changes", changes},
                  {"affected_jobs", affected},
                  {"affected_total", applied->affected_total},
                  {"needs_prune", applied->affected_total > 0 && !*prune},
                  {"cancelled", applied->cancelled}});
      });
  route("GET", "/api/v1/config", "/api/v1/config", "The configuration as YAML",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          if (p.role != Role::kAdmin) {
            return SendError(res, Status(StatusCode::kPermissionDenied,
                                         "only admins may read the configuration"));
          }
          res.set_content(cp_->ConfigYaml(), "application/yaml");
        });
}

}  // namespace arbiter::server

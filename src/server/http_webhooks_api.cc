// Webhooks (docs/webhooks.md): the hooks of a user, a tenant or the cluster, their delivery logs
// and a test ping. The signing secret is in the creation's answer only.
#include <fmt/format.h>
#include <httplib.h>

#include <string>

#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr const char* kIdPattern = R"(/api/v1/webhooks/([A-Za-z0-9_-]{1,64}))";

}  // namespace

void HttpApi::RegisterWebhookRoutes(const RouteFn& route) {
  route("POST", "/api/v1/webhooks", "/api/v1/webhooks",
        "Create a webhook: {url, events: [...], scope: user|tenant|cluster, format: json|slack, "
        "description, tenant}; the answer carries its signing secret, shown only this once",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          Reply(res, cp_->webhooks().Create(p, *body), 201);
        });
  route("GET", "/api/v1/webhooks", "/api/v1/webhooks",
        "List the webhooks the caller may manage (its own; a tenant admin: its tenant's; an "
        "admin: all), without their secrets",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->webhooks().List(p));
        });
  route("DELETE", "/api/v1/webhooks/{id}", kIdPattern,
        "Delete a webhook and its delivery log (pending deliveries are dropped)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->webhooks().Delete(p, req.matches[1]));
        });
  route("GET", "/api/v1/webhooks/{id}/deliveries", std::string(kIdPattern) + "/deliveries",
        "A webhook's delivery log, newest first: event, state, attempts, last status or error, "
        "next attempt, delivered at",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          size_t limit = 50;
          if (req.has_param("limit")) {
            const std::string v = req.get_param_value("limit");
            uint64_t n = 0;
            bool ok = !v.empty() && v.size() <= 4;
            for (char c : v) {
              ok = ok && c >= '0' && c <= '9';
              if (ok) n = n * 10 + static_cast<uint64_t>(c - '0');
            }
            if (!ok || n < 1 || n > 1000) {
              return SendError(
                  res, InvalidArgument("limit", fmt::format("must be 1-1000, got '{}'", v)));
            }
            limit = n;
          }
          Reply(res, cp_->webhooks().Deliveries(p, req.matches[1], limit));
        });
  route("POST", "/api/v1/webhooks/{id}/test", std::string(kIdPattern) + "/test",
        "Send the webhook a ping (event \"ping\"), delivered and retried as any event; answers "
        "the delivery (202)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->webhooks().Test(p, req.matches[1]), 202);
        });
}

}  // namespace arbiter::server

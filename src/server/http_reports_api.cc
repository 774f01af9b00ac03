// GET /api/v1/reports/{report}: the query parameters, the report, JSON or CSV (docs/reports.md).
#include <fmt/format.h>
#include <httplib.h>

#include <cstdio>
#include <ctime>

#include "api/errors.h"
#include "common/duration.h"
#include "common/time.h"
#include "model/service.h"
#include "server/http_api.h"
#include "server/reports.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// "90s", "30m", "12h", "7d", "2w" (a positive whole number and a unit).
Result<int64_t> ParseDurationMs(const std::string& s, const char* field) {
  const Status bad = InvalidArgument(
      field, fmt::format("must be a duration such as 90s, 30m, 12h, 7d or 2w, got '{}'", s));
  const auto ms = ParseDurationUnitsMs(s);
  if (!ms || *ms <= 0) return bad;
  return *ms;
}

// RFC 3339 or a date (common/time.h).
Result<int64_t> ParseTimeMs(const std::string& s, const char* field) {
  if (auto ms = ParseRfc3339Ms(s)) return *ms;
  return InvalidArgument(
      field,
      fmt::format("must be an RFC 3339 time (2026-11-10T08:00:00Z) or a date (2026-11-10), got "
                  "'{}'",
                  s));
}

// The query from the parameters: from/to (default to: now), or since (from = to - since);
// neither: the last 7 days.
Result<reports::Query> ParseQuery(const httplib::Request& req, int64_t now) {
  reports::Query q;
  q.to_ms = now;
  if (req.has_param("to")) {
    auto t = ParseTimeMs(req.get_param_value("to"), "to");
    if (!t.ok()) return t.status();
    q.to_ms = *t;
  }
  if (req.has_param("from") && req.has_param("since")) {
    return InvalidArgument("since", "give from or since, not both");
  }
  q.from_ms = q.to_ms - 7 * 86'400'000LL;
  if (req.has_param("from")) {
    auto f = ParseTimeMs(req.get_param_value("from"), "from");
    if (!f.ok()) return f.status();
    q.from_ms = *f;
  } else if (req.has_param("since")) {
    auto d = ParseDurationMs(req.get_param_value("since"), "since");
    if (!d.ok()) return d.status();
    q.from_ms = q.to_ms - *d;
  }
  if (req.has_param("group_by")) {
    const std::string g = req.get_param_value("group_by");
    q.group_by = reports::ParseGroupBy(g);
    if (!q.group_by) {
      return InvalidArgument(
          "group_by", fmt::format("must be tenant, queue, user, type or gpu_model, got '{}'", g));
    }
  }
  if (req.has_param("service")) {
    q.service = req.get_param_value("service");
    if (!IsValidServiceName(q.service)) {
      return InvalidArgument("service", fmt::format("'{}' is not a service name", q.service));
    }
  }
  if (req.has_param("step")) {
    auto d = ParseDurationMs(req.get_param_value("step"), "step");
    if (!d.ok()) return d.status();
    q.step_ms = *d;
  }
  return q;
}

}  // namespace

void HttpApi::RegisterReportRoutes(const RouteFn& route) {
  for (std::string_view name : reports::ReportNames()) {
    const std::string report(name);
    route("GET", fmt::format("/api/v1/reports/{}", report),
          fmt::format("/api/v1/reports/{}", report),
          fmt::format("The {} report (docs/reports.md): from, to (RFC 3339) or since (7d), "
                      "group_by, step, format=json|csv{}",
                      report, report == "forecast" ? ", horizon (14d)" : ""),
          [this, report](const Principal& p, const httplib::Request& req, httplib::Response& res) {
            const std::string format =
                req.has_param("format") ? req.get_param_value("format") : "json";
            if (format != "json" && format != "csv") {
              return SendError(res, InvalidArgument("format", fmt::format("must be json or csv, "
                                                                          "got '{}'",
                                                                          format)));
            }
            auto q = ParseQuery(req, cp_->Now());
            if (!q.ok()) return SendError(res, q.status());
            if (report == "forecast") {
              // Eight weeks of history unless the period is given; `horizon` days ahead.
              if (!req.has_param("from") && !req.has_param("since")) {
                q->from_ms = q->to_ms - reports::kForecastDefaultHistoryDays * reports::kDayMs;
              }
              if (req.has_param("horizon")) {
                auto h = ParseDurationMs(req.get_param_value("horizon"), "horizon");
                if (!h.ok()) return SendError(res, h.status());
                q->horizon_ms = *h;
              }
            } else if (req.has_param("horizon")) {
              return SendError(res, InvalidArgument("horizon", "only the forecast has a horizon"));
            }
            auto table = cp_->Report(p, report, *q);
            if (!table.ok()) return SendError(res, table.status());
            res.status = 200;
            if (format == "csv") {
              res.set_content(reports::ToCsv(*table), "text/csv; charset=utf-8");
            } else {
              res.set_content(reports::ToJson(report, *q, *table).dump(), "application/json");
            }
          });
  }
}

}  // namespace arbiter::server

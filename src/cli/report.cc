// `arbiter report NAME`: a report of GET /api/v1/reports/NAME (docs/reports.md) as a table, JSON,
// YAML or CSV.
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

constexpr std::array<const char*, 10> kReports = {
    "usage",   "wait",          "failures",          "preemptions",
    "cluster", "fragmentation", "idle-while-queued", "fairness",
    "serving", "forecast"};

struct ReportFlags {
  std::string name, from, to, since, by, step, service, horizon, output = "table";
};

// Percent-encodes a query value (RFC 3986 unreserved characters are kept).
std::string QueryEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string CellText(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string CsvField(const json& v) {
  if (v.is_null()) return "";
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string Upper(std::string s) {
  for (char& c : s) c = c == '_' ? ' ' : static_cast<char>(std::toupper(c));
  return s;
}

int Report(const ContextPtr& ctx, const ReportFlags& f) {
  std::string path = fmt::format("/api/v1/reports/{}?format=json", f.name);
  const std::pair<const char*, const std::string*> params[] = {
      {"from", &f.from}, {"to", &f.to},           {"since", &f.since},    {"group_by", &f.by},
      {"step", &f.step}, {"service", &f.service}, {"horizon", &f.horizon}};
  for (const auto& [key, value] : params) {
    if (!value->empty()) path += fmt::format("&{}={}", key, QueryEscape(*value));
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  if (f.output == "json" || f.output == "yaml") {
    PrintStructured(*r, f.output == "json" ? OutputFormat::kJson : OutputFormat::kYaml);
    return kExitOk;
  }
  const json& columns = (*r)["columns"];
  if (f.output == "csv") {
    std::string out;
    for (size_t i = 0; i < columns.size(); ++i) {
      out += fmt::format("{}{}", i > 0 ? "," : "", CsvField(columns[i]));
    }
    out += "\r\n";
    for (const json& row : (*r)["rows"]) {
      for (size_t i = 0; i < columns.size(); ++i) {
        out += fmt::format("{}{}", i > 0 ? "," : "",
                           CsvField(row.value(columns[i].get<std::string>(), json())));
      }
      out += "\r\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitOk;
  }
  std::vector<std::string> headers;
  for (const json& col : columns) headers.push_back(Upper(col.get<std::string>()));
  Table t(headers);
  for (const json& row : (*r)["rows"]) {
    std::vector<Cell> cells;
    for (const json& col : columns)
      cells.emplace_back(CellText(row.value(col.get<std::string>(), json())));
    t.AddRow(std::move(cells));
  }
  std::printf("%s report, %s to %s\n", f.name.c_str(), (*r).value("from", "").c_str(),
              (*r).value("to", "").c_str());
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

}  // namespace

void RegisterReportCommand(CLI::App& app, const ContextPtr& ctx) {
  auto f = std::make_shared<ReportFlags>();
  auto* report =
      app.add_subcommand("report",
                         "Reports for a period: usage, wait, failures, preemptions, cluster, "
                         "fragmentation, idle-while-queued, fairness, serving, forecast "
                         "(docs/reports.md)");
  report->add_option("report", f->name, "Which report")
      ->required()
      ->check(CLI::IsMember(std::vector<std::string>(kReports.begin(), kReports.end())));
  report->add_option("--from", f->from, "Start: RFC 3339 time or date (default: 7 days back)");
  report->add_option("--to", f->to, "End: RFC 3339 time or date (default: now)");
  report->add_option("--since", f->since, "The period up to --to: 90s, 30m, 12h, 7d, 2w")
      ->excludes("--from");
  report->add_option("--by", f->by, "Group by tenant, queue, user, type or gpu-model")
      ->check(CLI::IsMember({"tenant", "queue", "user", "type", "gpu-model", "gpu_model"}));
  report->add_option("--step", f->step, "One set of rows per step (1h, 1d, 1w)");
  report->add_option("--service", f->service, "serving: only this service");
  report->add_option("--horizon", f->horizon,
                     "forecast: how far ahead, in days (14d; default 14d, with 8 weeks of history "
                     "unless --since or --from says otherwise)");
  report->add_option("-o,--output", f->output, "Output: table (default), json, yaml, csv")
      ->check(CLI::IsMember({"table", "json", "yaml", "csv"}))
      ->group("Output");
  AddClientFlags(report, ctx);
  SetExamples(report,
              {"arbiter report usage --since 30d --by tenant",
               "arbiter report wait --since 7d --by queue --step 1d -o csv",
               "arbiter report idle-while-queued --from 2026-11-01 --to 2026-12-01",
               "arbiter report fairness --since 7d -o json", "arbiter report serving --since 1d",
               "arbiter report forecast --by tenant --horizon 14d"});
  report->callback([ctx, f] { ctx->Run([&] { return Report(ctx, *f); }); });
}

}  // namespace arbiter::cli

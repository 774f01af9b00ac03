// Online services (docs/services.md): `arbiter services`, `arbiter service show|scale|traffic|
// rollback|delete`, over /api/v1/services.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/service_args.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The age of a time the server gives as epoch milliseconds or as an ISO 8601 string.
std::string AgeOf(const json& obj, const char* ms_key, const char* iso_key) {
  auto ms = obj.find(ms_key);
  if (ms != obj.end() && ms->is_number() && ms->get<int64_t>() > 0) {
    const int64_t s = (NowMs() - ms->get<int64_t>()) / 1000;
    return ShortDuration(s < 0 ? 0 : s);
  }
  auto iso = obj.find(iso_key);
  return iso != obj.end() ? Age(*iso) : "-";
}

// The services the server lists ({"items": [...]} or a bare array).
const json& Items(const json& r) {
  static const json kEmpty = json::array();
  if (r.is_array()) return r;
  auto it = r.find("items");
  return it != r.end() && it->is_array() ? *it : kEmpty;
}

std::string ServicePath(const std::string& name) {
  return fmt::format("/api/v1/services/{}", QueryValue(name));
}

Color ReplicaColor(const std::string& state) {
  if (state == "ready") return Color::kGreen;
  if (state == "starting" || state == "pending") return Color::kYellow;
  if (state == "draining") return Color::kGrey;
  if (state == "failed") return Color::kRed;
  return Color::kNone;
}

std::string TemplateGpus(const json& tmpl) {
  const json res = tmpl.value("resources", json::object());
  auto g = res.find("gpus");
  if (g == res.end() || g->is_null()) return "0";
  std::string out = Amount(*g);
  const json models = tmpl.value("gpu_models", json::array());
  if (!models.empty()) {
    std::string m;
    for (const json& x : models) AppendTo(&m, ",", x.is_string() ? x.get<std::string>() : "");
    out += " (" + m + ")";
  }
  return out;
}

std::string CommandText(const json& tmpl) {
  std::string out;
  for (const json& w : tmpl.value("command", json::array())) {
    AppendTo(&out, " ", ShellQuote(w.is_string() ? w.get<std::string>() : w.dump()));
  }
  return OrDash(out);
}

int ListServices(const ContextPtr& ctx, const std::string& tenant) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  std::string path = "/api/v1/services";
  if (!tenant.empty()) path += "?tenant=" + QueryValue(tenant);
  auto r = api.Get(path);
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  const bool wide = ctx->format() == OutputFormat::kWide;
  std::vector<std::string> headers = {"NAME",  "TENANT",  "QUEUE", "REVISION",
                                      "READY", "TRAFFIC", "GPUS",  "AGE"};
  if (wide) {
    headers.push_back("PRIORITY");
    headers.push_back("ROUTE");
  }
  Table t(headers);
  for (const json& s : Items(*r)) {
    const std::string ready = ReadyText(s);
    const json status = s.value("status", json::object());
    const int64_t r_ready = status.value("ready", int64_t{0});
    const int64_t r_desired = status.value("desired", s.value("replicas", int64_t{0}));
    const Color rc = r_ready >= r_desired ? Color::kGreen
                     : r_ready == 0       ? Color::kRed
                                          : Color::kYellow;
    json tmpl = s.value("template", json::object());
    std::vector<Cell> row = {
        Str(s, "name"),          OrDash(Str(s, "tenant")),
        OrDash(Str(s, "queue")), OrDash(Str(s, "revision")),
        Cell(ready, rc),         TrafficText(s.value("traffic", json::array())),
        TemplateGpus(tmpl),      AgeOf(s, "created_ms", "created")};
    if (wide) {
      row.emplace_back(OrDash(Str(s, "priority_class")));
      row.emplace_back(fmt::format("/s/{}/", Str(s, "name")));
    }
    t.AddRow(std::move(row));
  }
  if (t.rows() == 0) {
    std::printf(
        "no services (create one with `arbiter apply -f service.yaml`; docs/services.md)\n");
    return kExitOk;
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

std::string ProbeText(const json& p) {
  if (!p.is_object()) return "-";
  std::string out =
      fmt::format("GET {} every {}s", Str(p, "path"), Amount(p.value("period_seconds", json(1))));
  if (p.contains("timeout_seconds")) {
    out += fmt::format(", timeout {}s", Amount(p["timeout_seconds"]));
  }
  if (p.contains("failure_threshold")) {
    out += fmt::format(", {} failures", Str(p, "failure_threshold"));
  }
  if (p.contains("initial_delay_seconds") && p["initial_delay_seconds"] != json(0)) {
    out += fmt::format(", after {}s", Amount(p["initial_delay_seconds"]));
  }
  return out;
}

// The last hour of the serving report for one service: its rows (one per revision).
json LastHour(ApiClient& api, const std::string& name) {
  auto r = api.Get(
      fmt::format("/api/v1/reports/serving?format=json&since=1h&service={}", QueryValue(name)));
  if (!r.ok()) return json();
  json rows = json::array();
  for (const json& row : r->value("rows", json::array())) {
    if (Str(row, "service") == name) rows.push_back(row);
  }
  return rows;
}

std::string Num(const json& v, const char* fmt_spec) {
  if (!v.is_number()) return "-";
  return fmt::format(fmt::runtime(fmt_spec), v.get<double>());
}

int ShowService(const ContextPtr& ctx, const std::string& name) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get(ServicePath(name));
  if (!r.ok()) return Fail(r.status());
  const json& s = *r;
  if (IsStructured(ctx->format())) {
    PrintStructured(s, ctx->format());
    return kExitOk;
  }
  const bool color = StdoutColors();
  const json status = s.value("status", json::object());
  const json tmpl = s.value("template", json::object());
  auto line = [](const char* k, const std::string& v) { std::printf("%-16s %s\n", k, v.c_str()); };
  line("Name:", Str(s, "name"));
  line("Tenant:", OrDash(Str(s, "tenant")));
  line("Queue:", OrDash(Str(s, "queue")));
  line("Priority class:", OrDash(Str(s, "priority_class")));
  line("Replicas:", fmt::format("{} ready of {} desired", status.value("ready", int64_t{0}),
                                status.value("desired", int64_t{0})));
  const json as = s.value("autoscaling", json());
  const json ast = status.value("autoscaling", json::object());
  if (as.is_object() && !as.empty()) {
    const json range = s.value("replicas", json::object());
    line("Autoscaling:",
         fmt::format("{}..{} replicas, {} target {} per replica at {}%, windows {} s / {} s{}",
                     Str(range, "min"), Str(range, "max"), Str(as, "metric"),
                     Amount(as.value("target", json(0))),
                     Amount(as.value("target_utilization", json(0))),
                     Amount(as.value("stable_window_seconds", json(0))),
                     Amount(as.value("panic_window_seconds", json(0))),
                     ast.value("panicking", false) ? " (panicking)" : ""));
    line("Load:",
         fmt::format("{} in flight, {} requests/s (the gateways' last second)",
                     Amount(ast.value("concurrency", json(0))), Amount(ast.value("rps", json(0)))));
    auto timing = [&](const char* key) {
      const json t = ast.value(key, json::object());
      if (t.value("count", int64_t{0}) == 0) return std::string("-");
      return fmt::format("{} (p50 {} s, p99 {} s)", Str(t, "count"),
                         Amount(t.value("p50_seconds", json(0))),
                         Amount(t.value("p99_seconds", json(0))));
    };
    line("Scale-ups:", timing("scale_up"));
    line("Reclaims:", timing("reclaim"));
    line("Cold starts:", timing("cold_start"));
  }
  if (s.value("reclaim_deadline_seconds", int64_t{0}) > 0) {
    line("Lends GPUs:",
         fmt::format("to jobs that stop within {} s", Str(s, "reclaim_deadline_seconds")));
  }
  line("Revision:", fmt::format("{} (latest)", Str(s, "revision")));
  line("Traffic:", TrafficText(s.value("traffic", json::array())));
  std::string route = fmt::format("GATEWAY/s/{}/", Str(s, "name"));
  for (const json& h : s.value("hosts", json::array())) {
    if (h.is_string()) route += ", Host: " + h.get<std::string>();
  }
  line("Route:", route);
  const int64_t port = s.value("port", int64_t{0});
  line("Port:", port > 0 ? std::to_string(port) : "assigned per replica (PORT)");
  line("Readiness:", ProbeText(s.value("readiness", json())));
  line("Liveness:", ProbeText(s.value("liveness", json())));
  const int64_t mc = s.value("max_concurrency", int64_t{0});
  line("Concurrency:", mc > 0 ? fmt::format("{} per replica", mc) : "unlimited");
  const json rollout = s.value("rollout", json::object());
  line("Rollout:", fmt::format("max surge {}, max unavailable {}", Str(rollout, "max_surge"),
                               Str(rollout, "max_unavailable")));
  const json slo = s.value("slo", json());
  if (slo.is_object() && !slo.empty()) {
    std::string text;
    if (slo.contains("latency_ms")) {
      text = fmt::format("p{} <= {} ms", Amount(slo.value("percentile", json(99))),
                         Amount(slo["latency_ms"]));
    }
    if (slo.contains("availability")) {
      AppendTo(&text, ", ", fmt::format("{}% available", Amount(slo["availability"])));
    }
    line("SLO:", OrDash(text));
  }

  std::printf("\nRevisions:\n");
  Table revs({"REVISION", "TRAFFIC", "READY", "GPUS", "CREATED", "COMMAND"});
  std::map<int64_t, std::string> traffic;
  for (const json& t : s.value("traffic", json::array())) {
    traffic[t.value("revision", int64_t{0})] = Amount(t.value("percent", json(0))) + "%";
  }
  std::map<int64_t, std::pair<int, int>> per_rev;  // revision -> (ready, all)
  for (const json& rep : status.value("replicas", json::array())) {
    auto& [ready, all] = per_rev[rep.value("revision", int64_t{0})];
    ++all;
    if (Str(rep, "state") == "ready") ++ready;
  }
  for (const json& rev : s.value("revisions", json::array())) {
    const int64_t n = rev.value("revision", int64_t{0});
    const auto pr = per_rev.find(n);
    revs.AddRow(
        {std::to_string(n), traffic.count(n) ? traffic[n] : "0%",
         pr == per_rev.end() ? "0/0" : fmt::format("{}/{}", pr->second.first, pr->second.second),
         TemplateGpus(rev.value("template", json::object())), AgeOf(rev, "created_ms", "created"),
         CommandText(rev.value("template", json::object()))});
  }
  if (revs.rows() == 0) {
    revs.AddRow(
        {Str(s, "revision"), "100%", ReadyText(s), TemplateGpus(tmpl), "-", CommandText(tmpl)});
  }
  revs.Print(stdout, color);

  std::printf("\nReplicas:\n");
  Table reps({"JOB", "NAME", "REVISION", "STATE", "NODE", "ADDRESS", "AGE", "RESTARTS", "REASON"});
  for (const json& rep : status.value("replicas", json::array())) {
    const std::string state = Str(rep, "state");
    reps.AddRow({Str(rep, "job"), OrDash(Str(rep, "name")), OrDash(Str(rep, "revision")),
                 Cell(OrDash(state), ReplicaColor(state)), OrDash(Str(rep, "node")),
                 OrDash(Str(rep, "address")), AgeOf(rep, "started_ms", "started"),
                 OrDash(Str(rep, "restarts")), OrDash(Str(rep, "reason"))});
  }
  if (reps.rows() == 0) {
    std::printf("  none\n");
  } else {
    reps.Print(stdout, color);
    std::printf("(a replica is a job: arbiter logs JOB, arbiter why JOB)\n");
  }

  // The autoscaler's last decisions, with their reasons.
  const json decisions =
      status.value("autoscaling", json::object()).value("decisions", json::array());
  if (!decisions.empty()) {
    std::printf("\nScaling decisions:\n");
    Table d({"AGE", "REPLICAS", "REASON"});
    const size_t from = decisions.size() > 8 ? decisions.size() - 8 : 0;
    for (size_t i = from; i < decisions.size(); ++i) {
      const json& e = decisions[i];
      d.AddRow({AgeOf(e, "at_ms", "at"), fmt::format("{} -> {}", Str(e, "from"), Str(e, "to")),
                Str(e, "reason")});
    }
    d.Print(stdout, color);
  }

  std::printf("\nLast hour:\n");
  const json hour = LastHour(api, name);
  if (!hour.is_array() || hour.empty()) {
    std::printf("  no requests through a gateway in the last hour\n");
    return kExitOk;
  }
  Table h({"REVISION", "REQUESTS", "ERRORS", "P50", "P99", "SLO"});
  for (const json& row : hour) {
    std::string met = "-";
    if (row.contains("slo_met") && row["slo_met"].is_boolean()) {
      met = row["slo_met"].get<bool>() ? "met" : "missed";
    }
    h.AddRow({OrDash(Str(row, "revision")), OrDash(Str(row, "requests")),
              OrDash(Str(row, "errors")), Num(row.value("p50_ms", json()), "{:.1f} ms"),
              Num(row.value("p99_ms", json()), "{:.1f} ms"),
              Cell(met, met == "met"      ? Color::kGreen
                        : met == "missed" ? Color::kRed
                                          : Color::kNone)});
  }
  h.Print(stdout, color);
  return kExitOk;
}

// Prints the service the server answered a change with, or it as JSON/YAML.
int Changed(const ContextPtr& ctx, const Result<json>& r, const std::string& what) {
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  std::printf("%s\n", what.c_str());
  return kExitOk;
}

int Scale(const ContextPtr& ctx, const std::string& name, int64_t replicas, int64_t min,
          int64_t max) {
  if ((replicas >= 0) == (min >= 0 || max >= 0)) {
    return Fail(InvalidArgument("--replicas",
                                "give --replicas N, or --min A --max B for a "
                                "service that autoscales"),
                kExitUsage);
  }
  if (replicas < 0 && (min < 0 || max < 0)) {
    return Fail(InvalidArgument(min < 0 ? "--min" : "--max", "give both --min and --max"),
                kExitUsage);
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  if (replicas < 0) {
    auto r = api.Post(ServicePath(name) + "/scale", json{{"min", min}, {"max", max}});
    return Changed(ctx, r,
                   fmt::format("service {} autoscales within {}..{} replicas", name, min, max));
  }
  auto r = api.Post(ServicePath(name) + "/scale", json{{"replicas", replicas}});
  return Changed(
      ctx, r,
      fmt::format("service {} scaled to {} replica{}", name, replicas, replicas == 1 ? "" : "s"));
}

int Traffic(const ContextPtr& ctx, const std::string& name, const std::vector<std::string>& args) {
  auto traffic = ParseTrafficArgs(args);
  if (!traffic.ok()) return Fail(traffic.status(), kExitUsage);
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Post(ServicePath(name) + "/traffic", json{{"traffic", *traffic}});
  return Changed(
      ctx, r,
      fmt::format("service {}: traffic {} (moved only to ready replicas)", name,
                  r.ok() ? TrafficText(r->value("traffic", *traffic)) : TrafficText(*traffic)));
}

int Rollback(const ContextPtr& ctx, const std::string& name) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Post(ServicePath(name) + "/rollback", json::object());
  return Changed(ctx, r,
                 fmt::format("service {}: rolling back, traffic {}", name,
                             r.ok() ? TrafficText(r->value("traffic", json::array())) : ""));
}

int Delete(const ContextPtr& ctx, const std::string& name) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Send("DELETE", ServicePath(name), "", "application/json");
  if (!r.ok()) return Fail(r.status());
  if (r->status < 200 || r->status >= 300) return Fail(api.FromReply(*r));
  std::printf("service %s deleted: its replicas drain and stop\n", name.c_str());
  return kExitOk;
}

}  // namespace

// Applies the services of an `apply -f` file: creates each one, or replaces it where it exists.
// With `dry_run`, says what would change. Used by `arbiter apply` (admin.cc).
int ApplyServices(const ContextPtr& ctx, ApiClient& api, const std::vector<json>& services,
                  const std::vector<int>& lines, const std::string& file, bool dry_run) {
  Table t({"ACTION", "KIND", "NAME", "DETAIL"});
  json results = json::array();
  const bool color = StdoutColors();
  for (size_t i = 0; i < services.size(); ++i) {
    const json& svc = services[i];
    const std::string name =
        svc.contains("name") && svc["name"].is_string() ? svc["name"].get<std::string>() : "";
    auto where = [&](const Status& st) {
      return Status(st.code(),
                    fmt::format("{} (the Service at line {}): {}", file, lines[i], Describe(st)));
    };
    if (name.empty()) {
      return Fail(where(InvalidArgument("name", "a Service needs a name")), kExitUsage);
    }
    auto existing = api.Send("GET", ServicePath(name), "", "application/json");
    if (!existing.ok()) return Fail(existing.status());
    const bool exists = existing->status == 200;
    if (!exists && existing->status != 404) return Fail(where(api.FromReply(*existing)));
    if (dry_run) {
      t.AddRow({Cell(exists ? "update" : "create", exists ? Color::kYellow : Color::kGreen),
                "service", name,
                exists ? "replaced (a changed template makes a new revision)" : "new, revision 1"});
      continue;
    }
    Result<json> r = exists ? api.Put(ServicePath(name), svc.dump(), "application/json")
                            : api.Post("/api/v1/services", svc);
    if (!r.ok()) return Fail(where(r.status()));
    results.push_back(*r);
    std::string detail;
    if (!exists) {
      detail = "created, revision 1";
    } else {
      json before = json::parse(existing->body, nullptr, false);
      const int64_t old_rev = before.is_object() ? before.value("revision", int64_t{0}) : 0;
      const int64_t new_rev = r->value("revision", int64_t{0});
      detail = new_rev != old_rev
                   ? fmt::format("revision {} rolling out (was {})", new_rev, old_rev)
                   : "updated (same revision)";
    }
    t.AddRow({Cell(exists ? "update" : "create", exists ? Color::kYellow : Color::kGreen),
              "service", name, detail});
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(json{{"services", results}}, ctx->format());
    return kExitOk;
  }
  t.Print(stdout, color);
  std::printf("%s%zu service%s %s\n", dry_run ? "dry run: " : "", services.size(),
              services.size() == 1 ? "" : "s", dry_run ? "would be applied" : "applied");
  return kExitOk;
}

void RegisterServiceCommands(CLI::App& app, const ContextPtr& ctx) {
  auto tenant = std::make_shared<std::string>();
  auto* list = app.add_subcommand("services", "Online services: revisions, traffic, replicas");
  list->add_option("--tenant", *tenant, "Only this tenant's services");
  AddClientFlags(list, ctx);
  AddOutputFlag(list, ctx);
  SetExamples(list, {"arbiter services", "arbiter services -o wide", "arbiter services -o json"});
  list->callback([ctx, tenant] { ctx->Run([&] { return ListServices(ctx, *tenant); }); });

  auto* svc = app.add_subcommand(
      "service", "One online service: show, scale, traffic, rollback, delete (docs/services.md)");
  svc->require_subcommand(1);
  SetExamples(svc, {"arbiter service show chat", "arbiter service scale chat --replicas 5",
                    "arbiter service traffic chat 3=90 4=10", "arbiter service rollback chat",
                    "arbiter apply -f chat.yaml   # create or update"});
  auto name = std::make_shared<std::string>();

  auto* show = svc->add_subcommand(
      "show", "Revisions, traffic, replicas (node, state, age) and the last hour against the SLO");
  show->add_option("name", *name, "The service")->required();
  AddClientFlags(show, ctx);
  AddOutputFlag(show, ctx, false);
  SetExamples(show, {"arbiter service show chat", "arbiter service show chat -o yaml"});
  show->callback([ctx, name] { ctx->Run([&] { return ShowService(ctx, *name); }); });

  auto replicas = std::make_shared<int64_t>(-1);
  auto min = std::make_shared<int64_t>(-1);
  auto max = std::make_shared<int64_t>(-1);
  auto* scale = svc->add_subcommand(
      "scale", "Set the number of replicas, or the range an autoscaling service moves in");
  scale->add_option("name", *name, "The service")->required();
  scale->add_option("--replicas", *replicas, "How many replicas (0 stops them all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  scale->add_option("--min", *min, "An autoscaling service's fewest replicas (0: scales to zero)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  scale->add_option("--max", *max, "An autoscaling service's most replicas")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  AddClientFlags(scale, ctx);
  AddOutputFlag(scale, ctx, false);
  SetExamples(scale, {"arbiter service scale chat --replicas 5",
                      "arbiter service scale chat --min 0 --max 8   # autoscaling"});
  scale->callback([ctx, name, replicas, min, max] {
    ctx->Run([&] { return Scale(ctx, *name, *replicas, *min, *max); });
  });

  auto split = std::make_shared<std::vector<std::string>>();
  auto* traffic = svc->add_subcommand(
      "traffic", "Split traffic between revisions (REVISION=PERCENT, adding up to 100)");
  traffic->add_option("name", *name, "The service")->required();
  traffic->add_option("split", *split, "REVISION=PERCENT ... (e.g. 3=90 4=10)")->required();
  AddClientFlags(traffic, ctx);
  AddOutputFlag(traffic, ctx, false);
  SetExamples(traffic, {"arbiter service traffic chat 3=90 4=10   # a 10% canary",
                        "arbiter service traffic chat 4=100       # promote it"});
  traffic->callback([ctx, name, split] { ctx->Run([&] { return Traffic(ctx, *name, *split); }); });

  auto* rollback = svc->add_subcommand(
      "rollback", "Return to the previous revision (rolling, without failed requests)");
  rollback->add_option("name", *name, "The service")->required();
  AddClientFlags(rollback, ctx);
  AddOutputFlag(rollback, ctx, false);
  SetExamples(rollback, {"arbiter service rollback chat"});
  rollback->callback([ctx, name] { ctx->Run([&] { return Rollback(ctx, *name); }); });

  auto* del = svc->add_subcommand("delete", "Delete a service: its replicas drain, then stop");
  del->add_option("name", *name, "The service")->required();
  AddClientFlags(del, ctx);
  SetExamples(del, {"arbiter service delete chat"});
  del->callback([ctx, name] { ctx->Run([&] { return Delete(ctx, *name); }); });
}

}  // namespace arbiter::cli

// `arbiter plan replay` and `arbiter plan capacity`: what-if replays of the recorded history
// (POST /api/v1/plan, POST /api/v1/plan/capacity; docs/simulator.md), as tables, JSON or HTML.
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

struct PlanFlags {
  std::string since = "30d", until;
  std::vector<std::string> add_nodes, remove_nodes, quota, policies;
  int64_t cycle_interval_ms = 0;
  int64_t stop_latency_ms = -1;  // -1: as measured on the period's preemptions
  bool json = false, html = false, jobs = false;
  // capacity
  std::string model, target;
  int32_t max_nodes = 0, gpus_per_node = 0;
};

json PeriodBody(const PlanFlags& f) {
  json body = {{"since", f.since}};
  if (!f.until.empty()) body["until"] = f.until;
  if (f.cycle_interval_ms > 0) body["cycle_interval_ms"] = f.cycle_interval_ms;
  if (f.stop_latency_ms >= 0) body["stop_latency_ms"] = f.stop_latency_ms;
  return body;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Sec(const json& v) {
  if (!v.is_number()) return "-";
  return ShortDuration(static_cast<int64_t>(std::llround(v.get<double>())));
}

// "p50 / p90 / p99" of a figures object.
std::string Waits(const json& g) {
  return fmt::format("{} / {} / {}", Sec(g.value("wait_p50_s", json())),
                     Sec(g.value("wait_p90_s", json())), Sec(g.value("wait_p99_s", json())));
}

std::string Num(const json& v, int decimals) {
  return v.is_number() ? fmt::format("{:.{}f}", v.get<double>(), decimals) : std::string("-");
}

// The columns: recorded, replayed (the baseline), each variant.
std::vector<std::string> Labels(const json& r) {
  std::vector<std::string> labels;
  for (const json& run : r["runs"]) labels.push_back(run.value("label", ""));
  return labels;
}

void PrintGroups(const json& r, const char* groups, const char* key, const char* title) {
  std::vector<std::string> headers = {title};
  const std::vector<std::string> labels = Labels(r);
  for (const std::string& l : labels) headers.push_back(Upper(l));
  Table t(headers);
  for (const json& g : r[groups]) {
    std::vector<Cell> row = {Cell(g.value(key, ""))};
    row.emplace_back(Waits(g["recorded"]));
    row.emplace_back(g.contains("replayed") ? Waits(g["replayed"]) : "-");
    for (size_t i = 2; i < labels.size(); ++i) {
      std::string cell = "-";
      for (const json& v : g["variants"]) {
        if (v.value("label", "") == labels[i]) cell = Waits(v);
      }
      row.emplace_back(cell);
    }
    t.AddRow(std::move(row));
  }
  t.Print(stdout, StdoutColors());
}

void PrintReplay(const json& r) {
  std::printf(
      "replay of %lld jobs (%lld more running or pending at the start, %lld not replayed), policy "
      "%s\n\n",
      static_cast<long long>(r.value("jobs", 0)), static_cast<long long>(r.value("carried_in", 0)),
      static_cast<long long>(r.value("skipped", 0)), r.value("policy", "").c_str());
  const auto samples = r.value("stop_latency_samples", int64_t{0});
  std::printf("each preemption stops %.3f s after its grace period (%s)\n\n",
              static_cast<double>(r.value("stop_latency_ms", int64_t{0})) / 1000.0,
              samples > 0 ? fmt::format("the median of {} recorded stops", samples).c_str()
                          : "given, or no stop recorded");
  std::printf("wait p50 / p90 / p99 by queue\n");
  PrintGroups(r, "queues", "queue", "QUEUE");
  std::printf("\nwait p50 / p90 / p99 by job type\n");
  PrintGroups(r, "types", "type", "TYPE");
  std::printf("\n");
  Table t({"", "NODES", "GPUS", "WAIT P50 / P90 / P99", "GPU ALLOC %", "IDLE GPU-H WHILE WAITING",
           "PREEMPTIONS"});
  for (const json& run : r["runs"]) {
    t.AddRow({Cell(run.value("label", "")), Cell(Num(run["nodes"], 0)), Cell(Num(run["gpus"], 0)),
              Cell(Waits(run)), Cell(Num(run["gpu_alloc_pct"], 2)),
              Cell(Num(run["idle_gpu_hours_while_waiting"], 1)), Cell(Num(run["preemptions"], 0))});
  }
  t.Print(stdout, StdoutColors());
  for (const json& run : r["runs"]) {
    if (run.contains("note")) {
      std::printf("%s: %s\n", run.value("label", "").c_str(), run.value("note", "").c_str());
    }
    for (const json& b : run.value("budgets", json::array())) {
      std::printf("%s: tenant %s used %.1f GPU-hours, %.1f%% of its budget for the period\n",
                  run.value("label", "").c_str(), b.value("tenant", "").c_str(),
                  b.value("gpu_hours", 0.0), b.value("used_pct", 0.0));
    }
  }
  for (const json& s : r.value("skipped_reasons", json::array())) {
    std::printf("not replayed: %s\n", s.get<std::string>().c_str());
  }
}

int Replay(const ContextPtr& ctx, const PlanFlags& f) {
  json body = PeriodBody(f);
  if (!f.add_nodes.empty()) body["add_nodes"] = f.add_nodes;
  if (!f.remove_nodes.empty()) body["remove_nodes"] = f.remove_nodes;
  if (!f.quota.empty()) body["quota"] = f.quota;
  if (!f.policies.empty()) body["policy"] = f.policies;
  if (f.html) body["format"] = "html";
  if (f.jobs) body["jobs"] = true;
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  if (f.html) {
    auto r = api.Send("POST", "/api/v1/plan", body.dump(), "application/json");
    if (!r.ok()) return Fail(r.status());
    if (r->status / 100 != 2) return Fail(api.FromReply(*r));
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    return kExitOk;
  }
  auto r = api.Post("/api/v1/plan", body);
  if (!r.ok()) return Fail(r.status());
  if (f.json) {
    PrintStructured(*r, OutputFormat::kJson);
    return kExitOk;
  }
  PrintReplay(*r);
  return kExitOk;
}

int Capacity(const ContextPtr& ctx, const PlanFlags& f) {
  json body = PeriodBody(f);
  body["model"] = f.model;
  body["target_wait_p90"] = f.target;
  if (f.max_nodes > 0) body["max_nodes"] = f.max_nodes;
  if (f.gpus_per_node > 0) body["gpus_per_node"] = f.gpus_per_node;
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Post("/api/v1/plan/capacity", body);
  if (!r.ok()) return Fail(r.status());
  if (f.json) {
    PrintStructured(*r, OutputFormat::kJson);
    return kExitOk;
  }
  const json& a = *r;
  if (a.value("found", false)) {
    const int64_t n = a.value("nodes", int64_t{0});
    std::printf("%lld node(s) of %s (%d GPUs each) bring every queue's p90 wait within %s\n",
                static_cast<long long>(n), a.value("model", "").c_str(),
                a.value("gpus_per_node", 0), Sec(a["target_wait_p90_s"]).c_str());
    if (a.value("price_per_gpu_hour", 0.0) > 0) {
      std::printf("cost: %.2f per hour, %.2f per 30 days (%.3f per GPU-hour)\n",
                  a.value("cost_per_hour", 0.0), a.value("cost_per_30_days", 0.0),
                  a.value("price_per_gpu_hour", 0.0));
    } else {
      std::printf("cost: no price is configured for %s\n", a.value("model", "").c_str());
    }
  } else {
    std::printf("%s\n", a.value("note", "").c_str());
  }
  std::printf("\n");
  Table probes({"NODES ADDED", "WORST P90 WAIT", "QUEUE", "MEETS TARGET"});
  for (const json& p : a["probes"]) {
    probes.AddRow({Cell(Num(p["nodes"], 0)), Cell(Sec(p["worst_wait_p90_s"])),
                   Cell(p.value("worst_queue", "")),
                   Cell(p.value("meets_target", false) ? "yes" : "no")});
  }
  probes.Print(stdout, StdoutColors());
  std::printf("\n");
  Table queues({"QUEUE", "BASELINE P50 / P90 / P99", "WITH THE NODES P50 / P90 / P99"});
  for (const json& q : a["queues"]) {
    queues.AddRow({Cell(q.value("queue", "")), Cell(Waits(q["baseline"])),
                   Cell(q.contains("with_nodes") ? Waits(q["with_nodes"]) : "-")});
  }
  queues.Print(stdout, StdoutColors());
  return kExitOk;
}

void AddPeriodFlags(CLI::App* cmd, PlanFlags* f) {
  cmd->add_option("--since", f->since, "The period up to --until: 90s, 30m, 12h, 7d, 2w")
      ->default_str("30d");
  cmd->add_option("--until", f->until, "End of the period: RFC 3339 time or date (default: now)");
  cmd->add_option("--cycle-interval-ms", f->cycle_interval_ms,
                  "The replay's periodic cycle (default 1000)");
  cmd->add_option("--stop-latency-ms", f->stop_latency_ms,
                  "Time a preempted job takes to stop after its grace period (default: the "
                  "median the period's preemptions took)")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
}

}  // namespace

void RegisterPlanCommands(CLI::App& app, const ContextPtr& ctx) {
  auto* plan = app.add_subcommand(
      "plan", "Capacity planning: what-if replays of the recorded history (admins)");
  plan->require_subcommand(1);

  auto rf = std::make_shared<PlanFlags>();
  auto* replay = plan->add_subcommand(
      "replay",
      "Replay the period's jobs through the scheduler on the cluster as it is and with changes, "
      "beside what happened");
  AddPeriodFlags(replay, rf.get());
  replay->add_option("--add-nodes", rf->add_nodes,
                     "Add nodes: COUNTxMODEL (4xH100-80G), or COUNTxMODEL:GPUS; repeatable");
  replay->add_option("--remove-node", rf->remove_nodes, "Remove a node; repeatable");
  replay->add_option("--quota", rf->quota,
                     "Change a quota: QUEUE.LIMIT.RESOURCE=VALUE (vision.guaranteed.gpu=32); "
                     "repeatable");
  replay->add_option("--policy", rf->policies, "Replay under another placement policy");
  auto* as_json = replay->add_flag("--json", rf->json, "Print the report as JSON");
  replay->add_flag("--html", rf->html, "Print a self-contained HTML report")->excludes(as_json);
  replay
      ->add_flag("--jobs", rf->jobs,
                 "With --json: each job's wait and preemptions, recorded and in each replay")
      ->needs(as_json);
  AddClientFlags(replay, ctx);
  SetExamples(replay, {"arbiter plan replay --since 30d",
                       "arbiter plan replay --since 7d --add-nodes 4xH100-80G --json",
                       "arbiter plan replay --since 30d --quota vision.guaranteed.gpu=32 "
                       "--remove-node gpu-07",
                       "arbiter plan replay --since 14d --policy bestfit --html > plan.html"});
  replay->callback([ctx, rf] { ctx->Run([&] { return Replay(ctx, *rf); }); });

  auto cf = std::make_shared<PlanFlags>();
  auto* capacity = plan->add_subcommand(
      "capacity",
      "The fewest nodes of a GPU model to add so that every queue's replayed p90 wait is within "
      "a target, and their cost");
  AddPeriodFlags(capacity, cf.get());
  capacity->add_option("--model", cf->model, "GPU model of the nodes to add")->required();
  capacity->add_option("--target-wait-p90", cf->target, "Target p90 wait: 90s, 30m, 1h")
      ->required();
  capacity->add_option("--max-nodes", cf->max_nodes, "Most nodes to try (default 64)");
  capacity->add_option("--gpus-per-node", cf->gpus_per_node,
                       "GPUs per added node (default: as an existing node of the model)");
  capacity->add_flag("--json", cf->json, "Print the answer as JSON");
  AddClientFlags(capacity, ctx);
  SetExamples(capacity, {"arbiter plan capacity --since 30d --target-wait-p90 1h --model H100-80G",
                         "arbiter plan capacity --since 7d --target-wait-p90 15m --model A100-80G "
                         "--max-nodes 16 --json"});
  capacity->callback([ctx, cf] { ctx->Run([&] { return Capacity(ctx, *cf); }); });
}

}  // namespace arbiter::cli

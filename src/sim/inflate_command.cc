#include "sim/inflate_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/rng.h"
#include "core/cluster.h"
#include "core/placement/framework.h"
#include "sim/spread.h"
#include "sim/text.h"

namespace arbiter::sim {

namespace {

Result<uint64_t> ParseSeed(std::string_view s, std::string_view whole) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    return InvalidArgument("seeds",
                           fmt::format("expected seeds like 42-51 or 1,2,3, got '{}'", whole));
  }
  return v;
}

// The value at demand d of a mean curve, or null when the curve does not reach d.
nlohmann::json AtDemand(const std::vector<CurvePoint>& curve, int d, bool alloc) {
  for (const CurvePoint& p : curve) {
    if (p.demand_pct == d) return alloc ? p.alloc_pct : p.frag_pct;
  }
  return nullptr;
}

// A run's allocation at demand d, or NaN when its curve does not reach d.
double RunAtDemand(const InflateRun& r, int d) {
  for (const CurvePoint& p : r.curve) {
    if (p.demand_pct == d) return p.alloc_pct;
  }
  return std::nan("");
}

nlohmann::json SpreadJson(const Spread& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"sd", s.sd}, {"ci95_lo", s.lo}, {"ci95_hi", s.hi}};
}

// The spread over runs of the allocation at demand d, or null when some run does not reach it.
nlohmann::json SpreadAt(const std::vector<InflateRun>& runs, int d) {
  std::vector<double> v;
  for (const InflateRun& r : runs) {
    const double a = RunAtDemand(r, d);
    if (std::isnan(a)) return nullptr;
    v.push_back(a);
  }
  if (v.empty()) return nullptr;
  return SpreadJson(Spread::Of(v));
}

std::string Stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

std::string FormatOrDash(const nlohmann::json& v) {
  return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : std::string("-");
}

}  // namespace

Result<std::vector<uint64_t>> ParseSeeds(std::string_view text) {
  std::vector<uint64_t> seeds;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view part = text.substr(start, comma - start);
    const size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      auto v = ParseSeed(part, text);
      if (!v.ok()) return v.status();
      seeds.push_back(*v);
    } else {
      auto lo = ParseSeed(part.substr(0, dash), text);
      auto hi = ParseSeed(part.substr(dash + 1), text);
      if (!lo.ok()) return lo.status();
      if (!hi.ok()) return hi.status();
      if (*hi < *lo || *hi - *lo >= 100000) {
        return InvalidArgument("seeds", fmt::format("bad seed range '{}'", part));
      }
      for (uint64_t s = *lo; s <= *hi; ++s) seeds.push_back(s);
    }
    start = comma + 1;
  }
  return seeds;
}

nlohmann::json InflateReport(std::string_view policy, std::string_view trace,
                             std::string_view nodes, double target,
                             const std::vector<InflateRun>& runs) {
  const std::vector<CurvePoint> mean = MeanCurve(runs);
  nlohmann::json curve = nlohmann::json::array();
  for (const CurvePoint& p : mean) {
    curve.push_back(
        {{"demand_pct", p.demand_pct}, {"alloc_pct", p.alloc_pct}, {"frag_pct", p.frag_pct}});
  }
  nlohmann::json seeds = nlohmann::json::array();
  nlohmann::json per_run = nlohmann::json::array();
  double seconds = 0;
  for (const InflateRun& r : runs) {
    seeds.push_back(r.seed);
    const double at100 = RunAtDemand(r, 100);
    const double at130 = RunAtDemand(r, 130);
    per_run.push_back(
        {{"seed", r.seed},
         {"alloc_pct_at_100", std::isnan(at100) ? nlohmann::json() : nlohmann::json(at100)},
         {"alloc_pct_at_130", std::isnan(at130) ? nlohmann::json() : nlohmann::json(at130)},
         {"tasks", r.tasks},
         {"placed", r.placed},
         {"demand_pct_end", r.demand_pct_end},
         {"alloc_pct_end", r.alloc_pct_end},
         {"seconds", r.seconds}});
    seconds += r.seconds;
  }
  return {{"policy", policy},
          {"trace", trace},
          {"nodes", nodes},
          {"target", target},
          {"seeds", seeds},
          {"alloc_pct_at_100", AtDemand(mean, 100, true)},
          {"alloc_pct_at_130", AtDemand(mean, 130, true)},
          {"frag_pct_at_0", AtDemand(mean, 0, false)},
          {"spread",
           {{"alloc_pct_at_100", SpreadAt(runs, 100)}, {"alloc_pct_at_130", SpreadAt(runs, 130)}}},
          {"seconds_per_seed", runs.empty() ? 0.0 : seconds / static_cast<double>(runs.size())},
          {"curve", curve},
          {"runs", per_run}};
}

namespace {

report::Section SummarySection(const std::vector<nlohmann::json>& results, int target_pct,
                               double cluster_gpus) {
  report::Section s;
  s.title = "Summary";
  report::Table t;
  t.columns = {"policy",
               "GPU alloc % at 100% demand",
               fmt::format("GPU alloc % at {}%", target_pct),
               "unallocated GPUs at the end",
               "fragmentation % at 0",
               "tasks placed (mean)",
               "s per seed"};
  for (const nlohmann::json& res : results) {
    const nlohmann::json& curve = res["curve"];
    const double end = curve.empty() ? 0.0 : curve.back()["alloc_pct"].get<double>();
    double placed = 0;
    double tasks = 0;
    for (const nlohmann::json& run : res["runs"]) {
      placed += run["placed"].get<double>();
      tasks += run["tasks"].get<double>();
    }
    const auto n = static_cast<double>(std::max<size_t>(1, res["runs"].size()));
    t.rows.push_back({res["policy"].get<std::string>(), FormatOrDash(res["alloc_pct_at_100"]),
                      curve.empty() ? "-" : fmt::format("{:.2f}", end),
                      fmt::format("{:.0f}", (100.0 - end) / 100.0 * cluster_gpus),
                      FormatOrDash(res["frag_pct_at_0"]),
                      fmt::format("{:.0f} of {:.0f}", placed / n, tasks / n),
                      fmt::format("{:.2f}", res["seconds_per_seed"].get<double>())});
  }
  s.tables.push_back(std::move(t));
  return s;
}

// One line per policy: `key` of its mean curve against demand, from `from_pct` on.
report::LineChart CurveChart(const std::vector<nlohmann::json>& results,
                             const std::string& demand_label, const std::string& title,
                             const char* key, const std::string& y_label, int from_pct) {
  report::LineChart c;
  c.title = title;
  c.x_label = demand_label;
  c.y_label = y_label;
  for (const nlohmann::json& res : results) {
    report::Series series{res["policy"].get<std::string>(), {}};
    for (const nlohmann::json& p : res["curve"]) {
      const int d = p["demand_pct"].get<int>();
      if (d >= from_pct) series.points.emplace_back(d, p[key].get<double>());
    }
    c.series.push_back(std::move(series));
  }
  return c;
}

report::Section SeedSpreadSection(const std::vector<nlohmann::json>& results, double target) {
  report::Section s;
  s.title = "GPU allocation at the end, per seed";
  s.paragraphs.push_back(fmt::format(
      "The spread of the final allocation (at {:.0f}% demand) over the seeds: box from the first "
      "to the third quartile, line at the median, dot at the mean, whiskers at the extremes.",
      100.0 * target));
  report::BoxChart c;
  c.title = "Final GPU allocation over seeds";
  c.x_label = "policy";
  c.y_label = "GPUs allocated at the end (%)";
  for (const nlohmann::json& res : results) {
    std::vector<double> values;
    for (const nlohmann::json& run : res["runs"])
      values.push_back(run["alloc_pct_end"].get<double>());
    c.boxes.push_back(report::Box::FromSamples(res["policy"].get<std::string>(), values));
  }
  s.charts.emplace_back(std::move(c));
  return s;
}

report::Section RunsSection(const std::vector<nlohmann::json>& results) {
  report::Section s;
  s.title = "Runs";
  report::Table t;
  t.columns = {"policy", "seed", "tasks", "placed", "demand % at the end", "GPU alloc % at the end",
               "s"};
  for (const nlohmann::json& res : results) {
    for (const nlohmann::json& run : res["runs"]) {
      t.rows.push_back({res["policy"].get<std::string>(), run["seed"].dump(), run["tasks"].dump(),
                        run["placed"].dump(),
                        fmt::format("{:.2f}", run["demand_pct_end"].get<double>()),
                        fmt::format("{:.2f}", run["alloc_pct_end"].get<double>()),
                        fmt::format("{:.2f}", run["seconds"].get<double>())});
    }
  }
  s.tables.push_back(std::move(t));
  return s;
}

}  // namespace

report::Report InflateHtmlReport(const InflateOptions& o, double cluster_gpus,
                                 const std::vector<nlohmann::json>& results) {
  report::Report r;
  const std::string trace =
      results.empty() ? Stem(o.pods_path) : results[0]["trace"].get<std::string>();
  const std::string nodes =
      results.empty() ? Stem(o.nodes_path) : results[0]["nodes"].get<std::string>();
  r.title = fmt::format("Workload inflation: {} on {}", trace, nodes);
  std::string cmd =
      fmt::format("arbiter simulate inflate --nodes {} --pods {}", o.nodes_path, o.pods_path);
  for (const std::string& p : o.policies) cmd += fmt::format(" --policy {}", p);
  cmd += fmt::format(" --seeds {} --target {}", o.seeds, o.target);
  if (o.node_order != "shuffled") cmd += fmt::format(" --node-order {}", o.node_order);
  r.subtitle = cmd;
  const size_t seeds = results.empty() ? 0 : results[0]["seeds"].size();
  r.notes.push_back(fmt::format(
      "The tasks of the trace are shuffled, random copies are added until the GPU request reaches "
      "{:.0f}% of the cluster's GPUs, and the tasks are placed one at a time into the empty "
      "cluster "
      "with no departures; a task that fits nowhere is dropped. GPU allocation is the allocated "
      "share of all GPUs, demand the requested share (dropped tasks included), fragmentation the "
      "idle GPU capacity that the typical tasks cannot use. Equal scores go to the node first in "
      "{}. Curves are the mean of {} seed{}.",
      100.0 * o.target,
      o.node_order == "file" ? "the node list's order"
                             : "a random order of the nodes drawn per seed, as in the published "
                               "experiment",
      seeds, seeds == 1 ? "" : "s"));
  const std::string demand_label = "GPU demand (% of the cluster's GPUs)";
  const int target_pct = static_cast<int>(std::floor(o.target * 100.0 + 1e-9));

  // 1. Summary.
  r.sections.push_back(SummarySection(results, target_pct, cluster_gpus));
  auto curve_chart = [&](const std::string& title, const char* key, const std::string& y_label,
                         int from_pct) {
    return CurveChart(results, demand_label, title, key, y_label, from_pct);
  };
  // 2. and 3. Allocation, whole range and near saturation.
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "GPU allocation against demand";
    s.paragraphs.push_back(
        "Up to the point where the cluster saturates every policy places every task; the curves "
        "part where tasks start to fit nowhere.");
    report::LineChart c = curve_chart("GPU allocation (mean over seeds)", "alloc_pct",
                                      "GPUs allocated (% of all GPUs)", 0);
    c.x_min = 0;
    c.x_max = target_pct;
    c.y_min = 0;
    c.y_max = 100;
    s.charts.emplace_back(std::move(c));
  }
  {
    report::Section& s = r.sections.emplace_back();
    const int from = std::min(80, target_pct);
    s.title = fmt::format("GPU allocation from {}% demand", from);
    s.paragraphs.push_back(
        "The same curves from near saturation on: the gap between a curve and 100% is the GPU "
        "capacity left unallocated.");
    report::LineChart c = curve_chart("GPU allocation near saturation (mean over seeds)",
                                      "alloc_pct", "GPUs allocated (% of all GPUs)", from);
    c.x_min = from;
    c.x_max = target_pct;
    s.charts.emplace_back(std::move(c));
  }
  // 4. Fragmentation.
  {
    report::Section& s = r.sections.emplace_back();
    s.title = "Fragmentation against demand";
    s.paragraphs.push_back(
        "Fragmentation ratio: the share of the idle GPU capacity that the typical tasks (the most "
        "frequent task shapes, 95% of the trace) cannot use where it lies, weighted by how often "
        "each shape occurs (the FGD paper's measure).");
    report::LineChart c = curve_chart("Fragmentation of the idle GPUs (mean over seeds)",
                                      "frag_pct", "fragmented share of idle GPUs (%)", 0);
    c.x_min = 0;
    c.x_max = target_pct;
    c.y_from_zero = true;
    s.charts.emplace_back(std::move(c));
  }
  // 5. Spread over seeds.
  r.sections.push_back(SeedSpreadSection(results, o.target));
  // 6. Every run.
  r.sections.push_back(RunsSection(results));
  return r;
}

std::string InflateTextTable(const nlohmann::json& results) {
  // "mean [lo, hi]" of a spread, or the mean alone for one seed, or "-".
  auto with_ci = [](const nlohmann::json& sp) {
    if (!sp.is_object()) return std::string("-");
    if (sp["n"].get<int>() < 2) return fmt::format("{:.2f}", sp["mean"].get<double>());
    return fmt::format("{:.2f} [{:.2f}, {:.2f}]", sp["mean"].get<double>(),
                       sp["ci95_lo"].get<double>(), sp["ci95_hi"].get<double>());
  };
  auto spread_of = [](const nlohmann::json& r, const char* key) -> nlohmann::json {
    if (!r.contains("spread")) return nullptr;
    return r["spread"][key];
  };
  std::string out = fmt::format("{:<14} {:>24} {:>24} {:>9} {:>9}\n", "policy",
                                "alloc@100 [95% CI]", "alloc@130 [95% CI]", "frag@0", "s/seed");
  for (const nlohmann::json& r : results) {
    out += fmt::format("{:<14} {:>24} {:>24} {:>9} {:>9.2f}\n", r["policy"].get<std::string>(),
                       with_ci(spread_of(r, "alloc_pct_at_100")),
                       with_ci(spread_of(r, "alloc_pct_at_130")), FormatOrDash(r["frag_pct_at_0"]),
                       r["seconds_per_seed"].get<double>());
  }
  // Paired by seed: each policy against the first, on the seeds both ran.
  if (results.size() < 2) return out;
  const nlohmann::json& base = results[0];
  out += fmt::format("difference from {}, paired by seed, mean [95% CI]:\n",
                     base["policy"].get<std::string>());
  for (size_t k = 1; k < results.size(); ++k) {
    std::string line = fmt::format("  {:<12}", results[k]["policy"].get<std::string>());
    for (const char* key : {"alloc_pct_at_100", "alloc_pct_at_130"}) {
      std::vector<double> diffs;
      for (const nlohmann::json& a : results[k]["runs"]) {
        for (const nlohmann::json& b : base["runs"]) {
          if (a["seed"] != b["seed"] || !a[key].is_number() || !b[key].is_number()) continue;
          diffs.push_back(a[key].get<double>() - b[key].get<double>());
        }
      }
      const Spread d = Spread::Of(diffs);
      line += diffs.empty() ? fmt::format(" {}: -", key)
                            : fmt::format(" {}: {:+.2f} [{:+.2f}, {:+.2f}] (n={})", key, d.mean,
                                          d.lo, d.hi, d.n);
    }
    out += line + "\n";
  }
  return out;
}

int RunInflateCommand(const InflateOptions& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "arbiter simulate inflate: %s\n", st.ToString().c_str());
    return 2;
  };
  auto seeds = ParseSeeds(o.seeds);
  if (!seeds.ok()) return fail(seeds.status());
  if (o.policies.empty()) return fail(InvalidArgument("policy", "give at least one --policy"));
  std::vector<core::Profile> profiles;
  if (o.node_order != "shuffled" && o.node_order != "file") {
    return fail(InvalidArgument(
        "node-order", fmt::format("must be 'shuffled' or 'file', got '{}'", o.node_order)));
  }
  auto trace_nodes = LoadOpenbNodes(o.nodes_path);
  if (!trace_nodes.ok()) return fail(trace_nodes.status());
  auto cluster = core::Cluster::Build(trace_nodes->models, trace_nodes->nodes);
  if (!cluster.ok()) return fail(cluster.status());
  for (const std::string& name : o.policies) {
    auto spec = core::Profile::Named(name);
    if (!spec.ok()) return fail(spec.status());
    // The experiment scores every feasible node, as the published one does.
    spec->nodes_to_score = static_cast<int32_t>(cluster->num_nodes());
    auto profile = core::Profile::Build(*spec);
    if (!profile.ok()) return fail(profile.status());
    profiles.push_back(std::move(*profile));
  }
  auto tasks = LoadOpenbPods(o.pods_path);
  if (!tasks.ok()) return fail(tasks.status());
  const Workload workload = CompileWorkload(*cluster, *tasks);
  // In a shuffled order, one cluster per seed, its nodes shuffled with a generator of the seed's
  // own (the models keep their ids, so the workload compiled above fits every one); in file order
  // every seed runs on the cluster above.
  std::vector<core::Cluster> shuffled;
  if (o.node_order == "shuffled") {
    for (uint64_t seed : *seeds) {
      std::vector<Node> nodes = trace_nodes->nodes;
      Rng rng(seed ^ 0x6e6f64652d6f7264ULL);  // "node-ord"
      rng.Shuffle(nodes.begin(), nodes.end());
      auto c = core::Cluster::Build(trace_nodes->models, nodes);
      if (!c.ok()) return fail(c.status());
      shuffled.push_back(std::move(*c));
    }
  }
  std::fprintf(
      stderr, "inflate: %zu nodes, %d GPUs, %zu tasks, %zu typical task classes, target %.0f%%\n",
      cluster->num_nodes(), static_cast<int>(cluster->capacity()[core::kDimGpu] / kMilliPerGpu),
      tasks->size(), workload.typical.classes.size(), 100.0 * o.target);

  nlohmann::json results = nlohmann::json::array();
  for (size_t p = 0; p < profiles.size(); ++p) {
    std::vector<InflateRun> runs;
    for (size_t i = 0; i < seeds->size(); ++i) {
      const uint64_t seed = (*seeds)[i];
      const core::Cluster& on = shuffled.empty() ? *cluster : shuffled[i];
      auto run = RunInflate(on, workload, profiles[p], seed, o.target);
      if (!run.ok()) return fail(run.status());
      std::fprintf(stderr,
                   "inflate: %s seed %llu: %lld tasks, %lld placed, GPU allocation %.2f%% at "
                   "%.2f%% demand (%.2f s)\n",
                   o.policies[p].c_str(), static_cast<unsigned long long>(seed),
                   static_cast<long long>(run->tasks), static_cast<long long>(run->placed),
                   run->alloc_pct_end, run->demand_pct_end, run->seconds);
      runs.push_back(std::move(*run));
    }
    results.push_back(
        InflateReport(o.policies[p], Stem(o.pods_path), Stem(o.nodes_path), o.target, runs));
    results.back()["node_order"] = o.node_order;
  }

  if (!o.html_path.empty()) {
    const double gpus = static_cast<double>(cluster->capacity()[core::kDimGpu]) / kMilliPerGpu;
    const Status st = report::WriteHtml(
        InflateHtmlReport(o, gpus, std::vector<nlohmann::json>(results.begin(), results.end())),
        o.html_path);
    if (!st.ok()) return fail(st);
  }
  const nlohmann::json report =
      results.size() == 1 ? results[0] : nlohmann::json{{"results", results}};
  if (o.json_path == "-") {
    std::printf("%s\n", report.dump(1).c_str());
    return 0;
  }
  if (!o.json_path.empty()) {
    const Status st = WriteTextFile(o.json_path, report.dump(1) + "\n", "report");
    if (!st.ok()) return fail(st);
  }
  std::printf("%s", InflateTextTable(results).c_str());
  return 0;
}

}  // namespace arbiter::sim

#include "sim/inflate_command.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/cluster.h"
#include "core/placement/framework.h"

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
    per_run.push_back({{"seed", r.seed},
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
          {"seconds_per_seed", runs.empty() ? 0.0 : seconds / static_cast<double>(runs.size())},
          {"curve", curve},
          {"runs", per_run}};
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
  std::fprintf(
      stderr, "inflate: %zu nodes, %d GPUs, %zu tasks, %zu typical task classes, target %.0f%%\n",
      cluster->num_nodes(), static_cast<int>(cluster->capacity()[core::kDimGpu] / kMilliPerGpu),
      tasks->size(), workload.typical.classes.size(), 100.0 * o.target);

  nlohmann::json results = nlohmann::json::array();
  for (size_t p = 0; p < profiles.size(); ++p) {
    std::vector<InflateRun> runs;
    for (uint64_t seed : *seeds) {
      auto run = RunInflate(*cluster, workload, profiles[p], seed, o.target);
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
  }

  const nlohmann::json report =
      results.size() == 1 ? results[0] : nlohmann::json{{"results", results}};
  if (o.json_path == "-") {
    std::printf("%s\n", report.dump(1).c_str());
    return 0;
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << report.dump(1) << "\n";
    if (!out) return fail(Internal(fmt::format("{}: cannot write the report", o.json_path)));
  }
  std::printf("%-14s %10s %10s %9s %9s\n", "policy", "alloc@100", "alloc@130", "frag@0", "s/seed");
  for (const nlohmann::json& r : results) {
    std::printf("%-14s %10s %10s %9s %9.2f\n", r["policy"].get<std::string>().c_str(),
                FormatOrDash(r["alloc_pct_at_100"]).c_str(),
                FormatOrDash(r["alloc_pct_at_130"]).c_str(),
                FormatOrDash(r["frag_pct_at_0"]).c_str(), r["seconds_per_seed"].get<double>());
  }
  return 0;
}

}  // namespace arbiter::sim

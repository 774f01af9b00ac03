// `arbiter simulate inflate`: the FGD paper's workload-inflation experiment (sim/inflate.h) for one
// or more placement profiles over a range of seeds, averaged, as a table or JSON.
//
//   arbiter simulate inflate --nodes NODES.csv --pods PODS.csv --policy fgd [--policy bestfit ...]
//       --seeds 42-51 --target 1.3 [--json OUT.json] [--html OUT.html]
//
// JSON, per policy: {"policy", "trace", "nodes", "seeds", "target", "alloc_pct_at_100",
// "alloc_pct_at_130", "frag_pct_at_0", "curve": [{"demand_pct", "alloc_pct", "frag_pct"}, ...],
// "runs": [per seed], "seconds_per_seed"}; several policies give {"results": [one per policy]}.
// --html writes a self-contained page (sim/report_html.h): a summary table, the allocation and
// fragmentation curves per policy against the demand, the per-seed spread. Progress goes to stderr.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "sim/inflate.h"
#include "sim/report_html.h"

namespace arbiter::sim {

struct InflateOptions {
  std::string nodes_path;
  std::string pods_path;
  std::vector<std::string> policies;
  std::string seeds = "42-51";
  double target = 1.3;
  // Which node wins a tie of equal scores. "shuffled" (the default): a random order of the nodes,
  // drawn per seed, as in the published experiment, whose simulator names every node with a
  // random-permutation prefix and whose scheduler gives ties to the smallest name. "file": the
  // order of the node list (the lower node id, as the server does).
  std::string node_order = "shuffled";
  std::string json_path;  // empty: a table on stdout; "-": JSON on stdout
  std::string html_path;  // empty: no HTML report
};

// "42-51", "42", "1,5,9" or a mix ("1-3,7"), in the order given.
Result<std::vector<uint64_t>> ParseSeeds(std::string_view text);

// The report of one policy's runs.
nlohmann::json InflateReport(std::string_view policy, std::string_view trace,
                             std::string_view nodes, double target,
                             const std::vector<InflateRun>& runs);

// The table printed on stdout: per policy the allocation at 100% and 130% demand, mean over the
// seeds with its 95% t-interval, and each policy's difference from the first, paired by seed.
std::string InflateTextTable(const nlohmann::json& results);

// The HTML report of one command on a cluster of `cluster_gpus` GPUs: `results` holds one
// InflateReport() per policy.
report::Report InflateHtmlReport(const InflateOptions& options, double cluster_gpus,
                                 const std::vector<nlohmann::json>& results);

// Runs the command; returns the process exit code (0, or 2 on bad input).
int RunInflateCommand(const InflateOptions& options);

}  // namespace arbiter::sim

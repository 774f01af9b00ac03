// The HTML report of `arbiter simulate replay --html`: one self-contained page (sim/report_html.h)
// for one or several policies' replays of the same trace on the same cluster, side by side.
//
// Sections, in this order (each chart section holds exactly one chart):
//   1. Summary: a table, one column per policy (outcomes, waits, JCT, allocation, idle GPU-hours
//      while jobs waited, preemptions, Jain's index, makespan, cycles).
//   2. GPU allocation over time: ReplayReport::alloc_series of every policy (a step line); 3. the
//      same from the first to the last submit (arrival_alloc_series).
//   4. Wait time distribution: per policy, how many started jobs waited longer than x.
//   5. Waits by queue and 6. by job type: p99 wait as grouped bars, and a table of the
//      percentiles (by type with the JCT too).
//   7. GPU share by queue: each queue's time-averaged share per policy against its guaranteed
//      share (bars and a table); 8. the same share over the time the queue had jobs waiting.
//   9. Dropped and unfinished jobs: their reasons with counts, per policy (a table, or a line
//      saying there were none).
//  10. Services (only with services): their figures per policy (a table); 11. ready replicas over
//      time (a step line per policy and service).
//
// Thread safety: a pure function of its arguments.
#pragma once

#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/report_html.h"

namespace arbiter::sim {

// `reports` are the replays of one workload under each policy, in the order to show them (so the
// same queues and job types, in the same order; the first report's are the ones shown);
// `command` is the command line, shown under the title; `trace` and `nodes` name the inputs.
report::Report ReplayHtmlReport(const std::vector<ReplayReport>& reports, const std::string& trace,
                                const std::string& nodes, const std::string& command);

}  // namespace arbiter::sim

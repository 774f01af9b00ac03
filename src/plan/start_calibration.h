// Calibration of the expected start (plan/expected_start.h) on a trace: how often a job really
// started before its P50 and its P90 estimate.
//
// The trace is replayed once (sim::RunReplay, the "actual" run). Before each of its cycles, every
// pending job that arrived before that cycle (it did not start in the cycle of its arrival) and
// has no estimate yet is estimated, if the sampling keeps it (every `every`-th such job by a hash
// of its id and the seed, at most max_jobs): EstimateStart on the replay's state at that moment
// (running jobs with their placements and elapsed time, pending jobs), with run times drawn from
// the history so far: the run times of the jobs that completed before that moment, by user (the
// trace's tenant: traces have no users), queue and cluster. Then the actual start of each
// estimated job in the replay is compared with its estimate: a hit when it started at or before
// it. Ideal rates: about 50% for P50, 90% for P90.
//
// Pure: no I/O, threads or clock. Thread safety: only reads its arguments.
#pragma once

#include <array>
#include <cstdint>

#include "core/placement/framework.h"
#include "plan/expected_start.h"
#include "sim/replay.h"

namespace arbiter::plan {

struct CalibrationOptions {
  StartEstimateOptions estimate;
  sim::ReplayOptions replay;  // the actual run's (its hooks are the calibration's own)
  int32_t every = 1;          // estimate one waiting job in `every` (by hash), >= 1
  int32_t max_jobs = 200;     // estimates at most
  size_t min_samples = 5;     // RunTimeHistory::min_samples
  // Give each estimate the cycle's nominations, decayed usage and typical tasks, as the server
  // does (false: the running and pending jobs alone, for comparison).
  bool carry_cycle_state = true;
  // The estimates draw future arrivals from the jobs that arrived this long before (0: none;
  // StartEstimateInput::arrival_window, at most the time since the first arrival).
  DurationMs arrival_window = SecondsToMs(3600);
  // A diagnostic: the run-time history holds every job's run time from the start (what the
  // estimates would be with the run-time distribution known, unbiased by the long runs still
  // running).
  bool known_run_times = false;
};

struct CalibrationReport {
  int64_t jobs = 0;             // in the trace
  int64_t started_at_once = 0;  // started in the cycle of their arrival: not estimated
  int64_t estimated = 0;
  int64_t unfinished = 0;  // estimated, never started in the actual run: left out of the rates
  int64_t scored = 0;      // estimated and started
  int64_t before_p50 = 0;  // started at or before the P50 estimate
  int64_t before_p90 = 0;
  double p50_hit_pct = 0;  // of scored
  double p90_hit_pct = 0;
  int64_t bounded = 0;  // estimates where a bound applied (pending jobs left out, horizon)
  // Median over scored jobs of the actual wait and of (P50 - actual start), seconds (the P50
  // after the horizon counts as the horizon).
  double actual_wait_median_s = 0;
  double p50_error_median_s = 0;
  // Each estimate's work (StartEstimate::work): median, P90 and most; estimates cut off by
  // StartEstimateOptions::max_work.
  int64_t work_median = 0;
  int64_t work_p90 = 0;
  int64_t work_max = 0;
  int64_t work_cut = 0;
  std::array<int64_t, kRunTimeSources> sources{};  // estimates by their main run-time source
};

CalibrationReport Calibrate(const sim::ReplayWorkload& workload, const core::Profile& profile,
                            const CalibrationOptions& options);

}  // namespace arbiter::plan

// Arbiter's trace format: the workload `arbiter simulate replay` plays, one job a row.
//
// CSV with a header line naming the columns, in any order. Required columns:
//   submit_time     seconds from the trace start, whole, >= 0
//   duration        seconds the job really runs once started, whole, >= 0
//   tenant, queue   names ([a-z0-9][a-z0-9-]*, at most 63); a queue belongs to one tenant and no
//                   queue is named like a tenant
//   type            training, fine-tuning, evaluation, batch-inference, service or experiment
//   priority_class  a priority class name
//   tasks           tasks that start together (a gang when > 1), 1..100000
//   gpus_per_task   0..1024
//   gpu_milli       share of each GPU in thousandths: 0 without GPUs, else 1..1000, below 1000
//                   only with gpus_per_task 1 (a GPU-sharing task)
//   gpu_models      allowed GPU models separated by '|', in order of preference; empty: any
//   walltime        seconds after which a running job is stopped (timed out); 0 or empty: none
// Optional columns: cpu_milli and memory_mib (per task, default 0) and name (default "job-N", N
// the 1-based row). Fields are not quoted and hold no commas; empty lines and lines starting with
// '#' are skipped; a trailing '\r' is ignored.
//
// Errors are InvalidArgument Status values whose field is "FILE:LINE:COLUMN" (1-based; the column
// counts comma-separated fields) and whose message names the column and the problem:
//   trace.csv:7:9: gpu_milli: below 1000 only for one GPU per task, got 500 with gpus_per_task 2
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/job.h"
#include "model/resources.h"
#include "sim/text.h"

namespace arbiter::sim {

struct TraceJob {
  std::string name;
  int64_t submit_time = 0;  // seconds
  int64_t duration = 0;     // seconds
  std::string tenant;
  std::string queue;
  JobType type = JobType::kTraining;
  std::string priority_class;
  int32_t tasks = 1;
  TaskResources resources;              // per task: gpus, gpu_milli, cpu_milli, memory_mib
  std::vector<std::string> gpu_models;  // empty: any
  int64_t walltime = 0;                 // seconds; 0: none
  size_t line = 0;                      // where it was read (0 for jobs made in code)
};

// A loaded trace: the jobs in file order and where their columns are, for later errors.
struct Trace {
  std::string file;
  std::vector<std::string> columns;  // the header, in order
  std::vector<TraceJob> jobs;

  // "FILE:LINE:COLUMN" of a job's column; "FILE:LINE" when the trace has no such column (a trace
  // converted from a pod list: the line is the pod's).
  std::string Where(const TraceJob& job, std::string_view column) const;
};

// The columns in the order FormatTrace writes them.
const std::vector<std::string_view>& TraceColumns();

// Parses a trace; `file` names it in errors.
Result<Trace> ParseTrace(std::string_view text, std::string_view file);
// Reads and parses a file (errors name the path).
Result<Trace> LoadTrace(const std::string& path);

// Delays each job's submit time by a uniform draw in [0, seconds) (whole seconds, rounded down),
// drawn from `seed`: equal seeds give equal delays, and jobs that arrived within `seconds` of each
// other may arrive in another order. For the spread of an online replay over seeds on a trace with
// times (`simulate replay --arrival-jitter`). `seconds` <= 0: no change.
void JitterArrivals(std::vector<TraceJob>* jobs, double seconds, uint64_t seed);

// Writes jobs in the trace format, every column, in the order of TraceColumns(). Names must not
// hold commas or line breaks (ParseTrace's rules); ParseTrace(FormatTrace(j)) gives j back.
std::string FormatTrace(const std::vector<TraceJob>& jobs);

}  // namespace arbiter::sim

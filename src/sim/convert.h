// From an openb pod list (sim/openb.h) to Arbiter's trace format (sim/trace.h): one job of one task
// per pod, `arbiter simulate convert`.
//
//   submit_time  creation_time - the earliest creation_time, times time_scale (rounded down)
//   duration     deletion_time - creation_time (a pod without deletion_time lives until the latest
//                time of the file)
//   resources    num_gpu GPUs of gpu_milli each, cpu_milli, memory_mib; gpu_models = gpu_spec
//   qos          LS -> critical / service, Guaranteed -> high / training,
//                Burstable -> normal / batch-inference, BE -> best-effort / experiment
//                (priority class / job type); no qos (the 5-column files) -> normal / training
//   tenant       "tenant-K", K = FNV-1a(pod name) mod tenants
//   queue        "tenant-K-online" for LS and Guaranteed pods, "tenant-K-batch" for the others
//   walltime     0 (the trace has none)
//
// The pod lists without times (the multigpu* files) get a synthetic arrival process from a seeded
// Rng: exponential inter-arrival times with mean `interarrival` seconds and exponential durations
// with mean `mean_duration` seconds, both rounded down to whole seconds, durations at least 1 s,
// arrivals in file order. A file where some pods have a creation_time and others not is an error.
//
// Deterministic: equal inputs and seed give equal traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "sim/openb.h"
#include "sim/trace.h"

namespace arbiter::sim {

struct ConvertOptions {
  int tenants = 4;
  uint64_t seed = 42;
  double time_scale = 1.0;        // multiplies submit times (not durations); > 0
  double interarrival = 60.0;     // seconds, mean, for pod lists without times
  double mean_duration = 3600.0;  // seconds, mean, for pod lists without times
};

// The trace's built-in priority classes and the qos each openb pod class maps to.
std::string PriorityClassForQos(const std::string& qos);
JobType JobTypeForQos(const std::string& qos);

Result<std::vector<TraceJob>> ConvertOpenbPods(const std::vector<TraceTask>& pods,
                                               const ConvertOptions& options);

struct ConvertCommandOptions {
  std::string pods_path;
  std::string out_path;  // "-": stdout
  ConvertOptions convert;
};

// `arbiter simulate convert`; returns the process exit code (0, or 2 on bad input).
int RunConvertCommand(const ConvertCommandOptions& options);

}  // namespace arbiter::sim

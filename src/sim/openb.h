// Loaders for Alibaba's GPU cluster trace of 2023 (`alibaba/clusterdata`, cluster-trace-gpu-v2023,
// CC BY 4.0; Weng et al., "Beware of Fragmentation", USENIX ATC'23), the "openb" files:
//
//   node lists  sn,cpu_milli,memory_mib,gpu,model
//   pod lists   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//               creation_time,deletion_time,scheduled_time
//               or only the first five columns (the multigpu* files)
//
// Errors are Status values whose field is "FILE:LINE:COLUMN" (1-based; the column counts
// comma-separated fields) and whose message names the column and what was wrong, e.g.
//   pods.csv:12:4: num_gpu: expected a whole number from 0 to 64, got 'x'
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_model.h"
#include "model/node.h"
#include "model/resources.h"

namespace arbiter::sim {

// A node list as model values: one GpuModel per distinct model name (in order of first use), one
// Node per row, its GPUs indexed 0..gpu-1 in one NVLink domain (the trace does not say).
struct TraceCluster {
  std::vector<GpuModel> models;
  std::vector<Node> nodes;
};

// One task (pod) of a pod list.
struct TraceTask {
  std::string name;
  TaskResources resources;              // gpus = num_gpu, gpu_milli per GPU, no GPU memory
  std::string gpu_spec;                 // as written ("" = any model)
  std::vector<std::string> gpu_models;  // the distinct models of gpu_spec, in order; empty: any
  std::string qos;                      // LS, Guaranteed, Burstable, BE; "" in the 5-column form
  // Seconds from the trace start; -1 when the column is absent or empty.
  int64_t creation_time = -1;
  int64_t deletion_time = -1;
  int64_t scheduled_time = -1;
};

// GPU memory the loaders give a model, in MiB. The trace does not record it: these are the
// vendors' figures for the named models (P100, T4, V100M16: 16 GiB; V100M32: 32 GiB; A10: 24 GiB)
// and placeholders for the undisclosed G1 (16 GiB), G2 (32 GiB) and G3 (80 GiB); any other name
// gets 16 GiB. No openb task asks for GPU memory, so the values do not change placements.
int64_t TraceGpuMemoryMib(std::string_view model);

// Parses a node list; `file` names it in errors.
Result<TraceCluster> ParseOpenbNodes(std::string_view text, std::string_view file);
// Parses a pod list in either header form; `file` names it in errors.
Result<std::vector<TraceTask>> ParseOpenbPods(std::string_view text, std::string_view file);

// Reads and parses a file (errors name the path).
Result<TraceCluster> LoadOpenbNodes(const std::string& path);
Result<std::vector<TraceTask>> LoadOpenbPods(const std::string& path);

}  // namespace arbiter::sim

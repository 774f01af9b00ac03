// Readable forms of the server's objects shared by several commands: a job's GPUs and command,
// GPUs in use per node, quota amounts.
//
// Thread safety: pure functions, except NodeGpuUsage (one thread's ApiClient).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/client.h"

namespace arbiter::cli {

// "4", "2x8" (tasks x GPUs per task), "0.5", "-" for none.
std::string JobGpus(const nlohmann::json& job);
// A job's command as a shell line; a batch script's wrapper as "batch script NAME ARGS".
std::string JobCommand(const nlohmann::json& job);
// The nodes a job runs on, "gpu-01,gpu-02" ("-" when none).
std::string JobNodes(const nlohmann::json& job);
// A word quoted for a POSIX shell when it needs it.
std::string ShellQuote(const std::string& word);
// "2 GPU x 0.5, 16 CPU, 64Gi" for the resources of one task.
std::string TaskResourcesText(const nlohmann::json& resources);

// Milli-GPUs in use per node, from the placements of the jobs that hold GPUs now.
Result<std::map<std::string, int64_t>> NodeGpuUsage(ApiClient& api);
// The node's GPU count and its models ("A100-80G", or "A100-80G,H100").
int64_t NodeGpuCount(const nlohmann::json& node);
std::string NodeGpuModels(const nlohmann::json& node);

// The "gpu" amount of a quota object ({"gpu": 8, "cpu": 64}), or nullopt when it has none.
std::optional<double> QuotaGpu(const nlohmann::json& quota);

}  // namespace arbiter::cli

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
#include <string_view>
#include <utility>
#include <vector>

#include "cli/client.h"

namespace arbiter::cli {

// "4", "2x8" (tasks x GPUs per task), "0.5", "-" for none.
std::string JobGpus(const nlohmann::json& job);
// A job's name; without one, what Slurm would call it: its batch script's file name, else its
// program's ("python" for `python train.py`).
std::string JobName(const nlohmann::json& job);
// A job's command as a shell line; a batch script's wrapper as "batch script NAME ARGS".
std::string JobCommand(const nlohmann::json& job);
// The nodes a job runs on, "gpu-01,gpu-02" ("-" when none).
std::string JobNodes(const nlohmann::json& job);
// A word quoted for a POSIX shell when it needs it.
std::string ShellQuote(const std::string& word);
// "2 GPU x 0.5, 16 CPU, 64Gi" for the resources of one task.
std::string TaskResourcesText(const nlohmann::json& resources);

// Seconds of the job's current or last run: since started_at while it runs (or stops), from
// started_at to finished_at once it ended, 0 before it starts or while it waits again.
int64_t JobElapsedSeconds(const nlohmann::json& job, int64_t now);
// The nodes a job is placed on, once each, in placement order.
std::vector<std::string> JobNodeNames(const nlohmann::json& job);
// The nodes it is placed on; not placed, the fewest it may take (`tasks` with distinct_nodes,
// else 1), as squeue counts a pending job's.
int64_t JobNodeCount(const nlohmann::json& job);
// The CPUs of all its tasks, rounded up to whole CPUs.
int64_t JobCpus(const nlohmann::json& job);
// Seconds since the epoch of a time field ("started_at"), when it is set.
std::optional<int64_t> JobTime(const nlohmann::json& job, const char* key);
// The pending verdict's code ("QuotaExceeded"), when the job waits with one.
std::string PendingCode(const nlohmann::json& job);

// A query parameter's value, percent-encoded where a URL needs it (commas kept).
std::string QueryValue(std::string_view value);
// "?k=v&k2=v2" of the pairs whose value is not empty ("" when none is).
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

// Milli-GPUs in use per node, from the placements of the jobs that hold GPUs now.
Result<std::map<std::string, int64_t>> NodeGpuUsage(ApiClient& api);
// The node's GPU count and its models ("A100-80G", or "A100-80G,H100").
int64_t NodeGpuCount(const nlohmann::json& node);
std::string NodeGpuModels(const nlohmann::json& node);

// The "gpu" amount of a quota object ({"gpu": 8, "cpu": 64}), or nullopt when it has none.
std::optional<double> QuotaGpu(const nlohmann::json& quota);

}  // namespace arbiter::cli

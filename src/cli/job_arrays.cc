#include "cli/job_arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace arbiter::cli {

using nlohmann::json;

std::optional<ArrayInfo> ArrayOf(const json& job) {
  auto it = job.find("array");
  if (it == job.end() || !it->is_object()) return std::nullopt;
  const json& a = *it;
  if (!a.contains("id") || !a["id"].is_number_integer() || a["id"].get<int64_t>() < 0 ||
      !a.contains("index") || !a["index"].is_number_integer()) {
    return std::nullopt;
  }
  ArrayInfo info;
  info.id = a["id"].get<uint64_t>();
  info.index = a["index"].get<int64_t>();
  if (a.contains("size") && a["size"].is_number_integer()) info.size = a["size"].get<int64_t>();
  if (a.contains("max_running") && a["max_running"].is_number_integer()) {
    info.max_running = a["max_running"].get<int64_t>();
  }
  return info;
}

std::string IndexRanges(std::vector<int64_t> indices) {
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::string out;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    out += fmt::format(
        "{}{}", out.empty() ? "" : ",",
        i == j ? fmt::format("{}", indices[i]) : fmt::format("{}-{}", indices[i], indices[j]));
    i = j + 1;
  }
  return out;
}

std::vector<JobGroup> GroupArrays(const json& jobs,
                                  const std::function<bool(const json&)>& collapse) {
  std::vector<JobGroup> out;
  std::map<uint64_t, size_t> open;  // array id -> its collapsed group in `out`
  for (const json& j : jobs) {
    const auto array = ArrayOf(j);
    if (!array || !collapse(j)) {
      out.push_back({{&j}, array});
      continue;
    }
    auto [it, fresh] = open.emplace(array->id, out.size());
    if (fresh) {
      out.push_back({{&j}, array});
    } else {
      out[it->second].jobs.push_back(&j);
    }
  }
  return out;
}

std::string GroupId(const JobGroup& g, bool with_limit) {
  if (!g.array) return std::to_string(g.jobs.front()->value("id", uint64_t{0}));
  if (g.jobs.size() == 1) return fmt::format("{}_{}", g.array->id, g.array->index);
  std::vector<int64_t> indices;
  for (const json* j : g.jobs) indices.push_back(ArrayOf(*j)->index);
  const std::string limit =
      with_limit && g.array->max_running > 0 ? fmt::format("%{}", g.array->max_running) : "";
  return fmt::format("{}_[{}{}]", g.array->id, IndexRanges(indices), limit);
}

std::string StateCounts(const JobGroup& g) {
  static const char* const kOrder[] = {
      "running",   "starting", "admitted",  "preempting", "preempted", "pending",  "retry-wait",
      "suspended", "lost",     "succeeded", "failed",     "cancelled", "timed-out"};
  std::map<std::string, int> counts;
  for (const json* j : g.jobs) ++counts[j->value("state", "")];
  std::string out;
  for (const char* s : kOrder) {
    auto it = counts.find(s);
    if (it == counts.end()) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", it->second, s);
    counts.erase(it);
  }
  for (const auto& [s, n] : counts) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, s);
  return out;
}

}  // namespace arbiter::cli

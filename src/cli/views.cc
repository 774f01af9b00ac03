#include "cli/views.h"

#include <fmt/format.h>

#include <set>

#include "cli/output.h"

namespace arbiter::cli {

using nlohmann::json;

std::string JobGpus(const json& job) {
  const json& r = job.value("resources", json::object());
  const int64_t gpus = r.value("gpus", int64_t{0});
  const int64_t milli = r.value("gpu_milli", int64_t{1000});
  const int64_t tasks = job.value("tasks", int64_t{1});
  if (gpus == 0) return "-";
  const std::string per =
      milli < 1000 ? Amount(json(static_cast<double>(milli) / 1000.0)) : std::to_string(gpus);
  return tasks > 1 ? fmt::format("{}x{}", tasks, per) : per;
}

std::string ShellQuote(const std::string& w) {
  if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,+@%") == std::string::npos) {
    return w;
  }
  std::string out = "'";
  for (char c : w) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string JobCommand(const json& job) {
  std::vector<std::string> cmd;
  for (const json& w : job.value("command", json::array())) {
    if (w.is_string()) cmd.push_back(w.get<std::string>());
  }
  size_t from = 0;
  std::string out;
  if (cmd.size() >= 5 && cmd[0] == "/bin/sh" && cmd[1] == "-c" &&
      cmd[2].rfind("export SLURM_JOB_ID=", 0) == 0) {
    out = fmt::format("batch script {}", ShellQuote(cmd[3]));
    from = 5;
  }
  for (size_t i = from; i < cmd.size(); ++i) {
    std::string w = ShellQuote(cmd[i]);
    if (w.size() > 200) w = w.substr(0, 200) + "...";
    AppendTo(&out, " ", w);
  }
  return out;
}

std::string JobNodes(const json& job) {
  std::vector<std::string> nodes;
  for (const json& t : job.value("placement", json::array())) {
    const std::string n = t.value("node", "");
    if (!n.empty() && std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  if (nodes.empty()) return "-";
  std::string out;
  for (const std::string& n : nodes) AppendTo(&out, ",", n);
  return out;
}

std::string TaskResourcesText(const json& r) {
  std::vector<std::string> parts;
  const int64_t gpus = r.value("gpus", int64_t{0});
  const int64_t milli = r.value("gpu_milli", int64_t{1000});
  if (gpus > 0) {
    parts.push_back(
        milli < 1000 ? fmt::format("{} of a GPU", Amount(json(static_cast<double>(milli) / 1000.0)))
                     : fmt::format("{} GPU{}", gpus, gpus == 1 ? "" : "s"));
  }
  if (r.value("gpu_memory_mib", int64_t{0}) > 0) {
    parts.push_back(fmt::format("{} GPU memory", Mebibytes(r.value("gpu_memory_mib", int64_t{0}))));
  }
  if (r.value("cpu_milli", int64_t{0}) > 0) {
    parts.push_back(fmt::format(
        "{} CPU", Amount(json(static_cast<double>(r.value("cpu_milli", int64_t{0})) / 1000.0))));
  }
  if (r.value("memory_mib", int64_t{0}) > 0) {
    parts.push_back(Mebibytes(r.value("memory_mib", int64_t{0})));
  }
  if (parts.empty()) return "no GPU";
  std::string out;
  for (const std::string& p : parts) AppendTo(&out, ", ", p);
  return out;
}

Result<std::map<std::string, int64_t>> NodeGpuUsage(ApiClient& api) {
  std::map<std::string, int64_t> used;
  for (const char* state : {"admitted", "starting", "running", "preempting"}) {
    auto jobs = api.ListAll(fmt::format("/api/v1/jobs?state={}", state));
    if (!jobs.ok()) return jobs.status();
    for (const json& j : *jobs) {
      for (const json& t : j.value("placement", json::array())) {
        int64_t milli = 0;
        for (const json& m : t.value("gpu_milli", json::array())) milli += m.get<int64_t>();
        used[t.value("node", "")] += milli;
      }
    }
  }
  return used;
}

int64_t NodeGpuCount(const json& node) {
  return static_cast<int64_t>(node.value("gpus", json::array()).size());
}

std::string NodeGpuModels(const json& node) {
  std::set<std::string> models;
  for (const json& g : node.value("gpus", json::array())) models.insert(g.value("model", ""));
  if (models.empty()) return "-";
  std::string out;
  for (const std::string& m : models) AppendTo(&out, ",", m);
  return out;
}

std::optional<double> QuotaGpu(const json& quota) {
  if (!quota.is_object() || !quota.contains("gpu") || !quota["gpu"].is_number()) {
    return std::nullopt;
  }
  return quota["gpu"].get<double>();
}

}  // namespace arbiter::cli

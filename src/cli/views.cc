#include "cli/views.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "cli/output.h"
#include "common/time.h"

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

std::string JobName(const json& job) {
  auto it = job.find("name");
  if (it != job.end() && it->is_string() && !it->get<std::string>().empty()) {
    return it->get<std::string>();
  }
  std::vector<std::string> cmd;
  for (const json& w : job.value("command", json::array())) {
    if (w.is_string()) cmd.push_back(w.get<std::string>());
  }
  const bool batch = cmd.size() >= 5 && cmd[0] == "/bin/sh" && cmd[1] == "-c" &&
                     cmd[2].rfind("export SLURM_JOB_ID=", 0) == 0;
  const std::string program = batch ? cmd[3] : cmd.empty() ? "" : cmd[0];
  return program.substr(program.find_last_of('/') + 1);
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

std::optional<int64_t> JobTime(const json& job, const char* key) {
  auto it = job.find(key);
  if (it == job.end() || !it->is_string()) return std::nullopt;
  const auto ms = ParseRfc3339Ms(it->get<std::string>());
  if (!ms) return std::nullopt;
  return *ms / 1000;
}

int64_t JobElapsedSeconds(const json& job, int64_t now) {
  const auto started = JobTime(job, "started_at");
  if (!started) return 0;
  const std::string state = job.value("state", "");
  const auto finished = JobTime(job, "finished_at");
  if (finished) return *finished >= *started ? *finished - *started : 0;
  if (state == "running" || state == "preempting" || job.contains("stopping")) {
    return std::max<int64_t>(0, now - *started);
  }
  return 0;
}

std::vector<std::string> JobNodeNames(const json& job) {
  std::vector<std::string> nodes;
  for (const json& t : job.value("placement", json::array())) {
    const std::string n = t.value("node", "");
    if (!n.empty() && std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  return nodes;
}

int64_t JobNodeCount(const json& job) {
  const size_t placed = JobNodeNames(job).size();
  if (placed > 0) return static_cast<int64_t>(placed);
  return job.value("distinct_nodes", false) ? job.value("tasks", int64_t{1}) : 1;
}

int64_t JobCpus(const json& job) {
  const int64_t milli = job.value("resources", json::object()).value("cpu_milli", int64_t{0}) *
                        job.value("tasks", int64_t{1});
  return (milli + 999) / 1000;
}

std::string PendingCode(const json& job) {
  auto it = job.find("pending");
  if (it == job.end() || !it->is_object()) return "";
  return it->value("code", "");
}

std::string QueryValue(std::string_view value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ',' || c == ':') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [k, v] : params) {
    if (!v.empty()) out += fmt::format("{}{}={}", out.empty() ? "?" : "&", k, QueryValue(v));
  }
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

#include "api/agent_codec.h"

#include <fmt/format.h>

#include <limits>

#include "model/job_array.h"

namespace arbiter::api {

using nlohmann::json;

namespace {

// A field that does not fit; thrown inside this file only, turned into a Status at its edge.
struct FieldError {
  std::string field;
  std::string message;
};

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : fmt::format("{}.{}", path, key);
}

const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

void ExpectObject(const json& j, const std::string& path) {
  if (!j.is_object()) throw FieldError{path, "must be an object"};
}

std::string Str(const json& obj, const std::string& path, const char* key, bool required,
                size_t max_bytes = 4096) {
  const json* v = Member(obj, key);
  if (v == nullptr) {
    if (required) throw FieldError{Join(path, key), "is required"};
    return "";
  }
  if (!v->is_string()) throw FieldError{Join(path, key), "must be a string"};
  std::string s = v->get<std::string>();
  if (s.size() > max_bytes) {
    throw FieldError{Join(path, key), fmt::format("must be at most {} bytes", max_bytes)};
  }
  return s;
}

int64_t Int(const json& obj, const std::string& path, const char* key, bool required,
            int64_t lo = 0, int64_t hi = std::numeric_limits<int64_t>::max()) {
  const json* v = Member(obj, key);
  if (v == nullptr) {
    if (required) throw FieldError{Join(path, key), "is required"};
    return lo > 0 ? lo : 0;
  }
  if (!v->is_number_integer()) throw FieldError{Join(path, key), "must be an integer"};
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    throw FieldError{Join(path, key), fmt::format("must be at most {}", hi)};
  }
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) {
    throw FieldError{Join(path, key), fmt::format("must be between {} and {}, got {}", lo, hi, x)};
  }
  return x;
}

uint64_t Uint(const json& obj, const std::string& path, const char* key, bool required) {
  const json* v = Member(obj, key);
  if (v == nullptr) {
    if (required) throw FieldError{Join(path, key), "is required"};
    return 0;
  }
  if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
    throw FieldError{Join(path, key), "must be a non-negative integer"};
  }
  return v->get<uint64_t>();
}

bool Bool(const json& obj, const std::string& path, const char* key, bool fallback) {
  const json* v = Member(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw FieldError{Join(path, key), "must be true or false"};
  return v->get<bool>();
}

std::map<std::string, std::string> StrMap(const json& obj, const std::string& path,
                                          const char* key) {
  std::map<std::string, std::string> out;
  const json* v = Member(obj, key);
  if (v == nullptr) return out;
  if (!v->is_object()) throw FieldError{Join(path, key), "must be an object of strings"};
  if (v->size() > 1024) throw FieldError{Join(path, key), "must have at most 1024 members"};
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) {
      throw FieldError{fmt::format("{}[\"{}\"]", Join(path, key), k), "must be a string"};
    }
    out[k] = val.get<std::string>();
  }
  return out;
}

const json& Array(const json& obj, const std::string& path, const char* key, size_t max,
                  const json& empty) {
  const json* v = Member(obj, key);
  if (v == nullptr) return empty;
  if (!v->is_array()) throw FieldError{Join(path, key), "must be an array"};
  if (v->size() > max) {
    throw FieldError{Join(path, key), fmt::format("must have at most {} items", max)};
  }
  return *v;
}

template <typename F>
auto Guard(F&& f) -> Result<decltype(f())> {
  try {
    return f();
  } catch (const FieldError& e) {
    return InvalidArgument(e.field, e.message);
  } catch (const std::exception& e) {
    return InvalidArgument("", e.what());
  }
}

}  // namespace

json AgentRegistrationToJson(const AgentRegistration& r) {
  json gpus = json::array();
  for (const Gpu& g : r.node.gpus) {
    gpus.push_back({{"index", g.index},
                    {"model", g.model},
                    {"memory_mib", g.memory_mib},
                    {"healthy", g.healthy},
                    {"nvlink_domain", g.nvlink_domain}});
  }
  json taints = json::array();
  for (const Taint& t : r.node.taints) taints.push_back({{"key", t.key}, {"value", t.value}});
  return {{"name", r.node.name},
          {"cpu_milli", r.node.cpu_milli},
          {"memory_mib", r.node.memory_mib},
          {"labels", r.node.labels},
          {"taints", taints},
          {"rack", r.node.rack},
          {"block", r.node.block},
          {"gpus", gpus},
          {"instance", r.instance},
          {"version", r.version},
          {"address", r.address},
          {"log_host", r.log_host},
          {"log_port", r.log_port},
          {"log_token", r.log_token},
          {"status", r.status}};
}

Result<AgentRegistration> ParseAgentRegistration(const json& j) {
  return Guard([&] {
    ExpectObject(j, "");
    AgentRegistration r;
    r.node.name = Str(j, "", "name", true, 253);
    r.node.cpu_milli = Int(j, "", "cpu_milli", true, 0, int64_t{1} << 40);
    r.node.memory_mib = Int(j, "", "memory_mib", true, 0, int64_t{1} << 40);
    r.node.labels = StrMap(j, "", "labels");
    const json none = json::array();
    const json& taints = Array(j, "", "taints", 64, none);
    for (size_t i = 0; i < taints.size(); ++i) {
      const std::string p = fmt::format("taints[{}]", i);
      ExpectObject(taints[i], p);
      r.node.taints.push_back(
          {Str(taints[i], p, "key", true, 253), Str(taints[i], p, "value", false)});
    }
    r.node.rack = Str(j, "", "rack", false, 253);
    r.node.block = Str(j, "", "block", false, 253);
    const json& gpus = Array(j, "", "gpus", kMaxAgentGpus, none);
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string p = fmt::format("gpus[{}]", i);
      ExpectObject(gpus[i], p);
      Gpu g;
      g.index = static_cast<int32_t>(Int(gpus[i], p, "index", true, 0, 65535));
      g.model = Str(gpus[i], p, "model", false, 253);
      g.memory_mib = Int(gpus[i], p, "memory_mib", false, 0, int64_t{1} << 30);
      g.healthy = Bool(gpus[i], p, "healthy", true);
      g.nvlink_domain = static_cast<int32_t>(Int(gpus[i], p, "nvlink_domain", false, -1, 65535));
      r.node.gpus.push_back(std::move(g));
    }
    r.instance = Str(j, "", "instance", true, 128);
    r.version = Str(j, "", "version", false, 128);
    r.address = Str(j, "", "address", false, 253);
    r.log_host = Str(j, "", "log_host", false, 253);
    r.log_port = static_cast<int32_t>(Int(j, "", "log_port", false, 0, 65535));
    r.log_token = Str(j, "", "log_token", false, 256);
    r.status = StrMap(j, "", "status");
    return r;
  });
}

json GpuTelemetryToJson(const GpuTelemetry& g) {
  json out = {{"index", g.index},
              {"utilization_pct", g.utilization_pct},
              {"memory_used_mib", g.memory_used_mib},
              {"memory_total_mib", g.memory_total_mib},
              {"healthy", g.healthy}};
  if (!g.uuid.empty()) out["uuid"] = g.uuid;
  if (!g.health_reason.empty()) out["health_reason"] = g.health_reason;
  return out;
}

json AgentHeartbeatToJson(const AgentHeartbeat& hb) {
  json gpus = json::array();
  for (const GpuTelemetry& g : hb.gpus) gpus.push_back(GpuTelemetryToJson(g));
  json reports = json::array();
  for (const TaskReport& r : hb.reports) {
    json item = {{"seq", r.seq},
                 {"job", r.job},
                 {"task", r.task},
                 {"attempt", r.attempt},
                 {"event", std::string(TaskEventName(r.event))}};
    if (r.event == TaskEvent::kExited) {
      item["exit_code"] = r.exit_code;
      item["timed_out"] = r.timed_out;
    }
    if (!r.message.empty()) item["message"] = r.message;
    if (!r.image_digest.empty()) item["image_digest"] = r.image_digest;
    reports.push_back(std::move(item));
  }
  json out = {{"name", hb.node}, {"instance", hb.instance}, {"gpus", gpus}, {"reports", reports}};
  if (hb.images_known) out["images"] = NodeImagesToJson(hb.images);
  return out;
}

Result<AgentHeartbeat> ParseAgentHeartbeat(const json& j) {
  return Guard([&] {
    ExpectObject(j, "");
    AgentHeartbeat hb;
    hb.node = Str(j, "", "name", true, 253);
    hb.instance = Str(j, "", "instance", true, 128);
    const json none = json::array();
    const json& gpus = Array(j, "", "gpus", kMaxAgentGpus, none);
    for (size_t i = 0; i < gpus.size(); ++i) {
      const std::string p = fmt::format("gpus[{}]", i);
      ExpectObject(gpus[i], p);
      GpuTelemetry g;
      g.index = static_cast<int32_t>(Int(gpus[i], p, "index", true, 0, 65535));
      g.uuid = Str(gpus[i], p, "uuid", false, 128);
      g.utilization_pct = static_cast<int32_t>(Int(gpus[i], p, "utilization_pct", false, 0, 100));
      g.memory_used_mib = Int(gpus[i], p, "memory_used_mib", false, 0, int64_t{1} << 30);
      g.memory_total_mib = Int(gpus[i], p, "memory_total_mib", false, 0, int64_t{1} << 30);
      g.healthy = Bool(gpus[i], p, "healthy", true);
      g.health_reason = Str(gpus[i], p, "health_reason", false, 1024);
      hb.gpus.push_back(std::move(g));
    }
    const json& reports = Array(j, "", "reports", kMaxAgentReports, none);
    for (size_t i = 0; i < reports.size(); ++i) {
      const std::string p = fmt::format("reports[{}]", i);
      const json& item = reports[i];
      ExpectObject(item, p);
      TaskReport r;
      r.seq = Uint(item, p, "seq", true);
      r.job = Uint(item, p, "job", true);
      r.task = static_cast<int32_t>(Int(item, p, "task", true, 0, 1 << 20));
      r.attempt = Uint(item, p, "attempt", true);
      const std::string event = Str(item, p, "event", true, 16);
      if (!ParseTaskEvent(event, &r.event)) {
        throw FieldError{
            Join(p, "event"),
            fmt::format("must be started, exited, lost, checkpointed or note, got '{}'", event)};
      }
      if (r.event == TaskEvent::kExited) {
        r.exit_code = static_cast<int32_t>(Int(item, p, "exit_code", true, -255, 65535));
        r.timed_out = Bool(item, p, "timed_out", false);
      }
      r.message = Str(item, p, "message", false, kMaxReportMessageBytes);
      r.image_digest = Str(item, p, "image_digest", false, 256);
      hb.reports.push_back(r);
    }
    if (Member(j, "images") != nullptr) {
      hb.images_known = true;
      const json& images = Array(j, "", "images", kMaxNodeImages, none);
      for (size_t i = 0; i < images.size(); ++i) {
        const std::string p = fmt::format("images[{}]", i);
        ExpectObject(images[i], p);
        NodeImage img;
        img.name = Str(images[i], p, "name", true, 1024);
        img.digest = Str(images[i], p, "digest", false, 256);
        img.size_bytes = Int(images[i], p, "size_bytes", false, 0, int64_t{1} << 50);
        hb.images.push_back(std::move(img));
      }
    }
    return hb;
  });
}

namespace {

json MountsToJson(const std::vector<Mount>& mounts) {
  json out = json::array();
  for (const Mount& m : mounts) {
    json j = {{"path", m.path},
              {"target", m.target.empty() ? m.path : m.target},
              {"read_only", m.read_only}};
    if (!m.volume.empty()) j["volume"] = m.volume;  // "path" is "" then
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

json TaskAssignmentToJson(const TaskAssignment& a) {
  return {{"job", a.job},
          {"task", a.task},
          {"attempt", a.attempt},
          {"run", a.run},
          {"grace_ms", a.grace_ms},
          {"deadline_ms", a.deadline},
          {"gpus", a.gpus},
          {"restarts", a.restarts},
          {"master_node", a.master_node},
          {"master_addr", a.master_addr},
          {"nodes", a.nodes},
          {"step_key", a.step_key},
          {"started", a.started},
          {"tasks", a.spec.tasks},
          {"command", a.spec.command},
          {"env", a.spec.env},
          {"secret_env", a.spec.secret_env},
          {"workdir", a.spec.workdir},
          {"mounts", MountsToJson(a.spec.mounts)},
          {"cpu_milli", a.spec.resources.cpu_milli},
          {"memory_mib", a.spec.resources.memory_mib},
          {"walltime_seconds", a.spec.walltime_seconds},
          {"tenant", a.spec.tenant},
          {"user", a.spec.user},
          {"queue", a.spec.queue},
          {"array", a.spec.array.id == 0 ? json(nullptr)
                                         : json{{"id", a.spec.array.id},
                                                {"index", a.spec.array.index},
                                                {"size", a.spec.array.size},
                                                {"min", a.array_bounds.min},
                                                {"max", a.array_bounds.max},
                                                {"step", a.array_bounds.step}}},
          {"service", !a.spec.service ? json(nullptr)
                                      : json{{"name", a.spec.service->name},
                                             {"revision", a.spec.service->revision},
                                             {"port", a.spec.service->port}}},
          {"run_as",
           {{"user", a.run_as.user},
            {"uid", a.run_as.uid},
            {"gid", a.run_as.gid},
            {"root_allowed", a.run_as.root_allowed}}},
          {"container_image", a.spec.container_image},
          {"image_pull_auth", a.image_pull_auth},
          {"image_insecure", a.image_insecure}};
}

json NodeImagesToJson(const std::vector<NodeImage>& images) {
  json out = json::array();
  for (const NodeImage& i : images) {
    json item = {{"name", i.name}};
    if (!i.digest.empty()) item["digest"] = i.digest;
    if (i.size_bytes > 0) item["size_bytes"] = i.size_bytes;
    out.push_back(std::move(item));
  }
  return out;
}

Result<TaskAssignment> ParseTaskAssignment(const json& j, const std::string& field) {
  return Guard([&] {
    const std::string& p = field;
    ExpectObject(j, p);
    TaskAssignment a;
    a.job = Uint(j, p, "job", true);
    a.task = static_cast<int32_t>(Int(j, p, "task", true, 0, 1 << 20));
    a.attempt = Uint(j, p, "attempt", true);
    a.run = Bool(j, p, "run", true);
    a.grace_ms = Int(j, p, "grace_ms", false, 0, int64_t{1} << 40);
    a.deadline = Int(j, p, "deadline_ms", false, 0, int64_t{1} << 50);
    const json none = json::array();
    const json& gpus = Array(j, p, "gpus", kMaxAgentGpus, none);
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].is_number_integer() || gpus[i].get<int64_t>() < 0) {
        throw FieldError{fmt::format("{}[{}]", Join(p, "gpus"), i), "must be a GPU index"};
      }
      a.gpus.push_back(gpus[i].get<int32_t>());
    }
    a.restarts = static_cast<int32_t>(Int(j, p, "restarts", false, 0, 1 << 30));
    a.master_node = Str(j, p, "master_node", false, 253);
    a.master_addr = Str(j, p, "master_addr", false, 253);
    const json& nodes = Array(j, p, "nodes", 1 << 20, none);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i].is_string() || nodes[i].get<std::string>().size() > 253) {
        throw FieldError{fmt::format("{}[{}]", Join(p, "nodes"), i), "must be a node name"};
      }
      a.nodes.push_back(nodes[i].get<std::string>());
    }
    a.step_key = Str(j, p, "step_key", false, 128);
    a.started = Bool(j, p, "started", false);
    a.spec.id = JobId(a.job);
    a.spec.tasks = static_cast<int32_t>(Int(j, p, "tasks", false, 1, 1 << 20));
    const json& command = Array(j, p, "command", 4096, none);
    for (size_t i = 0; i < command.size(); ++i) {
      if (!command[i].is_string()) {
        throw FieldError{fmt::format("{}[{}]", Join(p, "command"), i), "must be a string"};
      }
      a.spec.command.push_back(command[i].get<std::string>());
    }
    if (a.spec.command.empty()) throw FieldError{Join(p, "command"), "must not be empty"};
    a.spec.env = StrMap(j, p, "env");
    a.spec.secret_env = StrMap(j, p, "secret_env");
    a.spec.workdir = Str(j, p, "workdir", false);
    const json& mounts = Array(j, p, "mounts", kMaxJobMounts, none);
    for (size_t i = 0; i < mounts.size(); ++i) {
      const std::string mp = fmt::format("{}[{}]", Join(p, "mounts"), i);
      ExpectObject(mounts[i], mp);
      Mount m;
      m.volume = Str(mounts[i], mp, "volume", false, kMaxVolumeNameBytes);
      m.path = Str(mounts[i], mp, "path", m.volume.empty(), kMaxMountPathBytes);
      m.target = Str(mounts[i], mp, "target", false, kMaxMountPathBytes);
      m.read_only = Bool(mounts[i], mp, "read_only", true);
      if (!m.volume.empty() && !IsValidVolumeName(m.volume)) {
        throw FieldError{Join(mp, "volume"), "is not a volume name"};
      }
      if (!m.volume.empty() && !m.path.empty()) {
        throw FieldError{Join(mp, "volume"), "a mount has a path or a volume, not both"};
      }
      if (m.volume.empty() && m.path.empty()) throw FieldError{Join(mp, "path"), "is empty"};
      for (const std::string* path : {&m.path, &m.target}) {
        if (path->empty()) continue;
        if (std::string why = MountPathProblem(*path); !why.empty()) {
          throw FieldError{Join(mp, path == &m.path ? "path" : "target"), why};
        }
      }
      a.spec.mounts.push_back(std::move(m));
    }
    a.spec.resources.cpu_milli = Int(j, p, "cpu_milli", false, 0, int64_t{1} << 40);
    a.spec.resources.memory_mib = Int(j, p, "memory_mib", false, 0, int64_t{1} << 40);
    a.spec.walltime_seconds = Int(j, p, "walltime_seconds", false, 0, int64_t{1} << 40);
    a.spec.tenant = Str(j, p, "tenant", false, 253);
    a.spec.user = Str(j, p, "user", false, 253);
    a.spec.queue = Str(j, p, "queue", false, 253);
    if (j.contains("array") && !j["array"].is_null()) {
      const std::string ap = Join(p, "array");
      const json& r = j["array"];
      ExpectObject(r, ap);
      a.spec.array.id = Uint(r, ap, "id", true);
      a.spec.array.index = Int(r, ap, "index", true, 0, kMaxArrayIndex);
      a.spec.array.size = static_cast<int32_t>(
          Int(r, ap, "size", true, 1, static_cast<int64_t>(kMaxArrayElements)));
      a.array_bounds.min = Int(r, ap, "min", false, 0, kMaxArrayIndex);
      a.array_bounds.max = Int(r, ap, "max", false, 0, kMaxArrayIndex);
      a.array_bounds.step = Int(r, ap, "step", false, 1, kMaxArrayIndex);
    }
    if (j.contains("service") && !j["service"].is_null()) {
      const std::string sp = Join(p, "service");
      const json& r = j["service"];
      ExpectObject(r, sp);
      ServiceLink link;
      link.name = Str(r, sp, "name", true, 63);
      link.revision = Int(r, sp, "revision", true, 1, int64_t{1} << 40);
      link.port = static_cast<int32_t>(Int(r, sp, "port", true, 1, 65535));
      a.spec.service = std::move(link);
    }
    if (j.contains("run_as") && !j["run_as"].is_null()) {
      const std::string rp = Join(p, "run_as");
      const json& r = j["run_as"];
      ExpectObject(r, rp);
      a.run_as.user = Str(r, rp, "user", false, 253);
      // Absent is "the node's default", never 0 (root).
      if (Member(r, "uid") != nullptr) a.run_as.uid = Int(r, rp, "uid", true, -1, int64_t{1} << 32);
      if (Member(r, "gid") != nullptr) a.run_as.gid = Int(r, rp, "gid", true, -1, int64_t{1} << 32);
      a.run_as.root_allowed = Bool(r, rp, "root_allowed", false);
    }
    a.spec.container_image = Str(j, p, "container_image", false, 1024);
    a.image_pull_auth = Str(j, p, "image_pull_auth", false, 65536);
    a.image_insecure = Bool(j, p, "image_insecure", false);
    return a;
  });
}

}  // namespace arbiter::api

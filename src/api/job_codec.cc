#include "api/job_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "api/job_template.h"
#include "api/json_writer.h"
#include "api/parse_tree.h"
#include "api/value.h"
#include "model/job_array.h"
#include "model/node.h"

namespace arbiter::api {

namespace {

constexpr int32_t kMaxTasks = 100000;
constexpr int32_t kMaxGpusPerTask = 1024;
constexpr int64_t kMaxMib = int64_t{1} << 40;
constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
constexpr size_t kMaxNameBytes = 253;

Status ParseResources(const Value& v, const std::string& path, TaskResources* r) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(
      m.Check({"gpus", "gpu_milli", "gpu_memory_mib", "cpu_milli", "memory_mib"}));
  ARBITER_RETURN_IF_ERROR(m.Int32("gpus", 0, kMaxGpusPerTask, &r->gpus));
  ARBITER_RETURN_IF_ERROR(
      m.Int32("gpu_milli", 1, static_cast<int32_t>(kMilliPerGpu), &r->gpu_milli));
  ARBITER_RETURN_IF_ERROR(m.Int("gpu_memory_mib", 0, kMaxMib, &r->gpu_memory_mib));
  ARBITER_RETURN_IF_ERROR(m.Int("cpu_milli", 0, kMaxCpuMilli, &r->cpu_milli));
  return m.Int("memory_mib", 0, kMaxMib, &r->memory_mib);
}

Status ParseRetry(const Value& v, const std::string& path, RetryPolicy* r) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(
      m.Check({"max_retries", "backoff_seconds", "backoff_cap_seconds", "on_exit_codes"}));
  ARBITER_RETURN_IF_ERROR(m.Int32("max_retries", 0, 1000, &r->max_retries));
  ARBITER_RETURN_IF_ERROR(m.Int("backoff_seconds", 0, int64_t{7} * 86400, &r->backoff_seconds));
  ARBITER_RETURN_IF_ERROR(
      m.Int("backoff_cap_seconds", 0, kMaxBackoffCapSeconds, &r->backoff_cap_seconds));
  if (const Value* codes = m.Get("on_exit_codes")) {
    const std::string cp = m.PathOf("on_exit_codes");
    ARBITER_RETURN_IF_ERROR(ExpectSequence(*codes, cp, kMaxExitCodes));
    std::set<int32_t> seen;
    for (size_t i = 0; i < codes->items.size(); ++i) {
      int32_t code = 0;
      ARBITER_RETURN_IF_ERROR(ReadInt32(codes->items[i], IndexPath(cp, i), 0, 255, &code));
      if (!seen.insert(code).second) {
        return InvalidArgument(IndexPath(cp, i), fmt::format("duplicate exit code {}", code));
      }
      r->on_exit_codes.push_back(code);
    }
  }
  return Status::Ok();
}

Status ParseCommand(const Value& v, const std::string& path, std::vector<std::string>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxCommandArgs));
  if (v.items.empty()) {
    return InvalidArgument(path, "must not be empty: give the program and its arguments");
  }
  for (size_t i = 0; i < v.items.size(); ++i) {
    std::string arg;
    ARBITER_RETURN_IF_ERROR(ReadString(v.items[i], IndexPath(path, i), kMaxArgBytes, &arg));
    out->push_back(std::move(arg));
  }
  if (out->front().empty()) return InvalidArgument(IndexPath(path, 0), "the program is empty");
  return Status::Ok();
}

Status ParseEnv(const Value& v, const std::string& path, std::map<std::string, std::string>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectMapping(v, path, kMaxEnvVars));
  for (const auto& [key, value] : v.members) {
    const std::string kp = ChildPath(path, key);
    if (!IsValidEnvName(key)) {
      return InvalidArgument(kp, fmt::format("{} is not a valid variable name: use letters, "
                                             "digits and '_', not starting with a digit",
                                             Quote(key)));
    }
    ARBITER_RETURN_IF_ERROR(ReadString(value, kp, kMaxEnvValueBytes, &(*out)[key]));
  }
  return Status::Ok();
}

Status ParseSelector(const Value& v, const std::string& path,
                     std::map<std::string, std::string>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectMapping(v, path, kMaxSelectorLabels));
  for (const auto& [key, value] : v.members) {
    const std::string kp = ChildPath(path, key);
    if (!IsValidLabelKey(key)) {
      return InvalidArgument(kp, fmt::format("{} is not a valid label key: use letters, digits, "
                                             "'.', '_', '-' and '/', at most 253",
                                             Quote(key)));
    }
    std::string s;
    ARBITER_RETURN_IF_ERROR(ReadString(value, kp, 253, &s));
    if (!IsValidLabelValue(s)) {
      return InvalidArgument(kp, fmt::format("{} is not a valid label value: use letters, digits, "
                                             "'.', '_' and '-'",
                                             Quote(s)));
    }
    (*out)[key] = std::move(s);
  }
  return Status::Ok();
}

Status ParseTolerations(const Value& v, const std::string& path, std::vector<Toleration>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxTolerations));
  for (size_t i = 0; i < v.items.size(); ++i) {
    MappingReader m(v.items[i], IndexPath(path, i));
    ARBITER_RETURN_IF_ERROR(m.Check({"key", "value"}));
    ARBITER_RETURN_IF_ERROR(m.Require("key"));
    Toleration t;
    ARBITER_RETURN_IF_ERROR(m.String("key", 253, &t.key));
    if (!IsValidLabelKey(t.key)) {
      return InvalidArgument(m.PathOf("key"),
                             fmt::format("{} is not a valid taint key", Quote(t.key)));
    }
    ARBITER_RETURN_IF_ERROR(m.String("value", 253, &t.value));
    if (!IsValidLabelValue(t.value)) {
      return InvalidArgument(m.PathOf("value"),
                             fmt::format("{} is not a valid taint value", Quote(t.value)));
    }
    out->push_back(std::move(t));
  }
  return Status::Ok();
}

// depends_on: [{"type": "afterok", "job": 12}, {"type": "singleton"}]
Status ParseDependencies(const Value& v, const std::string& path, std::vector<Dependency>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxDependencies));
  for (size_t i = 0; i < v.items.size(); ++i) {
    MappingReader m(v.items[i], IndexPath(path, i));
    ARBITER_RETURN_IF_ERROR(m.Check({"type", "job"}));
    ARBITER_RETURN_IF_ERROR(m.Require("type"));
    std::string type;
    ARBITER_RETURN_IF_ERROR(m.String("type", 63, &type));
    Dependency d;
    if (!ParseDependencyType(type, &d.type)) {
      return InvalidArgument(m.PathOf("type"),
                             fmt::format("unknown dependency type {}; use after, afterok, "
                                         "afterany, afternotok or singleton",
                                         Quote(type)));
    }
    if (d.type == DependencyType::kSingleton) {
      if (m.Get("job") != nullptr) {
        return InvalidArgument(m.PathOf("job"),
                               "singleton waits for the earlier jobs of the same user and name; "
                               "it names no job");
      }
    } else {
      ARBITER_RETURN_IF_ERROR(m.Require("job"));
      int64_t job = 0;
      ARBITER_RETURN_IF_ERROR(m.Int("job", 1, int64_t{1} << 53, &job));
      d.job = static_cast<uint64_t>(job);
    }
    if (std::find(out->begin(), out->end(), d) == out->end()) out->push_back(d);
  }
  return Status::Ok();
}

// nodes, exclude_nodes: node names, each once.
Status ParseNodeNames(const Value& v, const std::string& path, std::vector<std::string>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxJobNodes));
  for (size_t i = 0; i < v.items.size(); ++i) {
    const std::string ip = IndexPath(path, i);
    std::string name;
    ARBITER_RETURN_IF_ERROR(ReadString(v.items[i], ip, 253, &name));
    if (!IsValidHostName(name)) {
      return InvalidArgument(ip, fmt::format("{} is not a valid node name", Quote(name)));
    }
    if (std::find(out->begin(), out->end(), name) != out->end()) {
      return InvalidArgument(ip, fmt::format("duplicate node {}", Quote(name)));
    }
    out->push_back(std::move(name));
  }
  return Status::Ok();
}

// mail: {"user": "alice@example.com", "types": ["END", "FAIL"]}.
Status ParseMail(const Value& v, const std::string& path, std::optional<MailSpec>* out) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(m.Check({"user", "types"}));
  MailSpec mail;
  ARBITER_RETURN_IF_ERROR(m.Require("user"));
  ARBITER_RETURN_IF_ERROR(m.String("user", 254, &mail.user));
  for (char c : mail.user) {
    if (static_cast<unsigned char>(c) <= ' ') {
      return InvalidArgument(ChildPath(path, "user"),
                             "must not contain spaces or control characters");
    }
  }
  if (const Value* t = m.Get("types")) {
    const std::string tp = ChildPath(path, "types");
    ARBITER_RETURN_IF_ERROR(ExpectSequence(*t, tp, 16));
    for (size_t i = 0; i < t->items.size(); ++i) {
      std::string type;
      ARBITER_RETURN_IF_ERROR(ReadString(t->items[i], IndexPath(tp, i), 32, &type));
      mail.types.push_back(std::move(type));
    }
  }
  *out = std::move(mail);
  return Status::Ok();
}

// "array" of a submission: {"indices": "0-99:2,200", "max_running": 8}.
Status ParseArrayRequest(const Value& v, const std::string& path, ArrayRequest* out) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(m.Check({"indices", "max_running"}));
  ARBITER_RETURN_IF_ERROR(m.Require("indices"));
  ARBITER_RETURN_IF_ERROR(m.String("indices", 4096, &out->indices));
  auto expanded = ExpandArrayIndices(out->indices, m.PathOf("indices"));
  if (!expanded.ok()) return expanded.status();
  out->expanded = std::move(expanded).value();
  return m.Int32("max_running", 0, kMaxArrayRunning, &out->max_running);
}

// "array" of a stored element: {"id": 12, "index": 3, "max_running": 0, "size": 8}.
Status ParseArrayElement(const Value& v, const std::string& path, JobArrayElement* out) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(m.Check({"id", "index", "size", "max_running"}));
  for (std::string_view k : {"id", "index", "size"}) ARBITER_RETURN_IF_ERROR(m.Require(k));
  int64_t id = 0;
  ARBITER_RETURN_IF_ERROR(m.Int("id", 1, int64_t{1} << 53, &id));
  out->id = static_cast<uint64_t>(id);
  ARBITER_RETURN_IF_ERROR(m.Int("index", 0, kMaxArrayIndex, &out->index));
  ARBITER_RETURN_IF_ERROR(m.Int32("size", 1, static_cast<int32_t>(kMaxArrayElements), &out->size));
  return m.Int32("max_running", 0, kMaxArrayRunning, &out->max_running);
}

// What "array" may be in a body: refused (a batch's job), a request, or a stored element.
enum class ArrayForm { kRefused, kRequest, kElement };

Status ParseGpuModels(const Value& v, const std::string& path, std::vector<std::string>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxJobGpuModels));
  for (size_t i = 0; i < v.items.size(); ++i) {
    const std::string ip = IndexPath(path, i);
    std::string name;
    ARBITER_RETURN_IF_ERROR(ReadString(v.items[i], ip, 63, &name));
    if (!IsValidModelName(name)) {
      return InvalidArgument(ip, fmt::format("{} is not a valid GPU model name", Quote(name)));
    }
    for (const std::string& earlier : *out) {
      if (earlier == name) {
        return InvalidArgument(ip, fmt::format("duplicate GPU model {}", Quote(name)));
      }
    }
    out->push_back(std::move(name));
  }
  return Status::Ok();
}

// "mounts": [{"path": "/data/imagenet", "target": "/data", "mode": "ro"},
//            {"volume": "ckpt", "target": "/ckpt", "mode": "rw"}]: exactly one of path and volume;
// mode defaults to "ro" for a path and "rw" for a volume (the tenant's own storage), target to
// the path. ValidateJobSpec checks the paths and names.
Status ParseMounts(const Value& v, const std::string& path, std::vector<Mount>* out) {
  ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxJobMounts));
  for (size_t i = 0; i < v.items.size(); ++i) {
    MappingReader m(v.items[i], IndexPath(path, i));
    ARBITER_RETURN_IF_ERROR(m.Check({"path", "volume", "target", "mode"}));
    Mount mount;
    if (m.Get("path") != nullptr && m.Get("volume") != nullptr) {
      return ErrorAt(*m.Get("volume"), m.PathOf("volume"),
                     "give either path (a host path) or volume (a volume of the tenant), not both");
    }
    if (m.Get("volume") != nullptr) {
      ARBITER_RETURN_IF_ERROR(m.String("volume", kMaxVolumeNameBytes, &mount.volume));
      if (mount.volume.empty()) {
        return ErrorAt(*m.Get("volume"), m.PathOf("volume"), "must not be empty");
      }
    } else {
      ARBITER_RETURN_IF_ERROR(m.Require("path"));
      ARBITER_RETURN_IF_ERROR(m.String("path", kMaxMountPathBytes, &mount.path));
    }
    ARBITER_RETURN_IF_ERROR(m.String("target", kMaxMountPathBytes, &mount.target));
    std::string mode = mount.volume.empty() ? "ro" : "rw";
    ARBITER_RETURN_IF_ERROR(m.String("mode", 63, &mode));
    if (mode != "ro" && mode != "rw") {
      return ErrorAt(*m.Get("mode"), m.PathOf("mode"),
                     fmt::format("must be ro or rw, got {}", Quote(mode)));
    }
    mount.read_only = mode == "ro";
    out->push_back(std::move(mount));
  }
  return Status::Ok();
}

// Strings at the top level: names, paths, the image.
Status ParseStrings(const MappingReader& m, JobSpec* job) {
  // Absent or empty: the tenant's default_queue (the server resolves it, and aliases).
  ARBITER_RETURN_IF_ERROR(m.String("queue", 63, &job->queue));
  if (!job->queue.empty() && !IsValidQueueAlias(job->queue)) {
    return InvalidArgument("queue", fmt::format("{} is not a valid queue name: use letters, "
                                                "digits, '-', '_' and '.', starting with a letter "
                                                "or digit",
                                                Quote(job->queue)));
  }
  ARBITER_RETURN_IF_ERROR(m.String("name", kMaxNameBytes, &job->name));
  for (char c : job->name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return InvalidArgument("name", "must not contain control characters");
    }
  }
  ARBITER_RETURN_IF_ERROR(m.String("priority_class", 63, &job->priority_class));
  if (!job->priority_class.empty() && !IsValidName(job->priority_class)) {
    return InvalidArgument("priority_class", fmt::format("{} is not a valid priority class name",
                                                         Quote(job->priority_class)));
  }
  std::string type;
  ARBITER_RETURN_IF_ERROR(m.String("type", 63, &type));
  if (!type.empty() && !ParseJobType(type, &job->type)) {
    return InvalidArgument("type", fmt::format("unknown job type {}; use training, fine-tuning, "
                                               "evaluation, batch-inference, service or "
                                               "experiment",
                                               Quote(type)));
  }
  ARBITER_RETURN_IF_ERROR(m.String("workdir", kMaxPathBytes, &job->workdir));
  if (!job->workdir.empty() && job->workdir[0] != '/') {
    return InvalidArgument("workdir",
                           fmt::format("must be an absolute path, got {}", Quote(job->workdir)));
  }
  ARBITER_RETURN_IF_ERROR(m.String("container_image", kMaxImageBytes, &job->container_image));
  for (char c : job->container_image) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return InvalidArgument("container_image", "must not contain spaces or control characters");
    }
  }
  return Status::Ok();
}

Status ParseArrayMember(const MappingReader& m, ArrayForm form, JobSpec* job,
                        std::optional<ArrayRequest>* request) {
  const Value* v = m.Get("array");
  if (v == nullptr) return Status::Ok();
  if (form == ArrayForm::kElement) return ParseArrayElement(*v, "array", &job->array);
  if (form == ArrayForm::kRefused) {
    return InvalidArgument("array",
                           "a job array is submitted on its own, with POST /api/v1/jobs; a "
                           "batch's jobs cannot be arrays");
  }
  ArrayRequest a;
  ARBITER_RETURN_IF_ERROR(ParseArrayRequest(*v, "array", &a));
  *request = std::move(a);
  return Status::Ok();
}

// "service" of a stored job: {"name": "chat", "revision": 3, "port": 20001}. Only the server
// makes replicas: a submission that names one is refused.
Status ParseServiceMember(const MappingReader& m, ArrayForm form, JobSpec* job) {
  const Value* v = m.Get("service");
  if (v == nullptr) return Status::Ok();
  if (form != ArrayForm::kElement) {
    return InvalidArgument("service",
                           "a service's replicas are started by the server; create a service "
                           "with POST /api/v1/services instead");
  }
  MappingReader s(*v, "service");
  ARBITER_RETURN_IF_ERROR(s.Check({"name", "revision", "port"}));
  ServiceLink link;
  ARBITER_RETURN_IF_ERROR(s.Require("name"));
  ARBITER_RETURN_IF_ERROR(s.String("name", 63, &link.name));
  ARBITER_RETURN_IF_ERROR(s.Int("revision", 1, int64_t{1} << 40, &link.revision));
  ARBITER_RETURN_IF_ERROR(s.Int32("port", 1, 65535, &link.port));
  job->service = std::move(link);
  return Status::Ok();
}

Status ParseBody(const Value& root, ArrayForm form, JobSpec* job,
                 std::optional<ArrayRequest>* request) {
  MappingReader m(root, "");
  for (std::string_view k : {"tenant", "user", "id", "submit_time"}) {
    if (root.kind == Value::Kind::kMapping && root.Find(k) != nullptr) {
      return InvalidArgument(std::string(k),
                             "is not part of the submission: the server sets the tenant and user "
                             "from the token, the id and submit time itself");
    }
  }
  ARBITER_RETURN_IF_ERROR(m.Check({"name",
                                   "queue",
                                   "type",
                                   "priority_class",
                                   "command",
                                   "env",
                                   "workdir",
                                   "tasks",
                                   "distinct_nodes",
                                   "resources",
                                   "gpu_models",
                                   "node_selector",
                                   "walltime_seconds",
                                   "retry",
                                   "preemptible",
                                   "grace_period_seconds",
                                   "tolerations",
                                   "container_image",
                                   "mounts",
                                   "secret_env",
                                   "depends_on",
                                   "exclusive",
                                   "nodes",
                                   "exclude_nodes",
                                   "mail",
                                   "array",
                                   "service"}));
  ARBITER_RETURN_IF_ERROR(ParseStrings(m, job));
  ARBITER_RETURN_IF_ERROR(ParseServiceMember(m, form, job));
  ARBITER_RETURN_IF_ERROR(ParseArrayMember(m, form, job, request));
  ARBITER_RETURN_IF_ERROR(m.Require("command"));
  ARBITER_RETURN_IF_ERROR(ParseCommand(*m.Get("command"), "command", &job->command));
  if (const Value* v = m.Get("env")) ARBITER_RETURN_IF_ERROR(ParseEnv(*v, "env", &job->env));
  if (const Value* v = m.Get("secret_env")) {
    ARBITER_RETURN_IF_ERROR(ParseEnv(*v, "secret_env", &job->secret_env));
  }
  ARBITER_RETURN_IF_ERROR(m.Int32("tasks", 1, kMaxTasks, &job->tasks));
  ARBITER_RETURN_IF_ERROR(m.Bool("distinct_nodes", &job->distinct_nodes));
  ARBITER_RETURN_IF_ERROR(m.Bool("exclusive", &job->exclusive));
  if (const Value* v = m.Get("nodes")) {
    ARBITER_RETURN_IF_ERROR(ParseNodeNames(*v, "nodes", &job->nodes));
  }
  if (const Value* v = m.Get("exclude_nodes")) {
    ARBITER_RETURN_IF_ERROR(ParseNodeNames(*v, "exclude_nodes", &job->exclude_nodes));
  }
  if (const Value* v = m.Get("mail")) ARBITER_RETURN_IF_ERROR(ParseMail(*v, "mail", &job->mail));
  if (const Value* v = m.Get("mounts")) {
    ARBITER_RETURN_IF_ERROR(ParseMounts(*v, "mounts", &job->mounts));
  }
  if (const Value* v = m.Get("resources")) {
    ARBITER_RETURN_IF_ERROR(ParseResources(*v, "resources", &job->resources));
  }
  if (const Value* v = m.Get("gpu_models")) {
    ARBITER_RETURN_IF_ERROR(ParseGpuModels(*v, "gpu_models", &job->gpu_models));
  }
  if (const Value* v = m.Get("node_selector")) {
    ARBITER_RETURN_IF_ERROR(ParseSelector(*v, "node_selector", &job->node_selector));
  }
  if (const Value* v = m.Get("tolerations")) {
    ARBITER_RETURN_IF_ERROR(ParseTolerations(*v, "tolerations", &job->tolerations));
  }
  if (const Value* v = m.Get("depends_on")) {
    ARBITER_RETURN_IF_ERROR(ParseDependencies(*v, "depends_on", &job->depends_on));
  }
  ARBITER_RETURN_IF_ERROR(
      m.Int("walltime_seconds", 0, kMaxWalltimeSeconds, &job->walltime_seconds));
  if (const Value* v = m.Get("retry"))
    ARBITER_RETURN_IF_ERROR(ParseRetry(*v, "retry", &job->retry));
  if (m.Get("preemptible") != nullptr) {
    bool b = false;
    ARBITER_RETURN_IF_ERROR(m.Bool("preemptible", &b));
    job->preemptible = b;
  }
  if (m.Get("grace_period_seconds") != nullptr) {
    int64_t g = 0;
    ARBITER_RETURN_IF_ERROR(m.Int("grace_period_seconds", 0, 86400, &g));
    job->grace_period_seconds = g;
  }
  return Status::Ok();
}

}  // namespace

Status UnderField(const Status& st, const std::string& prefix) {
  if (st.ok() || prefix.empty()) return st;
  return Status(st.code(), st.message(),
                st.field().empty()     ? prefix
                : st.field()[0] == '[' ? prefix + st.field()
                                       : prefix + "." + st.field());
}

Status ParseJobTemplate(const Value& v, const std::string& path, JobSpec* job) {
  MappingReader m(v, path);
  ARBITER_RETURN_IF_ERROR(m.Check({"command", "env", "secret_env", "workdir", "resources",
                                   "gpu_models", "node_selector", "tolerations", "container_image",
                                   "mounts", "grace_period_seconds"}));
  ARBITER_RETURN_IF_ERROR(m.Require("command"));
  ARBITER_RETURN_IF_ERROR(ParseCommand(*m.Get("command"), m.PathOf("command"), &job->command));
  if (const Value* e = m.Get("env"))
    ARBITER_RETURN_IF_ERROR(ParseEnv(*e, m.PathOf("env"), &job->env));
  if (const Value* e = m.Get("secret_env")) {
    ARBITER_RETURN_IF_ERROR(ParseEnv(*e, m.PathOf("secret_env"), &job->secret_env));
  }
  ARBITER_RETURN_IF_ERROR(m.String("workdir", kMaxPathBytes, &job->workdir));
  if (!job->workdir.empty() && job->workdir[0] != '/') {
    return InvalidArgument(m.PathOf("workdir"),
                           fmt::format("must be an absolute path, got {}", Quote(job->workdir)));
  }
  ARBITER_RETURN_IF_ERROR(m.String("container_image", kMaxImageBytes, &job->container_image));
  for (char c : job->container_image) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return InvalidArgument(m.PathOf("container_image"),
                             "must not contain spaces or control characters");
    }
  }
  if (const Value* mo = m.Get("mounts")) {
    ARBITER_RETURN_IF_ERROR(ParseMounts(*mo, m.PathOf("mounts"), &job->mounts));
  }
  if (const Value* r = m.Get("resources")) {
    ARBITER_RETURN_IF_ERROR(ParseResources(*r, m.PathOf("resources"), &job->resources));
  }
  if (const Value* g = m.Get("gpu_models")) {
    ARBITER_RETURN_IF_ERROR(ParseGpuModels(*g, m.PathOf("gpu_models"), &job->gpu_models));
  }
  if (const Value* n = m.Get("node_selector")) {
    ARBITER_RETURN_IF_ERROR(ParseSelector(*n, m.PathOf("node_selector"), &job->node_selector));
  }
  if (const Value* t = m.Get("tolerations")) {
    ARBITER_RETURN_IF_ERROR(ParseTolerations(*t, m.PathOf("tolerations"), &job->tolerations));
  }
  if (m.Get("grace_period_seconds") != nullptr) {
    int64_t g = 0;
    ARBITER_RETURN_IF_ERROR(m.Int("grace_period_seconds", 0, 86400, &g));
    job->grace_period_seconds = g;
  }
  ARBITER_RETURN_IF_ERROR(UnderField(ValidateJobSpec(*job), path));
  return UnderField(CheckSubmittedEnv(*job), path);
}

namespace {

// A request body within the API's limits that is a JSON object.
Result<Value> ParseBodyObject(std::string_view json) {
  const TreeLimits limits{kMaxBodyBytes, kMaxNestingDepth, kMaxBodyValues};
  Result<Value> tree = ParseJsonTree(json, limits, "the request body");
  if (!tree.ok()) return tree.status();
  if (tree->kind != Value::Kind::kMapping) {
    return InvalidArgument(
        "", fmt::format("the request body must be a JSON object, got {}", Describe(*tree)));
  }
  return tree;
}

}  // namespace

Result<JobSpec> ParseJobSubmission(std::string_view json, std::optional<ArrayRequest>* array) {
  Result<Value> tree = ParseBodyObject(json);
  if (!tree.ok()) return tree.status();
  JobSpec job;
  std::optional<ArrayRequest> request;
  ARBITER_RETURN_IF_ERROR(ParseBody(
      *tree, array != nullptr ? ArrayForm::kRequest : ArrayForm::kRefused, &job, &request));
  ARBITER_RETURN_IF_ERROR(ValidateJobSpec(job));
  if (array != nullptr) *array = std::move(request);
  return job;
}

Result<JobSpec> ParseStoredJob(std::string_view json) {
  Result<Value> tree = ParseBodyObject(json);
  if (!tree.ok()) return tree.status();
  JobSpec job;
  std::optional<ArrayRequest> none;
  ARBITER_RETURN_IF_ERROR(ParseBody(*tree, ArrayForm::kElement, &job, &none));
  ARBITER_RETURN_IF_ERROR(ValidateJobSpec(job));
  return job;
}

nlohmann::json ArrayRequestToJson(const ArrayRequest& a) {
  nlohmann::json j = {{"indices", a.indices}};
  if (a.max_running > 0) j["max_running"] = a.max_running;
  return j;
}

Status ForBatchJob(const Status& st, size_t index) {
  if (st.ok()) return st;
  return Status(st.code(), st.message(),
                st.field().empty() ? fmt::format("jobs[{}]", index)
                                   : fmt::format("jobs[{}].{}", index, st.field()));
}

Result<std::vector<JobSpec>> ParseJobBatch(std::string_view json) {
  Result<Value> tree = ParseBodyObject(json);
  if (!tree.ok()) return tree.status();
  const Value* jobs = nullptr;
  for (const Member& m : tree->members) {
    if (m.key == "jobs") {
      jobs = &m.value;
    } else {
      return InvalidArgument(m.key, "unknown field; a batch is {\"jobs\": [job, ...]}");
    }
  }
  if (jobs == nullptr) return InvalidArgument("jobs", "is required: a list of jobs");
  if (jobs->kind != Value::Kind::kSequence) {
    return InvalidArgument("jobs", fmt::format("must be a list of jobs, got {}", Describe(*jobs)));
  }
  if (jobs->items.empty() || jobs->items.size() > kMaxBatchJobs) {
    return InvalidArgument(
        "jobs", fmt::format("must hold 1 to {} jobs, got {}", kMaxBatchJobs, jobs->items.size()));
  }
  std::vector<JobSpec> out(jobs->items.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const Value& v = jobs->items[i];
    std::optional<ArrayRequest> none;
    Status st = v.kind == Value::Kind::kMapping
                    ? ParseBody(v, ArrayForm::kRefused, &out[i], &none)
                    : InvalidArgument("", fmt::format("must be a job object, got {}", Describe(v)));
    if (st.ok()) st = ValidateJobSpec(out[i]);
    ARBITER_RETURN_IF_ERROR(ForBatchJob(st, i));
  }
  return out;
}

namespace {

// "array": {"id": A, "index": I, "max_running": M, "size": N}, keys in byte order.
void WriteArrayElement(JsonWriter& w, const JobArrayElement& a) {
  w.Key("array")
      .BeginObject()
      .Field("id", a.id)
      .Field("index", a.index)
      .Field("max_running", a.max_running)
      .Field("size", a.size)
      .EndObject();
}

}  // namespace

std::string ElementSpecText(std::string_view base, const JobArrayElement& element) {
  // An element's own "array" (a flat object of numbers) goes: the rest is the array's spec.
  constexpr std::string_view kOwn = "{\"array\":{";
  if (base.substr(0, kOwn.size()) == kOwn) base = base.substr(base.find('}') + 1);
  std::string out;
  out.reserve(base.size() + 80);
  JsonWriter w(&out);
  w.BeginObject();
  WriteArrayElement(w, element);
  // `base` is an object with at least "command": its members follow.
  out += ',';
  out.append(base.substr(1));
  return out;
}

// Keys in byte order, as nlohmann::json (a std::map per object) writes them.
std::string JobSpecJsonText(const JobSpec& job, bool env_values) {
  std::string out;
  out.reserve(384);
  JsonWriter w(&out);
  w.BeginObject();
  if (job.array.id != 0) WriteArrayElement(w, job.array);
  w.Field("command", job.command);
  if (!job.container_image.empty()) w.Field("container_image", job.container_image);
  if (!job.depends_on.empty()) {
    w.Key("depends_on").BeginArray();
    for (const Dependency& d : job.depends_on) {
      w.BeginObject();
      if (d.type != DependencyType::kSingleton) w.Field("job", d.job);
      w.Field("type", DependencyTypeName(d.type)).EndObject();
    }
    w.EndArray();
  }
  w.Field("distinct_nodes", job.distinct_nodes);
  w.Key("env").BeginObject();
  for (const auto& [k, v] : job.env) {
    if (env_values) {
      w.Field(k, v);
    } else {
      w.Key(k).Null();
    }
  }
  w.EndObject();
  if (!job.exclude_nodes.empty()) w.Field("exclude_nodes", job.exclude_nodes);
  if (job.exclusive) w.Field("exclusive", true);
  w.Field("gpu_models", job.gpu_models);
  if (job.grace_period_seconds) w.Field("grace_period_seconds", *job.grace_period_seconds);
  if (job.mail) {
    w.Key("mail").BeginObject().Field("types", job.mail->types).Field("user", job.mail->user);
    w.EndObject();
  }
  if (!job.mounts.empty()) {
    w.Key("mounts").BeginArray();
    for (const Mount& m : job.mounts) {
      w.BeginObject().Field("mode", MountModeName(m.read_only));
      if (!m.path.empty()) w.Field("path", m.path);
      if (!m.target.empty()) w.Field("target", m.target);
      if (!m.volume.empty()) w.Field("volume", m.volume);
      w.EndObject();
    }
    w.EndArray();
  }
  if (!job.name.empty()) w.Field("name", job.name);
  w.Key("node_selector").BeginObject();
  for (const auto& [k, v] : job.node_selector) w.Field(k, v);
  w.EndObject();
  if (!job.nodes.empty()) w.Field("nodes", job.nodes);
  if (job.preemptible) w.Field("preemptible", *job.preemptible);
  if (!job.priority_class.empty()) w.Field("priority_class", job.priority_class);
  if (!job.queue.empty()) w.Field("queue", job.queue);  // empty: the tenant's default_queue
  w.Key("resources")
      .BeginObject()
      .Field("cpu_milli", job.resources.cpu_milli)
      .Field("gpu_memory_mib", job.resources.gpu_memory_mib)
      .Field("gpu_milli", job.resources.gpu_milli)
      .Field("gpus", job.resources.gpus)
      .Field("memory_mib", job.resources.memory_mib)
      .EndObject();
  w.Key("retry")
      .BeginObject()
      .Field("backoff_cap_seconds", job.retry.backoff_cap_seconds)
      .Field("backoff_seconds", job.retry.backoff_seconds)
      .Field("max_retries", job.retry.max_retries)
      .Field("on_exit_codes", job.retry.on_exit_codes)
      .EndObject();
  if (job.service) {
    w.Key("service")
        .BeginObject()
        .Field("name", job.service->name)
        .Field("port", job.service->port)
        .Field("revision", job.service->revision)
        .EndObject();
  }
  w.Field("tasks", job.tasks);
  w.Key("tolerations").BeginArray();
  for (const Toleration& t : job.tolerations) {
    w.BeginObject().Field("key", t.key).Field("value", t.value).EndObject();
  }
  w.EndArray();
  w.Field("type", JobTypeName(job.type));
  w.Field("walltime_seconds", job.walltime_seconds);
  if (!job.workdir.empty()) w.Field("workdir", job.workdir);
  w.EndObject();
  return out;
}

nlohmann::json JobSpecToJson(const JobSpec& job) {
  nlohmann::json j = nlohmann::json::parse(JobSpecJsonText(job));
  if (!job.secret_env.empty()) j["secret_env"] = job.secret_env;
  return j;
}

std::string SecretEnvJsonText(const JobSpec& job) {
  if (job.secret_env.empty()) return "";
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  for (const auto& [k, v] : job.secret_env) w.Field(k, v);
  w.EndObject();
  return out;
}

Status ParseSecretEnv(std::string_view text, JobSpec* job) {
  job->secret_env.clear();
  if (text.empty()) return Status::Ok();
  const TreeLimits limits{kMaxBodyBytes, kMaxNestingDepth, kMaxBodyValues};
  Result<Value> tree = ParseJsonTree(text, limits, "secret_env");
  if (!tree.ok()) return tree.status();
  return ParseEnv(*tree, "secret_env", &job->secret_env);
}

}  // namespace arbiter::api

// TranslateK8sManifest: walks the manifest's tree, noting every path it reads; what is left over
// is `ignored`.
#include "api/k8s_manifest.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "api/job_codec.h"
#include "api/parse_tree.h"
#include "api/value.h"

namespace arbiter::api {

using nlohmann::json;

namespace {

constexpr int64_t kMaxTasks = 100000;  // as a submission's `tasks`

// A decimal number and an optional suffix: the suffix's multiplier; false when not a quantity.
bool ParseQuantity(std::string_view text, long double* out) {
  static const std::map<std::string_view, long double> kSuffixes = {{"", 1.0L},
                                                                    {"m", 1e-3L},
                                                                    {"k", 1e3L},
                                                                    {"M", 1e6L},
                                                                    {"G", 1e9L},
                                                                    {"T", 1e12L},
                                                                    {"P", 1e15L},
                                                                    {"E", 1e18L},
                                                                    {"Ki", 1024.0L},
                                                                    {"Mi", 1048576.0L},
                                                                    {"Gi", 1073741824.0L},
                                                                    {"Ti", 1099511627776.0L},
                                                                    {"Pi", 1125899906842624.0L},
                                                                    {"Ei", 1152921504606846976.0L}};
  if (text.empty() || text.size() > 64) return false;
  size_t i = 0;
  if (text[i] == '+') ++i;
  const size_t digits_start = i;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == digits_start) return false;
  std::string number(text.substr(0, i));
  // An exponent ("129e6"): "e" followed by digits; a lone "E" is exa.
  if (i + 1 < text.size() && (text[i] == 'e' || text[i] == 'E') &&
      (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '-' ||
       text[i + 1] == '+')) {
    size_t j = i + 1;
    if (text[j] == '-' || text[j] == '+') ++j;
    const size_t exp_start = j;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j == exp_start || j != text.size()) return false;
    number = std::string(text);
    i = j;
  }
  const auto suffix = kSuffixes.find(text.substr(i));
  if (suffix == kSuffixes.end()) return false;
  char* end = nullptr;
  const long double v = std::strtold(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(v) || v < 0) return false;
  *out = v * suffix->second;
  return *out < 1e18L;
}

class Translator {
 public:
  explicit Translator(const Value& root) : root_(root) {}

  Result<K8sTranslation> Run() {
    K8sTranslation out;
    std::string api_version;
    std::string kind;
    ARBITER_RETURN_IF_ERROR(Str(root_, "", "apiVersion", true, &api_version));
    ARBITER_RETURN_IF_ERROR(Str(root_, "", "kind", true, &kind));
    json body = json::object();
    const Value* metadata = Find(root_, "", "metadata");
    std::string name;
    if (metadata != nullptr) {
      ARBITER_RETURN_IF_ERROR(Str(*metadata, "metadata", "name", false, &name));
      if (!name.empty()) body["name"] = name;
      for (const char* where : {"labels", "annotations"}) {
        const std::string wp = ChildPath("metadata", where);
        const Value* m = metadata->Find(where);
        if (m == nullptr || m->kind != Value::Kind::kMapping) continue;
        std::string queue;
        ARBITER_RETURN_IF_ERROR(Str(*m, wp, std::string(kKueueQueueLabel), false, &queue));
        if (!queue.empty()) body["queue"] = queue;
      }
    }
    const Value* spec = Find(root_, "", "spec");
    if (spec == nullptr) return InvalidArgument("spec", "is required");
    if (api_version == "batch/v1" && kind == "Job") {
      ARBITER_RETURN_IF_ERROR(Job(*spec, &body));
    } else if (api_version == "kubeflow.org/v1" && kind == "PyTorchJob") {
      ARBITER_RETURN_IF_ERROR(PyTorchJob(*spec, &body));
    } else if (api_version == "apps/v1" && kind == "Deployment") {
      ARBITER_RETURN_IF_ERROR(Deployment(*spec, &body));
      out.is_service = true;
    } else {
      return InvalidArgument("kind", fmt::format("{} {} is not one Arbiter takes: batch/v1 Job, "
                                                 "kubeflow.org/v1 PyTorchJob or apps/v1 "
                                                 "Deployment",
                                                 api_version, kind));
    }
    out.source = fmt::format("{} {}{}", api_version, kind, name.empty() ? "" : " " + name);
    out.body = std::move(body);
    Unused(root_, "", &out.ignored);
    return out;
  }

 private:
  // A pod volume Arbiter reads: a hostPath (`path`), or a persistentVolumeClaim, which is the
  // tenant's volume of the claim's name (`volume`).
  struct PodVolume {
    std::string path;
    std::string volume;
    bool read_only = false;  // the claim's readOnly
  };

  // ---- Reading, and noting what was read ----

  void Use(const std::string& path) { used_.insert(path); }

  const Value* Find(const Value& v, const std::string& path, const std::string& key) {
    if (v.kind != Value::Kind::kMapping) return nullptr;
    const Value* m = v.Find(key);
    if (m == nullptr || m->is_null()) return nullptr;
    Use(ChildPath(path, key));
    return m;
  }

  Status Str(const Value& v, const std::string& path, const std::string& key, bool required,
             std::string* out) {
    const Value* m = Find(v, path, key);
    const std::string p = ChildPath(path, key);
    if (m == nullptr) return required ? InvalidArgument(p, "is required") : Status::Ok();
    return ReadString(*m, p, 64 * 1024, out);
  }

  Status Int(const Value& v, const std::string& path, const std::string& key, int64_t lo,
             int64_t hi, std::optional<int64_t>* out) {
    const Value* m = Find(v, path, key);
    if (m == nullptr) return Status::Ok();
    int64_t x = 0;
    ARBITER_RETURN_IF_ERROR(ReadInt(*m, ChildPath(path, key), lo, hi, &x));
    *out = x;
    return Status::Ok();
  }

  Status StringList(const Value& v, const std::string& path, std::vector<std::string>* out) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxCommandArgs));
    UseWhole(path);
    for (size_t i = 0; i < v.items.size(); ++i) {
      std::string s;
      ARBITER_RETURN_IF_ERROR(ReadString(v.items[i], IndexPath(path, i), kMaxArgBytes, &s));
      out->push_back(std::move(s));
    }
    return Status::Ok();
  }

  // The top-most paths under `v` that nothing read.
  void Unused(const Value& v, const std::string& path, std::vector<std::string>* out) const {
    if (!path.empty() && used_.count(path) != 0) {
      // Read as a whole (a scalar, or a mapping taken whole like nodeSelector), unless only
      // some of its members were read.
      if (v.kind != Value::Kind::kMapping && v.kind != Value::Kind::kSequence) return;
      if (whole_.count(path) != 0) return;
    }
    if (!path.empty() && !Covers(path)) {
      out->push_back(path);
      return;
    }
    if (v.kind == Value::Kind::kMapping) {
      for (const Member& m : v.members) Unused(m.value, ChildPath(path, m.key), out);
    } else if (v.kind == Value::Kind::kSequence) {
      for (size_t i = 0; i < v.items.size(); ++i) Unused(v.items[i], IndexPath(path, i), out);
    }
  }

  // Whether `path` or something under it was read.
  bool Covers(const std::string& path) const {
    auto it = used_.lower_bound(path);
    for (; it != used_.end() && it->compare(0, path.size(), path) == 0; ++it) {
      if (it->size() == path.size()) return true;
      const char next = (*it)[path.size()];
      if (next == '.' || next == '[') return true;
    }
    return false;
  }

  // A value read whole: nothing under it is reported.
  void UseWhole(const std::string& path) {
    Use(path);
    whole_.insert(path);
  }

  // ---- The kinds ----

  // batch/v1 Job: spec.parallelism, completions, backoffLimit, activeDeadlineSeconds, template.
  Status Job(const Value& spec, json* body) {
    std::optional<int64_t> parallelism;
    ARBITER_RETURN_IF_ERROR(Int(spec, "spec", "parallelism", 1, kMaxTasks, &parallelism));
    // Completions equal to the parallelism (or 1 task) say nothing beyond it; other values
    // (work queues, indexed completions) have no meaning here and stay listed.
    if (const Value* c = spec.Find("completions"); c != nullptr && c->is_scalar()) {
      int64_t n = 0;
      if (ReadInt(*c, "spec.completions", 0, int64_t{1} << 31, &n).ok() &&
          n == parallelism.value_or(1)) {
        Use("spec.completions");
      }
    }
    if (parallelism) (*body)["tasks"] = *parallelism;
    ARBITER_RETURN_IF_ERROR(RunLimits(spec, "spec", body));
    const Value* tmpl = Find(spec, "spec", "template");
    if (tmpl == nullptr) return InvalidArgument("spec.template", "is required");
    return PodTemplate(*tmpl, "spec.template", false, body);
  }

  // backoffLimit -> retry.max_retries, activeDeadlineSeconds -> walltime_seconds.
  Status RunLimits(const Value& v, const std::string& path, json* body) {
    std::optional<int64_t> backoff;
    std::optional<int64_t> deadline;
    ARBITER_RETURN_IF_ERROR(Int(v, path, "backoffLimit", 0, 1000, &backoff));
    ARBITER_RETURN_IF_ERROR(
        Int(v, path, "activeDeadlineSeconds", 1, kMaxWalltimeSeconds, &deadline));
    if (backoff) (*body)["retry"] = {{"max_retries", *backoff}};
    if (deadline) (*body)["walltime_seconds"] = *deadline;
    return Status::Ok();
  }

  // kubeflow.org/v1 PyTorchJob: Master (at most 1) and Worker replicas, one gang; the Master's
  // task is task 0 (Arbiter's MASTER_ADDR).
  Status PyTorchJob(const Value& spec, json* body) {
    const Value* replicas = Find(spec, "spec", "pytorchReplicaSpecs");
    const std::string rp = "spec.pytorchReplicaSpecs";
    if (replicas == nullptr || replicas->kind != Value::Kind::kMapping) {
      return InvalidArgument(rp, "is required: Master and Worker replica specs");
    }
    int64_t tasks = 0;
    std::optional<json> first;
    std::string first_name;
    for (const Member& m : replicas->members) {
      const std::string mp = ChildPath(rp, m.key);
      if (m.key != "Master" && m.key != "Worker") {
        return InvalidArgument(mp, fmt::format("replica type {} has no meaning here: Master and "
                                               "Worker only",
                                               Quote(m.key)));
      }
      Use(mp);
      std::optional<int64_t> n;
      ARBITER_RETURN_IF_ERROR(Int(m.value, mp, "replicas", 0, kMaxTasks, &n));
      if (m.key == "Master" && n.value_or(1) > 1) {
        return InvalidArgument(ChildPath(mp, "replicas"), "a PyTorchJob has at most one Master");
      }
      tasks += n.value_or(1);
      Find(m.value, mp, "restartPolicy");  // retries are the job's (runPolicy.backoffLimit)
      const Value* tmpl = Find(m.value, mp, "template");
      if (tmpl == nullptr) return InvalidArgument(ChildPath(mp, "template"), "is required");
      json task = json::object();
      ARBITER_RETURN_IF_ERROR(PodTemplate(*tmpl, ChildPath(mp, "template"), false, &task));
      if (!first) {
        first = std::move(task);
        first_name = m.key;
      } else if (task != *first) {
        return InvalidArgument(ChildPath(mp, "template"),
                               fmt::format("differs from {}'s: the tasks of one job run one "
                                           "template (image, command, resources, mounts)",
                                           first_name));
      }
    }
    if (!first) return InvalidArgument(rp, "is required: Master and Worker replica specs");
    if (tasks < 1) return InvalidArgument(rp, "has no replicas");
    for (auto& [k, v] : first->items()) (*body)[k] = v;
    (*body)["tasks"] = tasks;
    (*body)["type"] = "training";
    if (const Value* run = Find(spec, "spec", "runPolicy")) {
      ARBITER_RETURN_IF_ERROR(RunLimits(*run, "spec.runPolicy", body));
    }
    return Status::Ok();
  }

  // apps/v1 Deployment: a service of spec.replicas replicas of the pod template.
  Status Deployment(const Value& spec, json* body) {
    std::optional<int64_t> replicas;
    ARBITER_RETURN_IF_ERROR(Int(spec, "spec", "replicas", 0, 1000, &replicas));
    const Value* tmpl = Find(spec, "spec", "template");
    if (tmpl == nullptr) return InvalidArgument("spec.template", "is required");
    json pod = json::object();
    ARBITER_RETURN_IF_ERROR(PodTemplate(*tmpl, "spec.template", true, &pod));
    // The service's own fields; the rest is its template.
    for (const char* k : {"port", "readiness", "liveness", "priority_class"}) {
      if (pod.contains(k)) {
        (*body)[k] = pod[k];
        pod.erase(k);
      }
    }
    if (!body->contains("name")) return InvalidArgument("metadata.name", "is required");
    (*body)["replicas"] = replicas.value_or(1);
    (*body)["template"] = std::move(pod);
    if (const Value* strategy = Find(spec, "spec", "strategy")) {
      const Value* ru = Find(*strategy, "spec.strategy", "rollingUpdate");
      if (ru != nullptr) {
        const std::string rup = "spec.strategy.rollingUpdate";
        json rollout = json::object();
        for (const auto& [k8s, ours] :
             {std::pair<const char*, const char*>{"maxSurge", "max_surge"},
              {"maxUnavailable", "max_unavailable"}}) {
          const Value* v = ru->Find(k8s);
          int64_t n = 0;
          // Percentages have no meaning here: they stay listed.
          if (v != nullptr && v->kind != Value::Kind::kString &&
              ReadInt(*v, ChildPath(rup, k8s), 0, 1000, &n).ok()) {
            Use(ChildPath(rup, k8s));
            rollout[ours] = n;
          }
        }
        if (!rollout.empty()) (*body)["rollout"] = std::move(rollout);
      }
      if (const Value* t = strategy->Find("type");
          t != nullptr && t->is_scalar() && t->text == "RollingUpdate") {
        Use("spec.strategy.type");
      }
    }
    return Status::Ok();
  }

  // ---- The pod template ----

  Status PodTemplate(const Value& tmpl, const std::string& path, bool service, json* out) {
    const std::string sp = ChildPath(path, "spec");
    const Value* spec = Find(tmpl, path, "spec");
    if (spec == nullptr) return InvalidArgument(sp, "is required");
    const Value* containers = Find(*spec, sp, "containers");
    const std::string cp = ChildPath(sp, "containers");
    if (containers == nullptr || containers->kind != Value::Kind::kSequence ||
        containers->items.empty()) {
      return InvalidArgument(cp, "is required: one container");
    }
    if (containers->items.size() > 1) {
      return InvalidArgument(cp, fmt::format("has {} containers: a task runs one (sidecars have "
                                             "no meaning here)",
                                             containers->items.size()));
    }
    std::string s;
    ARBITER_RETURN_IF_ERROR(Str(*spec, sp, "priorityClassName", false, &s));
    if (!s.empty()) (*out)["priority_class"] = s;
    // restartPolicy: a failed task's retries are the job's (backoffLimit).
    Find(*spec, sp, "restartPolicy");
    if (const Value* ns = Find(*spec, sp, "nodeSelector")) {
      json sel = json::object();
      ARBITER_RETURN_IF_ERROR(ExpectMapping(*ns, ChildPath(sp, "nodeSelector"), 64));
      for (const Member& m : ns->members) {
        std::string v;
        ARBITER_RETURN_IF_ERROR(
            ReadString(m.value, ChildPath(ChildPath(sp, "nodeSelector"), m.key), 253, &v));
        sel[m.key] = v;
      }
      UseWhole(ChildPath(sp, "nodeSelector"));
      (*out)["node_selector"] = std::move(sel);
    }
    if (const Value* tol = Find(*spec, sp, "tolerations")) {
      ARBITER_RETURN_IF_ERROR(Tolerations(*tol, ChildPath(sp, "tolerations"), out));
    }
    std::optional<int64_t> grace;
    ARBITER_RETURN_IF_ERROR(Int(*spec, sp, "terminationGracePeriodSeconds", 0, 86400, &grace));
    if (grace) (*out)["grace_period_seconds"] = *grace;
    // hostPath and persistentVolumeClaim volumes by name; the others have no meaning here.
    std::map<std::string, PodVolume> volumes;
    if (const Value* vols = Find(*spec, sp, "volumes")) {
      const std::string vp = ChildPath(sp, "volumes");
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*vols, vp, 256));
      for (size_t i = 0; i < vols->items.size(); ++i) {
        const Value& v = vols->items[i];
        const std::string ip = IndexPath(vp, i);
        const Value* hp = v.kind == Value::Kind::kMapping ? v.Find("hostPath") : nullptr;
        const Value* pvc =
            v.kind == Value::Kind::kMapping ? v.Find("persistentVolumeClaim") : nullptr;
        if (hp == nullptr && pvc == nullptr) continue;
        std::string name;
        PodVolume source;
        ARBITER_RETURN_IF_ERROR(Str(v, ip, "name", true, &name));
        if (hp != nullptr) {
          ARBITER_RETURN_IF_ERROR(Str(*hp, ChildPath(ip, "hostPath"), "path", true, &source.path));
          UseWhole(ChildPath(ip, "hostPath"));  // its `type` (DirectoryOrCreate...) included
        } else {
          // A claim is storage of the workload's own that outlives it: the tenant's volume of
          // the claim's name.
          const std::string cp_ = ChildPath(ip, "persistentVolumeClaim");
          ARBITER_RETURN_IF_ERROR(Str(*pvc, cp_, "claimName", true, &source.volume));
          if (const Value* ro = Find(*pvc, cp_, "readOnly")) {
            ARBITER_RETURN_IF_ERROR(ReadBool(*ro, ChildPath(cp_, "readOnly"), &source.read_only));
          }
        }
        volumes[name] = std::move(source);
      }
    }
    return Container(containers->items[0], IndexPath(cp, 0), service, volumes, out);
  }

  Status Tolerations(const Value& v, const std::string& path, json* out) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxTolerations));
    json list = json::array();
    for (size_t i = 0; i < v.items.size(); ++i) {
      const std::string ip = IndexPath(path, i);
      std::string key;
      std::string value;
      std::string op;
      ARBITER_RETURN_IF_ERROR(Str(v.items[i], ip, "key", false, &key));
      ARBITER_RETURN_IF_ERROR(Str(v.items[i], ip, "operator", false, &op));
      ARBITER_RETURN_IF_ERROR(Str(v.items[i], ip, "value", false, &value));
      // The effect (NoSchedule, NoExecute) is what a taint does here anyway: keeps jobs off.
      Find(v.items[i], ip, "effect");
      if (key.empty()) {
        return InvalidArgument(ChildPath(ip, "key"),
                               "is required: a toleration of every taint has no meaning here");
      }
      list.push_back({{"key", key}, {"value", op == "Exists" ? "" : value}});
    }
    (*out)["tolerations"] = std::move(list);
    return Status::Ok();
  }

  Status Container(const Value& c, const std::string& path, bool service,
                   const std::map<std::string, PodVolume>& volumes, json* out) {
    std::string s;
    ARBITER_RETURN_IF_ERROR(Str(c, path, "name", false, &s));  // the container's own name
    ARBITER_RETURN_IF_ERROR(Str(c, path, "image", true, &s));
    (*out)["container_image"] = s;
    std::vector<std::string> command;
    const Value* cmd = Find(c, path, "command");
    const Value* args = Find(c, path, "args");
    if (cmd == nullptr) {
      return InvalidArgument(ChildPath(path, "command"),
                             args == nullptr
                                 ? "is required: the image's ENTRYPOINT is not known when the "
                                   "job is submitted; name what runs"
                                 : "is required with args: the image's ENTRYPOINT is not known "
                                   "when the job is submitted; put it in command");
    }
    ARBITER_RETURN_IF_ERROR(StringList(*cmd, ChildPath(path, "command"), &command));
    if (args != nullptr)
      ARBITER_RETURN_IF_ERROR(StringList(*args, ChildPath(path, "args"), &command));
    (*out)["command"] = command;
    std::string workdir;
    ARBITER_RETURN_IF_ERROR(Str(c, path, "workingDir", false, &workdir));
    if (!workdir.empty()) (*out)["workdir"] = workdir;
    if (const Value* env = Find(c, path, "env")) {
      ARBITER_RETURN_IF_ERROR(Env(*env, ChildPath(path, "env"), out));
    }
    if (const Value* res = Find(c, path, "resources")) {
      ARBITER_RETURN_IF_ERROR(Resources(*res, ChildPath(path, "resources"), out));
    }
    if (const Value* vm = Find(c, path, "volumeMounts")) {
      ARBITER_RETURN_IF_ERROR(Mounts(*vm, ChildPath(path, "volumeMounts"), volumes, out));
    }
    if (service) {
      if (const Value* ports = c.Find("ports");
          ports != nullptr && ports->kind == Value::Kind::kSequence && !ports->items.empty()) {
        const std::string pp = IndexPath(ChildPath(path, "ports"), 0);
        std::optional<int64_t> port;
        ARBITER_RETURN_IF_ERROR(Int(ports->items[0], pp, "containerPort", 1, 65535, &port));
        if (port) (*out)["port"] = *port;
        Use(ChildPath(path, "ports"));
      }
      for (const auto& [k8s, ours] :
           {std::pair<const char*, const char*>{"readinessProbe", "readiness"},
            {"livenessProbe", "liveness"}}) {
        if (const Value* p = c.Find(k8s); p != nullptr && p->kind == Value::Kind::kMapping) {
          ARBITER_RETURN_IF_ERROR(Probe(*p, ChildPath(path, k8s), ours, out));
        }
      }
    }
    return Status::Ok();
  }

  Status Env(const Value& v, const std::string& path, json* out) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxEnvVars));
    json env = json::object();
    for (size_t i = 0; i < v.items.size(); ++i) {
      const std::string ip = IndexPath(path, i);
      // A value from a Secret or ConfigMap (valueFrom) has no meaning here: it stays listed.
      if (v.items[i].kind == Value::Kind::kMapping && v.items[i].Find("value") == nullptr) {
        continue;
      }
      std::string name;
      std::string value;
      ARBITER_RETURN_IF_ERROR(Str(v.items[i], ip, "name", true, &name));
      ARBITER_RETURN_IF_ERROR(Str(v.items[i], ip, "value", false, &value));
      env[name] = value;
    }
    if (!env.empty()) (*out)["env"] = std::move(env);
    return Status::Ok();
  }

  // limits, else requests (a pod's requests default to its limits): the task's reservation and
  // its ceiling here are one amount.
  Status Resources(const Value& v, const std::string& path, json* out) {
    json r = json::object();
    for (const char* which : {"requests", "limits"}) {
      const std::string wp = ChildPath(path, which);
      const Value* m = v.Find(which);
      if (m == nullptr || m->kind != Value::Kind::kMapping) continue;
      for (const Member& mem : m->members) {
        const std::string kp = ChildPath(wp, mem.key);
        std::string text;
        if (!mem.value.is_scalar()) continue;
        text = mem.value.text;
        int64_t amount = 0;
        if (mem.key == "nvidia.com/gpu") {
          if (!ParseK8sMilli(text, &amount) || amount % 1000 != 0) {
            return InvalidArgument(kp, fmt::format("{} is not a whole number of GPUs", text));
          }
          r["gpus"] = amount / 1000;
        } else if (mem.key == "cpu") {
          if (!ParseK8sMilli(text, &amount)) {
            return InvalidArgument(kp, fmt::format("{} is not a CPU quantity", Quote(text)));
          }
          r["cpu_milli"] = amount;
        } else if (mem.key == "memory") {
          if (!ParseK8sMib(text, &amount)) {
            return InvalidArgument(kp, fmt::format("{} is not a memory quantity", Quote(text)));
          }
          r["memory_mib"] = amount;
        } else {
          continue;  // other resources (ephemeral-storage, amd.com/gpu) stay listed
        }
        Use(kp);
      }
    }
    if (!r.empty()) (*out)["resources"] = std::move(r);
    return Status::Ok();
  }

  Status Mounts(const Value& v, const std::string& path,
                const std::map<std::string, PodVolume>& volumes, json* out) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, 256));
    json mounts = json::array();
    for (size_t i = 0; i < v.items.size(); ++i) {
      const Value& m = v.items[i];
      const std::string ip = IndexPath(path, i);
      const Value* name = m.kind == Value::Kind::kMapping ? m.Find("name") : nullptr;
      if (name == nullptr || !name->is_scalar()) continue;
      const auto source = volumes.find(name->text);
      if (source == volumes.end()) continue;  // not a hostPath or claim volume: stays listed
      std::string target;
      ARBITER_RETURN_IF_ERROR(Str(m, ip, "mountPath", true, &target));
      Use(ChildPath(ip, "name"));
      bool read_only = source->second.read_only;
      if (const Value* ro = Find(m, ip, "readOnly")) {
        bool mount_ro = false;
        ARBITER_RETURN_IF_ERROR(ReadBool(*ro, ChildPath(ip, "readOnly"), &mount_ro));
        read_only = read_only || mount_ro;
      }
      json mj = {{"mode", read_only ? "ro" : "rw"}};
      if (!source->second.volume.empty()) {
        mj["volume"] = source->second.volume;
        mj["target"] = target;
      } else {
        mj["path"] = source->second.path;
        if (target != source->second.path) mj["target"] = target;
      }
      mounts.push_back(std::move(mj));
    }
    if (!mounts.empty()) (*out)["mounts"] = std::move(mounts);
    return Status::Ok();
  }

  // httpGet probes: path, periodSeconds, timeoutSeconds, failureThreshold, successThreshold,
  // initialDelaySeconds. The port is the service's.
  Status Probe(const Value& p, const std::string& path, const char* ours, json* out) {
    const Value* http = p.Find("httpGet");
    if (http == nullptr || http->kind != Value::Kind::kMapping) return Status::Ok();
    Use(path);
    Use(ChildPath(path, "httpGet"));
    json probe = json::object();
    std::string probe_path;
    ARBITER_RETURN_IF_ERROR(Str(*http, ChildPath(path, "httpGet"), "path", false, &probe_path));
    probe["path"] = probe_path.empty() ? "/" : probe_path;
    Find(*http, ChildPath(path, "httpGet"), "port");
    for (const auto& [k8s, key] :
         {std::pair<const char*, const char*>{"periodSeconds", "period_seconds"},
          {"timeoutSeconds", "timeout_seconds"},
          {"failureThreshold", "failure_threshold"},
          {"successThreshold", "success_threshold"},
          {"initialDelaySeconds", "initial_delay_seconds"}}) {
      std::optional<int64_t> n;
      ARBITER_RETURN_IF_ERROR(Int(p, path, k8s, 0, 86400, &n));
      if (n) probe[key] = *n;
    }
    (*out)[ours] = std::move(probe);
    return Status::Ok();
  }

  const Value& root_;
  std::set<std::string> used_;
  std::set<std::string> whole_;
};

}  // namespace

std::string K8sTranslation::Warning() const {
  if (ignored.empty()) return "";
  return fmt::format("{}: ignored (no meaning in Arbiter): {}", source, fmt::join(ignored, ", "));
}

bool IsK8sManifest(const json& doc) {
  return doc.is_object() && doc.contains("apiVersion") && doc.contains("kind");
}

Result<K8sTranslation> TranslateK8sManifest(std::string_view yaml) {
  const TreeLimits limits{kMaxBodyBytes, kMaxNestingDepth, kMaxBodyValues};
  Result<Value> tree = ParseYamlTree(yaml, limits, "the manifest");
  if (!tree.ok()) return tree.status();
  if (tree->kind != Value::Kind::kMapping) {
    return InvalidArgument("", fmt::format("a manifest is a mapping, got {}", Describe(*tree)));
  }
  Translator t(*tree);
  return t.Run();
}

bool ParseK8sMilli(std::string_view text, int64_t* out) {
  long double v = 0;
  if (!ParseQuantity(text, &v)) return false;
  *out = static_cast<int64_t>(std::ceil(v * 1000.0L - 1e-9L));
  return true;
}

bool ParseK8sMib(std::string_view text, int64_t* out) {
  long double v = 0;
  if (!ParseQuantity(text, &v)) return false;
  *out = static_cast<int64_t>(std::ceil(v / 1048576.0L - 1e-12L));
  return true;
}

}  // namespace arbiter::api

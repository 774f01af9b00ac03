// ParseConfigYaml: the YAML tree (parse_tree.h) read into a ClusterConfig, section by section.
#include "api/config_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <set>

#include "api/parse_tree.h"
#include "api/value.h"
#include "model/job.h"

namespace arbiter::api {

namespace {

constexpr int64_t kMaxQuotaMilli = int64_t{1000} * 1000 * 1000 * 1000 * 1000;  // 10^12 units
constexpr int64_t kMaxQuotaMib = int64_t{1} << 50;
constexpr int64_t kMaxQuotaTasks = int64_t{1000} * 1000 * 1000;
constexpr int64_t kMaxNodeMib = int64_t{1} << 40;
constexpr int64_t kMaxNodeCpuMilli = int64_t{1} << 40;
constexpr int64_t kMaxPriceMilli = int64_t{1000} * 1000 * 1000 * 1000;  // 10^9 per GPU-hour
constexpr int64_t kMaxWeightMilli = int64_t{1000} * 1000 * 1000;        // weights up to 10^6
constexpr int64_t kMaxSeconds = int64_t{366} * 86400;
constexpr int64_t kMaxGpuHours = int64_t{1} << 40;
constexpr int64_t kMaxUnixId = 4294967294;  // uid_t and gid_t, (uid_t)-1 excluded
constexpr size_t kMaxRegistries = 64;
constexpr size_t kMaxMountRules = 64;

constexpr std::string_view kLimitKinds[] = {"guaranteed", "max", "lending_limit"};

std::optional<int64_t>& Slot(QuotaLimits& l, std::string_view kind) {
  if (kind == "guaranteed") return l.guaranteed;
  if (kind == "max") return l.max;
  return l.lending_limit;
}

// Reads a string field that must be one of `allowed`.
Status ReadChoice(const MappingReader& m, std::string_view key,
                  std::initializer_list<std::string_view> allowed, std::string* out) {
  ARBITER_RETURN_IF_ERROR(m.String(key, 63, out));
  if (std::find(allowed.begin(), allowed.end(), *out) != allowed.end()) return Status::Ok();
  return ErrorAt(*m.Get(key), m.PathOf(key),
                 fmt::format("must be one of {}, got {}", fmt::join(allowed, ", "), Quote(*out)));
}

// Reads a label-like string (rack, block, label and taint values).
Status ReadLabelValue(const Value& v, const std::string& path, std::string* out) {
  ARBITER_RETURN_IF_ERROR(ReadString(v, path, 253, out));
  if (IsValidLabelValue(*out)) return Status::Ok();
  return ErrorAt(
      v, path,
      fmt::format("{} is not a valid value: use letters, digits, '.', '_' and '-'", Quote(*out)));
}

class ConfigParser {
 public:
  explicit ConfigParser(ClusterConfig* out) : out_(out) {}

  Status Parse(const Value& root) {
    MappingReader m(root, "");
    ARBITER_RETURN_IF_ERROR(m.Check({"scheduler", "gpu_models", "priority_classes", "tenants",
                                     "users", "nodes", "approvals", "identity"}));
    if (const Value* v = m.Get("scheduler")) ARBITER_RETURN_IF_ERROR(Scheduler(*v));
    // References point from later sections to earlier ones, whatever the document order.
    if (const Value* v = m.Get("gpu_models")) ARBITER_RETURN_IF_ERROR(GpuModels(*v));
    if (const Value* v = m.Get("priority_classes")) ARBITER_RETURN_IF_ERROR(PriorityClasses(*v));
    if (const Value* v = m.Get("tenants")) ARBITER_RETURN_IF_ERROR(Tenants(*v));
    ARBITER_RETURN_IF_ERROR(ClassReferences());
    if (const Value* v = m.Get("users")) ARBITER_RETURN_IF_ERROR(Users(*v));
    if (const Value* v = m.Get("nodes")) ARBITER_RETURN_IF_ERROR(Nodes(*v));
    if (const Value* v = m.Get("approvals")) ARBITER_RETURN_IF_ERROR(Approvals(*v));
    if (const Value* v = m.Get("identity")) ARBITER_RETURN_IF_ERROR(Identity(*v));
    return Status::Ok();
  }

 private:
  // Guaranteed amounts by quota key, and where each was written.
  struct Guarantees {
    std::map<std::string, int64_t> amount;
    std::map<std::string, std::string> path;
  };

  // Records `name` in `seen` (name -> path of its name field); an error when it is there.
  static Status Unique(std::map<std::string, std::string>* seen, const std::string& name,
                       const std::string& path, const Value& v) {
    const auto [it, inserted] = seen->emplace(name, path);
    if (inserted) return Status::Ok();
    return ErrorAt(v, path,
                   fmt::format("duplicate name {} (first at {})", Quote(name), it->second));
  }

  // The name member: required, checked by `valid`, unique in `seen`.
  template <typename Valid>
  static Status Name(const MappingReader& m, Valid valid, std::string_view rule,
                     std::map<std::string, std::string>* seen, std::string* out) {
    ARBITER_RETURN_IF_ERROR(m.Require("name"));
    ARBITER_RETURN_IF_ERROR(m.String("name", 253, out));
    const Value& v = *m.Get("name");
    if (!valid(*out)) {
      return ErrorAt(v, m.PathOf("name"),
                     fmt::format("{} is not a valid name: {}", Quote(*out), rule));
    }
    return Unique(seen, *out, m.PathOf("name"), v);
  }

  const GpuModel* FindModel(std::string_view name) const {
    for (const GpuModel& g : out_->gpu_models) {
      if (g.name == name) return &g;
    }
    return nullptr;
  }

  Status UnknownModel(const Value& v, const std::string& path, std::string_view name) const {
    std::vector<std::string> names;
    for (const GpuModel& g : out_->gpu_models) names.push_back(g.name);
    return ErrorAt(v, path,
                   fmt::format("unknown GPU model {}; gpu_models declares: {}", Quote(name),
                               names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }

  Status GpuModels(const Value& seq) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(seq, "gpu_models", kMaxGpuModels));
    std::map<std::string, std::string> seen;
    for (size_t i = 0; i < seq.items.size(); ++i) {
      MappingReader m(seq.items[i], IndexPath("gpu_models", i));
      ARBITER_RETURN_IF_ERROR(m.Check({"name", "memory_mib", "price_per_hour"}));
      GpuModel g;
      ARBITER_RETURN_IF_ERROR(Name(m, IsValidModelName,
                                   "use letters, digits, '.', '_' and '-' (at most 63)", &seen,
                                   &g.name));
      if (g.name == "any") {
        return InvalidArgument(m.PathOf("name"), "\"any\" is reserved (quota maps use it)");
      }
      ARBITER_RETURN_IF_ERROR(m.Mib("memory_mib", kMaxNodeMib, &g.memory_mib));
      ARBITER_RETURN_IF_ERROR(
          m.Milli("price_per_hour", 0, kMaxPriceMilli, &g.price_milli_per_hour));
      out_->gpu_models.push_back(std::move(g));
    }
    return Status::Ok();
  }

  Status Scheduler(const Value& v) {
    MappingReader m(v, "scheduler");
    ARBITER_RETURN_IF_ERROR(
        m.Check({"policy", "filters", "scores", "gpu_selector", "nodes_to_score"}));
    SchedulerConfig& s = out_->scheduler;
    ARBITER_RETURN_IF_ERROR(m.String("policy", 63, &s.policy));
    if (!s.policy.empty() && !IsValidName(s.policy)) {
      return ErrorAt(*m.Get("policy"), m.PathOf("policy"),
                     fmt::format("{} is not a policy name", Quote(s.policy)));
    }
    if (const Value* f = m.Get("filters")) {
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*f, "scheduler.filters", 64));
      for (size_t i = 0; i < f->items.size(); ++i) {
        std::string name;
        ARBITER_RETURN_IF_ERROR(
            ReadString(f->items[i], IndexPath("scheduler.filters", i), 63, &name));
        s.filters.push_back(std::move(name));
      }
    }
    if (const Value* sc = m.Get("scores")) {
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*sc, "scheduler.scores", 64));
      for (size_t i = 0; i < sc->items.size(); ++i) {
        MappingReader w(sc->items[i], IndexPath("scheduler.scores", i));
        ARBITER_RETURN_IF_ERROR(w.Check({"plugin", "weight"}));
        ScoreWeightConfig c;
        ARBITER_RETURN_IF_ERROR(w.Require("plugin"));
        ARBITER_RETURN_IF_ERROR(w.String("plugin", 63, &c.plugin));
        ARBITER_RETURN_IF_ERROR(w.Int("weight", 1, 1000, &c.weight));
        s.scores.push_back(std::move(c));
      }
    }
    ARBITER_RETURN_IF_ERROR(m.String("gpu_selector", 63, &s.gpu_selector));
    ARBITER_RETURN_IF_ERROR(m.Int("nodes_to_score", 0, 1000000, &s.nodes_to_score));
    return Status::Ok();
  }

  Status PriorityClasses(const Value& seq) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(seq, "priority_classes", kMaxPriorityClasses));
    std::map<std::string, std::string> seen;
    for (size_t i = 0; i < seq.items.size(); ++i) {
      MappingReader m(seq.items[i], IndexPath("priority_classes", i));
      ARBITER_RETURN_IF_ERROR(
          m.Check({"name", "value", "preemptible", "min_runtime_seconds", "grace_period_seconds",
                   "preempts_anywhere", "allowed_tenants", "allowed_queues"}));
      PriorityClass p;
      ARBITER_RETURN_IF_ERROR(
          Name(m, IsValidName, "use lower-case letters, digits and '-'", &seen, &p.name));
      ARBITER_RETURN_IF_ERROR(m.Require("value"));
      ARBITER_RETURN_IF_ERROR(m.Int32("value", -1000000000, 1000000000, &p.value));
      ARBITER_RETURN_IF_ERROR(m.Bool("preemptible", &p.preemptible));
      ARBITER_RETURN_IF_ERROR(m.Int("min_runtime_seconds", 0, kMaxSeconds, &p.min_runtime_seconds));
      ARBITER_RETURN_IF_ERROR(m.Int("grace_period_seconds", 0, 86400, &p.grace_period_seconds));
      ARBITER_RETURN_IF_ERROR(m.Bool("preempts_anywhere", &p.preempts_anywhere));
      ARBITER_RETURN_IF_ERROR(NameList(m, "allowed_tenants", &p.allowed_tenants));
      ARBITER_RETURN_IF_ERROR(NameList(m, "allowed_queues", &p.allowed_queues));
      out_->priority_classes.push_back(std::move(p));
    }
    return Status::Ok();
  }

  // A list of tenant or queue names (allowed_tenants, allowed_queues); what they name is checked
  // once the tenants are read (ClassReferences). Each name is remembered with where it was written.
  Status NameList(const MappingReader& m, std::string_view key, std::vector<std::string>* out) {
    const Value* list = m.Get(key);
    if (list == nullptr) return Status::Ok();
    const std::string lp = m.PathOf(key);
    ARBITER_RETURN_IF_ERROR(ExpectSequence(*list, lp, kMaxQueues));
    for (size_t i = 0; i < list->items.size(); ++i) {
      std::string name;
      const std::string ip = IndexPath(lp, i);
      ARBITER_RETURN_IF_ERROR(ReadString(list->items[i], ip, 63, &name));
      if (std::find(out->begin(), out->end(), name) != out->end()) {
        return ErrorAt(list->items[i], ip, fmt::format("duplicate name {}", Quote(name)));
      }
      class_refs_.push_back({&list->items[i], ip, name, key == "allowed_tenants"});
      out->push_back(std::move(name));
    }
    return Status::Ok();
  }

  // Every name in a priority class's allowed_tenants is a tenant, every one in allowed_queues a
  // queue (not a tenant).
  Status ClassReferences() const {
    for (const ClassRef& r : class_refs_) {
      const bool tenant = tenant_names_.count(r.name) > 0;
      const bool queue = !tenant && queue_names_.count(r.name) > 0;
      if (r.tenant && !tenant) {
        return ErrorAt(*r.value, r.path,
                       fmt::format("unknown tenant {}{}", Quote(r.name),
                                   queue ? " (a queue: list it under allowed_queues)" : ""));
      }
      if (!r.tenant && !queue) {
        return ErrorAt(*r.value, r.path,
                       fmt::format("unknown queue {}{}", Quote(r.name),
                                   tenant ? " (a tenant: list it under allowed_tenants)" : ""));
      }
    }
    return Status::Ok();
  }

  Status Tenants(const Value& seq) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(seq, "tenants", kMaxTenants));
    for (size_t i = 0; i < seq.items.size(); ++i) {
      TenantConfig t;
      Guarantees g;
      ARBITER_RETURN_IF_ERROR(Queue(seq.items[i], IndexPath("tenants", i), "", 0, &t, &g));
      t.name = t.queues.front().name;
      ARBITER_RETURN_IF_ERROR(DefaultQueue(seq.items[i], IndexPath("tenants", i), t));
      tenant_names_.insert(t.name);
      out_->tenants.push_back(std::move(t));
    }
    // An alias is another name for one queue: no queue or tenant may have it as its name.
    for (const auto& [lower, where] : alias_paths_) {
      for (const auto& [name, path] : queue_names_) {
        if (LowerAscii(name) == lower) {
          return InvalidArgument(where.second,
                                 fmt::format("alias {} is the name of {} ({}); an alias must not "
                                             "be another queue's name",
                                             Quote(where.first), Quote(name), path));
        }
      }
    }
    return Status::Ok();
  }

  // A tenant's default_queue names one of its own leaf queues.
  static Status DefaultQueue(const Value& v, const std::string& path, const TenantConfig& t) {
    if (t.default_queue.empty()) return Status::Ok();
    const std::string dp = ChildPath(path, "default_queue");
    const Value& dv = *MappingReader(v, path).Get("default_queue");
    std::vector<std::string> leaves;
    bool has_children = false;
    for (const QueueSpec& q : t.queues) {
      const bool leaf = std::none_of(t.queues.begin(), t.queues.end(),
                                     [&](const QueueSpec& c) { return c.parent == q.name; });
      if (q.is_tenant) continue;
      if (leaf) leaves.push_back(q.name);
      if (q.name == t.default_queue) has_children = !leaf;
    }
    if (has_children) {
      return ErrorAt(
          dv, dp,
          fmt::format("queue {} has child queues; name one of them", Quote(t.default_queue)));
    }
    if (std::find(leaves.begin(), leaves.end(), t.default_queue) == leaves.end()) {
      return ErrorAt(
          dv, dp,
          fmt::format("{} is not a queue of tenant {}; its queues: {}", Quote(t.default_queue),
                      Quote(t.name),
                      leaves.empty() ? "none" : fmt::format("{}", fmt::join(leaves, ", "))));
    }
    return Status::Ok();
  }

  // aliases: [gpu_H100, GPU-H100]; letters of either case, digits, '_', '.', '-' (at most 63).
  Status Aliases(const Value& v, const std::string& path, QueueSpec* s) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxAliases));
    for (size_t i = 0; i < v.items.size(); ++i) {
      const std::string ip = IndexPath(path, i);
      std::string alias;
      ARBITER_RETURN_IF_ERROR(ReadString(v.items[i], ip, 63, &alias));
      if (!IsValidQueueAlias(alias)) {
        return ErrorAt(v.items[i], ip,
                       fmt::format("{} is not a valid alias: use letters, digits, '_', '.' and "
                                   "'-', starting with a letter or digit (at most 63)",
                                   Quote(alias)));
      }
      const auto [it, inserted] =
          alias_paths_.emplace(LowerAscii(alias), std::make_pair(alias, ip));
      if (!inserted) {
        return ErrorAt(v.items[i], ip,
                       fmt::format("duplicate alias {} (first at {}; aliases are compared "
                                   "without case)",
                                   Quote(alias), it->second.second));
      }
      s->aliases.push_back(std::move(alias));
    }
    return Status::Ok();
  }

  // run_as: {user: NAME} or {uid: N, gid: N}; uid or gid 0 only where root is allowed.
  static Status RunAs(const Value& v, const std::string& path, bool allow_root, RunAsConfig* r) {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"user", "uid", "gid"}));
    ARBITER_RETURN_IF_ERROR(m.String("user", 32, &r->user));
    if (!r->user.empty() && !IsValidUnixUserName(r->user)) {
      return ErrorAt(*m.Get("user"), m.PathOf("user"),
                     fmt::format("{} is not a valid user name of a node", Quote(r->user)));
    }
    for (const char* key : {"uid", "gid"}) {
      if (m.Get(key) == nullptr) continue;
      int64_t id = 0;
      ARBITER_RETURN_IF_ERROR(m.Int(key, 0, kMaxUnixId, &id));
      if (id == 0 && !allow_root) {
        return ErrorAt(*m.Get(key), m.PathOf(key),
                       "0 is root: only a tenant with allow_root: true may run tasks as root");
      }
      (std::string_view(key) == "uid" ? r->uid : r->gid) = id;
    }
    if (r->user.empty() == !r->uid.has_value()) {
      return ErrorAt(v, path, "give either user (a user of the nodes) or uid");
    }
    if (!r->user.empty() && r->gid) {
      return ErrorAt(*m.Get("gid"), m.PathOf("gid"), "a named user brings its own groups");
    }
    return Status::Ok();
  }

  // images: {registries: ["registry.example.com/vision/"], insecure: ["localhost:5000"]}.
  static Status Images(const Value& v, const std::string& path, ImagePolicy* out) {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"registries", "insecure"}));
    auto list = [&](const char* key, std::vector<std::string>* items) -> Status {
      const Value* l = m.Get(key);
      const std::string lp = m.PathOf(key);
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*l, lp, kMaxRegistries));
      for (size_t i = 0; i < l->items.size(); ++i) {
        const std::string ip = IndexPath(lp, i);
        std::string item;
        ARBITER_RETURN_IF_ERROR(ReadString(l->items[i], ip, 255, &item));
        if (item.empty() || !IsImageText(item)) {
          return ErrorAt(l->items[i], ip,
                         fmt::format("{} is not a registry prefix: use a host[:port] and "
                                     "optionally a path, without spaces",
                                     Quote(item)));
        }
        if (std::find(items->begin(), items->end(), item) != items->end()) {
          return ErrorAt(l->items[i], ip, fmt::format("duplicate {}", Quote(item)));
        }
        items->push_back(std::move(item));
      }
      return Status::Ok();
    };
    if (m.Get("registries") != nullptr && !m.Get("registries")->is_null()) {
      out->registries.emplace();
      ARBITER_RETURN_IF_ERROR(list("registries", &*out->registries));
    }
    if (m.Get("insecure") != nullptr && !m.Get("insecure")->is_null()) {
      ARBITER_RETURN_IF_ERROR(list("insecure", &out->insecure));
      for (size_t i = 0; i < out->insecure.size(); ++i) {
        if (out->insecure[i].find('/') != std::string::npos) {
          return ErrorAt(m.Get("insecure")->items[i], IndexPath(m.PathOf("insecure"), i),
                         "an insecure registry is a host[:port], without a path");
        }
      }
    }
    return Status::Ok();
  }

  static bool IsImageText(const std::string& s) {
    for (char c : s) {
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
    }
    return s.front() != '/';
  }

  // mounts: [{path: /data/imagenet, mode: ro}, {path: /checkpoints/vision, mode: rw}].
  static Status MountRules(const Value& v, const std::string& path, std::vector<MountRule>* out) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxMountRules));
    for (size_t i = 0; i < v.items.size(); ++i) {
      MappingReader m(v.items[i], IndexPath(path, i));
      ARBITER_RETURN_IF_ERROR(m.Check({"path", "mode"}));
      ARBITER_RETURN_IF_ERROR(m.Require("path"));
      MountRule r;
      ARBITER_RETURN_IF_ERROR(m.String("path", kMaxMountPathBytes, &r.path));
      if (std::string why = MountPathProblem(r.path); !why.empty()) {
        return ErrorAt(*m.Get("path"), m.PathOf("path"), fmt::format("{}: {}", r.path, why));
      }
      std::string mode = "ro";
      ARBITER_RETURN_IF_ERROR(ReadChoice(m, "mode", {"ro", "rw"}, &mode));
      r.read_only = mode != "rw";
      for (const MountRule& earlier : *out) {
        if (earlier.path == r.path) {
          return ErrorAt(*m.Get("path"), m.PathOf("path"),
                         fmt::format("duplicate path {}", Quote(r.path)));
        }
      }
      out->push_back(std::move(r));
    }
    return Status::Ok();
  }

  // volumes: [{name: ckpt, mode: rw, size_gib: 500}, {name: datasets, mode: ro}].
  static Status VolumeRules(const Value& v, const std::string& path, std::vector<VolumeRule>* out) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxTenantVolumes));
    for (size_t i = 0; i < v.items.size(); ++i) {
      MappingReader m(v.items[i], IndexPath(path, i));
      ARBITER_RETURN_IF_ERROR(m.Check({"name", "mode", "size_gib"}));
      ARBITER_RETURN_IF_ERROR(m.Require("name"));
      VolumeRule r;
      ARBITER_RETURN_IF_ERROR(m.String("name", 1024, &r.name));
      if (!IsValidVolumeName(r.name)) {
        return ErrorAt(*m.Get("name"), m.PathOf("name"),
                       fmt::format("{} is not a volume name: lower-case letters, digits and '-', "
                                   "starting and ending with a letter or digit (at most {})",
                                   Quote(r.name), kMaxVolumeNameBytes));
      }
      for (const VolumeRule& earlier : *out) {
        if (earlier.name == r.name) {
          return ErrorAt(*m.Get("name"), m.PathOf("name"),
                         fmt::format("duplicate volume {}", Quote(r.name)));
        }
      }
      std::string mode = "rw";
      ARBITER_RETURN_IF_ERROR(ReadChoice(m, "mode", {"ro", "rw"}, &mode));
      r.read_only = mode == "ro";
      ARBITER_RETURN_IF_ERROR(m.Int("size_gib", 1, kMaxVolumeSizeGib, &r.size_gib));
      out->push_back(std::move(r));
    }
    return Status::Ok();
  }

  // POSIX portable user names, as useradd takes them.
  static bool IsValidUnixUserName(const std::string& s) {
    if (s.empty() || s.size() > 32 || s[0] == '-') return false;
    for (char c : s) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
        return false;
      }
    }
    return true;
  }

  Status Budget(const Value& v, const std::string& path, BudgetConfig* b) {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"gpu_hours", "period", "on_exhausted"}));
    ARBITER_RETURN_IF_ERROR(m.Require("gpu_hours"));
    ARBITER_RETURN_IF_ERROR(m.Int("gpu_hours", 0, kMaxGpuHours, &b->gpu_hours));
    ARBITER_RETURN_IF_ERROR(ReadChoice(m, "period", {"day", "week", "month"}, &b->period));
    return ReadChoice(m, "on_exhausted", {"block", "best-effort"}, &b->on_exhausted);
  }

  // One `guaranteed`, `max` or `lending_limit` mapping into the quota map; `paths` gets where
  // each quota key was written.
  Status Limits(const Value& v, const std::string& path, std::string_view kind, QueueSpec* s,
                std::map<std::string, std::string>* paths) {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"gpu", "cpu", "memory", "tasks"}));
    auto set = [&](const std::string& key, const std::string& p, int64_t amount) {
      Slot(s->quota[key], kind) = amount;
      (*paths)[key] = p;
    };
    int64_t amount = 0;
    if (const Value* cpu = m.Get("cpu")) {
      ARBITER_RETURN_IF_ERROR(ReadMilli(*cpu, m.PathOf("cpu"), 0, kMaxQuotaMilli, &amount));
      set("cpu", m.PathOf("cpu"), amount);
    }
    if (const Value* mem = m.Get("memory")) {
      ARBITER_RETURN_IF_ERROR(ReadMib(*mem, m.PathOf("memory"), kMaxQuotaMib, &amount));
      set("memory", m.PathOf("memory"), amount);
    }
    // Live tasks (placed and running) bound processes, not capacity: only a ceiling.
    if (const Value* tasks = m.Get("tasks")) {
      if (kind != "max") {
        return InvalidArgument(m.PathOf("tasks"),
                               "tasks is a ceiling on live tasks: set it under max only");
      }
      ARBITER_RETURN_IF_ERROR(ReadInt(*tasks, m.PathOf("tasks"), 0, kMaxQuotaTasks, &amount));
      set("tasks", m.PathOf("tasks"), amount);
    }
    const Value* gpu = m.Get("gpu");
    if (gpu == nullptr) return Status::Ok();
    const std::string gp = m.PathOf("gpu");
    if (gpu->kind != Value::Kind::kMapping) {
      ARBITER_RETURN_IF_ERROR(ReadMilli(*gpu, gp, 0, kMaxQuotaMilli, &amount));
      set("gpu", gp, amount);
      return Status::Ok();
    }
    for (const auto& [model, value] : gpu->members) {
      const std::string mp = ChildPath(gp, model);
      if (model != "any" && FindModel(model) == nullptr) return UnknownModel(value, mp, model);
      if (value.is_null()) continue;
      ARBITER_RETURN_IF_ERROR(ReadMilli(value, mp, 0, kMaxQuotaMilli, &amount));
      set(model == "any" ? "gpu" : "gpu:" + model, mp, amount);
    }
    return Status::Ok();
  }

  static std::string Amount(const std::string& key, int64_t amount) {
    if (key == "tasks") return fmt::format("{}", amount);
    return key == "memory" ? fmt::format("{} MiB", amount) : FormatMilli(amount);
  }

  // Everything of a queue (or tenant) but its children; `explicit_g` gets its own guarantees.
  Status QueueFields(const MappingReader& m, QueueSpec* s, Guarantees* explicit_g) {
    std::map<std::string, std::string> paths[std::size(kLimitKinds)];
    for (size_t k = 0; k < std::size(kLimitKinds); ++k) {
      if (const Value* v = m.Get(kLimitKinds[k])) {
        ARBITER_RETURN_IF_ERROR(Limits(*v, m.PathOf(kLimitKinds[k]), kLimitKinds[k], s, &paths[k]));
      }
    }
    for (const auto& [key, lim] : s->quota) {
      if (lim.guaranteed) {
        explicit_g->amount[key] = *lim.guaranteed;
        explicit_g->path[key] = paths[0][key];
      }
      if (lim.max && lim.guaranteed && *lim.max < *lim.guaranteed) {
        return InvalidArgument(
            paths[1][key], fmt::format("max ({}) is below guaranteed ({})", Amount(key, *lim.max),
                                       Amount(key, *lim.guaranteed)));
      }
    }
    ARBITER_RETURN_IF_ERROR(m.Milli("weight", 1, kMaxWeightMilli, &s->weight_milli));
    ARBITER_RETURN_IF_ERROR(
        m.Int("default_walltime_seconds", 0, kMaxSeconds, &s->default_walltime_seconds));
    if (const Value* fs = m.Get("fair_share")) {
      MappingReader f(*fs, m.PathOf("fair_share"));
      ARBITER_RETURN_IF_ERROR(f.Check({"half_life_seconds"}));
      ARBITER_RETURN_IF_ERROR(
          f.Int("half_life_seconds", 0, kMaxSeconds, &s->decay.half_life_seconds));
    }
    if (const Value* types = m.Get("allowed_types")) {
      const std::string tp = m.PathOf("allowed_types");
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*types, tp, 16));
      for (size_t i = 0; i < types->items.size(); ++i) {
        std::string t;
        ARBITER_RETURN_IF_ERROR(ReadString(types->items[i], IndexPath(tp, i), 63, &t));
        JobType jt;
        if (!ParseJobType(t, &jt)) {
          return ErrorAt(types->items[i], IndexPath(tp, i),
                         fmt::format("unknown job type {}; use training, fine-tuning, evaluation, "
                                     "batch-inference, service or experiment",
                                     Quote(t)));
        }
        if (std::find(s->allowed_types.begin(), s->allowed_types.end(), t) !=
            s->allowed_types.end()) {
          return ErrorAt(types->items[i], IndexPath(tp, i),
                         fmt::format("duplicate job type {}", Quote(t)));
        }
        s->allowed_types.push_back(std::move(t));
      }
    }
    return Status::Ok();
  }

  // A tenant (parent empty) or queue and, recursively, its children. `effective` gets its
  // guarantees per key: its own where set, else its children's sum (a key a queue does not set is
  // transparent, as in the quota tree).
  Status Queue(const Value& v, const std::string& path, const std::string& parent, size_t level,
               TenantConfig* t, Guarantees* effective) {
    const bool is_tenant = parent.empty();
    MappingReader m(v, path);
    if (is_tenant) {
      ARBITER_RETURN_IF_ERROR(
          m.Check({"name", "budget", "guaranteed", "max", "lending_limit", "weight",
                   "default_walltime_seconds", "allowed_types", "fair_share", "queues", "run_as",
                   "allow_root", "default_queue", "images", "mounts", "volumes"}));
    } else {
      ARBITER_RETURN_IF_ERROR(m.Check({"name", "guaranteed", "max", "lending_limit", "weight",
                                       "default_walltime_seconds", "allowed_types", "fair_share",
                                       "queues", "aliases"}));
    }
    if (++queue_count_ > kMaxQueues) {
      return ErrorAt(v, path, fmt::format("at most {} tenants and queues in all", kMaxQueues));
    }
    QueueSpec s;
    ARBITER_RETURN_IF_ERROR(Name(m, IsValidName,
                                 "use lower-case letters, digits and '-' (at most 63); names are "
                                 "unique across tenants and queues",
                                 &queue_names_, &s.name));
    s.parent = parent;
    s.is_tenant = is_tenant;
    if (is_tenant) {
      if (const Value* b = m.Get("budget")) {
        t->budget.emplace();
        ARBITER_RETURN_IF_ERROR(Budget(*b, m.PathOf("budget"), &*t->budget));
      }
      ARBITER_RETURN_IF_ERROR(m.Bool("allow_root", &t->allow_root));
      if (const Value* r = m.Get("run_as")) {
        t->run_as.emplace();
        ARBITER_RETURN_IF_ERROR(RunAs(*r, m.PathOf("run_as"), t->allow_root, &*t->run_as));
      }
      tenant_allow_root_[s.name] = t->allow_root;
      ARBITER_RETURN_IF_ERROR(m.String("default_queue", 63, &t->default_queue));
      if (const Value* im = m.Get("images")) {
        ARBITER_RETURN_IF_ERROR(Images(*im, m.PathOf("images"), &t->images));
      }
      if (const Value* mo = m.Get("mounts")) {
        ARBITER_RETURN_IF_ERROR(MountRules(*mo, m.PathOf("mounts"), &t->mounts));
      }
      if (const Value* vo = m.Get("volumes")) {
        ARBITER_RETURN_IF_ERROR(VolumeRules(*vo, m.PathOf("volumes"), &t->volumes));
      }
    } else if (const Value* a = m.Get("aliases")) {
      ARBITER_RETURN_IF_ERROR(Aliases(*a, m.PathOf("aliases"), &s));
    }
    Guarantees own;
    ARBITER_RETURN_IF_ERROR(QueueFields(m, &s, &own));
    const std::string name = s.name;
    t->queues.push_back(std::move(s));

    std::map<std::string, int64_t> children_g;
    if (const Value* children = m.Get("queues")) {
      const std::string cp = m.PathOf("queues");
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*children, cp, kMaxQueues));
      if (!children->items.empty() && level >= kMaxQueueDepth) {
        return ErrorAt(*children, cp,
                       fmt::format("queues nest at most {} levels below a tenant", kMaxQueueDepth));
      }
      for (size_t i = 0; i < children->items.size(); ++i) {
        Guarantees g;
        ARBITER_RETURN_IF_ERROR(
            Queue(children->items[i], IndexPath(cp, i), name, level + 1, t, &g));
        for (const auto& [key, amount] : g.amount) children_g[key] += amount;
      }
    }
    // sum over children c of G(c) <= G(n) on every key n sets.
    for (const auto& [key, amount] : own.amount) {
      const auto it = children_g.find(key);
      if (it != children_g.end() && it->second > amount) {
        return InvalidArgument(
            own.path[key], fmt::format("the queues under {} guarantee {} in all, more than its "
                                       "own {}",
                                       Quote(name), Amount(key, it->second), Amount(key, amount)));
      }
    }
    effective->amount = children_g;
    for (const auto& [key, amount] : own.amount) effective->amount[key] = amount;
    return Status::Ok();
  }

  Status Users(const Value& seq) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(seq, "users", kMaxUsers));
    std::map<std::string, std::string> seen;
    for (size_t i = 0; i < seq.items.size(); ++i) {
      MappingReader m(seq.items[i], IndexPath("users", i));
      ARBITER_RETURN_IF_ERROR(m.Check({"name", "tenant", "role", "run_as"}));
      UserConfig u;
      ARBITER_RETURN_IF_ERROR(Name(m, IsValidUserName,
                                   "use letters, digits, '.', '_', '-' and '@' (at most 253)",
                                   &seen, &u.name));
      if (IsReservedUserName(u.name)) {
        return ErrorAt(
            *m.Get("name"), m.PathOf("name"),
            fmt::format("{} is reserved for the server's own identities", Quote(u.name)));
      }
      u.role = "member";
      ARBITER_RETURN_IF_ERROR(
          ReadChoice(m, "role", {"admin", "tenant-admin", "member", "viewer"}, &u.role));
      ARBITER_RETURN_IF_ERROR(m.String("tenant", 63, &u.tenant));
      if (u.tenant.empty()) {
        if (u.role != "admin") {
          return ErrorAt(
              seq.items[i], m.PathOf("tenant"),
              fmt::format("is required for the role {} (only admins have none)", Quote(u.role)));
        }
      } else if (tenant_names_.count(u.tenant) == 0) {
        return ErrorAt(*m.Get("tenant"), m.PathOf("tenant"),
                       fmt::format("unknown tenant {}", Quote(u.tenant)));
      }
      if (const Value* r = m.Get("run_as")) {
        u.run_as.emplace();
        ARBITER_RETURN_IF_ERROR(
            RunAs(*r, m.PathOf("run_as"), tenant_allow_root_[u.tenant], &*u.run_as));
      }
      out_->users.push_back(std::move(u));
    }
    return Status::Ok();
  }

  Status Approvals(const Value& seq) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(seq, "approvals", kMaxApprovalRules));
    std::map<std::string, std::string> seen;
    for (size_t i = 0; i < seq.items.size(); ++i) {
      MappingReader m(seq.items[i], IndexPath("approvals", i));
      ARBITER_RETURN_IF_ERROR(m.Check({"name", "when", "approvers", "expires_after_seconds"}));
      ApprovalRuleConfig r;
      ARBITER_RETURN_IF_ERROR(Name(
          m, IsValidName, "use lower-case letters, digits and '-' (at most 63)", &seen, &r.name));
      ARBITER_RETURN_IF_ERROR(m.Require("when"));
      ARBITER_RETURN_IF_ERROR(ApprovalCondition(*m.Get("when"), m.PathOf("when"), &r.when));
      ARBITER_RETURN_IF_ERROR(m.Require("approvers"));
      ARBITER_RETURN_IF_ERROR(Approvers(*m.Get("approvers"), m.PathOf("approvers"), &r));
      ARBITER_RETURN_IF_ERROR(
          m.Int("expires_after_seconds", 0, kMaxApprovalExpirySeconds, &r.expires_after_seconds));
      out_->approvals.push_back(std::move(r));
    }
    return Status::Ok();
  }

  Status ApprovalCondition(const Value& v, const std::string& path, ApprovalWhen* w) const {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(
        m.Check({"gpus_at_least", "gpu_hours_at_least", "priority_class", "queue", "type"}));
    if (m.Get("gpus_at_least") != nullptr) {
      w->gpus_at_least.emplace();
      ARBITER_RETURN_IF_ERROR(m.Int("gpus_at_least", 1, 1000000, &*w->gpus_at_least));
    }
    if (m.Get("gpu_hours_at_least") != nullptr) {
      w->gpu_hours_at_least.emplace();
      ARBITER_RETURN_IF_ERROR(
          m.Int("gpu_hours_at_least", 1, int64_t{1} << 40, &*w->gpu_hours_at_least));
    }
    ARBITER_RETURN_IF_ERROR(m.String("priority_class", 63, &w->priority_class));
    if (!w->priority_class.empty()) {
      const bool known =
          std::any_of(out_->priority_classes.begin(), out_->priority_classes.end(),
                      [&](const PriorityClass& p) { return p.name == w->priority_class; });
      if (!known) {
        return ErrorAt(*m.Get("priority_class"), m.PathOf("priority_class"),
                       fmt::format("unknown priority class {}", Quote(w->priority_class)));
      }
    }
    ARBITER_RETURN_IF_ERROR(m.String("queue", 63, &w->queue));
    if (!w->queue.empty() && queue_names_.count(w->queue) == 0) {
      return ErrorAt(*m.Get("queue"), m.PathOf("queue"),
                     fmt::format("unknown queue {}", Quote(w->queue)));
    }
    ARBITER_RETURN_IF_ERROR(m.String("type", 63, &w->type));
    JobType jt;
    if (!w->type.empty() && !ParseJobType(w->type, &jt)) {
      return ErrorAt(*m.Get("type"), m.PathOf("type"),
                     fmt::format("unknown job type {}; use training, fine-tuning, evaluation, "
                                 "batch-inference, service or experiment",
                                 Quote(w->type)));
    }
    if (w->gpus_at_least || w->gpu_hours_at_least || !w->priority_class.empty() ||
        !w->queue.empty() || !w->type.empty()) {
      return Status::Ok();
    }
    return ErrorAt(v, path,
                   "needs at least one condition (gpus_at_least, gpu_hours_at_least, "
                   "priority_class, queue, type)");
  }

  Status Approvers(const Value& v, const std::string& path, ApprovalRuleConfig* r) const {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"role", "users"}));
    const Value* users = m.Get("users");
    if ((m.Get("role") == nullptr) == (users == nullptr)) {
      return ErrorAt(v, path, "needs exactly one of role (tenant-admin) or users");
    }
    if (m.Get("role") != nullptr) return ReadChoice(m, "role", {"tenant-admin"}, &r->approver_role);
    const std::string up = m.PathOf("users");
    ARBITER_RETURN_IF_ERROR(ExpectSequence(*users, up, kMaxApprovers));
    if (users->items.empty()) return ErrorAt(*users, up, "needs at least one user");
    for (size_t i = 0; i < users->items.size(); ++i) {
      std::string name;
      const std::string ip = IndexPath(up, i);
      ARBITER_RETURN_IF_ERROR(ReadString(users->items[i], ip, 253, &name));
      if (!IsValidUserName(name)) {
        return ErrorAt(users->items[i], ip,
                       fmt::format("{} is not a valid user name", Quote(name)));
      }
      if (std::find(r->approver_users.begin(), r->approver_users.end(), name) !=
          r->approver_users.end()) {
        return ErrorAt(users->items[i], ip, fmt::format("duplicate name {}", Quote(name)));
      }
      r->approver_users.push_back(std::move(name));
    }
    return Status::Ok();
  }

  Status Identity(const Value& v) {
    MappingReader m(v, "identity");
    ARBITER_RETURN_IF_ERROR(m.Check({"oidc", "ldap", "mappings"}));
    IdentityConfig& c = out_->identity;
    if (const Value* o = m.Get("oidc")) {
      c.oidc.emplace();
      ARBITER_RETURN_IF_ERROR(Oidc(*o, m.PathOf("oidc"), &*c.oidc));
    }
    if (const Value* l = m.Get("ldap")) {
      c.ldap.emplace();
      ARBITER_RETURN_IF_ERROR(Ldap(*l, m.PathOf("ldap"), &*c.ldap));
    }
    if (const Value* s = m.Get("mappings")) {
      const std::string path = m.PathOf("mappings");
      ARBITER_RETURN_IF_ERROR(ExpectSequence(*s, path, kMaxIdentityMappings));
      for (size_t i = 0; i < s->items.size(); ++i) {
        IdentityMapping r;
        ARBITER_RETURN_IF_ERROR(Mapping(s->items[i], IndexPath(path, i), &r));
        c.mappings.push_back(std::move(r));
      }
    }
    if ((c.oidc || c.ldap) && c.mappings.empty()) {
      return ErrorAt(v, "identity.mappings",
                     "is required with oidc or ldap: a person no mapping matches is refused");
    }
    return Status::Ok();
  }

  // An http(s) URL: https anywhere, http only on a loopback host.
  static Status WebUrl(const Value& v, const std::string& path, const std::string& url) {
    const bool https = url.rfind("https://", 0) == 0;
    const bool http = url.rfind("http://", 0) == 0;
    if (!https && !http) return ErrorAt(v, path, "must start with https://");
    const std::string rest = url.substr(https ? 8 : 7);
    const std::string host = rest.substr(0, rest.find_first_of(":/"));
    if (host.empty()) return ErrorAt(v, path, "has no host");
    if (url.back() == '/') return ErrorAt(v, path, "must not end with '/'");
    if (http && host != "127.0.0.1" && host != "localhost" && host != "[::1]") {
      return ErrorAt(v, path, "must use https:// (http:// only on a loopback address)");
    }
    return Status::Ok();
  }

  Status Oidc(const Value& v, const std::string& path, OidcConfig* o) const {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"issuer", "audience", "client_id", "username_claim",
                                     "groups_claim", "clock_skew_seconds"}));
    ARBITER_RETURN_IF_ERROR(m.Require("issuer"));
    ARBITER_RETURN_IF_ERROR(m.String("issuer", 2048, &o->issuer));
    ARBITER_RETURN_IF_ERROR(WebUrl(*m.Get("issuer"), m.PathOf("issuer"), o->issuer));
    ARBITER_RETURN_IF_ERROR(m.Require("audience"));
    ARBITER_RETURN_IF_ERROR(m.String("audience", 1024, &o->audience));
    if (o->audience.empty()) return ErrorAt(*m.Get("audience"), m.PathOf("audience"), "is empty");
    ARBITER_RETURN_IF_ERROR(m.String("client_id", 1024, &o->client_id));
    ARBITER_RETURN_IF_ERROR(m.String("username_claim", 255, &o->username_claim));
    ARBITER_RETURN_IF_ERROR(m.String("groups_claim", 255, &o->groups_claim));
    if (o->username_claim.empty()) {
      return ErrorAt(*m.Get("username_claim"), m.PathOf("username_claim"), "is empty");
    }
    return m.Int("clock_skew_seconds", 0, 600, &o->clock_skew_seconds);
  }

  Status Ldap(const Value& v, const std::string& path, LdapConfig* l) const {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"url", "user_dn", "group_base", "group_filter",
                                     "group_attribute", "start_tls", "token_ttl_seconds"}));
    ARBITER_RETURN_IF_ERROR(m.Require("url"));
    ARBITER_RETURN_IF_ERROR(m.String("url", 2048, &l->url));
    if (l->url.rfind("ldap://", 0) != 0 && l->url.rfind("ldaps://", 0) != 0) {
      return ErrorAt(*m.Get("url"), m.PathOf("url"), "must start with ldap:// or ldaps://");
    }
    ARBITER_RETURN_IF_ERROR(m.Require("user_dn"));
    ARBITER_RETURN_IF_ERROR(m.String("user_dn", 1024, &l->user_dn));
    if (l->user_dn.find("{user}") == std::string::npos) {
      return ErrorAt(*m.Get("user_dn"), m.PathOf("user_dn"),
                     "must contain {user}, where the login name goes");
    }
    ARBITER_RETURN_IF_ERROR(m.String("group_base", 1024, &l->group_base));
    ARBITER_RETURN_IF_ERROR(m.String("group_filter", 1024, &l->group_filter));
    if (l->group_filter.empty() || l->group_filter.front() != '(' ||
        l->group_filter.back() != ')') {
      return ErrorAt(*m.Get("group_filter"), m.PathOf("group_filter"),
                     "must be an LDAP filter in parentheses");
    }
    ARBITER_RETURN_IF_ERROR(m.String("group_attribute", 255, &l->group_attribute));
    if (l->group_attribute.empty()) {
      return ErrorAt(*m.Get("group_attribute"), m.PathOf("group_attribute"), "is empty");
    }
    ARBITER_RETURN_IF_ERROR(m.Bool("start_tls", &l->start_tls));
    return m.Int("token_ttl_seconds", 60, int64_t{366} * 86400, &l->token_ttl_seconds);
  }

  Status Mapping(const Value& v, const std::string& path, IdentityMapping* r) const {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"group", "user", "tenant", "role"}));
    ARBITER_RETURN_IF_ERROR(m.String("group", 255, &r->group));
    ARBITER_RETURN_IF_ERROR(m.String("user", 253, &r->user));
    if (r->group.empty() == r->user.empty()) {
      return ErrorAt(v, path, "needs exactly one of group or user");
    }
    if (!r->user.empty() && !IsValidUserName(r->user)) {
      return ErrorAt(*m.Get("user"), m.PathOf("user"),
                     fmt::format("{} is not a valid user name", Quote(r->user)));
    }
    ARBITER_RETURN_IF_ERROR(m.Require("role"));
    ARBITER_RETURN_IF_ERROR(
        ReadChoice(m, "role", {"admin", "tenant-admin", "member", "viewer"}, &r->role));
    ARBITER_RETURN_IF_ERROR(m.String("tenant", 63, &r->tenant));
    if (r->tenant.empty()) {
      if (r->role != "admin") {
        return ErrorAt(
            v, m.PathOf("tenant"),
            fmt::format("is required for the role {} (only admins have none)", Quote(r->role)));
      }
    } else if (tenant_names_.count(r->tenant) == 0) {
      return ErrorAt(*m.Get("tenant"), m.PathOf("tenant"),
                     fmt::format("unknown tenant {}", Quote(r->tenant)));
    } else if (r->role == "admin") {
      return ErrorAt(*m.Get("tenant"), m.PathOf("tenant"),
                     "must be absent for the role \"admin\" (admins belong to no tenant)");
    }
    return Status::Ok();
  }

  Status Nodes(const Value& seq) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(seq, "nodes", kMaxNodes));
    std::map<std::string, std::string> seen;
    for (size_t i = 0; i < seq.items.size(); ++i) {
      Node n;
      ARBITER_RETURN_IF_ERROR(OneNode(seq.items[i], IndexPath("nodes", i), &seen, &n));
      out_->nodes.push_back(std::move(n));
    }
    return Status::Ok();
  }

  Status OneNode(const Value& v, const std::string& path, std::map<std::string, std::string>* seen,
                 Node* n) {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check(
        {"name", "cpu_milli", "memory_mib", "rack", "block", "labels", "taints", "gpus", "state"}));
    ARBITER_RETURN_IF_ERROR(Name(
        m, IsValidHostName, "use letters, digits, '.', '_' and '-' (at most 253)", seen, &n->name));
    ARBITER_RETURN_IF_ERROR(m.Int("cpu_milli", 0, kMaxNodeCpuMilli, &n->cpu_milli));
    ARBITER_RETURN_IF_ERROR(m.Mib("memory_mib", kMaxNodeMib, &n->memory_mib));
    if (const Value* r = m.Get("rack")) {
      ARBITER_RETURN_IF_ERROR(ReadLabelValue(*r, m.PathOf("rack"), &n->rack));
    }
    if (const Value* b = m.Get("block")) {
      ARBITER_RETURN_IF_ERROR(ReadLabelValue(*b, m.PathOf("block"), &n->block));
    }
    if (const Value* s = m.Get("state")) {
      std::string state;
      ARBITER_RETURN_IF_ERROR(ReadString(*s, m.PathOf("state"), 63, &state));
      if (!ParseNodeState(state, &n->state)) {
        return ErrorAt(
            *s, m.PathOf("state"),
            fmt::format("must be one of ready, cordoned, draining, down, got {}", Quote(state)));
      }
    }
    if (const Value* l = m.Get("labels"))
      ARBITER_RETURN_IF_ERROR(Labels(*l, m.PathOf("labels"), n));
    if (const Value* t = m.Get("taints"))
      ARBITER_RETURN_IF_ERROR(Taints(*t, m.PathOf("taints"), n));
    if (const Value* g = m.Get("gpus")) {
      const std::string gp = m.PathOf("gpus");
      ARBITER_RETURN_IF_ERROR(g->kind == Value::Kind::kSequence ? GpuList(*g, gp, n)
                                                                : GpuGroup(*g, gp, n));
    }
    return ValidateNode(*n, path);
  }

  Status Labels(const Value& v, const std::string& path, Node* n) {
    ARBITER_RETURN_IF_ERROR(ExpectMapping(v, path, kMaxLabels));
    for (const auto& [key, value] : v.members) {
      const std::string kp = ChildPath(path, key);
      if (!IsValidLabelKey(key)) {
        return ErrorAt(value, kp,
                       fmt::format("{} is not a valid label key: use letters, digits, '.', '_', "
                                   "'-' and '/'",
                                   Quote(key)));
      }
      ARBITER_RETURN_IF_ERROR(ReadLabelValue(value, kp, &n->labels[key]));
    }
    return Status::Ok();
  }

  Status Taints(const Value& v, const std::string& path, Node* n) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxTaints));
    for (size_t i = 0; i < v.items.size(); ++i) {
      MappingReader m(v.items[i], IndexPath(path, i));
      ARBITER_RETURN_IF_ERROR(m.Check({"key", "value"}));
      ARBITER_RETURN_IF_ERROR(m.Require("key"));
      Taint t;
      ARBITER_RETURN_IF_ERROR(m.String("key", 253, &t.key));
      if (!IsValidLabelKey(t.key)) {
        return ErrorAt(*m.Get("key"), m.PathOf("key"),
                       fmt::format("{} is not a valid taint key", Quote(t.key)));
      }
      if (const Value* tv = m.Get("value")) {
        ARBITER_RETURN_IF_ERROR(ReadLabelValue(*tv, m.PathOf("value"), &t.value));
      }
      n->taints.push_back(std::move(t));
    }
    return Status::Ok();
  }

  // gpus: {count: 8, model: A100-80G, nvlink_domains: 2, memory_mib: 81920}: GPUs 0..count-1,
  // domain of GPU i = i / (count / nvlink_domains).
  Status GpuGroup(const Value& v, const std::string& path, Node* n) {
    MappingReader m(v, path);
    ARBITER_RETURN_IF_ERROR(m.Check({"count", "model", "nvlink_domains", "memory_mib"}));
    int32_t count = 0;
    ARBITER_RETURN_IF_ERROR(m.Require("count"));
    ARBITER_RETURN_IF_ERROR(m.Int32("count", 0, static_cast<int32_t>(kMaxGpusPerNode), &count));
    if (count == 0) return Status::Ok();
    ARBITER_RETURN_IF_ERROR(m.Require("model"));
    std::string model;
    ARBITER_RETURN_IF_ERROR(m.String("model", 63, &model));
    const GpuModel* gm = FindModel(model);
    if (gm == nullptr) return UnknownModel(*m.Get("model"), m.PathOf("model"), model);
    int32_t domains = 1;
    ARBITER_RETURN_IF_ERROR(m.Int32("nvlink_domains", 1, count, &domains));
    if (count % domains != 0) {
      return ErrorAt(*m.Get("nvlink_domains"), m.PathOf("nvlink_domains"),
                     fmt::format("must divide the GPU count ({}), got {}", count, domains));
    }
    int64_t memory = gm->memory_mib;
    ARBITER_RETURN_IF_ERROR(m.Mib("memory_mib", kMaxNodeMib, &memory));
    for (int32_t i = 0; i < count; ++i) {
      n->gpus.push_back(Gpu{i, model, memory, true, i / (count / domains)});
    }
    return Status::Ok();
  }

  // gpus: [{index: 0, model: A100-80G, memory_mib: 81920, nvlink_domain: 0, healthy: true}, ...]
  Status GpuList(const Value& v, const std::string& path, Node* n) {
    ARBITER_RETURN_IF_ERROR(ExpectSequence(v, path, kMaxGpusPerNode));
    for (size_t i = 0; i < v.items.size(); ++i) {
      MappingReader m(v.items[i], IndexPath(path, i));
      ARBITER_RETURN_IF_ERROR(
          m.Check({"index", "model", "memory_mib", "nvlink_domain", "healthy"}));
      Gpu g;
      g.index = static_cast<int32_t>(i);
      ARBITER_RETURN_IF_ERROR(m.Int32("index", 0, 1023, &g.index));
      ARBITER_RETURN_IF_ERROR(m.Require("model"));
      ARBITER_RETURN_IF_ERROR(m.String("model", 63, &g.model));
      const GpuModel* gm = FindModel(g.model);
      if (gm == nullptr) return UnknownModel(*m.Get("model"), m.PathOf("model"), g.model);
      g.memory_mib = gm->memory_mib;
      ARBITER_RETURN_IF_ERROR(m.Mib("memory_mib", kMaxNodeMib, &g.memory_mib));
      ARBITER_RETURN_IF_ERROR(m.Int32("nvlink_domain", -1, 1023, &g.nvlink_domain));
      ARBITER_RETURN_IF_ERROR(m.Bool("healthy", &g.healthy));
      n->gpus.push_back(std::move(g));
    }
    return Status::Ok();
  }

  // A name in a priority class's allowed_tenants (tenant = true) or allowed_queues.
  struct ClassRef {
    const Value* value;
    std::string path;
    std::string name;
    bool tenant;
  };

  ClusterConfig* out_;
  std::vector<ClassRef> class_refs_;
  std::map<std::string, std::string> queue_names_;  // tenants and queues
  // Queue aliases, lower-cased -> (as written, path).
  std::map<std::string, std::pair<std::string, std::string>> alias_paths_;
  std::set<std::string> tenant_names_;
  std::map<std::string, bool> tenant_allow_root_;  // tenant -> allow_root
  size_t queue_count_ = 0;
};

}  // namespace

bool IsReservedUserName(std::string_view name) { return name == "admin" || name == "anonymous"; }

Result<ClusterConfig> ParseConfigYaml(std::string_view yaml) {
  const TreeLimits limits{kMaxConfigBytes, kMaxConfigDepth, kMaxConfigValues};
  Result<Value> tree = ParseYamlTree(yaml, limits, "the configuration");
  if (!tree.ok()) return tree.status();
  if (tree->kind != Value::Kind::kMapping) {
    return ErrorAt(*tree, "",
                   fmt::format("the configuration must be a mapping (gpu_models, "
                               "priority_classes, tenants, users, nodes), got {}",
                               Describe(*tree)));
  }
  ClusterConfig config;
  ConfigParser parser(&config);
  ARBITER_RETURN_IF_ERROR(parser.Parse(*tree));
  return config;
}

}  // namespace arbiter::api

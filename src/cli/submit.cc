// `arbiter submit`: a command after --, a job file (YAML or JSON), or a Slurm batch script.
//
// Precedence, last wins: the file's or script's own settings (#SBATCH, then #ARBITER lines), then
// the command line's flags, then (for the queue only) ARBITER_QUEUE or the saved default queue
// when nothing named one. The job is validated here with the server's own codec before anything
// is sent, so a bad field is reported without a request.
#include <fmt/format.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "api/job_codec.h"
#include "api/k8s_manifest.h"
#include "cli/commands.h"
#include "cli/sbatch.h"
#include "cli/suggest.h"
#include "cli/views.h"
#include "model/job_array.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

// The flags that describe a job: on the command line and on #ARBITER lines.
struct JobFlags {
  std::string queue, type, priority, name, walltime, workdir, image, cpus, memory, gpu_memory,
      gpu_share, dependency, nodelist, exclude, mail_user, mail_type, export_env;
  int32_t gpus = 0, tasks = 1, retries = 0;
  int64_t grace = 0;
  std::vector<std::string> gpu_models, env, secret_env, selectors, tolerations;
  bool distinct_nodes = false, preemptible = false, not_preemptible = false, exclusive = false;
  std::map<std::string, CLI::Option*> opts;

  bool given(const std::string& flag) const {
    auto it = opts.find(flag);
    return it != opts.end() && it->second->count() > 0;
  }
};

void AddJobFlags(CLI::App* app, JobFlags* f) {
  const char* g = "Job";
  auto add = [&](const std::string& name, auto& value, const std::string& help) {
    CLI::Option* o = app->add_option(fmt::format("--{}", name), value, help)->group(g);
    f->opts[name] = o;
    return o;
  };
  add("queue", f->queue, "Queue to submit to (else ARBITER_QUEUE, the saved default)");
  add("gpus", f->gpus, "Whole GPUs per task")->check(CLI::Range(0, 1024));
  add("gpu-share", f->gpu_share, "A share of one GPU per task: 0.25, 0.5 (instead of --gpus)");
  add("gpu-memory", f->gpu_memory, "GPU memory needed on each GPU: 20Gi, 40960 (MiB)");
  add("tasks", f->tasks, "Tasks that start together (a gang)")->check(CLI::Range(1, 100000));
  add("gpu-model", f->gpu_models, "Allowed GPU model, repeatable, in order of preference")
      ->allow_extra_args(false);
  add("type", f->type, "training, fine-tuning, evaluation, batch-inference, service, experiment")
      ->check(CLI::IsMember(
          {"training", "fine-tuning", "evaluation", "batch-inference", "service", "experiment"}));
  add("priority", f->priority, "Priority class (arbiter priority-classes lists them)");
  add("name", f->name, "Job name");
  add("walltime", f->walltime, "Longest run: 2h, 1h30m, 90m, 1d12h or Slurm's 1-12, 2:30:00");
  add("retries", f->retries, "Retries after a failure")->check(CLI::Range(0, 1000));
  add("dependency", f->dependency,
      "Start only after other jobs: afterok:ID[:ID], afterany:ID, afternotok:ID, after:ID, "
      "singleton; several joined by ',' (as Slurm's -d)");
  add("env", f->env, "Environment variable K=V (K alone: its value here), repeatable")
      ->allow_extra_args(false);
  add("secret-env", f->secret_env,
      "Secret variable K (its value here) or K=V: the task gets it, the API never shows it; "
      "repeatable")
      ->allow_extra_args(false);
  add("workdir", f->workdir, "Working directory of the tasks (absolute, or relative to here)");
  add("cpus", f->cpus, "CPUs per task: 8, 0.5");
  add("memory", f->memory, "Memory per task: 64Gi, 64G, 512Mi, 65536 (MiB)");
  add("node-selector", f->selectors, "Node label key=value, repeatable")->allow_extra_args(false);
  add("toleration", f->tolerations, "Tolerate taint key[=value], repeatable")
      ->allow_extra_args(false);
  add("image", f->image, "Container image");
  add("grace-period", f->grace, "Seconds from SIGTERM to SIGKILL")->check(CLI::Range(0, 86400));
  f->opts["distinct-nodes"] =
      app->add_flag("--distinct-nodes", f->distinct_nodes, "Every task on its own node")->group(g);
  f->opts["preemptible"] =
      app->add_flag("--preemptible", f->preemptible, "May be preempted (overrides the class)")
          ->group(g);
  f->opts["no-preemptible"] =
      app->add_flag("--no-preemptible", f->not_preemptible, "Must not be preempted")->group(g);
  f->opts["exclusive"] =
      app->add_flag("--exclusive", f->exclusive,
                    "Each task takes a node no other job uses, whole (and is charged for it)")
          ->group(g);
  add("nodelist", f->nodelist, "Only these nodes, a Slurm host list: gpu-[01-04],gpu-07");
  add("exclude", f->exclude, "Never these nodes, a Slurm host list");
  add("mail-user", f->mail_user, "Who hears about the job (kept with it; Slurm's --mail-user)");
  add("mail-type", f->mail_type, "When: BEGIN, END, FAIL, ALL, ... joined by ','");
  add("export", f->export_env,
      "The submitter's environment for the job: ALL, NONE, or VAR[=VALUE],... (scripts: ALL "
      "by default, as sbatch; commands: none)");
}

// A decimal with at most 3 decimals in thousandths ("0.5" -> 500).
Result<int64_t> Milli(const std::string& s, const std::string& flag) {
  int64_t whole = 0;
  int64_t frac = 0;
  int digits = 0;
  bool dot = false;
  bool any = false;
  for (char c : s) {
    if (c == '.' && !dot) {
      dot = true;
    } else if (c >= '0' && c <= '9' && (!dot || digits < 3) && whole < (int64_t{1} << 40)) {
      any = true;
      if (dot) {
        frac = frac * 10 + (c - '0');
        ++digits;
      } else {
        whole = whole * 10 + (c - '0');
      }
    } else {
      return InvalidArgument(flag,
                             fmt::format("--{} {}: use a number with at most 3 decimals", flag, s));
    }
  }
  if (!any) return InvalidArgument(flag, fmt::format("--{}: a number is needed", flag));
  while (digits++ < 3) frac *= 10;
  return whole * 1000 + frac;
}

// Sizes in MiB: 64Gi, 1.5Gi, 64G, 512M, 65536 (rounded up to whole MiB).
Result<int64_t> MemoryMib(const std::string& s, const std::string& flag) {
  std::string num = s;
  std::string unit;
  while (!num.empty() && std::isalpha(static_cast<unsigned char>(num.back()))) {
    unit.insert(unit.begin(),
                static_cast<char>(std::toupper(static_cast<unsigned char>(num.back()))));
    num.pop_back();
  }
  if (unit.size() > 1 &&
      (unit.substr(1) == "I" || unit.substr(1) == "B" || unit.substr(1) == "IB")) {
    unit = unit.substr(0, 1);
  }
  auto bad = [&] {
    return InvalidArgument(flag, fmt::format("--{} {}: use a size such as 64Gi, 512Mi or a number "
                                             "of MiB",
                                             flag, s));
  };
  auto milli = Milli(num, flag);
  if (!milli.ok()) return bad();
  // MiB per unit; K is handled apart (1/1024 MiB).
  const int64_t per_mib = unit.empty() || unit == "M" ? 1
                          : unit == "G"               ? 1024
                          : unit == "T"               ? 1024 * 1024
                                                      : 0;
  if (unit == "K") return (*milli + int64_t{1024} * 1000 - 1) / (int64_t{1024} * 1000);
  if (per_mib == 0) return bad();
  if (*milli / 1000 > (int64_t{1} << 40) / per_mib) {
    return InvalidArgument(flag, fmt::format("--{} {}: too large", flag, s));
  }
  return (*milli * per_mib + 999) / 1000;
}

// --exclusive, --nodelist, --exclude, --mail-user, --mail-type (as sbatch's).
Status ApplyNodeAndMailFlags(const JobFlags& f, JobSpec* job) {
  if (f.given("exclusive")) job->exclusive = f.exclusive;
  for (const auto& [flag, out] :
       {std::pair<const char*, std::vector<std::string>*>{"nodelist", &job->nodes},
        {"exclude", &job->exclude_nodes}}) {
    if (!f.given(flag)) continue;
    auto hosts = ExpandHostList(std::string(flag) == "nodelist" ? f.nodelist : f.exclude);
    if (!hosts.ok()) {
      return InvalidArgument(flag, fmt::format("--{}: {}", flag, hosts.status().message()));
    }
    *out = std::move(hosts).value();
  }
  if (f.given("mail-user") || f.given("mail-type")) {
    MailSpec mail = job->mail.value_or(MailSpec{});
    if (f.given("mail-user")) mail.user = f.mail_user;
    if (mail.user.empty() && std::getenv("USER") != nullptr) mail.user = std::getenv("USER");
    if (f.given("mail-type")) {
      mail.types.clear();
      std::string t;
      for (char c : f.mail_type + ",") {
        if (c != ',') {
          t += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        } else if (!t.empty()) {
          mail.types.push_back(std::exchange(t, ""));
        }
      }
    }
    job->mail = std::move(mail);
  }
  return Status::Ok();
}

// The submitter's environment, for --export.
std::map<std::string, std::string> Environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

Status ApplyJobFlags(const JobFlags& f, JobSpec* job) {
  if (f.given("queue")) job->queue = f.queue;
  if (f.given("name")) job->name = f.name;
  if (f.given("priority")) job->priority_class = f.priority;
  if (f.given("type") && !ParseJobType(f.type, &job->type)) {
    return InvalidArgument("type", fmt::format("unknown job type {}", f.type));
  }
  if (f.given("tasks")) job->tasks = f.tasks;
  if (f.given("distinct-nodes")) job->distinct_nodes = f.distinct_nodes;
  if (f.given("gpus")) {
    job->resources.gpus = f.gpus;
    job->resources.gpu_milli = 1000;
  }
  if (f.given("gpu-share")) {
    auto m = Milli(f.gpu_share, "gpu-share");
    if (!m.ok()) return m.status();
    if (*m <= 0 || *m > 1000) {
      return InvalidArgument("gpu-share", "--gpu-share must be above 0 and at most 1 (one GPU)");
    }
    job->resources.gpus = 1;
    job->resources.gpu_milli = static_cast<int32_t>(*m);
  }
  if (f.given("gpu-memory")) {
    auto m = MemoryMib(f.gpu_memory, "gpu-memory");
    if (!m.ok()) return m.status();
    job->resources.gpu_memory_mib = *m;
  }
  if (f.given("cpus")) {
    auto m = Milli(f.cpus, "cpus");
    if (!m.ok()) return m.status();
    job->resources.cpu_milli = *m;
  }
  if (f.given("memory")) {
    auto m = MemoryMib(f.memory, "memory");
    if (!m.ok()) return m.status();
    job->resources.memory_mib = *m;
  }
  if (f.given("gpu-model")) job->gpu_models = f.gpu_models;
  if (f.given("walltime")) {
    auto w = ParseDuration(f.walltime);
    if (!w.ok()) return w.status();
    job->walltime_seconds = *w;
  }
  if (f.given("retries")) job->retry.max_retries = f.retries;
  if (f.given("dependency")) {
    auto deps = ParseSlurmDependency(f.dependency);
    if (!deps.ok()) return deps.status();
    job->depends_on = std::move(deps).value();
  }
  // K=V, or K alone for its value in this environment (a secret then stays out of the history).
  auto put = [](const std::string& flag, const std::string& kv,
                std::map<std::string, std::string>* out) -> Status {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) {
      (*out)[kv.substr(0, eq)] = kv.substr(eq + 1);
      return Status::Ok();
    }
    const char* here = std::getenv(kv.c_str());
    if (here == nullptr) {
      return InvalidArgument(
          flag, fmt::format("--{} {}: not set here; use --{} {}=VALUE", flag, kv, flag, kv));
    }
    (*out)[kv] = here;
    return Status::Ok();
  };
  for (const std::string& kv : f.env) ARBITER_RETURN_IF_ERROR(put("env", kv, &job->env));
  for (const std::string& kv : f.secret_env) {
    ARBITER_RETURN_IF_ERROR(put("secret-env", kv, &job->secret_env));
  }
  if (f.given("workdir")) {
    namespace fs = std::filesystem;
    std::error_code ec;
    job->workdir = fs::path(f.workdir).is_absolute()
                       ? f.workdir
                       : (fs::current_path(ec) / f.workdir).lexically_normal().string();
  }
  for (const std::string& kv : f.selectors) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      return InvalidArgument("node-selector", fmt::format("--node-selector {}: use key=value", kv));
    }
    job->node_selector[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : f.tolerations) {
    const size_t eq = kv.find('=');
    job->tolerations.push_back(
        {kv.substr(0, eq), eq == std::string::npos ? "" : kv.substr(eq + 1)});
  }
  if (f.given("image")) job->container_image = f.image;
  if (f.given("grace-period")) job->grace_period_seconds = f.grace;
  if (f.preemptible && f.not_preemptible) {
    return InvalidArgument("preemptible", "give --preemptible or --no-preemptible, not both");
  }
  if (f.given("preemptible")) job->preemptible = true;
  if (f.given("no-preemptible")) job->preemptible = false;
  return ApplyNodeAndMailFlags(f, job);
}

struct SubmitState {
  JobFlags flags;
  std::vector<std::string> args;
  std::string unused;
  bool dry_run = false;
  bool parsable = false;
  std::string idempotency_key;
  std::string array;  // --array: a job array's indices (Slurm's syntax)
  std::string file;   // -f: the job file (as the first word)
  // arbiter sbatch: its words (options, the script, its arguments), and what sbatch prints.
  bool sbatch = false;
  std::vector<std::string> sbatch_words;
  bool wait = false;                     // sbatch -W: wait for the job; exit with its exit code
  std::vector<std::string> extras;       // options submit does not know
  std::vector<std::string> flags_known;  // submit's own long flags, for "did you mean"
};

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return InvalidArgument("", fmt::format("cannot read {}", path));
  std::stringstream s;
  s << f.rdbuf();
  if (s.str().size() > (size_t{1} << 20)) {
    return InvalidArgument("", fmt::format("{} is larger than 1 MiB", path));
  }
  return s.str();
}

// `array`: the file's job array ("array": {"indices", "max_running"}), when it has one.
// A Kubernetes manifest (a Job or a PyTorchJob) is translated (api/k8s_manifest.h), with one
// warning naming the fields it ignored.
Result<JobSpec> JobFromFile(const std::string& path, const std::string& text,
                            const std::string& queue, std::optional<api::ArrayRequest>* array) {
  json doc;
  try {
    doc = YamlToJson(YAML::Load(text));  // JSON is YAML
  } catch (const YAML::Exception& e) {
    return InvalidArgument("", fmt::format("{}: not valid YAML or JSON: {}", path, e.what()));
  }
  if (api::IsK8sManifest(doc)) {
    auto t = api::TranslateK8sManifest(text);
    if (!t.ok()) {
      return Status(t.status().code(), fmt::format("{}: {}", path, Describe(t.status())),
                    t.status().field());
    }
    if (t->is_service) {
      return InvalidArgument("", fmt::format("{}: a Deployment is a service: create it with "
                                             "arbiter apply -f {}",
                                             path, path));
    }
    if (!t->ignored.empty()) Warn(t->Warning());
    doc = std::move(t->body);
  }
  if (!doc.is_object()) {
    return InvalidArgument("",
                           fmt::format("{}: must hold one job object (queue, command, ...)", path));
  }
  if ((!doc.contains("queue") || doc["queue"].is_null()) && !queue.empty()) doc["queue"] = queue;
  auto spec = api::ParseJobSubmission(doc.dump(), array);
  if (!spec.ok()) {
    const Status& st = spec.status();
    std::string msg = st.message();
    if (st.field() == "queue" && !doc.contains("queue")) {
      msg += "; add queue: to the file or pass --queue";  // (absent is the tenant's default)
    }
    return Status(st.code(),
                  fmt::format("{}: {}", path, Describe(Status(st.code(), msg, st.field()))));
  }
  return spec;
}

std::string RandomKey() {
  std::random_device rd;
  return fmt::format("cli-{:08x}{:08x}{:08x}", rd(), rd(), rd());
}

// GPU model names as the cluster spells them: "a100" -> "A100-80G" (case-insensitive, then a
// unique or several prefix matches, kept in order of preference).
void ResolveGpuModels(ApiClient& api, JobSpec* job) {
  if (job->gpu_models.empty()) return;
  auto nodes = api.Get("/api/v1/nodes");
  if (!nodes.ok()) return;
  std::set<std::string> known;
  for (const json& n : (*nodes)["items"]) {
    for (const json& g : n.value("gpus", json::array())) known.insert(g.value("model", ""));
  }
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  std::vector<std::string> out;
  for (const std::string& want : job->gpu_models) {
    std::vector<std::string> match;
    if (known.count(want)) {
      match = {want};
    } else {
      for (const std::string& k : known) {
        if (lower(k) == lower(want)) match = {k};
      }
      if (match.empty()) {
        for (const std::string& k : known) {
          if (lower(k).rfind(lower(want), 0) == 0) match.push_back(k);
        }
      }
    }
    if (match.empty()) match = {want};  // the server names the known ones
    if (match.size() != 1 || match[0] != want) {
      std::string joined;
      for (const std::string& m : match) AppendTo(&joined, ", ", m);
      Note(fmt::format("GPU model {} is {} on this cluster", want, joined));
    }
    for (const std::string& m : match) {
      if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
    }
  }
  job->gpu_models = out;
}

// #SBATCH -A: the tenant must be the token's (or, for admins, the queue's).
Status CheckAccount(ApiClient& api, const std::string& account, const std::string& queue) {
  auto who = api.Get("/api/v1/whoami");
  if (!who.ok()) return who.status();
  const std::string tenant = who->value("tenant", "");
  if (who->value("role", "") != "admin") {
    if (tenant != account) {
      return InvalidArgument(
          "account", fmt::format("#SBATCH --account={}: your token is for tenant {}; use a token "
                                 "of {} or remove the directive",
                                 account, tenant.empty() ? "(none)" : tenant, account));
    }
    return Status::Ok();
  }
  auto q = api.Get(fmt::format("/api/v1/queues/{}", queue));
  if (q.ok() && q->value("tenant", "") != account) {
    return InvalidArgument("account", fmt::format("#SBATCH --account={}: queue {} belongs to "
                                                  "tenant {}",
                                                  account, queue, q->value("tenant", "")));
  }
  return Status::Ok();
}

// The words of the command line from `first` (the first positional word after "submit") on, in
// the order typed, without "--": a command written without the separator, flags included.
std::vector<std::string> CommandAsTyped(const std::vector<std::string>& argv,
                                        const std::string& first) {
  std::vector<std::string> out;
  bool in_submit = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (!in_submit) {
      in_submit = argv[i] == "submit";
      continue;
    }
    if (out.empty() && argv[i] != first) continue;
    if (argv[i] != "--") out.push_back(argv[i]);
  }
  return out;
}

// Where "--" is on the command line after "submit" (-1: not there), and how many words follow.
int WordsAfterSeparator(const std::vector<std::string>& argv) {
  bool in_submit = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (!in_submit && argv[i] == "submit") {
      in_submit = true;
    } else if (in_submit && argv[i] == "--") {
      return static_cast<int>(argv.size() - i - 1);
    }
  }
  return -1;
}

bool HasSuffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Built {
  JobSpec job;
  std::string source;  // the file ("" : a command)
  bool from_script = false;
  std::string account;  // #SBATCH -A
  std::string array;    // #SBATCH --array, or the job file's array (with its %N)
  std::vector<std::string> unsupported;
  std::vector<std::string> notes;
};

// A batch script's job: its directives, then `sbatch_options` (arbiter sbatch's command line,
// which overrides them, as sbatch's does), then --export when given.
Result<Built> BuildFromScript(const std::string& path, const std::string& text,
                              std::vector<std::string> args,
                              const std::vector<std::string>& sbatch_options,
                              const std::string& export_override) {
  Built b;
  auto script = ParseBatchScript(text);
  if (!script.ok()) {
    return Status(script.status().code(), fmt::format("{}: {}", path, script.status().message()),
                  script.status().field());
  }
  if (!sbatch_options.empty()) {
    auto end = ApplySbatchOptions(sbatch_options, &*script);
    if (!end.ok()) return end.status();
  }
  if (!export_override.empty()) script->slurm.export_env = export_override;
  namespace fs = std::filesystem;
  std::error_code ec;
  ScriptContext sc;
  sc.text = text;
  sc.name = fs::path(path).filename().string();
  sc.args = std::move(args);
  sc.submit_dir = fs::current_path(ec).string();
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) sc.submit_host = host;
  sc.environment = Environment();
  b.notes = script->notes;
  auto job = JobFromBatchScript(*script, sc, &b.notes);
  if (!job.ok()) {
    return Status(job.status().code(), fmt::format("{}: {}", path, job.status().message()),
                  job.status().field());
  }
  b.job = std::move(job).value();
  b.source = path;
  b.from_script = true;
  b.unsupported = script->unsupported;
  b.account = script->slurm.account.value_or("");
  b.array = script->slurm.array.value_or("");
  if (!script->arbiter_args.empty()) {
    CLI::App a{"#ARBITER directives"};
    JobFlags af;
    AddJobFlags(&a, &af);
    std::vector<std::string> words(script->arbiter_args.rbegin(), script->arbiter_args.rend());
    try {
      a.parse(words);
    } catch (const CLI::ParseError& e) {
      return InvalidArgument("", fmt::format("{}: #ARBITER: {}", path, e.what()));
    }
    Status st = ApplyJobFlags(af, &b.job);
    if (!st.ok()) {
      return Status(st.code(), fmt::format("{}: #ARBITER: {}", path, Describe(st)), st.field());
    }
  }
  return b;
}

// What to run, from the words given: a command (after --, or not a file), a job file or a batch
// script. Errors are usage errors.
Result<Built> BuildJob(const ContextPtr& ctx, const SubmitState& st, const Connection& conn) {
  // Split the words at "--".
  const int after = WordsAfterSeparator(ctx->argv);
  const auto n_after =
      static_cast<std::ptrdiff_t>(after < 0 ? 0 : std::min<size_t>(after, st.args.size()));
  const std::vector<std::string> before(st.args.begin(), st.args.end() - n_after);
  const std::vector<std::string> rest(st.args.end() - n_after, st.args.end());
  if (before.empty() && rest.empty()) {
    return InvalidArgument("",
                           "nothing to run: arbiter submit [FLAGS] -- COMMAND ARGS..., arbiter "
                           "submit job.yaml, or arbiter submit script.sh (see arbiter submit "
                           "--help)");
  }
  Built b;
  std::error_code ec;
  if (before.empty()) {
    b.job.command = rest;
    if (st.flags.given("export")) {
      ARBITER_RETURN_IF_ERROR(
          ExportEnvironment(st.flags.export_env, Environment(), &b.job, &b.notes));
    }
    return b;
  }
  if (!std::filesystem::is_regular_file(before[0], ec)) {
    // A command written without "--" would run something other than the user meant (its flags
    // taken for this command's): say how to write it, and send nothing.
    std::string words;
    for (const std::string& w : CommandAsTyped(ctx->argv, before[0])) {
      AppendTo(&words, " ", ShellQuote(w));
    }
    return InvalidArgument(
        "", fmt::format("{}: no such file{}; to run a command on the node, put it after --: "
                        "arbiter submit [FLAGS] -- {}",
                        before[0],
                        std::filesystem::is_directory(before[0], ec) ? " (it is a folder)" : "",
                        words));
  }
  const std::string& path = before[0];
  b.source = path;
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<std::string> args(before.begin() + 1, before.end());
  args.insert(args.end(), rest.begin(), rest.end());
  const size_t first = text->find_first_not_of(" \t\r\n");
  const bool job_file = HasSuffix(path, ".yaml") || HasSuffix(path, ".yml") ||
                        HasSuffix(path, ".json") ||
                        (first != std::string::npos && (*text)[first] == '{');
  if (!job_file) {
    return BuildFromScript(path, *text, std::move(args), {},
                           st.flags.given("export") ? st.flags.export_env : "");
  }
  if (!args.empty()) {
    return InvalidArgument("", fmt::format("{} is a job file: it takes no arguments (the command "
                                           "is in the file)",
                                           path));
  }
  std::optional<api::ArrayRequest> array;
  auto job =
      JobFromFile(path, *text, st.flags.given("queue") ? st.flags.queue : conn.queue, &array);
  if (!job.ok()) return job.status();
  b.job = std::move(job).value();
  if (array) {  // as --array would say it
    b.array = array->max_running > 0 ? fmt::format("{}%{}", array->indices, array->max_running)
                                     : array->indices;
  }
  return b;
}

// The body with secret values masked.
json Masked(json j) {
  if (j.contains("secret_env")) {
    json& secrets = j["secret_env"];
    for (auto it = secrets.begin(); it != secrets.end(); ++it) *it = "(secret)";
  }
  return j;
}

// --dry-run: the body (every element of an array), nothing sent.
// The server's "queue is required" for a job sent without one, with how to give one here.
Status NoQueueHint(const Status& st, const std::string& queue, bool from_script) {
  if (!queue.empty() || st.field().find("queue") == std::string::npos) return st;
  return Status(st.code(),
                fmt::format("{}; pass --queue QUEUE{} (or save a default with arbiter login "
                            "--queue)",
                            st.message(), from_script ? ", or add #SBATCH -p QUEUE" : ""),
                st.field());
}

int DryRun(const ContextPtr& ctx, const json& body, size_t elements) {
  const OutputFormat f =
      ctx->format() == OutputFormat::kJson ? OutputFormat::kJson : OutputFormat::kYaml;
  PrintStructured(Masked(body), f);
  if (elements > 0) {
    std::fprintf(stderr, "dry run: nothing was submitted (a job array of %zu jobs)\n", elements);
  } else {
    std::fprintf(stderr, "dry run: nothing was submitted\n");
  }
  return kExitOk;
}

// What `submit` prints for a job array (the server answered its first element, whose id is the
// array's): the id alone with --parsable (as sbatch's), every element with -o json|yaml.
int PrintArray(const ContextPtr& ctx, const SubmitState& st, ApiClient& api, const json& first,
               const ArraySpec& array) {
  const uint64_t id = first.value("id", uint64_t{0});
  if (st.parsable) {
    std::printf("%llu\n", static_cast<unsigned long long>(id));
    return kExitOk;
  }
  if (IsStructured(ctx->format())) {
    auto items = api.ListAll(fmt::format("/api/v1/jobs?array={}", id));
    if (!items.ok()) return Fail(items.status());
    PrintStructured(json{{"items", *items}}, ctx->format());
    return kExitOk;
  }
  const size_t n = array.expanded.size();
  if (st.sbatch) {
    std::printf("Submitted batch job %llu\n", static_cast<unsigned long long>(id));
    return kExitOk;
  }
  std::printf(
      "array %llu submitted to %s: %zu jobs (ids %llu to %llu, indices %s)%s\n",
      static_cast<unsigned long long>(id), first.value("queue", "").c_str(), n,
      static_cast<unsigned long long>(id), static_cast<unsigned long long>(id + n - 1),
      ArrayIndicesText(array.expanded).c_str(),
      array.max_running > 0 ? fmt::format(", at most {} at once", array.max_running).c_str() : "");
  return kExitOk;
}

// arbiter sbatch [OPTIONS] script.sh [ARGS...]: sbatch's own options (--parsable, --test-only,
// -W/--wait) are this command's; the others are the script's directives, given on the command
// line, where they override the script's.
Result<Built> BuildSbatch(SubmitState& st) {
  std::vector<std::string> options;
  size_t at = 0;
  for (; at < st.sbatch_words.size(); ++at) {
    const std::string& w = st.sbatch_words[at];
    if (w == "--parsable") {
      st.parsable = true;
    } else if (w == "--test-only") {
      st.dry_run = true;
    } else if (w == "-W" || w == "--wait") {
      st.wait = true;
    } else {
      options.push_back(w);
    }
  }
  BatchScript probe;
  auto end = ApplySbatchOptions(options, &probe);
  if (!end.ok()) return end.status();
  if (*end >= options.size()) {
    return InvalidArgument("",
                           "no batch script: arbiter sbatch [OPTIONS] script.sh [ARGS...] "
                           "(reading the script from standard input is not supported)");
  }
  const std::string path = options[*end];
  std::vector<std::string> args(options.begin() + static_cast<std::ptrdiff_t>(*end) + 1,
                                options.end());
  options.resize(*end);
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return BuildFromScript(path, *text, std::move(args), options, "");
}

// sbatch -W: waits for the job to end; its exit code (1 when it ended without one).
int WaitForExit(ApiClient& api, uint64_t id) {
  static const std::set<std::string> kFinal = {"succeeded", "failed", "cancelled", "timed-out"};
  auto pause = std::chrono::milliseconds(100);
  for (;;) {
    auto r = api.Get(fmt::format("/api/v1/jobs/{}", id));
    if (!r.ok() && r.status().code() != StatusCode::kUnavailable) return Fail(r.status());
    if (r.ok() && kFinal.count(r->value("state", ""))) {
      const json& exit = r->value("exit_code", json());
      return exit.is_number() ? exit.get<int>() : (r->value("state", "") == "succeeded" ? 0 : 1);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

int Submit(const ContextPtr& ctx, SubmitState& st) {
  auto conn = ctx->Resolve();
  if (!conn.ok()) return Fail(conn.status(), kExitUsage);
  if (!st.file.empty()) {
    if (!st.args.empty()) {
      return Fail(InvalidArgument("", fmt::format("-f {} is a job file: it takes no command or "
                                                  "arguments",
                                                  st.file)),
                  kExitUsage);
    }
    st.args.push_back(st.file);
  }
  // Options this command does not know: a command's own flags written without "--" (BuildJob
  // says how to write it), else a mistake.
  if (!st.extras.empty()) {
    // A near miss of one of submit's own flags (--gpu for --gpus) is a typo when the command is
    // after "--" (or there is none): not one of the command's own options.
    const int after_separator = WordsAfterSeparator(ctx->argv);
    for (const std::string& e : st.extras) {
      if (after_separator < 0 && !st.args.empty()) break;
      const std::string flag = e.substr(0, e.find('='));
      if (flag.size() < 3 || flag.rfind("--", 0) != 0) continue;
      const std::string near = DidYouMean(flag, st.flags_known);
      if (near.empty()) continue;
      std::fprintf(stderr, "error: unknown flag \"%s\" for \"arbiter submit\"%s\n", flag.c_str(),
                   near.c_str());
      return kExitUsage;
    }
    std::error_code ec;
    const int after = after_separator;
    const bool command_before_separator =
        !st.args.empty() && (after < 0 || static_cast<size_t>(after) < st.args.size()) &&
        !std::filesystem::is_regular_file(st.args[0], ec);
    if (!command_before_separator) {
      return Fail(InvalidArgument("", fmt::format("unknown option {} (see arbiter submit --help; "
                                                  "a command's own options go after --)",
                                                  st.extras[0])),
                  kExitUsage);
    }
  }

  // 1. What to run.
  auto built = st.sbatch ? BuildSbatch(st) : BuildJob(ctx, st, *conn);
  if (!built.ok()) return Fail(built.status(), kExitUsage);
  Built& b = *built;
  const bool from_script = b.from_script;

  // 2. The command line's flags, then the default queue.
  Status applied = ApplyJobFlags(st.flags, &b.job);
  if (!applied.ok()) return Fail(applied, kExitUsage);
  if (from_script) SetSlurmJobEnv(&b.job);
  if (b.job.queue.empty()) b.job.queue = conn->queue;
  if (!b.unsupported.empty()) {
    std::string list;
    for (const std::string& u : b.unsupported) AppendTo(&list, ", ", u);
    Warn(fmt::format("{}: #SBATCH directives Arbiter does not support, ignored: {}", b.source,
                     list));
  }
  for (const std::string& n : b.notes) Note(n);

  // 3. No queue: the server uses the tenant's default_queue (an error there lists the queues).
  if (b.job.queue.empty()) {
    Note(st.dry_run ? "no queue given: the server would use your tenant's default_queue"
                    : "no queue given: the server uses your tenant's default_queue");
  }

  // 4. Validate as the server will.
  json body = api::JobSpecToJson(b.job);
  auto checked = api::ParseJobSubmission(body.dump());
  if (!checked.ok()) {
    return Fail(Status(checked.status().code(),
                       fmt::format("the job is not valid: {}", Describe(checked.status()))),
                kExitUsage);
  }
  body = api::JobSpecToJson(*checked);

  // A job array: the server makes one job per index (each has ARBITER_ARRAY_* in its
  // environment, and a script's wrapper SLURM_ARRAY_* from them).
  const std::string array_spec = !st.array.empty() ? st.array : b.array;
  std::optional<ArraySpec> array;
  if (!array_spec.empty()) {
    auto a = ParseArraySpec(array_spec);
    if (!a.ok()) return Fail(a.status(), kExitUsage);
    array = std::move(a).value();
  }
  auto with_array = [&array](json job) {
    if (array) job["array"] = api::ArrayRequestToJson({array->indices, {}, array->max_running});
    return job;
  };

  // 5. Dry run: the body, nothing sent (and no secret value printed).
  if (st.dry_run) return DryRun(ctx, with_array(body), array ? array->expanded.size() : 0);

  // 6. Submit.
  ApiClient api(*conn);
  if (!b.account.empty() && !b.job.queue.empty()) {
    Status acc = CheckAccount(api, b.account, b.job.queue);
    if (!acc.ok()) return Fail(acc);
  }
  ResolveGpuModels(api, &b.job);
  body = with_array(api::JobSpecToJson(b.job));
  const std::string key = st.idempotency_key.empty() ? RandomKey() : st.idempotency_key;
  HeaderMap headers = {{"Idempotency-Key", key}};
  // A broken connection is retried with the same key: the server answers with the job it made
  // the first time, if it made one.
  auto r = api.Post("/api/v1/jobs", body, headers);
  auto broken = [](const Status& e) {
    // A refused connection sent nothing: no retry.
    return e.code() == StatusCode::kUnavailable && e.message().rfind("cannot reach", 0) != 0;
  };
  for (int attempt = 1; attempt < 3 && !r.ok() && broken(r.status()); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500 * attempt));
    r = api.Post("/api/v1/jobs", body, headers);
  }
  if (!r.ok()) return Fail(NoQueueHint(r.status(), b.job.queue, from_script));
  const uint64_t id = r->value("id", uint64_t{0});
  if (array) {
    const int printed = PrintArray(ctx, st, api, *r, *array);
    if (printed != kExitOk || !st.wait) return printed;
    // -W/--wait: every element, as sbatch waits for a whole array; the highest exit code.
    std::fflush(stdout);
    int worst = kExitOk;
    for (uint64_t e = id; e < id + array->expanded.size(); ++e) {
      worst = std::max(worst, WaitForExit(api, e));
    }
    return worst;
  }
  if (st.parsable) {
    std::printf("%llu\n", static_cast<unsigned long long>(id));
  } else if (st.sbatch) {
    std::printf("Submitted batch job %llu\n", static_cast<unsigned long long>(id));
  } else if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
  } else {
    std::printf("job %llu submitted to %s (%s)\n",
                static_cast<unsigned long long>(r->value("id", uint64_t{0})),
                r->value("queue", "").c_str(), r->value("state", "").c_str());
  }
  if (st.wait) {
    std::fflush(stdout);
    return WaitForExit(api, id);
  }
  return kExitOk;
}

// The usage line without the placeholder positional.
class SubmitFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string name) const override {
    return fmt::format(
        "Usage: {} [OPTIONS] (-- COMMAND [ARGS...] | job.yaml | script.sh "
        "[ARGS...])\n",
        name);
  }
};

}  // namespace

void RegisterSubmitCommand(CLI::App& app, const ContextPtr& ctx) {
  auto st = std::make_shared<SubmitState>();
  auto* cmd = app.add_subcommand(
      "submit",
      "Submit a job: a command after --, a job file (YAML or JSON), or a Slurm batch script");
  cmd->formatter(std::make_shared<SubmitFormatter>());
  AddJobFlags(cmd, &st->flags);
  cmd->add_option("args", st->args, "job.yaml | script.sh [ARGS...] | -- COMMAND [ARGS...]");
  // Never filled: while a positional is still open, CLI11 keeps the words after "--" for this
  // command instead of handing them back to the parent.
  cmd->add_option("unused", st->unused)->group("");
  cmd->add_flag("--dry-run", st->dry_run,
                "Print the job that would be submitted (-o json: the request body); send nothing");
  cmd->add_option("-f,--file", st->file,
                  "A job file: the job object (YAML or JSON), or a Kubernetes batch/v1 Job or "
                  "kubeflow.org/v1 PyTorchJob (docs/kubernetes.md)");
  cmd->add_flag("--parsable", st->parsable, "Print only the new job's id");
  cmd->add_option("--array", st->array,
                  "A job array, Slurm's syntax (0-9, 1,3,5, 0-20:5; %N: at most N at once): one "
                  "job per index, ARBITER_ARRAY_INDEX set (also #SBATCH --array)");
  cmd->add_option("--idempotency-key", st->idempotency_key,
                  "Submitting again with the same key returns the first job");
  AddClientFlags(cmd, ctx);
  AddOutputFlag(cmd, ctx, false);
  cmd->footer(
      "A job file holds the job object of the REST API (docs/config.md) as YAML or JSON, or a\n"
      "Kubernetes Job or PyTorchJob manifest (docs/kubernetes.md: one warning names the fields\n"
      "that have no meaning here).\n"
      "A batch script's #SBATCH directives are read as sbatch would (docs/cli.md lists them;\n"
      "unsupported ones are named in a warning); #ARBITER lines take this command's flags.\n"
      "Flags given here override the file's and the script's settings.\n\n"
      "Examples:\n"
      "  arbiter submit --queue vision-train --gpus 2 -- python train.py --epochs 3\n"
      "  arbiter submit --queue vision-dev --gpu-share 0.5 --walltime 2h -- python eval.py\n"
      "  arbiter submit --tasks 4 --distinct-nodes --gpus 8 --gpu-model A100-80G -- torchrun ...\n"
      "  arbiter submit job.yaml\n"
      "  arbiter submit -f pytorchjob.yaml        # kind: PyTorchJob, one gang\n"
      "  arbiter submit train.sh -- --lr 3e-4     # #SBATCH -p vision-train --gres=gpu:a100:4\n"
      "  arbiter submit --dry-run -o json train.sh\n"
      "  arbiter submit --array 0-99%8 --queue q -- sh -c 'python eval.py --shard "
      "$ARBITER_ARRAY_INDEX'\n"
      "  ID=$(arbiter submit --parsable --queue q -- ./run.sh) && arbiter wait $ID");
  // Unknown options are checked in Submit: a command written without "--" gets a better answer.
  cmd->allow_extras();
  cmd->callback([ctx, st, cmd] {
    // The separator itself comes back from CLI11 once the command's words are in `args`.
    st->extras.clear();
    st->flags_known = FlagNames(cmd);
    for (const std::string& e : cmd->remaining()) {
      if (e != "--") st->extras.push_back(e);
    }
    ctx->Run([&] { return Submit(ctx, *st); });
  });

  auto sb = std::make_shared<SubmitState>();
  sb->sbatch = true;
  auto* sbatch = app.add_subcommand(
      "sbatch", "Submit a Slurm batch script with sbatch's options (they override #SBATCH lines)");
  // Every word after the command is sbatch's: options, then the script and its arguments.
  sbatch->prefix_command();
  sbatch->footer(
      "Takes the options of #SBATCH lines on the command line, as sbatch does (docs/cli.md,\n"
      "\"Coming from Slurm\"), and prints \"Submitted batch job ID\". Also --parsable (the id\n"
      "only), --test-only (print the job, submit nothing), -W/--wait (wait; exit with the job's\n"
      "exit code). The server and token come from ARBITER_SERVER/ARBITER_TOKEN or arbiter "
      "login.\n\n"
      "Examples:\n"
      "  arbiter sbatch train.sh\n"
      "  arbiter sbatch -p gpu_a100 -N 2 --gres=gpu:8 -t 1-00:00:00 train.sh --lr 3e-4\n"
      "  arbiter sbatch --parsable --dependency=afterok:12 eval.sh\n"
      "  JOB=$(arbiter sbatch --parsable -W smoke.sh) && echo \"passed: $JOB\"");
  sbatch->callback([ctx, sb, sbatch] {
    sb->sbatch_words = sbatch->remaining();
    ctx->Run([&] { return Submit(ctx, *sb); });
  });
}

}  // namespace arbiter::cli

// The job commands: jobs, show, why, logs, cancel, suspend, resume, retry, wait, events.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/job_arrays.h"
#include "cli/job_refs.h"
#include "cli/slurm.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

const std::set<std::string>& FinalStates() {
  static const std::set<std::string> kFinal = {"succeeded", "failed", "cancelled", "timed-out"};
  return kFinal;
}

std::string Str(const json& j, const char* key, const char* fallback = "") {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return fallback;
  return it->get<std::string>();
}

uint64_t IdOf(const json& j) { return j.value("id", uint64_t{0}); }

// The job `text` names (123, or an array's element 123_7) into `*id`; else the exit code of why
// not (2 for another form, before any request).
int OneJob(ApiClient& api, const std::string& text, uint64_t* id) {
  auto ref = ParseJobRef(text);
  if (!ref.ok()) return Fail(ref.status(), kExitUsage);
  if (Status st = OneJobOnly(*ref); !st.ok()) return Fail(st, kExitUsage);
  auto r = ResolveOneJob(api, *ref);
  if (!r.ok()) return Fail(r.status());
  *id = *r;
  return kExitOk;
}

// --- jobs --------------------------------------------------------------------------------------

struct ListFlags {
  std::string queue, state, user, tenant, type;
  bool active = false, mine = false, all = false, expand = false;
  size_t limit = 0;
};

// Which jobs `arbiter jobs` asks for (docs/cli.md, "jobs"). By default the caller's own jobs that
// have not ended. A filter that names whose or where (--user, --tenant, --queue) lifts "own", one
// that names states (--state) lifts "not ended"; --all lifts both; --mine and --active put them
// back.
struct ListScope {
  bool only_mine = false;
  bool only_active = false;
  bool defaults = false;  // neither a filter nor --all: the plain `arbiter jobs`
};

ListScope ScopeOf(const ListFlags& f) {
  ListScope s;
  const bool whose = !f.user.empty() || !f.tenant.empty() || !f.queue.empty();
  s.only_mine = f.mine || (!f.all && !whose);
  s.only_active = f.active || (!f.all && f.state.empty());
  s.defaults = !f.all && !whose && f.state.empty() && f.type.empty() && !f.mine && !f.active;
  return s;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// NODELIST(REASON) as squeue writes it: where it runs, else why it waits or how it ended.
std::string NodesOrReason(const json& j) {
  const std::vector<std::string> nodes = JobNodeNames(j);
  const std::string state = Str(j, "state");
  if (!nodes.empty() && !FinalStates().count(state)) return CompressHostlist(nodes);
  std::string why = PendingCode(j);
  if (why.empty()) why = Str(j, "reason");
  return why.empty() ? "" : fmt::format("({})", why);
}

// One row of the jobs table: a job, or an array's elements (STATE: how many in each state; TIME:
// the longest; NODELIST: where the live ones run, else the first verdict).
std::vector<Cell> JobRow(const JobGroup& g, int64_t now, bool wide) {
  const json& j = *g.jobs.front();
  const bool many = g.jobs.size() > 1;
  std::string name = JobName(j);
  if (many && g.array) {  // the elements' names end with their index ("NAME-7")
    const std::string tail = fmt::format("-{}", g.array->index);
    if (name.size() > tail.size() &&
        name.compare(name.size() - tail.size(), tail.size(), tail) == 0) {
      name.resize(name.size() - tail.size());
    }
  }
  int64_t elapsed = 0;
  std::set<std::string> live_nodes;
  std::string waiting;
  for (const json* e : g.jobs) {
    elapsed = std::max(elapsed, JobElapsedSeconds(*e, now));
    if (!FinalStates().count(Str(*e, "state"))) {
      for (const std::string& n : JobNodeNames(*e)) live_nodes.insert(n);
    }
    if (waiting.empty() && !PendingCode(*e).empty()) waiting = fmt::format("({})", PendingCode(*e));
  }
  int64_t nodes = JobNodeCount(j);
  std::string where = NodesOrReason(j);
  if (many) {
    if (!live_nodes.empty()) nodes = static_cast<int64_t>(live_nodes.size());
    where = !live_nodes.empty()
                ? CompressHostlist(std::vector<std::string>(live_nodes.begin(), live_nodes.end()))
            : !waiting.empty() ? waiting
                               : where;
  }
  const std::string state = Str(j, "state");
  const int64_t wall = j.value("walltime_seconds", int64_t{0});
  std::vector<Cell> row = {g.array ? GroupId(g) : std::to_string(IdOf(j)),
                           OrDash(name),
                           Str(j, "queue"),
                           Str(j, "user"),
                           many ? Cell(StateCounts(g)) : Cell(state, StateColor(state)),
                           SqueueDuration(elapsed),
                           wall > 0 ? SqueueDuration(wall) : "UNLIMITED",
                           std::to_string(nodes),
                           JobGpus(j),
                           where};
  if (wide) {
    std::string full = Str(j, "reason");
    if (j.contains("pending") && j["pending"].is_object()) {
      full = fmt::format("{}: {}", Str(j["pending"], "code"), Str(j["pending"], "message"));
    }
    const json& exit = j.value("exit_code", json());
    row.push_back(Str(j, "tenant"));
    row.push_back(Str(j, "type"));
    row.push_back(OrDash(Str(j, "priority_class")));
    row.push_back(std::to_string(j.value("restarts", 0)));
    row.push_back(exit.is_number() ? std::to_string(exit.get<int>()) : "-");
    row.push_back(Age(j.value("submitted_at", json())));
    row.push_back(full);
  }
  return row;
}

int ListJobs(const ContextPtr& ctx, const ListFlags& f) {
  if (f.mine && !f.user.empty()) {
    return Fail(InvalidArgument("user", "--mine and --user ask for different users; give one"),
                kExitUsage);
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  const ListScope scope = ScopeOf(f);
  std::string user = f.user;
  if (scope.only_mine) {
    auto who = api.Get("/api/v1/whoami");
    if (!who.ok()) return Fail(who.status());
    user = Str(*who, "user");
  }
  const std::string query = QueryString({{"queue", f.queue},
                                         {"state", f.state},
                                         {"user", user},
                                         {"tenant", f.tenant},
                                         {"type", f.type},
                                         {"active", scope.only_active ? "true" : ""}});
  auto items = api.ListAll(fmt::format("/api/v1/jobs{}", query));
  if (!items.ok()) return Fail(items.status());
  json jobs = std::move(items).value();
  if (f.limit > 0 && jobs.size() > f.limit) {
    jobs = json(std::vector<json>(jobs.end() - static_cast<std::ptrdiff_t>(f.limit), jobs.end()));
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(json{{"items", jobs}}, ctx->format());
    return kExitOk;
  }
  if (jobs.empty()) {
    std::fprintf(stderr, "%s\n",
                 scope.defaults ? "no jobs of yours are running or waiting (arbiter jobs --all: "
                                  "every job you may see, ended ones too)"
                                : "no jobs match");
    return kExitOk;
  }
  const bool wide = ctx->format() == OutputFormat::kWide;
  const bool expand = wide || f.expand;
  std::vector<std::string> headers = {"ID",   "NAME",  "QUEUE", "USER", "STATE",
                                      "TIME", "LIMIT", "NODES", "GPUS", "NODELIST(REASON)"};
  if (wide) {
    for (const char* h : {"TENANT", "TYPE", "PRIORITY", "RESTARTS", "EXIT", "AGE", "REASON"}) {
      headers.push_back(h);
    }
  }
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  Table t(headers);
  for (const JobGroup& g : GroupArrays(jobs, [&](const json&) { return !expand; })) {
    t.AddRow(JobRow(g, now, wide));
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

// --- show --------------------------------------------------------------------------------------

void Line(const char* label, const std::string& value) {
  if (value.empty()) return;
  std::printf("  %-12s %s\n", label, value.c_str());
}

std::string When(const json& v) {
  if (!v.is_string()) return "";
  return fmt::format("{} ({} ago)", v.get<std::string>(), Age(v));
}

int Show(const ContextPtr& ctx, const std::string& ref) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  uint64_t id = 0;
  if (int rc = OneJob(api, ref, &id); rc != kExitOk) return rc;
  auto r = api.Get(fmt::format("/api/v1/jobs/{}", id));
  if (!r.ok()) return Fail(r.status());
  const json& j = *r;
  if (IsStructured(ctx->format())) {
    PrintStructured(j, ctx->format());
    return kExitOk;
  }
  const bool color = StdoutColors();
  const std::string state = Str(j, "state");
  std::printf("%s\n",
              Paint(fmt::format("Job {}{}", id,
                                Str(j, "name").empty() ? "" : fmt::format("  {}", Str(j, "name"))),
                    Color::kBold, color)
                  .c_str());
  Line("State:", Paint(state, StateColor(state), color) +
                     (Str(j, "reason").empty() ? "" : fmt::format(" ({})", Str(j, "reason"))) +
                     (j.contains("stopping") ? ", stopping its processes" : ""));
  Line("Queue:", fmt::format("{} (tenant {}), submitted by {}", Str(j, "queue"), Str(j, "tenant"),
                             Str(j, "user")));
  Line("Type:",
       Str(j, "type") + (Str(j, "priority_class").empty()
                             ? ""
                             : fmt::format(", priority class {}", Str(j, "priority_class"))));
  const int64_t tasks = j.value("tasks", int64_t{1});
  Line("Tasks:", fmt::format("{} x ({}){}", tasks, TaskResourcesText(j.value("resources", json())),
                             j.value("distinct_nodes", false) ? ", each on its own node" : ""));
  std::string models;
  for (const json& m : j.value("gpu_models", json::array())) {
    AppendTo(&models, ", ", m.get<std::string>());
  }
  Line("GPU models:", models);
  auto names = [&](const char* key) {
    std::string out;
    for (const json& n : j.value(key, json::array())) AppendTo(&out, ",", n.get<std::string>());
    return out;
  };
  Line("Nodes:", names("nodes"));
  Line("Excluded:", names("exclude_nodes"));
  if (j.value("exclusive", false)) Line("Exclusive:", "yes: each task takes a node whole");
  if (j.contains("mail") && j["mail"].is_object()) {
    std::string types;
    for (const json& t : j["mail"].value("types", json::array())) {
      AppendTo(&types, ",", t.get<std::string>());
    }
    Line("Mail:", fmt::format("{} to {}", types.empty() ? "NONE" : types, Str(j["mail"], "user")));
  }
  if (j.contains("gpu_model")) Line("Running on:", Str(j, "gpu_model"));
  std::string deps;  // as Slurm writes them: afterok:12,singleton
  for (const json& d : j.value("depends_on", json::array())) {
    AppendTo(&deps, ",",
             d.contains("job") ? fmt::format("{}:{}", Str(d, "type"), d.value("job", uint64_t{0}))
                               : Str(d, "type"));
  }
  Line("Depends on:", deps);
  if (const json& a = j.value("array", json()); a.is_object()) {  // as Slurm names it: 12_3
    const int max_running = a.value("max_running", 0);
    Line("Array:",
         fmt::format("{}_{} (array {} of {} jobs{})", a.value("id", uint64_t{0}),
                     a.value("index", int64_t{0}), a.value("id", uint64_t{0}), a.value("size", 0),
                     max_running > 0 ? fmt::format(", at most {} at once", max_running) : ""));
  }
  const int64_t wall = j.value("walltime_seconds", int64_t{0});
  Line("Walltime:", wall > 0 ? fmt::format("{} ({} s)", ShortDuration(wall), wall) : "");
  Line("Submitted:", When(j.value("submitted_at", json())));
  Line("Started:", When(j.value("started_at", json())));
  Line("Finished:", When(j.value("finished_at", json())));
  const json& exit = j.value("exit_code", json());
  Line("Exit code:", exit.is_number() ? std::to_string(exit.get<int>()) : "");
  Line("Restarts:",
       fmt::format("{} (preemptions {})", j.value("restarts", 0), j.value("preemptions", 0)));
  int task = 0;
  for (const json& t : j.value("placement", json::array())) {
    std::string gpus;
    for (const json& g : t.value("gpus", json::array())) {
      AppendTo(&gpus, ",", std::to_string(g.get<int>()));
    }
    Line(task == 0 ? "Placement:" : "",
         fmt::format("task {} on {}{}", task, Str(t, "node"),
                     gpus.empty() ? "" : fmt::format(", GPUs {}", gpus)));
    ++task;
  }
  if (j.contains("pending") && j["pending"].is_object()) {
    const json& p = j["pending"];
    std::string eta;
    if (p.value("estimated_start", json()).is_string()) {
      eta = fmt::format(", estimated start {}", Str(p, "estimated_start"));
    }
    const int position = p.value("position", 0);
    Line("Waiting:",
         fmt::format("{}: {}{}", Str(p, "code"), Str(p, "message"),
                     position > 0 ? fmt::format(" (position {}{})", position, eta) : eta));
  }
  Line("Command:", JobCommand(j));
  Line("Workdir:", Str(j, "workdir"));
  Line("Image:", Str(j, "container_image"));
  std::string env;
  const json job_env = j.value("env", json::object());
  for (const auto& [k, v] : job_env.items()) {
    if (k.rfind("SLURM_", 0) == 0) continue;  // the batch script's, shown by -o yaml
    // null: a value this caller may not see (another member's job, or a viewer).
    AppendTo(
        &env, " ",
        fmt::format("{}={}", k, v.is_string() ? ShellQuote(v.get<std::string>()) : "(hidden)"));
  }
  for (const auto& name : j.value("secret_env", json::array())) {
    if (name.is_string()) AppendTo(&env, " ", fmt::format("{}=(secret)", name.get<std::string>()));
  }
  Line("Env:", env);
  return kExitOk;
}

// --- why ---------------------------------------------------------------------------------------

namespace {

// "P50 in 50m (TIME)", "P50 after the horizon", or, when the work bound cut the replays off
// before the horizon, "P50 later than 3h20m".
std::string Quantile(const json& es, const char* name) {
  const std::string key = fmt::format("{}_s", name);
  if (!es.value(key, json()).is_number()) {
    const json bounds = es.value("bounds", json::array());
    const bool cut = std::find(bounds.begin(), bounds.end(), json("work")) != bounds.end();
    if (cut && es.value("simulated_s", json()).is_number()) {
      return fmt::format("{} later than {}", name, ShortDuration(es["simulated_s"].get<int64_t>()));
    }
    return fmt::format("{} after the horizon", name);
  }
  return fmt::format("{} in {} ({})", name, ShortDuration(es[key].get<int64_t>()), Str(es, name));
}

// The expected start of `why` in one line: "  expected start: p50 in 50m (...), p90 in 1h20m
// (...); 32 samples, run times from the user's history".
std::string ExpectedStartLine(const json& es) {
  const std::string source = Str(es, "run_time_source");
  std::string from;
  if (source == "user") {
    from = "run times from each user's history";
  } else if (source == "queue" || source == "cluster") {
    from = fmt::format("run times from the {}'s history", source);
  } else if (source == "walltime") {
    from = "run times from walltimes";
  } else {
    from = "no run-time history or walltimes";
  }
  std::string line = fmt::format("  expected start: {}, {}; {} samples, {}", Quantile(es, "p50"),
                                 Quantile(es, "p90"), es.value("samples", 0), from);
  if (es.value("bounded", false)) {
    std::vector<std::string> bounds;
    for (const json& b : es.value("bounds", json::array())) bounds.push_back(b.get<std::string>());
    line += fmt::format(" (bounded: {})", fmt::join(bounds, ", "));
  }
  return line;
}

}  // namespace

int Why(const ContextPtr& ctx, const std::string& ref) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  uint64_t id = 0;
  if (int rc = OneJob(api, ref, &id); rc != kExitOk) return rc;
  auto r = api.Get(fmt::format("/api/v1/jobs/{}/why", id));
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  const bool color = StdoutColors();
  const std::string state = Str(*r, "state");
  if (!r->contains("code")) {
    std::printf("%s\n", Str(*r, "message").c_str());
    return kExitOk;
  }
  std::printf("job %llu is %s: %s\n", static_cast<unsigned long long>(id),
              Paint(state, StateColor(state), color).c_str(),
              Paint(Str(*r, "code"), Color::kBold, color).c_str());
  std::printf("  %s\n", Str(*r, "message").c_str());
  std::string where = fmt::format("  position {} in its queue", r->value("position", 0));
  if (r->value("estimated_start", json()).is_string()) {
    const std::string eta = Str(*r, "estimated_start");
    auto ago = SecondsSince(eta);
    where += fmt::format("; estimated start {}{}", eta,
                         ago && *ago < 0 ? fmt::format(" (in {})", ShortDuration(-*ago)) : "");
  }
  std::printf("%s\n", where.c_str());
  const json& es = r->value("expected_start", json());
  if (es.is_object()) std::printf("%s\n", ExpectedStartLine(es).c_str());
  return kExitOk;
}

// --- logs --------------------------------------------------------------------------------------

namespace {

// What `logs` prints.
struct LogsFlags {
  int task = 0;
  bool all_tasks = false;
  bool follow = false;
  bool stdout_only = false;
  bool stderr_only = false;
  std::string stream = "combined";  // --stream: combined (or its alias both), stdout, stderr
  uint64_t run = 0;                 // 0: every run
};

// Why a follower waits before the job's next run, for a note on stderr ("" : it does not).
std::string WaitingFor(uint64_t id, const json& job) {
  const std::string state = Str(job, "state");
  if (state == "pending") {
    const json pending = job.value("pending", json::object());
    const std::string why =
        pending.is_object() && pending.contains("message")
            ? fmt::format("{}: {}", Str(pending, "code"), Str(pending, "message"))
            : "waiting for the next scheduling cycle";
    return fmt::format("job {} is pending ({}); waiting for it to run (Ctrl-C to stop)", id, why);
  }
  if (state == "retry-wait") {
    return fmt::format("job {} waits for its retry ({}); waiting for it to run (Ctrl-C to stop)",
                       id, Str(job, "reason"));
  }
  if (state == "suspended") {
    return fmt::format("job {} is suspended; waiting for it to be resumed and run (Ctrl-C to stop)",
                       id);
  }
  return "";
}

// Writes a task's log to stdout: as it comes, or (with a prefix) line by line, each line after
// the prefix and written whole, so that the tasks' lines never mix.
class LogPrinter {
 public:
  LogPrinter(std::string prefix, std::mutex* mu) : prefix_(std::move(prefix)), mu_(mu) {}

  void Write(std::string_view chunk) {
    if (prefix_.empty()) return Put(chunk);
    held_.append(chunk);
    const size_t end = held_.rfind('\n');
    if (end == std::string::npos) return;
    std::string lines;
    for (size_t at = 0; at <= end;) {
      const size_t nl = held_.find('\n', at);
      lines += prefix_;
      lines.append(held_, at, nl + 1 - at);
      at = nl + 1;
    }
    held_.erase(0, end + 1);
    Put(lines);
  }
  // The log ended: a last line without its newline gets one.
  void Finish() {
    if (!prefix_.empty() && !held_.empty()) Put(prefix_ + held_ + "\n");
    held_.clear();
  }

 private:
  void Put(std::string_view text) {
    std::lock_guard<std::mutex> lock(*mu_);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }

  std::string prefix_;
  std::mutex* mu_;
  std::string held_;
};

// One task's log (GET /api/v1/jobs/{id}/logs) into `out`.
Status PrintTaskLog(const Connection& c, uint64_t id, int task, const std::string& stream,
                    const LogsFlags& f, LogPrinter* out) {
  ApiClient api(c);
  std::string path = fmt::format("/api/v1/jobs/{}/logs?task={}&stream={}", id, task, stream);
  if (f.run != 0) path += fmt::format("&run={}", f.run);
  if (f.follow) path += "&follow=true";
  const Status st = api.Stream(
      path,
      [out](std::string_view chunk) {
        out->Write(chunk);
        return true;
      },
      f.follow ? 7 * 24 * 3600 : 60);
  out->Finish();
  return st;
}

// Every task's log, each line after "N: " (srun -l): one after the other, or followed at once.
Status PrintAllTasks(const Connection& c, uint64_t id, int tasks, const std::string& stream,
                     const LogsFlags& f) {
  constexpr int kMaxFollowed = 64;
  if (f.follow && tasks > kMaxFollowed) {
    return InvalidArgument("--all-tasks", fmt::format("-f follows at most {} tasks at once; job {} "
                                                      "has {}: choose one with --task",
                                                      kMaxFollowed, id, tasks));
  }
  std::mutex mu;
  std::vector<Status> st(static_cast<size_t>(tasks));
  auto one = [&](int t) {
    LogPrinter out(fmt::format("{}: ", t), &mu);
    st[static_cast<size_t>(t)] = PrintTaskLog(c, id, t, stream, f, &out);
  };
  if (f.follow) {
    std::vector<std::thread> threads;
    for (int t = 0; t < tasks; ++t) threads.emplace_back(one, t);
    for (std::thread& t : threads) t.join();
  } else {
    for (int t = 0; t < tasks; ++t) one(t);
  }
  // A task without a log (it has not run, or wrote nothing) is no error while another has one.
  const bool any = std::any_of(st.begin(), st.end(), [](const Status& s) { return s.ok(); });
  for (const Status& s : st) {
    if (!s.ok() && (s.code() != StatusCode::kNotFound || !any)) return s;
  }
  return Status::Ok();
}

// What an error of the logs route means to this client: an older server lacks what it asked.
int LogsFailure(const Status& st, const Connection& c) {
  auto unavailable = [&](const std::string& what) {
    return Fail(
        Status(StatusCode::kUnavailable, fmt::format("the server at {} {}", c.server, what)),
        kExitUnavailable);
  };
  if (st.code() == StatusCode::kNotFound && st.message().rfind("no route", 0) == 0) {
    return unavailable("does not serve logs yet (it has no GET /api/v1/jobs/{id}/logs)");
  }
  if (st.code() == StatusCode::kInvalidArgument && st.field() == "stream") {
    return unavailable("does not interleave stdout and stderr yet: use --stdout or --stderr");
  }
  if (st.code() == StatusCode::kInvalidArgument && st.field() == "run") {
    return unavailable("does not keep runs apart yet: leave out --run");
  }
  return Fail(st);
}

}  // namespace

// Prints a task's output on stdout: by default stdout and stderr interleaved as written, every
// run after a separator line (the server writes those). Following waits for the job to start,
// follows it through its runs and ends when it ends; a job that goes away ends it with an error.
int Logs(const ContextPtr& ctx, const std::string& ref, const LogsFlags& f) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  uint64_t id = 0;
  {
    ApiClient api(*c);
    if (int rc = OneJob(api, ref, &id); rc != kExitOk) return rc;
  }
  const std::string stream = f.stdout_only        ? "stdout"
                             : f.stderr_only      ? "stderr"
                             : f.stream == "both" ? "combined"
                                                  : f.stream;
  ApiClient api(*c);
  int tasks = 1;
  if (f.follow || f.all_tasks) {
    auto job = api.Get(fmt::format("/api/v1/jobs/{}", id));
    if (!job.ok()) return LogsFailure(job.status(), *c);
    tasks = job->value("tasks", 1);
    if (f.follow && f.run == 0) {
      if (const std::string note = WaitingFor(id, *job); !note.empty()) Note(note);
    }
  }
  std::mutex mu;
  LogPrinter out("", &mu);
  const Status st = f.all_tasks ? PrintAllTasks(*c, id, tasks, stream, f)
                                : PrintTaskLog(*c, id, f.task, stream, f, &out);
  if (!st.ok()) return LogsFailure(st, *c);
  if (!f.follow || f.run != 0) return kExitOk;
  // The server ends a followed log when the job ends, or when it can no longer be read (the job
  // is gone, or no longer this token's to see: the error says which).
  auto job = api.Get(fmt::format("/api/v1/jobs/{}", id));
  if (!job.ok()) return Fail(job.status());
  const std::string state = Str(*job, "state");
  if (FinalStates().count(state) == 0) {
    return Fail(
        Status(StatusCode::kUnavailable,
               fmt::format("the log of job {} ended before the job did (it is {})", id, state)),
        kExitUnreachable);
  }
  return kExitOk;
}

// --- cancel, suspend, resume, retry ------------------------------------------------------------

const char* ActionDone(const std::string& action) {
  return action == "cancel"    ? "cancelled"
         : action == "suspend" ? "suspended"
         : action == "resume"  ? "resumed"
         : action == "requeue" ? "requeued"
                               : "queued for a retry";
}

// `action` on every job the references stand for: a whole array in one request.
int Act(const ContextPtr& ctx, const std::string& action, const std::vector<std::string>& texts) {
  auto refs = ParseJobRefs(texts);
  if (!refs.ok()) return Fail(refs.status(), kExitUsage);
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  int rc = kExitOk;
  json done = json::array();
  const bool table = !IsStructured(ctx->format());
  for (const JobRef& ref : *refs) {
    auto target = ResolveJobRef(api, ref);
    if (!target.ok()) {
      rc = Fail(target.status());
      continue;
    }
    if (target->array != 0) {
      auto r = api.Post(fmt::format("/api/v1/arrays/{}/{}", target->array, action), json());
      if (!r.ok()) {
        rc = Fail(r.status());
        continue;
      }
      done.push_back(*r);
      if (table) {
        const size_t n = r->value("changed", json::array()).size();
        std::printf("array %llu: %zu job%s %s\n", static_cast<unsigned long long>(target->array), n,
                    n == 1 ? "" : "s", ActionDone(action));
      }
      continue;
    }
    for (uint64_t id : target->jobs) {
      auto r = api.Post(fmt::format("/api/v1/jobs/{}/{}", id, action), json());
      if (!r.ok()) {
        rc = Fail(r.status());
        continue;
      }
      done.push_back(*r);
      if (table) {
        const std::string state = Str(*r, "state");
        std::printf("job %llu %s (%s)\n", static_cast<unsigned long long>(id), ActionDone(action),
                    Paint(state, StateColor(state), StdoutColors()).c_str());
      }
    }
  }
  if (!table) {
    const bool one = refs->size() == 1 && refs->front().kind == JobRef::Kind::kJob;
    PrintStructured(one && done.size() == 1 ? done[0] : done, ctx->format());
  }
  return rc;
}

// --- wait --------------------------------------------------------------------------------------

// Polls `path` (a job or an array) until `ended` says so, the deadline passes (false, with `*last`
// the last answer), or an error that is not a restarting server's.
struct Poller {
  ApiClient& api;
  double timeout_s;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // `on_answer` returns true once the object has ended.
  Result<bool> Until(const std::string& path, const std::function<bool(const json&)>& on_answer) {
    auto pause = std::chrono::milliseconds(100);
    double unreachable_since = -1;
    while (true) {
      auto r = api.Get(path);
      if (!r.ok()) {
        // A restarting server is waited for (up to a minute); anything else is an answer.
        if (r.status().code() != StatusCode::kUnavailable) return r.status();
        if (unreachable_since < 0) unreachable_since = Elapsed();
        if (Elapsed() - unreachable_since > 60) return r.status();
      } else {
        unreachable_since = -1;
        if (on_answer(*r)) return true;
      }
      if (timeout_s > 0 && Elapsed() >= timeout_s) return false;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
  }
};

// Waits for one job; its last state in `*final`. Exit code as `wait`'s.
int WaitJob(const ContextPtr& ctx, Poller& poll, uint64_t id, json* final) {
  std::string last_state;
  auto ended = poll.Until(fmt::format("/api/v1/jobs/{}", id), [&](const json& j) {
    *final = j;
    const std::string state = Str(j, "state");
    if (state != last_state && !IsStructured(ctx->format()) && !last_state.empty()) {
      std::fprintf(stderr, "job %llu is %s\n", static_cast<unsigned long long>(id), state.c_str());
    }
    last_state = state;
    return FinalStates().count(state) > 0;
  });
  if (!ended.ok()) return Fail(ended.status());
  if (!*ended) {
    std::fprintf(stderr, "error: job %llu is still %s after %g s\n",
                 static_cast<unsigned long long>(id),
                 last_state.empty() ? "unknown" : last_state.c_str(), poll.timeout_s);
    return kExitTimeout;
  }
  const json& j = *final;
  const std::string state = Str(j, "state");
  if (!IsStructured(ctx->format())) {
    const json& exit = j.value("exit_code", json());
    std::printf("job %llu %s%s%s\n", static_cast<unsigned long long>(id),
                Paint(state, StateColor(state), StdoutColors()).c_str(),
                exit.is_number() ? fmt::format(" (exit code {})", exit.get<int>()).c_str() : "",
                state != "succeeded" && !Str(j, "reason").empty()
                    ? fmt::format(": {}", Str(j, "reason")).c_str()
                    : "");
  }
  return state == "succeeded" ? kExitOk : kExitFailed;
}

// "6 succeeded, 1 failed" of an array's "states".
std::string StatesText(const json& states) {
  std::string out;
  for (const auto& [state, n] : states.items()) {
    AppendTo(&out, ", ", fmt::format("{} {}", n.get<int64_t>(), state));
  }
  return out;
}

// Waits for every element of array `id` to end; the array in `*final`.
int WaitArray(const ContextPtr& ctx, Poller& poll, uint64_t id, json* final) {
  auto ended = poll.Until(fmt::format("/api/v1/arrays/{}", id), [&](const json& a) {
    *final = a;
    const json states = a.value("states", json::object());
    for (const auto& [state, n] : states.items()) {
      if (!FinalStates().count(state)) return false;
    }
    return true;
  });
  if (!ended.ok()) return Fail(ended.status());
  const std::string states = StatesText(final->value("states", json::object()));
  if (!*ended) {
    std::fprintf(stderr, "error: array %llu has not ended after %g s: %s\n",
                 static_cast<unsigned long long>(id), poll.timeout_s, states.c_str());
    return kExitTimeout;
  }
  const json all = final->value("states", json::object());
  const bool succeeded = all.size() == 1 && all.contains("succeeded");
  if (!IsStructured(ctx->format())) {
    std::printf("array %llu ended: %s\n", static_cast<unsigned long long>(id), states.c_str());
  }
  return succeeded ? kExitOk : kExitFailed;
}

int Wait(const ContextPtr& ctx, const std::vector<std::string>& texts, double timeout_s) {
  auto refs = ParseJobRefs(texts);
  if (!refs.ok()) return Fail(refs.status(), kExitUsage);
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  Poller poll{api, timeout_s};
  int rc = kExitOk;
  json finals = json::array();
  for (const JobRef& ref : *refs) {
    auto target = ResolveJobRef(api, ref);
    if (!target.ok()) return Fail(target.status());
    std::vector<std::pair<uint64_t, bool>> waits;  // id, whether an array
    if (target->array != 0) waits.emplace_back(target->array, true);
    for (uint64_t id : target->jobs) waits.emplace_back(id, false);
    for (const auto& [id, is_array] : waits) {
      json final;
      const int code = is_array ? WaitArray(ctx, poll, id, &final) : WaitJob(ctx, poll, id, &final);
      if (code == kExitTimeout || (code != kExitOk && code != kExitFailed) || final.is_null()) {
        return code;
      }
      finals.push_back(final);
      if (code != kExitOk) rc = code;
    }
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(finals.size() == 1 ? finals[0] : finals, ctx->format());
  }
  return rc;
}

// --- events ------------------------------------------------------------------------------------

struct EventPrinter {
  OutputFormat format;
  bool color;
  bool header_done = false;
  std::optional<uint64_t> job;  // only this job's

  void Print(uint64_t seq, const std::string& kind, const json& data) {
    if (job && (kind != "job" || data.value("id", uint64_t{0}) != *job)) return;
    if (format == OutputFormat::kJson) {
      std::printf("%s\n", json{{"seq", seq}, {"kind", kind}, {"data", data}}.dump().c_str());
    } else if (format == OutputFormat::kYaml) {
      std::printf("---\n%s", ToYaml(json{{"seq", seq}, {"kind", kind}, {"data", data}}).c_str());
    } else {
      if (!header_done) {
        std::printf("%-8s %-7s %-16s %-26s %s\n", "SEQ", "KIND", "OBJECT", "CHANGE", "REASON");
        header_done = true;
      }
      std::string object = kind;
      std::string change;
      std::string reason;
      if (kind == "job") {
        object = fmt::format("job/{}", data.value("id", uint64_t{0}));
        const std::string from = Str(data, "from");
        const std::string to = Str(data, "to");
        change = from.empty() ? to : fmt::format("{} -> {}", from, to);
        if (format == OutputFormat::kWide) reason = Str(data, "tenant") + " ";
        reason += Str(data, "reason");
        const int pad = std::max(0, 26 - static_cast<int>(change.size()));
        change = fmt::format(
            "{}{}{}",
            from.empty() ? "" : fmt::format("{} -> ", Paint(from, StateColor(from), color)),
            Paint(to, StateColor(to), color), std::string(static_cast<size_t>(pad), ' '));
      } else if (kind == "node") {
        object = fmt::format("node/{}", Str(data, "name"));
        const std::string s = Str(data, "state");
        change =
            Paint(s, StateColor(s), color) +
            std::string(static_cast<size_t>(std::max(0, 26 - static_cast<int>(s.size()))), ' ');
      } else {
        change = fmt::format("{:<26}", data.dump());
      }
      std::printf("%-8llu %-7s %-16s %s %s\n", static_cast<unsigned long long>(seq), kind.c_str(),
                  object.c_str(), change.c_str(), reason.c_str());
    }
    std::fflush(stdout);
  }
};

// Reads a server-sent event stream; `caught_up` is called at each keep-alive comment (which the
// server sends once it has sent everything it has) and returns false to stop.
class SseReader {
 public:
  SseReader(EventPrinter* printer, uint64_t* seq, std::function<bool()> caught_up)
      : printer_(printer), seq_(seq), caught_up_(std::move(caught_up)) {}

  bool Feed(std::string_view chunk) {
    buf_.append(chunk);
    size_t end;
    while ((end = buf_.find("\n\n")) != std::string::npos) {
      const std::string block = buf_.substr(0, end);
      buf_.erase(0, end + 2);
      if (!Block(block)) return false;
    }
    return true;
  }

 private:
  bool Block(const std::string& block) {
    uint64_t id = 0;
    std::string kind;
    std::string data;
    bool comment = false;
    size_t start = 0;
    while (start < block.size()) {
      size_t eol = block.find('\n', start);
      if (eol == std::string::npos) eol = block.size();
      const std::string line = block.substr(start, eol - start);
      start = eol + 1;
      if (line.rfind(':', 0) == 0) {
        comment = true;
      } else if (line.rfind("id: ", 0) == 0) {
        id = std::strtoull(line.c_str() + 4, nullptr, 10);
      } else if (line.rfind("event: ", 0) == 0) {
        kind = line.substr(7);
      } else if (line.rfind("data: ", 0) == 0) {
        data += line.substr(6);
      }
    }
    if (!kind.empty()) {
      *seq_ = std::max(*seq_, id);
      json d = json::parse(data, nullptr, /*allow_exceptions=*/false);
      printer_->Print(id, kind, d.is_discarded() ? json(data) : d);
    }
    if (comment) return caught_up_();
    return true;
  }

  EventPrinter* printer_;
  uint64_t* seq_;
  std::function<bool()> caught_up_;
  std::string buf_;
};

int JobHistory(const ContextPtr& ctx, ApiClient& api, uint64_t id) {
  auto r = api.Get(fmt::format("/api/v1/jobs/{}/events", id));
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  const bool color = StdoutColors();
  Table t({"TIME", "FROM", "TO", "REASON"});
  for (const json& e : (*r)["items"]) {
    const std::string from = Str(e, "from");
    const std::string to = Str(e, "to");
    t.AddRow({Str(e, "at"), Cell(from.empty() ? "-" : from, StateColor(from)),
              Cell(to, StateColor(to)), Str(e, "reason")});
  }
  t.Print(stdout, color);
  return kExitOk;
}

int Events(const ContextPtr& ctx, const std::optional<std::string>& ref, bool follow,
           std::optional<uint64_t> since) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  std::optional<uint64_t> job;
  if (ref) {
    uint64_t id = 0;
    if (int rc = OneJob(api, *ref, &id); rc != kExitOk) return rc;
    job = id;
  }
  if (job && !follow) return JobHistory(ctx, api, *job);
  if (job) {
    // The job must exist (and be visible) before its changes are awaited.
    auto r = api.Get(fmt::format("/api/v1/jobs/{}", *job));
    if (!r.ok()) return Fail(r.status());
  }
  EventPrinter printer{ctx->format(), StdoutColors(), false, job};
  // Without -f: what the server still holds (since 0), up to its first keep-alive.
  uint64_t seq = since.value_or(0);
  bool use_since = since.has_value() || !follow;
  for (int attempt = 0;; ++attempt) {
    SseReader reader(&printer, &seq, [follow] { return follow; });
    const std::string path =
        use_since ? fmt::format("/api/v1/events?since={}", seq) : "/api/v1/events";
    Status st = api.Stream(
        path, [&](std::string_view chunk) { return reader.Feed(chunk); }, 60);
    if (!follow) {
      if (!st.ok()) return Fail(st);
      if (!printer.header_done && ctx->format() != OutputFormat::kJson &&
          ctx->format() != OutputFormat::kYaml) {
        std::fprintf(stderr, "no events%s\n", since ? " after that sequence number" : "");
      }
      return kExitOk;
    }
    if (!st.ok() && st.code() != StatusCode::kUnavailable) return Fail(st);
    // The stream broke (server restart): resume after the last event seen.
    if (!st.ok() && attempt % 10 == 0) {
      std::fprintf(stderr, "warning: %s; reconnecting\n", Describe(st).c_str());
    }
    use_since = seq > 0 || use_since;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

void RegisterJobCommands(CLI::App& app, const ContextPtr& ctx) {
  auto lf = std::make_shared<ListFlags>();
  auto* jobs = app.add_subcommand(
      "jobs", "List your jobs that have not ended (--all: every job you may see, ended ones too)");
  jobs->alias("ls");
  jobs->add_flag("-a,--all", lf->all, "Every job you may see, ended ones too");
  jobs->add_option("--queue", lf->queue,
                   "Only these queues' (comma-separated), everyone's unless --mine");
  jobs->add_option("--state", lf->state,
                   "Only jobs in these states (pending,running,...), ended ones too");
  jobs->add_option("--user", lf->user, "Only these users' (comma-separated)");
  jobs->add_option("--tenant", lf->tenant, "Only these tenants' (admins), everyone's");
  jobs->add_option("--type", lf->type, "Only these job types");
  jobs->add_flag("--active", lf->active, "Only jobs that have not ended (with --all or a filter)");
  jobs->add_flag("--mine", lf->mine, "Only your own (with --all or a filter)");
  jobs->add_option("--limit", lf->limit, "Only the last N");
  jobs->add_flag("-r,--expand", lf->expand,
                 "A row per element of a job array (-o wide too); else one row per array");
  AddClientFlags(jobs, ctx);
  AddOutputFlag(jobs, ctx);
  SetExamples(jobs, {"arbiter jobs", "arbiter jobs --all",
                     "arbiter jobs --queue vision-train --state pending",
                     "arbiter jobs --all --mine -o wide", "arbiter jobs --user bob",
                     "arbiter jobs --all -o json | jq '.items[].id'"});
  jobs->callback([ctx, lf] { ctx->Run([&] { return ListJobs(ctx, *lf); }); });

  auto id = std::make_shared<std::string>();
  auto* show = app.add_subcommand("show", "Show a job: resources, placement, times, command");
  show->add_option("id", *id, "Job id, or an array's element (123_7)")->required();
  AddClientFlags(show, ctx);
  AddOutputFlag(show, ctx, false);
  SetExamples(show, {"arbiter show 12", "arbiter show 12_3", "arbiter show 12 -o yaml"});
  show->callback([ctx, id] { ctx->Run([&] { return Show(ctx, *id); }); });

  auto* why = app.add_subcommand("why", "Explain why a job is not running yet");
  why->add_option("id", *id, "Job id, or an array's element (123_7)")->required();
  AddClientFlags(why, ctx);
  AddOutputFlag(why, ctx, false);
  SetExamples(why, {"arbiter why 12", "arbiter why 12 -o json"});
  why->callback([ctx, id] { ctx->Run([&] { return Why(ctx, *id); }); });

  auto follow = std::make_shared<bool>(false);
  auto lf_logs = std::make_shared<LogsFlags>();
  auto* logs = app.add_subcommand(
      "logs", "Print a task's output: stdout and stderr as written, every run in order");
  logs->add_option("id", *id, "Job id, or an array's element (123_7)")->required();
  auto* task_o = logs->add_option("--task", lf_logs->task, "Task index (0 .. tasks-1)")
                     ->check(CLI::Range(0, 100000));
  logs->add_flag("--all-tasks", lf_logs->all_tasks,
                 "Every task's output, each line after its task's index (\"3: ...\")")
      ->excludes(task_o);
  logs->add_flag("-f,--follow", lf_logs->follow,
                 "Wait for the job to start, print while it runs (its next runs too) until it "
                 "ends");
  auto* out_o = logs->add_flag("--stdout", lf_logs->stdout_only, "Only the task's stdout");
  auto* err_o = logs->add_flag("--stderr", lf_logs->stderr_only, "Only the task's stderr");
  logs->add_option("--stream", lf_logs->stream,
                   "combined (stdout and stderr as written; also: both), stdout or stderr")
      ->check(CLI::IsMember({"combined", "both", "stdout", "stderr"}))
      ->capture_default_str()
      ->excludes(out_o)
      ->excludes(err_o);
  out_o->excludes(err_o);
  logs->add_option("--run", lf_logs->run, "Only this run (1: the first; see the separators)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 62));
  AddClientFlags(logs, ctx);
  SetExamples(logs, {"arbiter logs 12", "arbiter logs 12 -f", "arbiter logs 12 --task 3",
                     "arbiter logs 12_7", "arbiter logs 12 --all-tasks", "arbiter logs 12 --stderr",
                     "arbiter logs 12 --run 2"});
  logs->callback([ctx, id, lf_logs] { ctx->Run([&] { return Logs(ctx, *id, *lf_logs); }); });

  auto ids = std::make_shared<std::vector<std::string>>();
  const char* ids_help =
      "Job ids: 123 (for an array's id, the whole array), 123_7 (an array's element), "
      "123_[1-5,9] (elements), 11-20 (a range of job ids)";
  struct ActionHelp {
    const char* name;
    const char* help;
    const char* example;
  };
  for (const ActionHelp& a :
       {ActionHelp{"cancel", "Cancel jobs (running ones are stopped: SIGTERM, grace, SIGKILL)",
                   "arbiter cancel 12 13 14 20-29 31_[2-4]"},

        ActionHelp{"suspend",
                   "Suspend jobs: stop their processes (SIGTERM, grace, SIGKILL), free their GPUs "
                   "and keep them out of scheduling until resumed. Not Slurm's SIGSTOP: a resumed "
                   "job starts again, from its checkpoint if it keeps one",
                   "arbiter suspend 12"},
        ActionHelp{"resume",
                   "Resume suspended jobs: back to their queue, in their place (submit time kept)",
                   "arbiter resume 12"},
        ActionHelp{"requeue",
                   "Requeue running jobs (Slurm's scontrol requeue): stop them and put them back "
                   "in their queue at once",
                   "arbiter requeue 12"},
        ActionHelp{"retry", "Run failed, cancelled or timed-out jobs again", "arbiter retry 12"}}) {
    auto* cmd = app.add_subcommand(a.name, a.help);
    cmd->add_option("ids", *ids, ids_help)->required();
    AddClientFlags(cmd, ctx);
    AddOutputFlag(cmd, ctx, false);
    SetExamples(cmd, {a.example, fmt::format("arbiter {} 12 -o json", a.name)});
    const std::string action = a.name;
    cmd->callback([ctx, ids, action] { ctx->Run([&] { return Act(ctx, action, *ids); }); });
  }

  auto timeout = std::make_shared<double>(0);
  auto* wait = app.add_subcommand(
      "wait", "Wait until jobs end; exit 0 when all succeeded, 1 when one did not");
  wait->add_option("ids", *ids, ids_help)->required();
  wait->add_option("--timeout", *timeout, "Give up after S seconds (exit 5); 0: never")
      ->check(CLI::Range(0.0, 1e9));
  AddClientFlags(wait, ctx);
  AddOutputFlag(wait, ctx, false);
  SetExamples(wait, {"arbiter wait 12", "arbiter wait 12 --timeout 3600 && echo done",
                     "ID=$(arbiter submit --parsable train.sh) && arbiter wait $ID"});
  wait->callback([ctx, ids, timeout] { ctx->Run([&] { return Wait(ctx, *ids, *timeout); }); });

  auto job_opt = std::make_shared<std::string>();
  auto since_opt = std::make_shared<uint64_t>(0);
  auto* events = app.add_subcommand(
      "events", "Job and node changes: what the server holds, or live with -f; one job's history");
  auto* job_o = events->add_option(
      "id", *job_opt, "A job (or an array's element, 123_7): its history (with -f: its changes)");
  events->add_flag("-f,--follow", *follow, "Keep printing changes as they happen");
  auto* since_o =
      events->add_option("--since", *since_opt, "Only events after this sequence number");
  AddClientFlags(events, ctx);
  AddOutputFlag(events, ctx);
  SetExamples(events, {"arbiter events", "arbiter events -f", "arbiter events 12",
                       "arbiter events -f -o json | jq -c 'select(.kind==\"job\")'"});
  events->callback([ctx, follow, job_o, since_o, job_opt, since_opt] {
    std::optional<std::string> j;
    std::optional<uint64_t> s;
    if (job_o->count() > 0) j = *job_opt;
    if (since_o->count() > 0) s = *since_opt;
    ctx->Run([&] { return Events(ctx, j, *follow, s); });
  });
}

}  // namespace arbiter::cli

// The job commands: jobs, show, why, logs, cancel, suspend, resume, retry, wait, events.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/job_arrays.h"
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

int Show(const ContextPtr& ctx, uint64_t id) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
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
  if (j.contains("gpu_model")) Line("Running on:", Str(j, "gpu_model"));
  std::string deps;  // as Slurm writes them: afterok:12,singleton
  for (const json& d : j.value("depends_on", json::array())) {
    AppendTo(&deps, ",",
             d.contains("job") ? fmt::format("{}:{}", Str(d, "type"), d.value("job", uint64_t{0}))
                               : Str(d, "type"));
  }
  Line("Depends on:", deps);
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

int Why(const ContextPtr& ctx, uint64_t id) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
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
  return kExitOk;
}

// --- logs --------------------------------------------------------------------------------------

namespace {

// One stream of a task's log into `out` (stdout or stderr).
Status StreamLog(const Connection& c, uint64_t id, int task, const char* stream, bool follow,
                 FILE* out) {
  ApiClient api(c);
  const std::string path = fmt::format("/api/v1/jobs/{}/logs?task={}&stream={}{}", id, task, stream,
                                       follow ? "&follow=true" : "");
  return api.Stream(
      path,
      [out](std::string_view chunk) {
        std::fwrite(chunk.data(), 1, chunk.size(), out);
        std::fflush(out);
        return true;
      },
      follow ? 24 * 3600 : 60);
}

}  // namespace

// The task's stdout goes to our stdout and its stderr to our stderr; `--stream` picks one, which
// then comes on stdout. With --follow both are followed at once, each on its own connection.
int Logs(const ContextPtr& ctx, uint64_t id, int task, bool follow, const std::string& stream) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  const bool want_out = stream != "stderr";
  const bool want_err = stream != "stdout";
  Status out_st, err_st;
  if (want_out && want_err && follow) {
    std::thread err([&] { err_st = StreamLog(*c, id, task, "stderr", true, stderr); });
    out_st = StreamLog(*c, id, task, "stdout", true, stdout);
    err.join();
  } else {
    if (want_out) out_st = StreamLog(*c, id, task, "stdout", follow, stdout);
    // Asked for alone, the task's stderr comes on stdout, to pipe it.
    if (want_err && out_st.ok()) {
      err_st = StreamLog(*c, id, task, "stderr", follow, want_out ? stderr : stdout);
    }
  }
  const Status st = !out_st.ok() ? out_st : err_st;
  if (st.ok()) return kExitOk;
  if (st.code() == StatusCode::kNotFound && st.message().rfind("no route", 0) == 0) {
    return Fail(Status(StatusCode::kUnavailable,
                       fmt::format("the server at {} does not serve logs yet (it has no GET "
                                   "/api/v1/jobs/{{id}}/logs)",
                                   c->server)),
                kExitUnavailable);
  }
  return Fail(st);
}

// --- cancel, suspend, resume, retry ------------------------------------------------------------

int Act(const ContextPtr& ctx, const std::string& action, const std::vector<uint64_t>& ids) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  int rc = kExitOk;
  json done = json::array();
  for (uint64_t id : ids) {
    auto r = api.Post(fmt::format("/api/v1/jobs/{}/{}", id, action), json());
    if (!r.ok()) {
      rc = Fail(r.status());
      continue;
    }
    done.push_back(*r);
    if (!IsStructured(ctx->format())) {
      const std::string state = Str(*r, "state");
      std::printf("job %llu %s (%s)\n", static_cast<unsigned long long>(id),
                  action == "cancel"    ? "cancelled"
                  : action == "suspend" ? "suspended"
                  : action == "resume"  ? "resumed"
                                        : "queued for a retry",
                  Paint(state, StateColor(state), StdoutColors()).c_str());
    }
  }
  if (IsStructured(ctx->format())) {
    if (ids.size() == 1 && done.size() == 1) {
      PrintStructured(done[0], ctx->format());
    } else {
      PrintStructured(done, ctx->format());
    }
  }
  return rc;
}

// --- wait --------------------------------------------------------------------------------------

int Wait(const ContextPtr& ctx, const std::vector<uint64_t>& ids, double timeout_s) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  int rc = kExitOk;
  json finals = json::array();
  for (uint64_t id : ids) {
    std::string last_state;
    auto pause = std::chrono::milliseconds(100);
    double unreachable_since = -1;
    json j;
    while (true) {
      auto r = api.Get(fmt::format("/api/v1/jobs/{}", id));
      if (!r.ok()) {
        // A restarting server is waited for (up to a minute); anything else is an answer.
        if (r.status().code() != StatusCode::kUnavailable) return Fail(r.status());
        if (unreachable_since < 0) unreachable_since = elapsed();
        if (elapsed() - unreachable_since > 60) return Fail(r.status());
      } else {
        unreachable_since = -1;
        j = *r;
        const std::string state = Str(j, "state");
        if (state != last_state && !IsStructured(ctx->format()) && !last_state.empty()) {
          std::fprintf(stderr, "job %llu is %s\n", static_cast<unsigned long long>(id),
                       state.c_str());
        }
        last_state = state;
        if (FinalStates().count(state)) break;
      }
      if (timeout_s > 0 && elapsed() >= timeout_s) {
        std::fprintf(stderr, "error: job %llu is still %s after %g s\n",
                     static_cast<unsigned long long>(id),
                     last_state.empty() ? "unknown" : last_state.c_str(), timeout_s);
        return kExitTimeout;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
    finals.push_back(j);
    const std::string state = Str(j, "state");
    if (state != "succeeded") rc = kExitFailed;
    if (!IsStructured(ctx->format())) {
      const json& exit = j.value("exit_code", json());
      std::printf("job %llu %s%s%s\n", static_cast<unsigned long long>(id),
                  Paint(state, StateColor(state), StdoutColors()).c_str(),
                  exit.is_number() ? fmt::format(" (exit code {})", exit.get<int>()).c_str() : "",
                  state != "succeeded" && !Str(j, "reason").empty()
                      ? fmt::format(": {}", Str(j, "reason")).c_str()
                      : "");
    }
  }
  if (IsStructured(ctx->format())) {
    PrintStructured(ids.size() == 1 ? finals[0] : finals, ctx->format());
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

int Events(const ContextPtr& ctx, std::optional<uint64_t> job, bool follow,
           std::optional<uint64_t> since) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
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

  auto id = std::make_shared<uint64_t>(0);
  auto* show = app.add_subcommand("show", "Show a job: resources, placement, times, command");
  show->add_option("id", *id, "Job id")->required();
  AddClientFlags(show, ctx);
  AddOutputFlag(show, ctx, false);
  SetExamples(show, {"arbiter show 12", "arbiter show 12 -o yaml"});
  show->callback([ctx, id] { ctx->Run([&] { return Show(ctx, *id); }); });

  auto* why = app.add_subcommand("why", "Explain why a job is not running yet");
  why->add_option("id", *id, "Job id")->required();
  AddClientFlags(why, ctx);
  AddOutputFlag(why, ctx, false);
  SetExamples(why, {"arbiter why 12", "arbiter why 12 -o json"});
  why->callback([ctx, id] { ctx->Run([&] { return Why(ctx, *id); }); });

  auto task = std::make_shared<int>(0);
  auto follow = std::make_shared<bool>(false);
  auto* logs = app.add_subcommand("logs", "Print a task's output (stdout and stderr)");
  logs->add_option("id", *id, "Job id")->required();
  logs->add_option("--task", *task, "Task index (0 .. tasks-1)")->check(CLI::Range(0, 100000));
  logs->add_flag("-f,--follow", *follow, "Keep printing while the task runs");
  auto stream = std::make_shared<std::string>("both");
  logs->add_option("--stream", *stream,
                   "stdout, stderr or both (both: the task's stderr goes to this command's stderr)")
      ->check(CLI::IsMember({"stdout", "stderr", "both"}))
      ->capture_default_str();
  AddClientFlags(logs, ctx);
  SetExamples(logs, {"arbiter logs 12", "arbiter logs 12 -f", "arbiter logs 12 --task 3",
                     "arbiter logs 12 --stream stderr"});
  logs->callback([ctx, id, task, follow, stream] {
    ctx->Run([&] { return Logs(ctx, *id, *task, *follow, *stream); });
  });

  auto ids = std::make_shared<std::vector<uint64_t>>();
  struct ActionHelp {
    const char* name;
    const char* help;
    const char* example;
  };
  for (const ActionHelp& a :
       {ActionHelp{"cancel", "Cancel jobs (running ones are stopped: SIGTERM, grace, SIGKILL)",
                   "arbiter cancel 12 13 14"},
        ActionHelp{"suspend", "Suspend jobs: stop them and keep them out of scheduling",
                   "arbiter suspend 12"},
        ActionHelp{"resume", "Resume suspended jobs (back to pending)", "arbiter resume 12"},
        ActionHelp{"retry", "Run failed, cancelled or timed-out jobs again", "arbiter retry 12"}}) {
    auto* cmd = app.add_subcommand(a.name, a.help);
    cmd->add_option("ids", *ids, "Job ids")->required();
    AddClientFlags(cmd, ctx);
    AddOutputFlag(cmd, ctx, false);
    SetExamples(cmd, {a.example, fmt::format("arbiter {} 12 -o json", a.name)});
    const std::string action = a.name;
    cmd->callback([ctx, ids, action] { ctx->Run([&] { return Act(ctx, action, *ids); }); });
  }

  auto timeout = std::make_shared<double>(0);
  auto* wait = app.add_subcommand(
      "wait", "Wait until jobs end; exit 0 when all succeeded, 1 when one did not");
  wait->add_option("ids", *ids, "Job ids")->required();
  wait->add_option("--timeout", *timeout, "Give up after S seconds (exit 5); 0: never")
      ->check(CLI::Range(0.0, 1e9));
  AddClientFlags(wait, ctx);
  AddOutputFlag(wait, ctx, false);
  SetExamples(wait, {"arbiter wait 12", "arbiter wait 12 --timeout 3600 && echo done",
                     "ID=$(arbiter submit --parsable train.sh) && arbiter wait $ID"});
  wait->callback([ctx, ids, timeout] { ctx->Run([&] { return Wait(ctx, *ids, *timeout); }); });

  auto job_opt = std::make_shared<uint64_t>(0);
  auto since_opt = std::make_shared<uint64_t>(0);
  auto* events = app.add_subcommand(
      "events", "Job and node changes: what the server holds, or live with -f; one job's history");
  auto* job_o = events->add_option("id", *job_opt, "A job: its history (with -f: its changes)");
  events->add_flag("-f,--follow", *follow, "Keep printing changes as they happen");
  auto* since_o =
      events->add_option("--since", *since_opt, "Only events after this sequence number");
  AddClientFlags(events, ctx);
  AddOutputFlag(events, ctx);
  SetExamples(events, {"arbiter events", "arbiter events -f", "arbiter events 12",
                       "arbiter events -f -o json | jq -c 'select(.kind==\"job\")'"});
  events->callback([ctx, follow, job_o, since_o, job_opt, since_opt] {
    std::optional<uint64_t> j;
    std::optional<uint64_t> s;
    if (job_o->count() > 0) j = *job_opt;
    if (since_o->count() > 0) s = *since_opt;
    ctx->Run([&] { return Events(ctx, j, *follow, s); });
  });
}

}  // namespace arbiter::cli

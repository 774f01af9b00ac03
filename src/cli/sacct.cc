// `arbiter sacct`: Slurm's sacct over Arbiter's job history (docs/cli.md, "sacct").
//
// Which jobs: the caller's own (admins: everyone's, as root's in Slurm; -a: every user the caller
// may see; -u: those users), that existed at some time in the window [-S, -E]: submitted by its
// end and not ended before its start. The window starts at midnight today by default (with -j:
// at the beginning; with -s: now, as Slurm's) and ends now. With -s, jobs in those states, an
// ended state counting only when the job ended within the window. Arbiter records no job steps:
// each job is one line, its allocation, as with -X.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>

#include "cli/commands.h"
#include "cli/job_arrays.h"
#include "cli/slurm.h"
#include "cli/slurm_format.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

constexpr const char* kDefaultFields = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";

// The fields sacct -o takes here, with Slurm's widths (right-justified unless said).
const std::vector<SacctField>& KnownFields() {
  static const std::vector<SacctField> kFields = {
      {"JobID", 12, false},       {"JobIDRaw", 12, false},  {"JobName", 10, true},
      {"Partition", 10, true},    {"Account", 10, true},    {"User", 9, true},
      {"State", 10, true},        {"ExitCode", 8, true},    {"Elapsed", 10, true},
      {"ElapsedRaw", 10, true},   {"Start", 19, true},      {"End", 19, true},
      {"Submit", 19, true},       {"Eligible", 19, true},   {"AllocCPUS", 10, true},
      {"NCPUS", 10, true},        {"ReqCPUS", 8, true},     {"AllocTRES", 10, false},
      {"ReqTRES", 10, false},     {"AllocGRES", 12, false}, {"ReqGRES", 12, false},
      {"AllocNodes", 10, true},   {"NNodes", 8, true},      {"ReqNodes", 8, true},
      {"NodeList", 15, false},    {"ReqMem", 10, true},     {"Timelimit", 10, true},
      {"TimelimitRaw", 12, true}, {"Reason", 20, false},    {"Priority", 10, true},
      {"QOS", 10, true},          {"CPUTime", 10, true},    {"CPUTimeRAW", 10, true},
      {"WorkDir", 20, false},     {"Cluster", 10, true}};
  return kFields;
}

struct SacctFlags {
  std::string jobs, users, start, end, states, format, names, partitions, accounts;
  bool allusers = false, allocations = false, noheader = false, parsable = false, parsable2 = false;
};

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// "12_3" for an array's element, else its id.
std::string JobIdText(const json& j) {
  const auto a = ArrayOf(j);
  return a ? fmt::format("{}_{}", a->id, a->index) : std::to_string(j.value("id", uint64_t{0}));
}

// Whether the job was ever given nodes (it holds or held an allocation).
bool Allocated(const json& j) {
  return !JobNodeNames(j).empty() || (JobTime(j, "started_at") && SlurmStateOf(j).code != "PD");
}

// Slurm's ExitCode "code:signal": Arbiter records 128 + N for a task killed by signal N.
std::string ExitCodeText(const json& j) {
  const json& e = j.value("exit_code", json());
  if (!e.is_number_integer()) return "0:0";
  const int code = e.get<int>();
  if (code > 128 && code <= 128 + 64) return fmt::format("0:{}", code - 128);
  return fmt::format("{}:0", code);
}

std::string StateText(const json& j) {
  const std::string state = Str(j, "state");
  const SlurmState s = SlurmStateFor(state, false);
  const std::string reason = Str(j, "reason");
  if (state == "cancelled" && reason.rfind("cancel by ", 0) == 0) {
    return fmt::format("CANCELLED by {}", reason.substr(10));
  }
  return std::string(s.name);
}

std::string Memory(int64_t mib) {
  if (mib <= 0) return "0";
  return mib % 1024 == 0 ? fmt::format("{}G", mib / 1024) : fmt::format("{}M", mib);
}

// "cpu=4,gres/gpu=2,mem=16G,node=1".
std::string Tres(const json& j) {
  const json& r = j.value("resources", json::object());
  const int64_t tasks = j.value("tasks", int64_t{1});
  std::string out = fmt::format("cpu={}", JobCpus(j));
  const int64_t gpus = r.value("gpus", int64_t{0});
  if (gpus > 0) {
    const int64_t milli = r.value("gpu_milli", int64_t{1000});
    out += fmt::format(",gres/gpu={}",
                       milli < 1000 ? Amount(json(static_cast<double>(milli * tasks) / 1000.0))
                                    : std::to_string(gpus * tasks));
  }
  out += fmt::format(",mem={},node={}", Memory(r.value("memory_mib", int64_t{0}) * tasks),
                     JobNodeCount(j));
  return out;
}

std::string Gres(const json& j) {
  const json& r = j.value("resources", json::object());
  const int64_t gpus = r.value("gpus", int64_t{0}) * j.value("tasks", int64_t{1});
  return gpus > 0 ? fmt::format("gpu:{}", gpus) : "";
}

std::string Time(const std::optional<int64_t>& t) { return t ? SlurmTimestamp(*t) : "Unknown"; }

struct FieldContext {
  int64_t now = 0;
  std::map<std::string, int64_t> priority;
};

using FieldFn = std::string (*)(const json& j, const FieldContext& c);

int64_t Elapsed(const json& j, const FieldContext& c) { return JobElapsedSeconds(j, c.now); }
int64_t AllocCpus(const json& j) { return Allocated(j) ? JobCpus(j) : 0; }
int64_t Walltime(const json& j) { return j.value("walltime_seconds", int64_t{0}); }

// Each field's value, by name.
const std::map<std::string, FieldFn>& FieldFns() {
  using C = const FieldContext&;
  static const std::map<std::string, FieldFn> kFns = {
      {"JobID", [](const json& j, C) { return JobIdText(j); }},
      {"JobIDRaw", [](const json& j, C) { return std::to_string(j.value("id", uint64_t{0})); }},
      {"JobName", [](const json& j, C) { return JobName(j); }},
      {"Partition", [](const json& j, C) { return Str(j, "queue"); }},
      {"Account", [](const json& j, C) { return Str(j, "tenant"); }},
      {"User", [](const json& j, C) { return Str(j, "user"); }},
      {"State", [](const json& j, C) { return StateText(j); }},
      {"ExitCode", [](const json& j, C) { return ExitCodeText(j); }},
      {"Elapsed", [](const json& j, C c) { return SacctDuration(Elapsed(j, c)); }},
      {"ElapsedRaw", [](const json& j, C c) { return std::to_string(Elapsed(j, c)); }},
      {"Start",
       [](const json& j, C) -> std::string {
         return SlurmStateOf(j).code == "PD" ? "Unknown" : Time(JobTime(j, "started_at"));
       }},
      {"End", [](const json& j, C) { return Time(JobTime(j, "finished_at")); }},
      {"Submit", [](const json& j, C) { return Time(JobTime(j, "submitted_at")); }},
      {"Eligible", [](const json& j, C) { return Time(JobTime(j, "submitted_at")); }},
      {"AllocCPUS", [](const json& j, C) { return std::to_string(AllocCpus(j)); }},
      {"NCPUS", [](const json& j, C) { return std::to_string(AllocCpus(j)); }},
      {"ReqCPUS", [](const json& j, C) { return std::to_string(JobCpus(j)); }},
      {"AllocTRES", [](const json& j, C) { return Allocated(j) ? Tres(j) : std::string(); }},
      {"ReqTRES", [](const json& j, C) { return Tres(j); }},
      {"AllocGRES", [](const json& j, C) { return Allocated(j) ? Gres(j) : std::string(); }},
      {"ReqGRES", [](const json& j, C) { return Gres(j); }},
      {"AllocNodes",
       [](const json& j, C) { return std::to_string(Allocated(j) ? JobNodeCount(j) : 0); }},
      {"NNodes", [](const json& j, C) { return std::to_string(JobNodeCount(j)); }},
      {"ReqNodes", [](const json& j, C) { return std::to_string(JobNodeCount(j)); }},
      {"NodeList",
       [](const json& j, C) {
         const auto nodes = JobNodeNames(j);
         return nodes.empty() ? std::string("None assigned") : CompressHostlist(nodes);
       }},
      {"ReqMem",
       [](const json& j, C) {
         return Memory(j.value("resources", json::object()).value("memory_mib", int64_t{0}));
       }},
      {"Timelimit",
       [](const json& j, C) -> std::string {
         return Walltime(j) > 0 ? SacctDuration(Walltime(j)) : "UNLIMITED";
       }},
      {"TimelimitRaw",
       [](const json& j, C) -> std::string {
         return Walltime(j) > 0 ? std::to_string(Walltime(j) / 60) : "UNLIMITED";
       }},
      {"Reason",
       [](const json& j, C) -> std::string {
         return PendingCode(j).empty() ? "None" : PendingCode(j);
       }},
      {"Priority",
       [](const json& j, C c) {
         auto it = c.priority.find(Str(j, "priority_class"));
         return std::to_string(it == c.priority.end() ? 0 : it->second);
       }},
      {"QOS", [](const json& j, C) { return Str(j, "priority_class"); }},
      {"CPUTime", [](const json& j, C c) { return SacctDuration(Elapsed(j, c) * AllocCpus(j)); }},
      {"CPUTimeRAW",
       [](const json& j, C c) { return std::to_string(Elapsed(j, c) * AllocCpus(j)); }},
      {"WorkDir", [](const json& j, C) { return Str(j, "workdir"); }},
      {"Cluster", [](const json&, C) { return std::string("arbiter"); }}};
  return kFns;
}

// The window [start, end] (seconds since the epoch; start 0: no bound) of the flags.
struct Window {
  int64_t start = 0;
  int64_t end = 0;
  bool end_given = false;
};

Result<Window> WindowOf(const SacctFlags& f, int64_t now) {
  Window w;
  w.end = now;
  if (!f.start.empty()) {
    auto s = ParseSlurmDateTime(f.start, now, "starttime");
    if (!s.ok()) return s.status();
    w.start = *s;
  } else if (!f.states.empty()) {
    w.start = now;  // Slurm: with --state and no start, the jobs in those states now
  } else if (f.jobs.empty()) {
    w.start = *ParseSlurmDateTime("midnight", now, "starttime");
  }
  if (!f.end.empty()) {
    auto e = ParseSlurmDateTime(f.end, now, "endtime");
    if (!e.ok()) return e.status();
    w.end = *e;
    w.end_given = true;
  }
  if (w.end < w.start) {
    return InvalidArgument("endtime", fmt::format("the end ({}) is before the start ({})",
                                                  SlurmTimestamp(w.end), SlurmTimestamp(w.start)));
  }
  return w;
}

std::string Rfc3339(int64_t epoch) {
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool EndedCode(std::string_view code) {
  return code == "CD" || code == "F" || code == "CA" || code == "TO" || code == "NF" ||
         code == "PR" || code == "OOM" || code == "BF" || code == "DL";
}

// The users to ask for: -u, else everyone with -a (and for admins, as for root), else the caller.
Result<std::string> UsersOf(ApiClient& api, const SacctFlags& f) {
  if (!f.users.empty()) return f.users;
  if (f.allusers) return std::string();
  auto who = api.Get("/api/v1/whoami");
  if (!who.ok()) return who.status();
  if (Str(*who, "role") == "admin") return std::string();
  return Str(*who, "user");
}

int Sacct(const ContextPtr& ctx, const SacctFlags& f) {
  const char* env_format = std::getenv("SACCT_FORMAT");
  const std::string list = !f.format.empty()                           ? f.format
                           : env_format != nullptr && *env_format != 0 ? env_format
                                                                       : kDefaultFields;
  auto fields = ParseSacctFields(list, KnownFields(), "format");
  if (!fields.ok()) return Fail(fields.status(), kExitUsage);
  std::optional<std::set<std::string>> codes;
  if (!f.states.empty()) {
    auto parsed = ParseSlurmJobStates(f.states, "state");
    if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
    codes = std::move(parsed).value();
  }
  FieldContext c;
  c.now = static_cast<int64_t>(std::time(nullptr));
  auto window = WindowOf(f, c.now);
  if (!window.ok()) return Fail(window.status(), kExitUsage);
  auto conn = ctx->Resolve();
  if (!conn.ok()) return Fail(conn.status(), kExitUsage);
  ApiClient api(*conn);
  auto users = UsersOf(api, f);
  if (!users.ok()) return Fail(users.status());
  std::string states;
  if (codes) {
    for (const std::string& s : ArbiterStatesFor(*codes)) states += (states.empty() ? "" : ",") + s;
  }
  json items = json::array();
  if (!codes || !states.empty()) {
    auto r = api.ListAll(fmt::format(
        "/api/v1/jobs{}", QueryString({{"user", *users},
                                       {"queue", f.partitions},
                                       {"tenant", f.accounts},
                                       {"state", states},
                                       {"since", window->start > 0 ? Rfc3339(window->start) : ""},
                                       {"until", window->end_given ? Rfc3339(window->end) : ""}})));
    if (!r.ok()) return Fail(r.status());
    items = std::move(r).value();
  }
  for (const SacctField& field : *fields) {
    if (field.name != "Priority") continue;
    auto classes = api.Get("/api/v1/priority-classes");
    if (!classes.ok()) return Fail(classes.status());
    for (const json& pc : (*classes)["items"]) c.priority[Str(pc, "name")] = pc.value("value", 0);
  }
  std::set<std::string> wanted_jobs;
  for (const std::string& id : SplitCommas(f.jobs)) wanted_jobs.insert(id);
  std::set<std::string> names;
  for (const std::string& n : SplitCommas(f.names)) names.insert(n);
  std::vector<std::vector<std::string>> rows;
  for (const json& j : items) {
    const auto a = ArrayOf(j);
    if (!wanted_jobs.empty() && !wanted_jobs.count(std::to_string(j.value("id", uint64_t{0}))) &&
        !(a && (wanted_jobs.count(std::to_string(a->id)) || wanted_jobs.count(JobIdText(j))))) {
      continue;
    }
    if (!names.empty() && !names.count(JobName(j))) continue;
    if (codes) {
      const std::string code(SlurmStateFor(Str(j, "state"), false).code);
      if (!codes->count(code)) continue;
      // An ended state holds from the job's end on: it counts when the end is in the window.
      const auto finished = JobTime(j, "finished_at");
      if (EndedCode(code) && finished && (*finished < window->start || *finished > window->end)) {
        continue;
      }
    }
    std::vector<std::string> row;
    for (const SacctField& field : *fields) row.push_back(FieldFns().at(field.name)(j, c));
    rows.push_back(std::move(row));
  }
  const SacctStyle style = f.parsable2  ? SacctStyle::kParsable2
                           : f.parsable ? SacctStyle::kParsable
                                        : SacctStyle::kTable;
  const std::string text = RenderSacct(*fields, rows, !f.noheader, style);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

}  // namespace

void RegisterSacctCommand(CLI::App& app, const ContextPtr& ctx) {
  auto f = std::make_shared<SacctFlags>();
  auto* cmd = app.add_subcommand(
      "sacct", "Slurm's sacct: your jobs since midnight, running and ended, in Slurm's formats");
  cmd->add_option("-j,--jobs", f->jobs, "Only these jobs (ids, array ids, ARRAY_INDEX); any time");
  cmd->add_option("-u,--user", f->users, "Only these users' jobs (comma-separated)");
  cmd->add_flag("-a,--allusers", f->allusers, "Every user's jobs you may see");
  cmd->add_option("-S,--starttime", f->start,
                  "From this time (YYYY-MM-DD[THH:MM[:SS]], now-1days, ...; default midnight)");
  cmd->add_option("-E,--endtime", f->end, "Up to this time (default now)");
  cmd->add_option("-s,--state", f->states,
                  "Only jobs in these states (CD,F,CA,TO,R,PD,...); without -S: now");
  cmd->add_option("-r,--partition", f->partitions, "Only these partitions' (queues') jobs");
  cmd->add_option("-A,--accounts", f->accounts, "Only these accounts' (tenants') jobs");
  cmd->add_option("--name", f->names, "Only jobs of these names (comma-separated)");
  cmd->add_flag("-X,--allocations", f->allocations,
                "Only the allocations (Arbiter records no steps: always so)");
  cmd->add_flag("-n,--noheader", f->noheader, "No header lines");
  cmd->add_flag("-p,--parsable", f->parsable, "Fields ended by '|', nothing cut");
  cmd->add_flag("-P,--parsable2", f->parsable2, "Fields separated by '|', nothing cut");
  cmd->add_option(
      "-o,--format", f->format,
      fmt::format("Fields (default {}; else $SACCT_FORMAT); Name%N sets a width", kDefaultFields));
  AddClientFlags(cmd, ctx);
  SetExamples(cmd, {"arbiter sacct", "arbiter sacct -S now-7days -s F,TO",
                    "arbiter sacct -j 12 -o JobID,State,ExitCode,Elapsed",
                    "arbiter sacct -a -S 2024-05-01 -P -o JobID,User,State,ExitCode"});
  cmd->callback([ctx, f] { ctx->Run([&] { return Sacct(ctx, *f); }); });
}

}  // namespace arbiter::cli

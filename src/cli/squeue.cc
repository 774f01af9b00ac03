// `arbiter squeue`: Slurm's squeue over Arbiter's jobs, with its flags, columns and formats, so
// that muscle memory and the scripts that parse it keep working (docs/cli.md, "squeue").
//
// By default every job the caller may see that has not ended (a member: its tenant's), sorted by
// partition, state, priority and the scheduler's order. States are Slurm's (cli/slurm.h); the
// REASON of a waiting job is Arbiter's verdict code (QuotaExceeded, Dependency, ...). The pending
// elements of a job array are one row ("12_[5-99%8]"), the others one row each ("12_3"); -r shows
// every element on its own row.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/job_arrays.h"
#include "cli/slurm.h"
#include "cli/slurm_format.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

constexpr const char* kDefaultFormat = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
constexpr const char* kLongFormat = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
constexpr const char* kStartFormat = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R";
constexpr const char* kLetters = "iAFKaPjutTMlLDRNrCbQpVSeZkqoEcm";

// Each letter's header, as squeue prints it.
const std::map<char, const char*>& Headers() {
  static const std::map<char, const char*> kHeaders = {
      {'i', "JOBID"},         {'A', "JOBID"},      {'F', "ARRAY_JOB_ID"},
      {'K', "ARRAY_TASK_ID"}, {'a', "ACCOUNT"},    {'P', "PARTITION"},
      {'j', "NAME"},          {'u', "USER"},       {'t', "ST"},
      {'T', "STATE"},         {'M', "TIME"},       {'l', "TIME_LIMIT"},
      {'L', "TIME_LEFT"},     {'D', "NODES"},      {'R', "NODELIST(REASON)"},
      {'N', "NODELIST"},      {'r', "REASON"},     {'C', "CPUS"},
      {'b', "TRES_PER_NODE"}, {'Q', "PRIORITY"},   {'p', "PRIORITY"},
      {'V', "SUBMIT_TIME"},   {'S', "START_TIME"}, {'e', "END_TIME"},
      {'Z', "WORK_DIR"},      {'k', "COMMENT"},    {'q', "QOS"},
      {'o', "COMMAND"},       {'E', "DEPENDENCY"}, {'c', "MIN_CPUS"},
      {'m', "MIN_MEMORY"}};
  return kHeaders;
}

struct SqueueFlags {
  std::string users, partitions, states, jobs, names, accounts, nodelist, format, sort;
  bool me = false, noheader = false, long_format = false, array = false, start = false;
  int iterate = 0;
};

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// What the fields of a listing need besides the jobs.
struct FieldContext {
  int64_t now = 0;
  std::map<std::string, int64_t> priority;  // priority class -> value
  int64_t max_priority = 0;
};

// The reason a job waits (pending: its verdict), or "None".
std::string WaitReason(const json& j, std::string_view code) {
  if (code == "PD") {
    const std::string v = PendingCode(j);
    if (!v.empty()) return v;
    return Str(j, "state") == "retry-wait" ? "Backoff" : "None";
  }
  if (code == "S") return "Suspended";
  if (code == "F") {
    const json& exit = j.value("exit_code", json());
    return exit.is_number() && exit.get<int>() != 0 ? "NonZeroExitCode" : "None";
  }
  if (code == "TO") return "TimeLimit";
  if (code == "NF") return "NodeDown";
  return "None";
}

std::string Limit(const json& j) {
  const int64_t wall = j.value("walltime_seconds", int64_t{0});
  return wall > 0 ? SqueueDuration(wall) : "UNLIMITED";
}

std::string Time(const std::optional<int64_t>& t) { return t ? SlurmTimestamp(*t) : "N/A"; }

std::string MemoryText(int64_t mib) {
  if (mib <= 0) return "0";
  return mib % 1024 == 0 ? fmt::format("{}G", mib / 1024) : fmt::format("{}M", mib);
}

std::string Dependencies(const json& j) {
  std::string out;
  for (const json& d : j.value("depends_on", json::array())) {
    const std::string part = d.contains("job")
                                 ? fmt::format("{}:{}", Str(d, "type"), d.value("job", uint64_t{0}))
                                 : Str(d, "type");
    out += (out.empty() ? "" : ",") + part;
  }
  return out.empty() ? "(null)" : out;
}

std::string Gres(const json& j) {
  const json& r = j.value("resources", json::object());
  const int64_t gpus = r.value("gpus", int64_t{0});
  const int64_t milli = r.value("gpu_milli", int64_t{1000});
  if (gpus == 0) return "N/A";
  if (milli < 1000)
    return fmt::format("gres/gpu:{}", Amount(json(static_cast<double>(milli) / 1000.0)));
  return fmt::format("gres/gpu:{}", gpus);
}

// The value of a field about a job's run: times, nodes, resources, priority.
std::string RunField(char letter, const json& j, const FieldContext& c) {
  const SlurmState st = SlurmStateOf(j);
  const int64_t wall = j.value("walltime_seconds", int64_t{0});
  const int64_t elapsed = JobElapsedSeconds(j, c.now);
  switch (letter) {
    case 'M':
      return SqueueDuration(elapsed);
    case 'l':
      return Limit(j);
    case 'L':
      return wall > 0 ? SqueueDuration(std::max<int64_t>(0, wall - elapsed)) : "UNLIMITED";
    case 'V':
      return Time(JobTime(j, "submitted_at"));
    case 'S': {
      if (auto started = JobTime(j, "started_at"); started && st.code != "PD") {
        return SlurmTimestamp(*started);
      }
      const json& p = j.value("pending", json::object());
      return Time(p.is_object() ? JobTime(p, "estimated_start") : std::nullopt);
    }
    case 'e': {
      if (auto finished = JobTime(j, "finished_at")) return SlurmTimestamp(*finished);
      auto started = JobTime(j, "started_at");
      return started && wall > 0 && st.code != "PD" ? SlurmTimestamp(*started + wall) : "N/A";
    }
    case 'D':
      return std::to_string(JobNodeCount(j));
    case 'R': {
      const std::string why = WaitReason(j, st.code);
      const std::vector<std::string> nodes = JobNodeNames(j);
      if (why == "None" && !nodes.empty()) return CompressHostlist(nodes);
      return fmt::format("({})", why);
    }
    case 'N':
      return CompressHostlist(JobNodeNames(j));
    case 'r':
      return WaitReason(j, st.code);
    case 'C':
      return std::to_string(JobCpus(j));
    case 'b':
      return Gres(j);
    case 'c':
      return std::to_string(
          (j.value("resources", json::object()).value("cpu_milli", int64_t{0}) + 999) / 1000);
    case 'm':
      return MemoryText(j.value("resources", json::object()).value("memory_mib", int64_t{0}));
    case 'Q':
    case 'p': {
      auto it = c.priority.find(Str(j, "priority_class"));
      const int64_t value = it == c.priority.end() ? 0 : it->second;
      if (letter == 'Q') return std::to_string(value);
      return fmt::format("{:.8f}", c.max_priority <= 0 ? 0.0
                                                       : static_cast<double>(value) /
                                                             static_cast<double>(c.max_priority));
    }
    default:
      return "";
  }
}

// The value of %`letter` for a row (a job, or an array's pending elements): what names the job
// here, the rest through RunField.
std::string Field(char letter, const JobGroup& g, const FieldContext& c) {
  const json& j = *g.jobs.front();
  switch (letter) {
    case 'i':
      return GroupId(g, /*with_limit=*/true);
    case 'A':
      return std::to_string(j.value("id", uint64_t{0}));
    case 'F':
      return std::to_string(g.array ? g.array->id : j.value("id", uint64_t{0}));
    case 'K': {
      if (!g.array) return "N/A";
      std::string k = GroupId(g, true);
      k = k.substr(k.find('_') + 1);
      if (k.size() > 1 && k.front() == '[') k = k.substr(1, k.size() - 2);
      return k;
    }
    case 'a':
      return Str(j, "tenant");
    case 'P':
      return Str(j, "queue");
    case 'j':
      return JobName(j);
    case 'u':
      return Str(j, "user");
    case 't':
      return std::string(SlurmStateOf(j).code);
    case 'T':
      return std::string(SlurmStateOf(j).name);
    case 'Z':
      return Str(j, "workdir").empty() ? "N/A" : Str(j, "workdir");
    case 'k':
      return "(null)";
    case 'q':
      return Str(j, "priority_class").empty() ? "N/A" : Str(j, "priority_class");
    case 'o':
      return JobCommand(j);
    case 'E':
      return Dependencies(j);
    default:
      return RunField(letter, j, c);
  }
}

// Slurm's order of states (its job_state values): pending, running, suspended, ended.
int StateRank(std::string_view code) {
  static const char* const kOrder[] = {"PD", "CF", "R",  "S",  "CG", "CD",
                                       "CA", "F",  "TO", "NF", "PR"};
  for (size_t i = 0; i < std::size(kOrder); ++i) {
    if (code == kOrder[i]) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kOrder));
}

struct SortKey {
  char letter;
  bool descending;
};

// -S/--sort: "P,t,-p" (a '-' sorts that key in descending order).
Result<std::vector<SortKey>> ParseSort(const std::string& spec) {
  std::vector<SortKey> keys;
  for (std::string item : SplitCommas(spec)) {
    bool descending = false;
    if (item.front() == '-' || item.front() == '+') {
      descending = item.front() == '-';
      item.erase(0, 1);
    }
    if (item.size() != 1 || std::string_view(kLetters).find(item[0]) == std::string_view::npos) {
      return InvalidArgument(
          "sort", fmt::format("'{}' is not a field letter of --format ({})", item, kLetters));
    }
    keys.push_back({item[0], descending});
  }
  return keys;
}

// One row, with what sorting reads besides its fields.
struct Row {
  JobGroup group;
  std::map<char, std::string> fields;
  int64_t position = 0;  // the pending verdict's place in its queue (0: none)
};

// Compares two values of one letter: numbers as numbers, states by Slurm's order, times by what
// they say; the rest as text.
int CompareField(char letter, const Row& a, const Row& b, const FieldContext& c) {
  const json& ja = *a.group.jobs.front();
  const json& jb = *b.group.jobs.front();
  auto cmp = [](auto x, auto y) { return x < y ? -1 : y < x ? 1 : 0; };
  switch (letter) {
    case 't':
    case 'T':
      return cmp(StateRank(SlurmStateOf(ja).code), StateRank(SlurmStateOf(jb).code));
    case 'i':
    case 'A':
    case 'F':
      return cmp(ja.value("id", uint64_t{0}), jb.value("id", uint64_t{0}));
    case 'M':
      return cmp(JobElapsedSeconds(ja, c.now), JobElapsedSeconds(jb, c.now));
    case 'l':
    case 'L':
      return cmp(ja.value("walltime_seconds", int64_t{0}),
                 jb.value("walltime_seconds", int64_t{0}));
    case 'D':
      return cmp(JobNodeCount(ja), JobNodeCount(jb));
    case 'C':
      return cmp(JobCpus(ja), JobCpus(jb));
    case 'Q':
    case 'p':
      return cmp(std::stoll(Field('Q', a.group, c)), std::stoll(Field('Q', b.group, c)));
    default:
      return cmp(a.fields.count(letter) ? a.fields.at(letter) : Field(letter, a.group, c),
                 b.fields.count(letter) ? b.fields.at(letter) : Field(letter, b.group, c));
  }
}

void SortRows(std::vector<Row>* rows, const std::vector<SortKey>& keys, const FieldContext& c) {
  std::stable_sort(rows->begin(), rows->end(), [&](const Row& a, const Row& b) {
    for (const SortKey& k : keys) {
      const int r = CompareField(k.letter, a, b, c);
      if (r != 0) return k.descending ? r > 0 : r < 0;
    }
    // Then the scheduler's order of the waiting ones, then ids.
    const int64_t pa = a.position > 0 ? a.position : INT64_MAX;
    const int64_t pb = b.position > 0 ? b.position : INT64_MAX;
    if (pa != pb) return pa < pb;
    return a.group.jobs.front()->value("id", uint64_t{0}) <
           b.group.jobs.front()->value("id", uint64_t{0});
  });
}

// Whether the job is one -j asked for: its id, its array's id, or "ARRAY_INDEX".
bool JobSelected(const json& j, const std::set<std::string>& wanted) {
  if (wanted.empty()) return true;
  if (wanted.count(std::to_string(j.value("id", uint64_t{0})))) return true;
  const auto a = ArrayOf(j);
  return a && (wanted.count(std::to_string(a->id)) ||
               wanted.count(fmt::format("{}_{}", a->id, a->index)));
}

// The jobs the flags select, from the server (filters it knows) and here (the rest).
Result<json> FetchJobs(ApiClient& api, const SqueueFlags& f, const std::set<std::string>* codes) {
  std::string users = f.users;
  if (f.me) {
    auto who = api.Get("/api/v1/whoami");
    if (!who.ok()) return who.status();
    users += (users.empty() ? "" : ",") + Str(*who, "user");
  }
  std::string states;
  if (codes != nullptr) {
    for (const std::string& s : ArbiterStatesFor(*codes)) states += (states.empty() ? "" : ",") + s;
    if (states.empty()) return json::array();  // states no Arbiter job is ever in
  }
  auto items = api.ListAll(
      fmt::format("/api/v1/jobs{}", QueryString({{"user", users},
                                                 {"queue", f.partitions},
                                                 {"tenant", f.accounts},
                                                 {"state", states},
                                                 {"active", codes == nullptr ? "true" : ""}})));
  if (!items.ok()) return items.status();
  std::set<std::string> wanted_jobs;
  for (const std::string& id : SplitCommas(f.jobs)) wanted_jobs.insert(id);
  std::set<std::string> names;
  for (const std::string& n : SplitCommas(f.names)) names.insert(n);
  std::set<std::string> on_nodes;
  if (!f.nodelist.empty()) {
    auto expanded = ExpandHostlist(f.nodelist, "nodelist");
    if (!expanded.ok()) return expanded.status();
    on_nodes.insert(expanded->begin(), expanded->end());
  }
  json out = json::array();
  for (json& j : *items) {
    if (codes != nullptr && !codes->count(std::string(SlurmStateOf(j).code))) continue;
    if (f.start && SlurmStateOf(j).code != "PD") continue;
    if (!JobSelected(j, wanted_jobs)) continue;
    if (!names.empty() && !names.count(JobName(j))) continue;
    if (!on_nodes.empty()) {
      const auto nodes = JobNodeNames(j);
      if (std::none_of(nodes.begin(), nodes.end(),
                       [&](const std::string& n) { return on_nodes.count(n) > 0; })) {
        continue;
      }
    }
    out.push_back(std::move(j));
  }
  return out;
}

// One listing, printed.
int PrintOnce(ApiClient& api, const SqueueFlags& f, const PercentFormat& format,
              const std::vector<SortKey>& sort, const std::set<std::string>* codes) {
  auto jobs = FetchJobs(api, f, codes);
  if (!jobs.ok()) return Fail(jobs.status());
  FieldContext c;
  c.now = static_cast<int64_t>(std::time(nullptr));
  bool wants_priority = false;
  for (const PercentField& pf : format.fields)
    wants_priority |= pf.letter == 'Q' || pf.letter == 'p';
  for (const SortKey& k : sort) wants_priority |= k.letter == 'Q' || k.letter == 'p';
  if (wants_priority) {
    auto classes = api.Get("/api/v1/priority-classes");
    if (!classes.ok()) return Fail(classes.status());
    for (const json& pc : (*classes)["items"]) {
      c.priority[Str(pc, "name")] = pc.value("value", int64_t{0});
      c.max_priority = std::max(c.max_priority, pc.value("value", int64_t{0}));
    }
  }
  std::vector<Row> rows;
  for (JobGroup& g : GroupArrays(
           *jobs, [&](const json& j) { return !f.array && SlurmStateOf(j).code == "PD"; })) {
    Row r{std::move(g), {}, 0};
    const json& p = r.group.jobs.front()->value("pending", json::object());
    r.position = p.is_object() ? p.value("position", int64_t{0}) : 0;
    for (const PercentField& pf : format.fields) r.fields[pf.letter] = Field(pf.letter, r.group, c);
    rows.push_back(std::move(r));
  }
  SortRows(&rows, sort, c);
  std::vector<std::string> headers;
  for (const PercentField& pf : format.fields) headers.emplace_back(Headers().at(pf.letter));
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    std::vector<std::string> line;
    for (const PercentField& pf : format.fields) line.push_back(r.fields.at(pf.letter));
    cells.push_back(std::move(line));
  }
  const std::string text = RenderPercent(format, headers, cells, !f.noheader);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

int Squeue(const ContextPtr& ctx, const SqueueFlags& f) {
  std::optional<std::set<std::string>> codes;
  if (!f.states.empty()) {
    auto parsed = ParseSlurmJobStates(f.states, "states");
    if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
    codes = std::move(parsed).value();
  }
  const char* env = std::getenv("SQUEUE_FORMAT");  // Slurm's, below -o
  const std::string text = !f.format.empty()                ? f.format
                           : f.start                        ? kStartFormat
                           : f.long_format                  ? kLongFormat
                           : env != nullptr && *env != '\0' ? env
                                                            : kDefaultFormat;
  auto format = ParsePercentFormat(text, kLetters, "format");
  if (!format.ok()) return Fail(format.status(), kExitUsage);
  auto sort = ParseSort(!f.sort.empty() ? f.sort : f.start ? "S" : "P,t,-p");
  if (!sort.ok()) return Fail(sort.status(), kExitUsage);
  if (!f.nodelist.empty()) {
    auto nodes = ExpandHostlist(f.nodelist, "nodelist");
    if (!nodes.ok()) return Fail(nodes.status(), kExitUsage);
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  for (bool first = true;; first = false) {
    if ((f.long_format || f.iterate > 0) && !f.noheader) {
      char when[64];
      const std::time_t now = std::time(nullptr);
      std::strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", std::localtime(&now));
      std::printf("%s%s\n", first ? "" : "\n", when);
    }
    const int rc = PrintOnce(api, f, *format, *sort, codes ? &*codes : nullptr);
    if (f.iterate <= 0 || rc != kExitOk) return rc;
    std::this_thread::sleep_for(std::chrono::seconds(f.iterate));
  }
}

}  // namespace

void RegisterSqueueCommand(CLI::App& app, const ContextPtr& ctx) {
  auto f = std::make_shared<SqueueFlags>();
  auto* cmd = app.add_subcommand(
      "squeue", "Slurm's squeue: jobs not ended, in Slurm's columns and formats (-o, -t, -u, ...)");
  cmd->set_help_flag("--help", "Print this help and exit (-h is --noheader, as in Slurm)");
  cmd->add_option("-u,--user", f->users, "Only these users' jobs (comma-separated)");
  cmd->add_flag("--me", f->me, "Only your own jobs");
  cmd->add_option("-p,--partition", f->partitions, "Only these partitions' (queues') jobs");
  cmd->add_option("-t,--states", f->states,
                  "Only jobs in these states: PD,R,CG,CD,F,CA,TO,S,PR,... or their names; all");
  cmd->add_option("-j,--jobs", f->jobs, "Only these jobs (ids, array ids, ARRAY_INDEX)");
  cmd->add_option("-n,--name", f->names, "Only jobs of these names (comma-separated)");
  cmd->add_option("-A,--account", f->accounts, "Only these accounts' (tenants') jobs");
  cmd->add_option("-w,--nodelist", f->nodelist, "Only jobs on these nodes (gpu-[01-04],box)");
  cmd->add_flag("-h,--noheader", f->noheader, "No header line");
  cmd->add_flag("-l,--long", f->long_format, "Long format: state names, time limits");
  cmd->add_option("-o,--format", f->format,
                  fmt::format("Output format (default \"{}\")", kDefaultFormat));
  cmd->add_option("-S,--sort", f->sort, "Sort by these format letters (default P,t,-p)");
  cmd->add_flag("-r,--array", f->array, "A row per element of a job array");
  cmd->add_flag("--start", f->start, "Pending jobs and their expected start times");
  cmd->add_option("-i,--iterate", f->iterate, "Print again every SECONDS until interrupted")
      ->check(CLI::Range(1, 86400));
  AddClientFlags(cmd, ctx);
  SetExamples(cmd, {"arbiter squeue", "arbiter squeue --me", "arbiter squeue -u alice -t PD,R",
                    "arbiter squeue -p vision-train --start", "arbiter squeue -h -o '%i %t %R'",
                    "squeue -u $USER   # through make install"});
  cmd->callback([ctx, f] { ctx->Run([&] { return Squeue(ctx, *f); }); });
}

}  // namespace arbiter::cli

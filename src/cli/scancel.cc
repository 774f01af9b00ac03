// `arbiter scancel` (scancel.h): Slurm's scancel over the REST API.
//
// Without filters, each id is cancelled as `arbiter cancel` would (a whole array in one request).
// With filters, the candidates are the jobs the ids name, or without ids every job the caller
// may see that has not ended; those that match every filter are cancelled one by one.
#include "cli/scancel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include "cli/commands.h"
#include "cli/job_refs.h"
#include "cli/views.h"
#include "model/job_array.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> SplitCommas(std::string_view s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    if (comma > at) out.emplace_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostList(std::string_view list, const std::string& field) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < list.size()) {
    // One name: up to the next comma outside brackets.
    const size_t open = list.find('[', at);
    const size_t comma = list.find(',', at);
    if (open == std::string_view::npos || (comma != std::string_view::npos && comma < open)) {
      const size_t end = std::min(comma, list.size());
      if (end > at) out.emplace_back(list.substr(at, end - at));
      at = end + 1;
      continue;
    }
    const size_t close = list.find(']', open);
    if (close == std::string_view::npos) {
      return InvalidArgument(field, fmt::format("'{}': a '[' without its ']'", list));
    }
    const std::string prefix(list.substr(at, open - at));
    size_t end = list.find(',', close);
    end = end == std::string_view::npos ? list.size() : end;
    const std::string suffix(list.substr(close + 1, end - close - 1));
    for (const std::string& part : SplitCommas(list.substr(open + 1, close - open - 1))) {
      const size_t dash = part.find('-');
      const std::string a = part.substr(0, dash);
      const std::string b = dash == std::string::npos ? a : part.substr(dash + 1);
      auto ok = [](const std::string& n) {
        return !n.empty() && n.size() <= 9 &&
               std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
      };
      if (!ok(a) || !ok(b) || std::stoll(b) < std::stoll(a) ||
          std::stoll(b) - std::stoll(a) >= 100000) {
        return InvalidArgument(field, fmt::format("'{}': '{}' is not a range of node numbers "
                                                  "(as in gpu[01-04,07])",
                                                  list, part));
      }
      for (long long n = std::stoll(a); n <= std::stoll(b); ++n) {
        out.push_back(fmt::format("{}{:0{}}{}", prefix, n, a.size(), suffix));
      }
    }
    at = end + 1;
  }
  if (out.empty()) return InvalidArgument(field, "no node names");
  return out;
}

Result<std::set<std::string>> ScancelStates(std::string_view list) {
  std::set<std::string> out;
  for (const std::string& s : SplitCommas(list)) {
    const std::string v = Lower(s);
    if (v == "pending" || v == "pd") {
      out.insert({"pending", "retry-wait"});
    } else if (v == "running" || v == "r") {
      out.insert({"admitted", "starting", "running", "preempting"});
    } else if (v == "suspended" || v == "s") {
      out.insert("suspended");
    } else {
      return InvalidArgument("state", fmt::format("--state={}: '{}' is not a state scancel takes: "
                                                  "PENDING (PD), RUNNING (R) or SUSPENDED (S)",
                                                  list, s));
    }
  }
  if (out.empty()) return InvalidArgument("state", "--state: no state given");
  return out;
}

namespace {

struct ScancelFlags {
  std::vector<std::string> ids;
  std::string user, partition, state, name, account, nodelist;
  bool me = false, verbose = false, quiet = false;
  std::map<std::string, CLI::Option*> refused;  // flag -> option: Slurm's that Arbiter cannot do
  std::map<std::string, std::string> refused_value;  // what they were given (unused)
  std::map<std::string, bool> refused_flag;
};

// What a job must match (all of what is given).
struct Filters {
  std::string user;
  std::set<std::string> names, tenants, nodes, states;
  // With -p: the live jobs of those queues, as the server resolves their names (aliases, case).
  std::optional<std::set<uint64_t>> in_queues;
  bool any() const {
    return !user.empty() || in_queues || !names.empty() || !tenants.empty() || !nodes.empty() ||
           !states.empty();
  }
  bool Match(const json& j) const {
    const std::string state = j.value("state", "");
    if (state == "succeeded" || state == "failed" || state == "cancelled" || state == "timed-out") {
      return false;
    }
    if (!user.empty() && j.value("user", "") != user) return false;
    if (in_queues && !in_queues->count(j.value("id", uint64_t{0}))) return false;
    if (!names.empty() && !names.count(j.value("name", ""))) return false;
    if (!tenants.empty() && !tenants.count(j.value("tenant", ""))) return false;
    if (!states.empty() && !states.count(state)) return false;
    if (!nodes.empty()) {
      bool on = false;
      for (const json& t : j.value("placement", json::array()))
        on |= nodes.count(t.value("node", ""));
      if (!on) return false;
    }
    return true;
  }
};

// The flags of Slurm's scancel that Arbiter cannot honour, and why.
const std::map<std::string, std::string>& RefusedFlags() {
  static const std::map<std::string, std::string> kRefused = {
      {"signal",
       "Arbiter does not send signals to a job's processes; it cancels them (SIGTERM, the grace "
       "period, then SIGKILL)"},
      {"batch", "Arbiter signals no batch step apart: it cancels the whole job"},
      {"full", "Arbiter signals no job step apart: it cancels the whole job"},
      {"hurry", "Arbiter keeps no burst buffers"},
      {"interactive", "Arbiter does not ask before cancelling"},
      {"clusters", "Arbiter's server is one cluster: point --server at another"},
      {"qos", "filter by priority class with `arbiter jobs` instead"},
      {"reservation", "Arbiter has no advance reservations"},
      {"wckey", "Arbiter has no workload characterisation keys"},
      {"sibling", "Arbiter has no federation"},
  };
  return kRefused;
}

Result<Filters> BuildFilters(const ScancelFlags& f, ApiClient& api) {
  Filters out;
  out.user = f.user;
  if (f.me) {
    auto who = api.Get("/api/v1/whoami");
    if (!who.ok()) return who.status();
    out.user = who->value("user", "");
  }
  if (!f.partition.empty()) {
    // The server resolves queue names as submissions do, and names an unknown one.
    auto items =
        api.ListAll("/api/v1/jobs" + QueryString({{"active", "true"}, {"queue", f.partition}}));
    if (!items.ok()) return items.status();
    out.in_queues.emplace();
    for (const json& j : *items) out.in_queues->insert(j.value("id", uint64_t{0}));
  }
  for (const std::string& n : SplitCommas(f.name)) out.names.insert(n);
  for (const std::string& a : SplitCommas(f.account)) out.tenants.insert(a);
  if (!f.nodelist.empty()) {
    auto nodes = ExpandHostList(f.nodelist, "nodelist");
    if (!nodes.ok()) return nodes.status();
    out.nodes.insert(nodes->begin(), nodes->end());
  }
  if (!f.state.empty()) {
    auto states = ScancelStates(f.state);
    if (!states.ok()) return states.status();
    out.states = std::move(states).value();
  }
  return out;
}

// The jobs to cancel with filters: those the ids name, or every job the caller may see.
Result<std::vector<json>> Candidates(ApiClient& api, const std::vector<JobRef>& refs,
                                     const Filters& filters) {
  std::vector<json> out;
  if (refs.empty()) {
    const std::string query =
        filters.user.empty() ? "/api/v1/jobs" : fmt::format("/api/v1/jobs?user={}", filters.user);
    auto items = api.ListAll(query);
    if (!items.ok()) return items.status();
    for (json& j : *items) out.push_back(std::move(j));
    return out;
  }
  for (const JobRef& ref : refs) {
    auto target = ResolveJobRef(api, ref);
    if (!target.ok()) return target.status();
    if (target->array != 0) {
      auto items = api.ListAll(fmt::format("/api/v1/jobs?array={}", target->array));
      if (!items.ok()) return items.status();
      for (json& j : *items) out.push_back(std::move(j));
    }
    for (uint64_t id : target->jobs) {
      auto j = api.Get(fmt::format("/api/v1/jobs/{}", id));
      if (!j.ok()) return j.status();
      out.push_back(std::move(j).value());
    }
  }
  return out;
}

// A failure to report: -Q leaves out those of jobs that have ended already.
int Report(const ScancelFlags& f, const Status& st) {
  if (f.quiet && st.code() == StatusCode::kConflict) return kExitOk;
  return Fail(st);
}

// Each id as `arbiter cancel` takes it.
int CancelIds(const ScancelFlags& f, ApiClient& api, const std::vector<JobRef>& refs) {
  int rc = kExitOk;
  for (const JobRef& ref : refs) {
    auto target = ResolveJobRef(api, ref);
    if (!target.ok()) {
      rc = Fail(target.status());
      continue;
    }
    if (target->array != 0) {
      auto r = api.Post(fmt::format("/api/v1/arrays/{}/cancel", target->array), json());
      if (!r.ok()) {
        if (int code = Report(f, r.status()); code != kExitOk) rc = code;
      } else if (f.verbose) {
        std::fprintf(stderr, "scancel: cancelled array %llu (%zu jobs)\n",
                     static_cast<unsigned long long>(target->array),
                     r->value("changed", json::array()).size());
      }
    }
    for (uint64_t id : target->jobs) {
      auto r = api.Post(fmt::format("/api/v1/jobs/{}/cancel", id), json());
      if (!r.ok()) {
        if (int code = Report(f, r.status()); code != kExitOk) rc = code;
      } else if (f.verbose) {
        std::fprintf(stderr, "scancel: cancelled job %llu\n", static_cast<unsigned long long>(id));
      }
    }
  }
  return rc;
}

int Scancel(const ContextPtr& ctx, const ScancelFlags& f) {
  for (const auto& [flag, option] : f.refused) {
    if (option->count() > 0) {
      return Fail(InvalidArgument("", fmt::format("scancel --{} is not supported: {}", flag,
                                                  RefusedFlags().at(flag))),
                  kExitUsage);
    }
  }
  auto refs = ParseJobRefs(f.ids);
  if (!refs.ok()) return Fail(refs.status(), kExitUsage);
  const bool filtered = !f.user.empty() || f.me || !f.partition.empty() || !f.state.empty() ||
                        !f.name.empty() || !f.account.empty() || !f.nodelist.empty();
  if (refs->empty() && !filtered) {
    return Fail(InvalidArgument("",
                                "scancel: no job given: name jobs (123, 123_7, 123_[1-3], "
                                "11-20) or filters (-u, --me, -p, -t, -n, -A, -w)"),
                kExitUsage);
  }
  if (!f.state.empty()) {
    if (auto st = ScancelStates(f.state); !st.ok()) return Fail(st.status(), kExitUsage);
  }
  if (!f.nodelist.empty()) {
    if (auto n = ExpandHostList(f.nodelist, "nodelist"); !n.ok()) {
      return Fail(n.status(), kExitUsage);
    }
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  if (!filtered) return CancelIds(f, api, *refs);
  auto filters = BuildFilters(f, api);
  if (!filters.ok()) return Fail(filters.status());
  auto candidates = Candidates(api, *refs, *filters);
  if (!candidates.ok()) return Fail(candidates.status());
  int rc = kExitOk;
  size_t cancelled = 0;
  for (const json& j : *candidates) {
    if (!filters->Match(j)) continue;
    const uint64_t id = j.value("id", uint64_t{0});
    auto r = api.Post(fmt::format("/api/v1/jobs/{}/cancel", id), json());
    if (!r.ok()) {
      if (int code = Report(f, r.status()); code != kExitOk) rc = code;
      continue;
    }
    ++cancelled;
    if (f.verbose) {
      std::fprintf(stderr, "scancel: cancelled job %llu\n", static_cast<unsigned long long>(id));
    }
  }
  if (f.verbose && cancelled == 0) std::fprintf(stderr, "scancel: no job matches\n");
  return rc;
}

}  // namespace

void RegisterScancelCommand(CLI::App& app, const ContextPtr& ctx) {
  auto f = std::make_shared<ScancelFlags>();
  auto* cmd = app.add_subcommand(
      "scancel", "Cancel jobs as Slurm's scancel does: by id, or by user, queue, state, name, ...");
  cmd->add_option("ids", f->ids,
                  "Jobs: 123 (an array's id: the whole array), 123_7, 123_[1-5,9], 11-20");
  cmd->add_option("-u,--user", f->user, "Only this user's jobs");
  cmd->add_flag("--me", f->me, "Only the token's user's jobs");
  cmd->add_option("-p,--partition", f->partition, "Only jobs of these queues (comma-separated)");
  cmd->add_option("-t,--state", f->state, "Only jobs in these states: PENDING, RUNNING, SUSPENDED");
  cmd->add_option("-n,--name,--jobname", f->name, "Only jobs of these names (comma-separated)");
  cmd->add_option("-A,--account", f->account, "Only jobs of these tenants (comma-separated)");
  cmd->add_option("-w,--nodelist", f->nodelist, "Only jobs on these nodes (gpu[01-04],cpu1)");
  cmd->add_flag("-v,--verbose", f->verbose, "Say what was cancelled (on stderr)");
  cmd->add_flag("-Q,--quiet", f->quiet, "Say nothing of jobs that had already ended");
  // Slurm's flags that Arbiter cannot honour: accepted by the parser, refused by name.
  const std::vector<std::pair<std::string, std::string>> value_flags = {
      {"-s,--signal", "signal"},           {"-M,--clusters", "clusters"}, {"-q,--qos", "qos"},
      {"-R,--reservation", "reservation"}, {"--wckey", "wckey"},          {"--sibling", "sibling"}};
  for (const auto& [names, flag] : value_flags) {
    f->refused[flag] =
        cmd->add_option(names, f->refused_value[flag], "Not supported (Slurm's)")->group("");
  }
  for (const auto& [names, flag] :
       std::vector<std::pair<std::string, std::string>>{{"-b,--batch", "batch"},
                                                        {"-f,--full", "full"},
                                                        {"-H,--hurry", "hurry"},
                                                        {"-i,--interactive", "interactive"}}) {
    f->refused[flag] =
        cmd->add_flag(names, f->refused_flag[flag], "Not supported (Slurm's)")->group("");
  }
  AddClientFlags(cmd, ctx);
  cmd->footer(
      "Silent when it succeeds (-v: what it cancelled); errors and exit codes as the other "
      "commands' (docs/cli.md).\n\n"
      "Examples:\n"
      "  arbiter scancel 123            # a job, or the whole array 123\n"
      "  arbiter scancel 123_7 123_[1-3]\n"
      "  arbiter scancel --me -t PENDING\n"
      "  arbiter scancel -u bob -n sweep -p gpu");
  cmd->callback([ctx, f] { ctx->Run([&] { return Scancel(ctx, *f); }); });
}

}  // namespace arbiter::cli

// `arbiter sinfo`: Slurm's sinfo over Arbiter's queues and nodes (docs/cli.md, "sinfo").
//
// Partitions are queues: the leaf queues the caller may see, the default one (its tenant's
// default_queue) marked with '*'. Arbiter's queues are quotas, not node sets: every queue may use
// every node, so each partition lists all the nodes, by state (cli/slurm.h maps the states). A
// line of output is the nodes of one partition whose printed fields are all alike (counts and
// node lists aside), as sinfo groups them; -N prints one line per node, -s one per partition, -R
// the nodes that are down or drained and why.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "cli/commands.h"
#include "cli/slurm.h"
#include "cli/slurm_format.h"
#include "cli/views.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

constexpr const char* kDefaultFormat = "%#P %.5a %.10l %.6D %.6t %N";
constexpr const char* kSummaryFormat = "%#P %.5a %.10l %.16F %N";
constexpr const char* kLongFormat = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N";
constexpr const char* kNodeFormat = "%#N %.6D %#P %.6t";
constexpr const char* kNodeLongFormat = "%#N %.6D %#P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E";
constexpr const char* kReasonFormat = "%20E %9u %19H %N";
constexpr const char* kLetters = "PRalDtTNGcmCFAOeEuHsrhgzdwfno";
// Fields that sum or list the nodes of a line; every other field must be alike within it.
constexpr std::string_view kAggregates = "DNCFA";

const std::map<char, const char*>& Headers() {
  static const std::map<char, const char*> kHeaders = {
      {'P', "PARTITION"},      {'R', "PARTITION"},  {'a', "AVAIL"},
      {'l', "TIMELIMIT"},      {'D', "NODES"},      {'t', "STATE"},
      {'T', "STATE"},          {'N', "NODELIST"},   {'G', "GRES"},
      {'c', "CPUS"},           {'m', "MEMORY"},     {'C', "CPUS(A/I/O/T)"},
      {'F', "NODES(A/I/O/T)"}, {'A', "NODES(A/I)"}, {'O', "CPU_LOAD"},
      {'e', "FREE_MEM"},       {'E', "REASON"},     {'u', "USER"},
      {'H', "TIMESTAMP"},      {'s', "JOB_SIZE"},   {'r', "ROOT"},
      {'h', "OVERSUBSCRIBE"},  {'g', "GROUPS"},     {'z', "S:C:T"},
      {'d', "TMP_DISK"},       {'w', "WEIGHT"},     {'f', "AVAIL_FEATURES"},
      {'n', "HOSTNAMES"},      {'o', "NODE_ADDR"}};
  return kHeaders;
}

struct SinfoFlags {
  std::string partitions, states, format;
  bool node = false, noheader = false, long_format = false, summarize = false, reasons = false;
};

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

struct Partition {
  std::string name;
  bool is_default = false;
  int64_t walltime = 0;
};

// A node as sinfo reads it.
struct NodeView {
  const json* node;
  NodeUse use;
  SlurmState state;
};

NodeView ViewOf(const json& n) {
  NodeView v{&n, {}, {}};
  const json& a = n.value("allocated", json::object());
  v.use.state = Str(n, "state");
  v.use.gpus = NodeGpuCount(n);
  v.use.gpu_milli_used = static_cast<int64_t>(a.value("gpus", 0.0) * 1000.0 + 0.5);
  v.use.cpu_milli = n.value("cpu_milli", int64_t{0});
  v.use.cpu_milli_used = a.value("cpu_milli", int64_t{0});
  v.use.jobs = a.value("jobs", int64_t{0});
  v.state = SlurmNodeState(v.use);
  return v;
}

bool Usable(const SlurmState& s) {
  return s.name == "IDLE" || s.name == "MIXED" || s.name == "ALLOCATED";
}

// Why a node is not ready: what its admin said, else what its state says.
std::string Reason(const NodeView& v) {
  const std::string given = Str(*v.node, "state_reason");
  if (!given.empty()) return given;
  if (v.use.state == "down") return "Not responding";
  if (v.use.state == "cordoned") return "cordoned";
  if (v.use.state == "draining") return "draining";
  return "none";
}

std::string Gres(const json& n) {
  const int64_t count = NodeGpuCount(n);
  return count == 0 ? "(null)" : fmt::format("gpu:{}:{}", NodeGpuModels(n), count);
}

// The value of a per-node field (not one of kAggregates).
std::string NodeField(char letter, const NodeView& v, const Partition& p) {
  const json& n = *v.node;
  switch (letter) {
    case 'P':
      return p.name + (p.is_default ? "*" : "");
    case 'R':
      return p.name;
    case 'a':
      return "up";
    case 'l':
      return p.walltime > 0 ? SqueueDuration(p.walltime) : "infinite";
    case 't':
      return std::string(v.state.code);
    case 'T':
      return std::string(v.state.name);
    case 'G':
      return Gres(n);
    case 'c':
      return std::to_string(v.use.cpu_milli / 1000);
    case 'm':
      return std::to_string(n.value("memory_mib", int64_t{0}));
    case 'O':
      return "N/A";
    case 'e': {
      const int64_t used = n.value("allocated", json::object()).value("memory_mib", int64_t{0});
      return std::to_string(std::max<int64_t>(0, n.value("memory_mib", int64_t{0}) - used));
    }
    case 'E':
      return Reason(v);
    case 'u':
      return Str(n, "state_changed_by").empty() ? "N/A" : Str(n, "state_changed_by");
    case 'H': {
      const auto at = JobTime(n, "state_changed_at");
      return at ? SlurmTimestamp(*at) : "Unknown";
    }
    case 's':
      return "1-infinite";
    case 'r':
      return "no";
    case 'h':
      return "NO";
    case 'g':
      return "all";
    case 'z':
      return fmt::format("1:{}:1", v.use.cpu_milli / 1000);
    case 'd':
      return "0";
    case 'w':
      return "1";
    case 'f':
      return NodeGpuCount(n) == 0 ? "(null)" : NodeGpuModels(n);
    case 'n':
    case 'o':
      return Str(n, "name");
    default:
      return "";
  }
}

// The value of an aggregate field over the nodes of one line.
std::string AggregateField(char letter, const std::vector<const NodeView*>& nodes) {
  switch (letter) {
    case 'D':
      return std::to_string(nodes.size());
    case 'N': {
      std::vector<std::string> names;
      for (const NodeView* v : nodes) names.push_back(Str(*v->node, "name"));
      return CompressHostlist(names);
    }
    case 'C': {
      int64_t alloc = 0, idle = 0, other = 0;
      for (const NodeView* v : nodes) {
        const int64_t total = v->use.cpu_milli / 1000;
        const int64_t used = std::min(total, (v->use.cpu_milli_used + 999) / 1000);
        if (Usable(v->state)) {
          alloc += used;
          idle += total - used;
        } else {
          other += total;
        }
      }
      return fmt::format("{}/{}/{}/{}", alloc, idle, other, alloc + idle + other);
    }
    case 'F':
    case 'A': {
      int64_t alloc = 0, idle = 0, other = 0;
      for (const NodeView* v : nodes) {
        if (v->state.name == "IDLE") {
          ++idle;
        } else if (Usable(v->state)) {
          ++alloc;
        } else {
          ++other;
        }
      }
      return letter == 'A' ? fmt::format("{}/{}", alloc, idle)
                           : fmt::format("{}/{}/{}/{}", alloc, idle, other, alloc + idle + other);
    }
    default:
      return "";
  }
}

// The lines of one partition (or, for -R, of every node once): nodes grouped by their per-node
// fields, in the order of their first node; with -N one line per node.
std::vector<std::vector<std::string>> Lines(const PercentFormat& format,
                                            const std::vector<NodeView>& nodes, const Partition& p,
                                            bool per_node) {
  std::vector<std::pair<std::vector<std::string>, std::vector<const NodeView*>>> groups;
  for (const NodeView& v : nodes) {
    std::vector<std::string> key;
    for (const PercentField& f : format.fields) {
      key.push_back(kAggregates.find(f.letter) == std::string_view::npos ? NodeField(f.letter, v, p)
                                                                         : "");
    }
    if (per_node) key.push_back(Str(*v.node, "name"));
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {&v}});
    } else {
      it->second.push_back(&v);
    }
  }
  std::vector<std::vector<std::string>> lines;
  for (auto& [key, members] : groups) {
    std::vector<std::string> line;
    for (size_t i = 0; i < format.fields.size(); ++i) {
      const char letter = format.fields[i].letter;
      line.push_back(kAggregates.find(letter) == std::string_view::npos
                         ? key[i]
                         : AggregateField(letter, members));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// The partitions the caller may see, those named by -p only.
Result<std::vector<Partition>> Partitions(ApiClient& api, const std::string& wanted) {
  auto queues = api.Get("/api/v1/queues");
  if (!queues.ok()) return queues.status();
  auto who = api.Get("/api/v1/whoami");
  if (!who.ok()) return who.status();
  const std::string tenant = Str(*who, "tenant");
  std::set<std::string> parents;
  for (const json& q : (*queues)["items"]) parents.insert(Str(q, "parent"));
  std::vector<Partition> all;
  for (const json& q : (*queues)["items"]) {
    if (q.value("is_tenant", false) || parents.count(Str(q, "name"))) continue;
    // The default partition: the caller's tenant's default queue (an admin with no tenant: each
    // tenant's).
    const bool is_default =
        q.value("default", false) && (tenant.empty() || Str(q, "tenant") == tenant);
    all.push_back({Str(q, "name"), is_default, q.value("default_walltime_seconds", int64_t{0})});
  }
  if (wanted.empty()) return all;
  std::vector<Partition> out;
  for (const std::string& w : SplitCommas(wanted)) {
    auto it = std::find_if(all.begin(), all.end(), [&](const Partition& p) { return p.name == w; });
    if (it == all.end()) {
      std::string known;
      for (const Partition& p : all) known += (known.empty() ? "" : ", ") + p.name;
      return InvalidArgument("partition", fmt::format("partition {} not found; partitions you can "
                                                      "see: {}",
                                                      w, known.empty() ? "none" : known));
    }
    out.push_back(*it);
  }
  return out;
}

const char* FormatFor(const SinfoFlags& f) {
  if (f.reasons) return kReasonFormat;
  if (f.node) return f.long_format ? kNodeLongFormat : kNodeFormat;
  if (f.summarize) return kSummaryFormat;
  return f.long_format ? kLongFormat : kDefaultFormat;
}

int Sinfo(const ContextPtr& ctx, const SinfoFlags& f) {
  // -o, else Slurm's $SINFO_FORMAT unless a flag chose a format, else the flags' format.
  const char* env = std::getenv("SINFO_FORMAT");
  const bool plain = !f.node && !f.long_format && !f.summarize && !f.reasons;
  const std::string text = !f.format.empty()                         ? f.format
                           : plain && env != nullptr && *env != '\0' ? env
                                                                     : FormatFor(f);
  auto format = ParsePercentFormat(text, kLetters, "format");
  if (!format.ok()) return Fail(format.status(), kExitUsage);
  std::optional<std::set<std::string>> states;
  if (!f.states.empty()) {
    auto parsed = ParseSlurmNodeStates(f.states, "states");
    if (!parsed.ok()) return Fail(parsed.status(), kExitUsage);
    states = std::move(parsed).value();
  }
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto partitions = Partitions(api, f.partitions);
  if (!partitions.ok()) return Fail(partitions.status());
  auto nodes = api.Get("/api/v1/nodes");
  if (!nodes.ok()) return Fail(nodes.status());
  std::vector<NodeView> views;
  for (const json& n : (*nodes)["items"]) {
    NodeView v = ViewOf(n);
    if (states && !states->count(std::string(v.state.name))) continue;
    if (f.reasons && Usable(v.state)) continue;  // -R: down and drained nodes only
    views.push_back(v);
  }
  std::sort(views.begin(), views.end(), [](const NodeView& a, const NodeView& b) {
    return Str(*a.node, "name") < Str(*b.node, "name");
  });
  std::vector<std::vector<std::string>> lines;
  if (f.reasons) {
    lines = Lines(*format, views, Partition{}, false);
  } else if (f.node) {
    // Node by node, each in every partition (all of them may use it).
    for (const NodeView& v : views) {
      for (const Partition& p : *partitions) {
        for (auto& l : Lines(*format, {v}, p, true)) lines.push_back(std::move(l));
      }
    }
  } else {
    for (const Partition& p : *partitions) {
      for (auto& l : Lines(*format, views, p, false)) lines.push_back(std::move(l));
    }
  }
  std::vector<std::string> headers;
  for (const PercentField& pf : format->fields) headers.emplace_back(Headers().at(pf.letter));
  const std::string out = RenderPercent(*format, headers, lines, !f.noheader);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace

void RegisterSinfoCommand(CLI::App& app, const ContextPtr& ctx) {
  auto f = std::make_shared<SinfoFlags>();
  auto* cmd = app.add_subcommand(
      "sinfo", "Slurm's sinfo: partitions (queues) and their nodes by state, in Slurm's formats");
  cmd->set_help_flag("--help", "Print this help and exit (-h is --noheader, as in Slurm)");
  cmd->add_flag("-N,--Node", f->node, "A line per node");
  cmd->add_option("-p,--partition", f->partitions, "Only these partitions (queues)");
  cmd->add_flag("-h,--noheader", f->noheader, "No header line");
  cmd->add_flag("-l,--long", f->long_format, "More columns");
  cmd->add_flag("-s,--summarize", f->summarize, "A line per partition, nodes as A/I/O/T");
  cmd->add_flag("-R,--list-reasons", f->reasons, "Nodes down or drained, and why");
  cmd->add_option("-t,--states", f->states,
                  "Only nodes in these states (idle,mix,alloc,drain,down)");
  cmd->add_option("-o,--format", f->format,
                  fmt::format("Output format (default \"{}\")", kDefaultFormat));
  AddClientFlags(cmd, ctx);
  SetExamples(cmd, {"arbiter sinfo", "arbiter sinfo -N -l", "arbiter sinfo -R",
                    "arbiter sinfo -p vision-train -t idle,mix", "arbiter sinfo -h -o '%P %D %t'"});
  cmd->callback([ctx, f] { ctx->Run([&] { return Sinfo(ctx, *f); }); });
}

}  // namespace arbiter::cli

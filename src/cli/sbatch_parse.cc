// Reading Slurm batch scripts: times, sizes, words, #SBATCH directives (sbatch.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "cli/sbatch.h"
#include "cli/sbatch_text.h"

namespace arbiter::cli {

using sbatch_text::kMaxSeconds;
using sbatch_text::Lower;
using sbatch_text::Number;
using sbatch_text::Split;
using sbatch_text::Trim;

Result<std::vector<Dependency>> ParseSlurmDependency(std::string_view text) {
  const std::string v(Trim(text));
  if (v.find('?') != std::string::npos) {
    return InvalidArgument("dependency",
                           fmt::format("--dependency={}: '?' (any one of) is not supported; "
                                       "Arbiter's dependencies must all hold (',')",
                                       v));
  }
  if (v.empty()) return InvalidArgument("dependency", "--dependency: empty");
  std::vector<Dependency> out;
  for (const std::string& part : Split(v, ',')) {
    const std::vector<std::string> words = Split(part, ':');
    Dependency d;
    if (words.empty() || !ParseDependencyType(Lower(words[0]), &d.type)) {
      return InvalidArgument(
          "dependency",
          fmt::format("--dependency={}: unknown type in '{}'; use after, afterok, afterany, "
                      "afternotok or singleton",
                      v, part));
    }
    if (d.type == DependencyType::kSingleton) {
      if (words.size() > 1) {
        return InvalidArgument("dependency",
                               fmt::format("--dependency={}: singleton takes no job ids", v));
      }
      out.push_back(d);
      continue;
    }
    if (words.size() < 2) {
      return InvalidArgument(
          "dependency",
          fmt::format("--dependency={}: '{}' needs job ids ({}:ID[:ID...])", v, part, words[0]));
    }
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string& id = words[i];
      if (id.find('+') != std::string::npos) {
        return InvalidArgument(
            "dependency", fmt::format("--dependency={}: a delay (+MINUTES) is not supported", v));
      }
      if (id.empty() || id.size() > 15 ||
          !std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
          id == std::string(id.size(), '0')) {
        return InvalidArgument("dependency",
                               fmt::format("--dependency={}: '{}' is not a job id", v, id));
      }
      d.job = std::stoull(id);
      if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    }
  }
  return out;
}

Result<int64_t> ParseSlurmTime(std::string_view text) {
  const std::string s = Trim(text);
  const std::string l = Lower(s);
  if (l == "unlimited" || l == "infinite") return int64_t{0};
  auto bad = [&] {
    return InvalidArgument("time", fmt::format("'{}' is not a Slurm time; use M, M:S, H:M:S, D-H, "
                                               "D-H:M or D-H:M:S (e.g. 90, 2:30:00, 1-12)",
                                               s));
  };
  int64_t days = 0;
  std::string rest = s;
  const size_t dash = s.find('-');
  const bool has_days = dash != std::string::npos;
  if (has_days) {
    auto d = Number(s.substr(0, dash), 100000);
    if (!d) return bad();
    days = *d;
    rest = s.substr(dash + 1);
  }
  const std::vector<std::string> parts = Split(rest, ':');
  if (parts.size() > 3) return bad();
  std::vector<int64_t> v;
  for (const std::string& p : parts) {
    auto n = Number(p, 100000000);
    if (!n) return bad();
    v.push_back(*n);
  }
  int64_t seconds = 0;
  if (has_days) {
    // D-H, D-H:M, D-H:M:S
    seconds = days * 86400 + v[0] * 3600;
    if (v.size() > 1) seconds += v[1] * 60;
    if (v.size() > 2) seconds += v[2];
  } else if (v.size() == 1) {
    seconds = v[0] * 60;  // M
  } else if (v.size() == 2) {
    seconds = v[0] * 60 + v[1];  // M:S
  } else {
    seconds = v[0] * 3600 + v[1] * 60 + v[2];  // H:M:S
  }
  if (seconds > kMaxSeconds) {
    return InvalidArgument("time",
                           fmt::format("'{}' is longer than the longest walltime, 366 days", s));
  }
  return seconds;
}

Result<int64_t> ParseSlurmMemory(std::string_view text) {
  std::string s = Trim(text);
  std::string unit;
  while (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back()))) {
    unit.insert(unit.begin(),
                static_cast<char>(std::toupper(static_cast<unsigned char>(s.back()))));
    s.pop_back();
  }
  if (unit.size() > 1 && (unit.substr(1) == "B" || unit.substr(1) == "IB"))
    unit = unit.substr(0, 1);
  auto n = Number(s);
  int64_t mib = 0;
  if (n && (unit.empty() || unit == "M")) {
    mib = *n;
  } else if (n && unit == "K") {
    mib = (*n + 1023) / 1024;
  } else if (n && unit == "G") {
    mib = *n * 1024;
  } else if (n && unit == "T") {
    mib = *n * 1024 * 1024;
  } else {
    return InvalidArgument("mem", fmt::format("'{}' is not a Slurm memory size; use a whole number "
                                              "with K, M (the default), G or T: 64G, 500M",
                                              Trim(text)));
  }
  if (mib > (int64_t{1} << 40)) {
    return InvalidArgument("mem", fmt::format("'{}' is too large", Trim(text)));
  }
  return mib;
}

Result<int64_t> ParseDuration(std::string_view text) {
  const std::string s = Trim(text);
  if (s.empty()) return InvalidArgument("walltime", "is empty");
  // Slurm's forms first (only digits, ':' and '-').
  if (s.find_first_not_of("0123456789:-") == std::string::npos) return ParseSlurmTime(s);
  const std::string l = Lower(s);
  if (l == "unlimited" || l == "infinite") return int64_t{0};
  int64_t total = 0;
  size_t i = 0;
  while (i < l.size()) {
    size_t j = i;
    while (j < l.size() && std::isdigit(static_cast<unsigned char>(l[j]))) ++j;
    auto n = Number(l.substr(i, j - i), 100000000);
    if (!n || j == l.size()) {
      return InvalidArgument("walltime", fmt::format("'{}' is not a duration; use 2h, 1h30m, 90m, "
                                                     "45s, 1d12h or Slurm's 1-12, 2:30:00",
                                                     s));
    }
    const char u = l[j];
    const int64_t mult = u == 'd' ? 86400 : u == 'h' ? 3600 : u == 'm' ? 60 : u == 's' ? 1 : 0;
    if (mult == 0) {
      return InvalidArgument("walltime",
                             fmt::format("'{}': unknown unit '{}'; use d, h, m or s", s, l[j]));
    }
    total += *n * mult;
    i = j + 1;
  }
  if (total > kMaxSeconds) {
    return InvalidArgument("walltime", fmt::format("'{}' is longer than 366 days", s));
  }
  return total;
}

Result<std::vector<std::string>> SplitWords(std::string_view line) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      ++i;
      continue;
    }
    if (c == '#' && !in_word) break;  // a comment
    in_word = true;
    if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      if (end == std::string_view::npos) return InvalidArgument("", "unmatched ' (single quote)");
      cur.append(line.substr(i + 1, end - i - 1));
      i = end + 1;
    } else if (c == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '\\' && i + 1 < line.size() &&
            (line[i + 1] == '"' || line[i + 1] == '\\' || line[i + 1] == '$')) {
          cur += line[i + 1];
          i += 2;
        } else if (line[i] == '"') {
          closed = true;
          ++i;
          break;
        } else {
          cur += line[i++];
        }
      }
      if (!closed) return InvalidArgument("", "unmatched \" (double quote)");
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[i + 1];
      i += 2;
    } else {
      cur += c;
      ++i;
    }
  }
  if (in_word) words.push_back(std::move(cur));
  return words;
}

bool LooksLikeBatchScript(std::string_view text) {
  if (text.substr(0, 2) == "#!") return true;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (line.substr(0, 7) == "#SBATCH" || line.substr(0, 8) == "#ARBITER") return true;
    start = end + 1;
  }
  return false;
}

// --- Directives ------------------------------------------------------------------------------

namespace {

Result<GpuRequest> ParseGpuCount(const std::string& v, const std::string& flag) {
  // [type:]count
  const std::vector<std::string> parts = Split(v, ':');
  GpuRequest g;
  auto bad = [&] {
    return InvalidArgument(flag, fmt::format("{}={}: use [TYPE:]COUNT, e.g. 4 or a100:4", flag, v));
  };
  if (v.find(',') != std::string::npos) {
    return InvalidArgument(
        flag, fmt::format("{}={}: one GPU type per job; Arbiter cannot mix models", flag, v));
  }
  if (parts.size() == 1) {
    auto n = Number(parts[0], 1024);
    if (!n) return bad();
    g.count = static_cast<int32_t>(*n);
  } else if (parts.size() == 2) {
    auto n = Number(parts[1], 1024);
    if (!n || parts[0].empty()) return bad();
    g.type = parts[0];
    g.count = static_cast<int32_t>(*n);
  } else {
    return bad();
  }
  return g;
}

// Where an option was given, for messages: "line 3" of the script, or sbatch's command line
// (line 0).
std::string Where(int line) {
  return line > 0 ? fmt::format("line {}", line) : std::string("command line");
}

// --gres=gpu[:type][:count][(S:0-1)][,other...]: the GPU part; other resources are unsupported.
Status ParseGres(const std::string& v, SlurmDirectives* d, std::vector<std::string>* unsupported,
                 int line) {
  for (std::string item : Split(v, ',')) {
    const size_t paren = item.find('(');
    if (paren != std::string::npos) item = item.substr(0, paren);  // socket binding: ignored
    std::vector<std::string> parts = Split(item, ':');
    if (parts[0].rfind("gres/", 0) == 0) parts[0] = parts[0].substr(5);
    if (parts[0] != "gpu") {
      unsupported->push_back(fmt::format("--gres={} ({})", item, Where(line)));
      continue;
    }
    GpuRequest g;
    g.count = 1;
    auto bad = [&] {
      return InvalidArgument("gres",
                             fmt::format("--gres={}: use gpu, gpu:COUNT or gpu:TYPE:COUNT", item));
    };
    if (parts.size() == 2) {
      if (auto n = Number(parts[1], 1024)) {
        g.count = static_cast<int32_t>(*n);
      } else {
        g.type = parts[1];
      }
    } else if (parts.size() == 3) {
      auto n = Number(parts[2], 1024);
      if (!n || parts[1].empty()) return bad();
      g.type = parts[1];
      g.count = static_cast<int32_t>(*n);
    } else if (parts.size() > 3) {
      return bad();
    }
    d->gres_gpu = g;
  }
  return Status::Ok();
}

// kOptional: a value only as --name=VALUE (--exclusive, --exclusive=user).
enum class Arg { kNone, kRequired, kOptional };

struct OptionSpec {
  const char* long_name;
  char short_name;
  Arg arg;
  // Applies the value; `line` for messages.
  std::function<Status(const std::string& value, BatchScript* s, int line)> apply;
};

Status SetInt(std::optional<int32_t>* out, const std::string& v, const std::string& flag,
              int64_t min = 1) {
  auto n = Number(v, 100000);
  if (!n || *n < min) {
    return InvalidArgument(
        flag, fmt::format("--{}={}: must be a whole number of at least {}", flag, v, min));
  }
  *out = static_cast<int32_t>(*n);
  return Status::Ok();
}

Status SetMem(std::optional<int64_t>* out, const std::string& v) {
  auto m = ParseSlurmMemory(v);
  if (!m.ok()) return m.status();
  *out = *m;
  return Status::Ok();
}

// Options that set one field as given.
OptionSpec Text(const char* name, char short_name,
                std::optional<std::string> SlurmDirectives::*field) {
  return {name, short_name, Arg::kRequired, [field](const std::string& v, BatchScript* s, int) {
            s->slurm.*field = v;
            return Status::Ok();
          }};
}

OptionSpec Count(const char* name, char short_name,
                 std::optional<int32_t> SlurmDirectives::*field) {
  return {name, short_name, Arg::kRequired,
          [name, field](const std::string& v, BatchScript* s, int) {
            return SetInt(&(s->slurm.*field), v, name);
          }};
}

OptionSpec Gpus(const char* name, char short_name,
                std::optional<GpuRequest> SlurmDirectives::*field) {
  return {name, short_name, Arg::kRequired,
          [name, field](const std::string& v, BatchScript* s, int) {
            auto g = ParseGpuCount(v, fmt::format("--{}", name));
            if (!g.ok()) return g.status();
            s->slurm.*field = *g;
            return Status::Ok();
          }};
}

OptionSpec Memory(const char* name, std::optional<int64_t> SlurmDirectives::*field) {
  return {name, 0, Arg::kRequired, [field](const std::string& v, BatchScript* s, int) {
            return SetMem(&(s->slurm.*field), v);
          }};
}

Status ApplyPartition(const std::string& v, BatchScript* s, int line) {
  const std::vector<std::string> parts = Split(v, ',');
  s->slurm.partition = parts[0];
  if (parts.size() > 1) {
    s->notes.push_back(fmt::format("--partition={} ({}): a job waits in one queue; using {}", v,
                                   Where(line), parts[0]));
  }
  return Status::Ok();
}

Status ApplyDependency(const std::string& v, BatchScript* s, int) {
  auto deps = ParseSlurmDependency(v);
  if (!deps.ok()) return deps.status();
  s->slurm.dependency = std::move(deps).value();
  return Status::Ok();
}

Status ApplyNodes(const std::string& v, BatchScript* s, int line) {
  const size_t dash = v.find('-');
  if (dash == std::string::npos) return SetInt(&s->slurm.nodes, v, "nodes");
  ARBITER_RETURN_IF_ERROR(SetInt(&s->slurm.nodes, v.substr(0, dash), "nodes"));
  s->notes.push_back(
      fmt::format("--nodes={} ({}): node ranges are not supported; using {} "
                  "nodes",
                  v, Where(line), *s->slurm.nodes));
  return Status::Ok();
}

Status ApplyMem(const std::string& v, BatchScript* s, int line) {
  ARBITER_RETURN_IF_ERROR(SetMem(&s->slurm.mem_mib, v));
  if (*s->slurm.mem_mib == 0) {
    s->notes.push_back(
        fmt::format("--mem={} ({}): \"all of a node's memory\" is not a "
                    "request in Arbiter; the job asks for no memory",
                    v, Where(line)));
  }
  return Status::Ok();
}

Status ApplyTime(const std::string& v, BatchScript* s, int) {
  auto t = ParseSlurmTime(v);
  if (!t.ok()) return t.status();
  s->slurm.time_seconds = *t;
  return Status::Ok();
}

// --signal=[{R|B}:]SIG[@TIME]
Status ApplySignal(const std::string& v, BatchScript* s, int) {
  std::string x = v;
  if (x.size() > 2 && x[1] == ':' && (x[0] == 'R' || x[0] == 'B')) x = x.substr(2);
  int64_t lead = 60;  // Slurm's default lead time
  const size_t at = x.find('@');
  if (at != std::string::npos) {
    auto n = Number(x.substr(at + 1), 65535);
    if (!n) {
      return InvalidArgument(
          "signal", fmt::format("--signal={}: use [R:|B:]SIG[@SECONDS], e.g. USR1@120", v));
    }
    lead = *n;
    x = x.substr(0, at);
  }
  std::string sig = x;
  for (char& c : sig) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (sig.rfind("SIG", 0) == 0) sig = sig.substr(3);
  if (sig == "15") sig = "TERM";
  if (sig.empty()) return InvalidArgument("signal", fmt::format("--signal={}: no signal", v));
  s->slurm.signal_name = sig;
  s->slurm.signal_seconds = lead;
  return Status::Ok();
}

Status ApplyExclusive(const std::string& v, BatchScript* s, int line) {
  s->slurm.exclusive = true;
  if (!v.empty()) {
    s->notes.push_back(
        fmt::format("--exclusive={} ({}): the job takes its nodes whole, "
                    "shared with nobody",
                    v, Where(line)));
  }
  return Status::Ok();
}

Status ApplyHostList(std::optional<std::vector<std::string>>* out, const char* flag,
                     const std::string& v) {
  auto hosts = ExpandHostList(v);
  if (!hosts.ok()) {
    return InvalidArgument(flag, fmt::format("--{}={}: {}", flag, v, hosts.status().message()));
  }
  *out = std::move(hosts).value();
  return Status::Ok();
}

Status ApplyOpenMode(const std::string& v, BatchScript* s, int) {
  const std::string mode = Lower(v);
  if (mode != "append" && mode != "truncate") {
    return InvalidArgument("open-mode", fmt::format("--open-mode={}: use append or truncate", v));
  }
  s->slurm.open_append = mode == "append";
  return Status::Ok();
}

const std::vector<OptionSpec>& Options() {
  using D = SlurmDirectives;
  static const std::vector<OptionSpec> kOptions = {
      Text("job-name", 'J', &D::job_name),
      {"partition", 'p', Arg::kRequired, ApplyPartition},
      Text("account", 'A', &D::account),
      {"nodes", 'N', Arg::kRequired, ApplyNodes},
      Count("ntasks", 'n', &D::ntasks),
      Count("ntasks-per-node", 0, &D::ntasks_per_node),
      {"gres", 0, Arg::kRequired,
       [](const std::string& v, BatchScript* s, int line) {
         return ParseGres(v, &s->slurm, &s->unsupported, line);
       }},
      Gpus("gpus", 'G', &D::gpus),
      Gpus("gpus-per-node", 0, &D::gpus_per_node),
      Gpus("gpus-per-task", 0, &D::gpus_per_task),
      Count("cpus-per-task", 'c', &D::cpus_per_task),
      Count("cpus-per-gpu", 0, &D::cpus_per_gpu),
      {"mem", 0, Arg::kRequired, ApplyMem},
      Memory("mem-per-gpu", &D::mem_per_gpu_mib),
      Memory("mem-per-cpu", &D::mem_per_cpu_mib),
      {"time", 't', Arg::kRequired, ApplyTime},
      Text("qos", 'q', &D::qos),
      {"requeue", 0, Arg::kNone,
       [](const std::string&, BatchScript* s, int) {
         s->slurm.requeue = true;
         return Status::Ok();
       }},
      {"no-requeue", 0, Arg::kNone,
       [](const std::string&, BatchScript* s, int) {
         s->slurm.requeue = false;
         return Status::Ok();
       }},
      {"signal", 0, Arg::kRequired, ApplySignal},
      Text("constraint", 'C', &D::constraint),
      Text("output", 'o', &D::output),
      Text("error", 'e', &D::error),
      Text("chdir", 'D', &D::chdir),
      Text("container-image", 0, &D::container_image),
      Text("array", 'a', &D::array),
      {"dependency", 'd', Arg::kRequired, ApplyDependency},
      {"exclusive", 0, Arg::kOptional, ApplyExclusive},
      {"nodelist", 'w', Arg::kRequired,
       [](const std::string& v, BatchScript* s, int) {
         return ApplyHostList(&s->slurm.nodelist, "nodelist", v);
       }},
      {"exclude", 'x', Arg::kRequired,
       [](const std::string& v, BatchScript* s, int) {
         return ApplyHostList(&s->slurm.exclude, "exclude", v);
       }},
      Text("mail-user", 0, &D::mail_user),
      Text("mail-type", 0, &D::mail_type),
      Text("export", 0, &D::export_env),
      {"open-mode", 0, Arg::kRequired, ApplyOpenMode},
  };
  return kOptions;
}

// Options of sbatch that take no value, so that an unsupported one does not swallow the next
// word.
bool IsSlurmFlag(const std::string& name) {
  static const std::set<std::string> kFlags = {"exclusive",
                                               "hold",
                                               "H",
                                               "overcommit",
                                               "O",
                                               "contiguous",
                                               "no-kill",
                                               "k",
                                               "parsable",
                                               "wait",
                                               "W",
                                               "test-only",
                                               "oversubscribe",
                                               "s",
                                               "spread-job",
                                               "use-min-nodes",
                                               "ignore-pbs",
                                               "quiet",
                                               "Q",
                                               "verbose",
                                               "v",
                                               "get-user-env",
                                               "reboot",
                                               "I",
                                               "immediate",
                                               "no-requeue",
                                               "requeue",
                                               "exact"};
  return kFlags.count(name) > 0;
}

const OptionSpec* FindOption(const std::string& name, bool is_long) {
  for (const OptionSpec& o : Options()) {
    if (is_long ? name == o.long_name : (name.size() == 1 && o.short_name == name[0])) return &o;
  }
  return nullptr;
}

// Applies the options of one #SBATCH line (line > 0), or of sbatch's command line (line 0: the
// first word that is no option ends them; its index goes to *end).
Status ParseDirectiveLine(const std::vector<std::string>& words, int line, BatchScript* s,
                          size_t* end = nullptr) {
  if (end != nullptr) *end = words.size();
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    std::string name;
    std::optional<std::string> value;
    bool is_long = false;
    if (end != nullptr && (w == "--" || w.empty() || w[0] != '-' || w == "-")) {
      *end = w == "--" ? i + 1 : i;
      return Status::Ok();
    }
    if (w.rfind("--", 0) == 0 && w.size() > 2) {
      is_long = true;
      const size_t eq = w.find('=');
      name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (eq != std::string::npos) value = w.substr(eq + 1);
    } else if (w.size() >= 2 && w[0] == '-' && w[1] != '-') {
      name = w.substr(1, 1);
      if (w.size() > 2) value = w.substr(w[2] == '=' ? 3 : 2);
    } else {
      s->unsupported.push_back(fmt::format("'{}' ({}: not an option)", w, Where(line)));
      continue;
    }
    const OptionSpec* o = FindOption(name, is_long);
    if (o == nullptr) {
      // Unsupported: name it with its value, and skip the value when it is a separate word.
      std::string shown = w;
      if (!value && !IsSlurmFlag(name) && i + 1 < words.size() && words[i + 1][0] != '-') {
        shown += fmt::format(" {}", words[++i]);
      }
      s->unsupported.push_back(fmt::format("{} ({})", shown, Where(line)));
      continue;
    }
    if (o->arg == Arg::kNone) {
      if (value) {
        return InvalidArgument(o->long_name,
                               fmt::format("{}: --{} takes no value", Where(line), o->long_name));
      }
      value = "";
    } else if (o->arg == Arg::kOptional) {
      if (!value) value = "";
    } else if (!value) {
      if (i + 1 >= words.size()) {
        return InvalidArgument(o->long_name, fmt::format("{}: {} needs a value", Where(line), w));
      }
      value = words[++i];
    }
    Status st = o->apply(*value, s, line);
    if (!st.ok()) {
      return Status(st.code(), fmt::format("{}: {}", Where(line), st.message()), st.field());
    }
  }
  return Status::Ok();
}

}  // namespace

Result<size_t> ApplySbatchOptions(const std::vector<std::string>& words, BatchScript* s) {
  size_t end = 0;
  ARBITER_RETURN_IF_ERROR(ParseDirectiveLine(words, 0, s, &end));
  return end;
}

Result<std::vector<std::string>> ExpandHostList(std::string_view list) {
  constexpr size_t kMaxHosts = 1024;
  std::vector<std::string> out;
  // Split at commas outside brackets.
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) return InvalidArgument("", "unbalanced brackets");
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) return InvalidArgument("", "unbalanced brackets");
  parts.push_back(cur);
  for (const std::string& part : parts) {
    if (Trim(part).empty()) return InvalidArgument("", "an empty host name");
    // Expand bracket groups left to right: prefix[ranges]rest.
    std::vector<std::string> names = {""};
    size_t at = 0;
    while (at < part.size()) {
      const size_t open = part.find('[', at);
      const std::string literal = part.substr(at, open - at);
      for (std::string& n : names) n += literal;
      if (open == std::string::npos) break;
      const size_t close = part.find(']', open);
      std::vector<std::string> items;
      for (const std::string& r : Split(part.substr(open + 1, close - open - 1), ',')) {
        const size_t dash = r.find('-');
        const std::string a = r.substr(0, dash);
        const std::string b = dash == std::string::npos ? a : r.substr(dash + 1);
        auto lo = Number(a, 99999999);
        auto hi = Number(b, 99999999);
        if (!lo || !hi || *hi < *lo) {
          return InvalidArgument("", fmt::format("'[{}]': use numbers and ranges such as "
                                                 "[01-04,07]",
                                                 part.substr(open + 1, close - open - 1)));
        }
        if (*hi - *lo > static_cast<int64_t>(kMaxHosts)) {
          return InvalidArgument("", fmt::format("more than {} hosts", kMaxHosts));
        }
        for (int64_t k = *lo; k <= *hi; ++k) {
          items.push_back(fmt::format("{:0{}}", k, a.size()));
        }
      }
      std::vector<std::string> grown;
      for (const std::string& n : names) {
        for (const std::string& item : items) {
          grown.push_back(n + item);
          if (grown.size() + out.size() > kMaxHosts) {
            return InvalidArgument("", fmt::format("more than {} hosts", kMaxHosts));
          }
        }
      }
      names = std::move(grown);
      at = close + 1;
    }
    for (std::string& n : names) {
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    }
  }
  return out;
}

Result<BatchScript> ParseBatchScript(std::string_view text) {
  BatchScript s;
  bool in_header = true;
  int line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("#!", 0) == 0) {
      s.interpreter = Trim(line.substr(2));
      continue;
    }
    const bool sbatch = line.rfind("#SBATCH", 0) == 0 &&
                        (line.size() == 7 || std::isspace(static_cast<unsigned char>(line[7])));
    const bool arbiter = line.rfind("#ARBITER", 0) == 0 &&
                         (line.size() == 8 || std::isspace(static_cast<unsigned char>(line[8])));
    if (sbatch || arbiter) {
      if (!in_header) {
        s.notes.push_back(
            fmt::format("line {}: {} after the script's first command is ignored, "
                        "as sbatch does",
                        line_no, sbatch ? "#SBATCH" : "#ARBITER"));
        continue;
      }
      auto words = SplitWords(std::string_view(line).substr(sbatch ? 7 : 8));
      if (!words.ok()) {
        return InvalidArgument("", fmt::format("line {}: {}", line_no, words.status().message()));
      }
      if (arbiter) {
        for (std::string& w : *words) s.arbiter_args.push_back(std::move(w));
      } else {
        ARBITER_RETURN_IF_ERROR(ParseDirectiveLine(*words, line_no, &s));
      }
      continue;
    }
    const std::string trimmed = Trim(line);
    if (trimmed.empty()) continue;
    if (trimmed[0] == '#') {
      if (in_header && (trimmed.rfind("#SBATCH", 0) == 0 || trimmed.rfind("#ARBITER", 0) == 0)) {
        s.notes.push_back(
            fmt::format("line {}: a directive must start the line; this one is "
                        "indented and ignored, as sbatch does",
                        line_no));
      }
      continue;
    }
    in_header = false;
  }
  return s;
}

}  // namespace arbiter::cli

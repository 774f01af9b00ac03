#include "exec/srun_layout.h"

#include <algorithm>
#include <cstdlib>
#include <set>

namespace arbiter::exec {
namespace {

// Options that take a value, by every name srun knows them by (long names without "--").
const std::set<std::string> kValueLong = {"ntasks",
                                          "nodes",
                                          "ntasks-per-node",
                                          "gpus-per-task",
                                          "gpu-bind",
                                          "cpus-per-task",
                                          "cpus-per-gpu",
                                          "mem",
                                          "mem-per-cpu",
                                          "mem-per-gpu",
                                          "job-name",
                                          "output",
                                          "error",
                                          "input",
                                          "partition",
                                          "time",
                                          "mpi",
                                          "export",
                                          "gpus",
                                          "gres",
                                          "cpu-bind",
                                          "distribution",
                                          "nodelist",
                                          "exclude",
                                          "chdir",
                                          "ntasks-per-gpu",
                                          "gpus-per-node",
                                          "account",
                                          "qos",
                                          "constraint",
                                          "wait",
                                          "hint",
                                          "threads-per-core",
                                          "network",
                                          "comment",
                                          "ntasks-per-socket",
                                          "ntasks-per-core",
                                          "cpu-freq",
                                          "mem-bind",
                                          "signal",
                                          "kill-on-bad-exit",
                                          "open-mode",
                                          "label-format"};
const std::set<std::string> kFlagLong = {"label",     "unbuffered", "exact",     "overlap",
                                         "exclusive", "verbose",    "quiet",     "no-kill",
                                         "whole",     "propagate",  "overcommit"};
// Short options: with a value, and without.
const std::string kValueShort = "nNcJoeiptmwxDAGCW";
const std::string kFlagShort = "luvQkKOs";

std::string LongOf(char c) {
  switch (c) {
    case 'n':
      return "ntasks";
    case 'N':
      return "nodes";
    case 'c':
      return "cpus-per-task";
    case 'J':
      return "job-name";
    case 'o':
      return "output";
    case 'e':
      return "error";
    case 'i':
      return "input";
    case 'p':
      return "partition";
    case 't':
      return "time";
    case 'm':
      return "distribution";
    case 'w':
      return "nodelist";
    case 'x':
      return "exclude";
    case 'D':
      return "chdir";
    case 'A':
      return "account";
    case 'G':
      return "gpus";
    case 'C':
      return "constraint";
    case 'W':
      return "wait";
    case 'l':
      return "label";
    case 'u':
      return "unbuffered";
    case 'v':
      return "verbose";
    case 'Q':
      return "quiet";
    case 'k':
      return "no-kill";
    case 'K':
      return "kill-on-bad-exit";
    case 'O':
      return "overcommit";
    case 's':
      return "oversubscribe";
    default:
      return std::string(1, c);
  }
}

// A count: digits, at least `min`.
bool ParseCount(const std::string& v, int min, int* out) {
  if (v.empty() || v.size() > 6 ||
      !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return false;
  }
  *out = std::atoi(v.c_str());
  return *out >= min;
}

std::string Apply(const std::string& name, const std::string& value, SrunRequest* r) {
  auto count = [&](int min, int* field) -> std::string {
    // "-N 2-4" (a range of nodes): srun takes the first.
    std::string v = value.substr(0, value.find('-'));
    if (!ParseCount(v, min, field)) {
      return "--" + name + "=" + value + ": expected a whole number of at least " +
             std::to_string(min);
    }
    return "";
  };
  if (name == "ntasks") return count(1, &r->ntasks);
  if (name == "nodes") return count(1, &r->nodes);
  if (name == "ntasks-per-node") return count(1, &r->ntasks_per_node);
  if (name == "gpus-per-task") {
    // "--gpus-per-task=a100:2": the model is the allocation's.
    const std::string v =
        value.substr(value.rfind(':') == std::string::npos ? 0 : value.rfind(':') + 1);
    if (!ParseCount(v, 0, &r->gpus_per_task)) {
      return "--gpus-per-task=" + value + ": expected a number of GPUs";
    }
    return "";
  }
  if (name == "gpu-bind") {
    const std::string v = value.substr(value.find(',') == std::string::npos ? 0 : 0);
    const std::string kind = value.substr(0, value.find(':'));
    // "verbose,closest": verbose is a modifier.
    std::string bind = value;
    if (bind.rfind("verbose,", 0) == 0) bind = bind.substr(8);
    const std::string k = bind.substr(0, bind.find(':'));
    if (k != "none" && k != "closest" && k != "single" && k != "map_gpu" && k != "per_task" &&
        k != "mask_gpu") {
      return "--gpu-bind=" + value +
             ": expected none, closest, single:N, per_task:N, map_gpu:LIST or mask_gpu:LIST";
    }
    (void)v;
    (void)kind;
    r->gpu_bind = bind;
    return "";
  }
  if (name == "label") {
    r->label = true;
    return "";
  }
  if (name == "chdir") {
    r->chdir = value;
    return "";
  }
  r->ignored.push_back(value.empty() ? "--" + name : "--" + name + "=" + value);
  return "";
}

}  // namespace

std::vector<std::string> SplitList(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    const size_t end = s.find(sep, start);
    const std::string part = s.substr(start, end == std::string::npos ? end : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::string ParseSrunArgs(const std::vector<std::string>& args, SrunRequest* out) {
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the command
    if (a.rfind("--", 0) == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? eq : eq - 2);
      if (name == "multi-prog" || name == "pty" || name == "het-group" || name == "jobid") {
        return "--" + name + " is not supported by Arbiter's srun (docs/cli.md)";
      }
      if (kFlagLong.count(name)) {
        if (eq != std::string::npos && name != "exclusive") {
          return "--" + name + " takes no value";
        }
        if (std::string e = Apply(name, "", out); !e.empty()) return e;
        continue;
      }
      if (!kValueLong.count(name)) {
        return "unknown option --" + name +
               " (Arbiter's srun runs job steps inside a batch job: docs/cli.md)";
      }
      std::string value;
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else if (name == "kill-on-bad-exit") {
        value = "1";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return "--" + name + " needs a value";
      }
      if (std::string e = Apply(name, value, out); !e.empty()) return e;
      continue;
    }
    // Short options, possibly bundled ("-lN2", "-n4").
    for (size_t k = 1; k < a.size(); ++k) {
      const char c = a[k];
      if (kFlagShort.find(c) != std::string::npos) {
        if (std::string e = Apply(LongOf(c), "", out); !e.empty()) return e;
        continue;
      }
      if (kValueShort.find(c) == std::string::npos) {
        return std::string("unknown option -") + c +
               " (Arbiter's srun runs job steps inside a batch job: docs/cli.md)";
      }
      std::string value = a.substr(k + 1);
      if (!value.empty() && value[0] == '=') value = value.substr(1);
      if (value.empty()) {
        if (i + 1 >= args.size()) return std::string("-") + c + " needs a value";
        value = args[++i];
      }
      if (std::string e = Apply(LongOf(c), value, out); !e.empty()) return e;
      break;
    }
  }
  out->argv.assign(args.begin() + static_cast<std::ptrdiff_t>(std::min(i, args.size())),
                   args.end());
  if (out->argv.empty()) return "no command to run (srun [options] command [args...])";
  return "";
}

std::vector<int> StepLayout::RanksOn(int node) const {
  std::vector<int> out;
  if (node < 0 || node >= nodes) return out;
  for (int l = 0; l < per_node; ++l) {
    const int rank = node * per_node + l;
    if (rank < ntasks) out.push_back(rank);
  }
  return out;
}

std::string Layout(const SrunRequest& r, int alloc_nodes, int env_per_node, int env_ntasks,
                   StepLayout* out) {
  alloc_nodes = std::max(1, alloc_nodes);
  int nodes = r.nodes > 0 ? r.nodes : alloc_nodes;
  if (nodes > alloc_nodes) {
    return "-N " + std::to_string(nodes) + ": the job has " + std::to_string(alloc_nodes) +
           " node" + (alloc_nodes == 1 ? "" : "s");
  }
  int per_node = r.ntasks_per_node;
  int ntasks = r.ntasks;
  if (per_node == 0 && ntasks > 0) {
    // -n alone: spread over the nodes (as few as needed when -N is not given either).
    if (r.nodes == 0) nodes = std::min(nodes, ntasks);
    per_node = (ntasks + nodes - 1) / nodes;
  }
  if (per_node == 0 && env_per_node > 0) per_node = env_per_node;
  if (per_node == 0 && env_ntasks > 0) per_node = (env_ntasks + nodes - 1) / nodes;
  if (per_node == 0) per_node = 1;
  if (ntasks == 0) {
    ntasks = per_node * nodes;
    if (r.ntasks_per_node == 0 && r.nodes == 0 && env_ntasks > 0 && env_ntasks < ntasks) {
      ntasks = env_ntasks;
    }
  }
  if (ntasks > per_node * nodes) {
    return "-n " + std::to_string(ntasks) + " with " + std::to_string(per_node) +
           " per node needs " + std::to_string((ntasks + per_node - 1) / per_node) +
           " nodes; the step has " + std::to_string(nodes);
  }
  // Nodes the block distribution leaves empty are not part of the step.
  nodes = (ntasks + per_node - 1) / per_node;
  out->nodes = nodes;
  out->per_node = per_node;
  out->ntasks = ntasks;
  return "";
}

bool IsNodeEnv(const std::string& name) {
  static const std::set<std::string> kNode = {"CUDA_VISIBLE_DEVICES",
                                              "NVIDIA_VISIBLE_DEVICES",
                                              "GPU_DEVICE_ORDINAL",
                                              "SLURM_JOB_GPUS",
                                              "SLURM_GPUS_ON_NODE",
                                              "SLURM_NODEID",
                                              "SLURM_PROCID",
                                              "SLURM_LOCALID",
                                              "SLURMD_NODENAME",
                                              "RANK",
                                              "LOCAL_RANK",
                                              "NODE_RANK",
                                              "HOME",
                                              "TMPDIR",
                                              "USER",
                                              "LOGNAME",
                                              "PWD",
                                              "OLDPWD",
                                              "SHLVL",
                                              "_"};
  return name.rfind("ARBITER_", 0) == 0 || kNode.count(name) > 0;
}

std::map<std::string, std::string> StepEnv(const std::map<std::string, std::string>& caller,
                                           const std::map<std::string, std::string>& node) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : caller) {
    if (!IsNodeEnv(k)) out[k] = v;
  }
  for (const auto& [k, v] : node) {
    if (IsNodeEnv(k)) out[k] = v;
  }
  return out;
}

namespace {

// One item of a host list (no comma outside brackets), its first bracket expanded, then the rest.
bool ExpandHostItem(const std::string& item, std::vector<std::string>* out) {
  const size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.find(']') != std::string::npos) return false;
    out->push_back(item);
    return true;
  }
  const size_t close = item.find(']', open);
  if (close == std::string::npos || close == open + 1) return false;
  const std::string prefix = item.substr(0, open);
  std::vector<std::string> rest;
  if (!ExpandHostItem(item.substr(close + 1), &rest)) return false;
  if (rest.empty()) rest.push_back("");
  for (const std::string& range : SplitList(item.substr(open + 1, close - open - 1))) {
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    int a = 0, b = 0;
    if (!ParseCount(lo, 0, &a) || !ParseCount(hi, 0, &b) || b < a || b - a > 100000) return false;
    for (int n = a; n <= b; ++n) {
      std::string num = std::to_string(n);
      if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');  // gpu[01-10]
      for (const std::string& tail : rest) out->push_back(prefix + num + tail);
    }
  }
  return true;
}

}  // namespace

std::string ExpandHostnames(const std::string& list, std::vector<std::string>* out) {
  out->clear();
  std::string item;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == ',' && depth == 0) {
      if (!item.empty() && !ExpandHostItem(item, out)) {
        return "invalid host list \"" + list + "\"";
      }
      item.clear();
      continue;
    }
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0) break;
    item += c;
  }
  if (depth != 0) return "invalid host list \"" + list + "\"";
  return "";
}

int Scontrol(const std::vector<std::string>& args, const std::string& job_nodelist,
             std::string* out, std::string* err) {
  const bool hostnames = args.size() >= 2 && args.size() <= 3 && args[0] == "show" &&
                         (args[1] == "hostnames" || args[1] == "hostname");
  if (!hostnames) {
    *err =
        "scontrol: error: inside an Arbiter job only `scontrol show hostnames [LIST]` is "
        "answered; use `arbiter` for the rest (docs/cli.md)\n";
    return 1;
  }
  const std::string list = args.size() == 3 ? args[2] : job_nodelist;
  if (list.empty()) {
    *err = "scontrol: error: no host list given and SLURM_JOB_NODELIST is not set\n";
    return 1;
  }
  std::vector<std::string> names;
  if (std::string e = ExpandHostnames(list, &names); !e.empty()) {
    *err = "scontrol: error: " + e + "\n";
    return 1;
  }
  for (const std::string& n : names) *out += n + "\n";
  return 0;
}

std::string ApplyJobGpusPerTask(const std::string& env_value, SrunRequest* r) {
  if (env_value.empty() || r->gpus_per_task != 0 || !r->gpu_bind.empty()) return "";
  const size_t colon = env_value.rfind(':');
  const std::string v = env_value.substr(colon == std::string::npos ? 0 : colon + 1);
  if (!ParseCount(v, 0, &r->gpus_per_task)) {
    return "SLURM_GPUS_PER_TASK=" + env_value + ": expected a number of GPUs";
  }
  return "";
}

std::string TaskGpus(const SrunRequest& r, const std::vector<std::string>& gpus, int local,
                     int per_node, std::vector<std::string>* out) {
  out->clear();
  int each = r.gpus_per_task;
  const std::string kind = r.gpu_bind.substr(0, r.gpu_bind.find(':'));
  const std::string arg =
      r.gpu_bind.find(':') == std::string::npos ? "" : r.gpu_bind.substr(r.gpu_bind.find(':') + 1);
  if (kind == "map_gpu") {
    const std::vector<std::string> map = SplitList(arg);
    if (map.empty()) return "--gpu-bind=map_gpu: needs a list of GPU indices";
    const std::string& want = map[static_cast<size_t>(local) % map.size()];
    int index = 0;
    if (!ParseCount(want, 0, &index) || index >= static_cast<int>(gpus.size())) {
      return "--gpu-bind=" + r.gpu_bind + ": GPU " + want + " is not one of the job's " +
             std::to_string(gpus.size()) + " on this node";
    }
    out->push_back(gpus[static_cast<size_t>(index)]);
    return "";
  }
  if (kind == "single" || kind == "per_task") {
    if (!ParseCount(arg, 1, &each)) return "--gpu-bind=" + r.gpu_bind + ": expected a count";
  } else if (kind == "closest" && each == 0 && per_node > 0 &&
             gpus.size() % static_cast<size_t>(per_node) == 0) {
    each = static_cast<int>(gpus.size()) / per_node;  // one equal share each
  } else if (kind == "none" || each == 0) {
    *out = gpus;  // every task sees every GPU of the node (srun's default)
    return "";
  }
  const size_t first = static_cast<size_t>(local) * static_cast<size_t>(each);
  if (first + static_cast<size_t>(each) > gpus.size()) {
    return std::to_string(each) + " GPU" + (each == 1 ? "" : "s") + " per task for " +
           std::to_string(per_node) + " tasks needs " + std::to_string(each * per_node) +
           " GPUs; the job has " + std::to_string(gpus.size()) + " on this node";
  }
  out->assign(gpus.begin() + static_cast<std::ptrdiff_t>(first),
              gpus.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(each)));
  return "";
}

std::map<std::string, std::string> TaskEnv(const StepLayout& l, int node, int rank, int local,
                                           const std::vector<std::string>& gpus, int step) {
  std::string joined;
  for (const std::string& g : gpus) joined += (joined.empty() ? "" : ",") + g;
  const std::string local_count = std::to_string(l.RanksOn(node).size());
  return {
      {"SLURM_PROCID", std::to_string(rank)},
      {"SLURM_LOCALID", std::to_string(local)},
      {"SLURM_NODEID", std::to_string(node)},
      {"SLURM_NTASKS", std::to_string(l.ntasks)},
      {"SLURM_NPROCS", std::to_string(l.ntasks)},
      {"SLURM_STEP_ID", std::to_string(step)},
      {"SLURM_STEPID", std::to_string(step)},
      {"SLURM_STEP_NUM_TASKS", std::to_string(l.ntasks)},
      {"SLURM_STEP_NUM_NODES", std::to_string(l.nodes)},
      {"SLURM_STEP_TASKS_PER_NODE", local_count},
      {"SLURM_TASKS_PER_NODE", local_count},
      {"SLURM_GPUS_ON_NODE", std::to_string(gpus.size())},
      {"SLURM_STEP_GPUS", joined},
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local)},
      {"WORLD_SIZE", std::to_string(l.ntasks)},
      {"LOCAL_WORLD_SIZE", local_count},
      {"NODE_RANK", std::to_string(node)},
      {"GROUP_RANK", std::to_string(node)},
      {"CUDA_VISIBLE_DEVICES", joined},
      {"GPU_DEVICE_ORDINAL", joined},
  };
}

}  // namespace arbiter::exec

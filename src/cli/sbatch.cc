#include "cli/sbatch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "cli/sbatch_text.h"
#include "model/job_array.h"

namespace arbiter::cli {

using sbatch_text::kMaxSeconds;
using sbatch_text::Lower;
using sbatch_text::Number;
using sbatch_text::Split;
using sbatch_text::Trim;

// --- The job ---------------------------------------------------------------------------------

namespace {

// A Slurm file-name pattern as a double-quoted shell word evaluated on the node.
std::string PatternToShell(const std::string& pattern) {
  std::string out = "\"";
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '%' && i + 1 < pattern.size()) {
      size_t j = i + 1;
      while (j < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[j]))) ++j;
      if (j < pattern.size()) {
        const std::string width = pattern.substr(i + 1, j - i - 1);
        // `var`: a parameter expansion's inside ("ARBITER_JOB_ID", "X:-0").
        auto num = [&](const char* var) {
          return width.empty() ? fmt::format("${{{}}}", var)
                               : fmt::format("$(printf '%0{}d' \"${{{}}}\")", width, var);
        };
        std::string rep;
        switch (pattern[j]) {
          case 'j':
            rep = num("ARBITER_JOB_ID");
            break;
          case 'A':  // the array's id (its first element's); a job of no array: its own
            rep = num("ARBITER_ARRAY_JOB_ID:-$ARBITER_JOB_ID");
            break;
          case 'J':
            rep = num("ARBITER_JOB_ID") + ".batch";
            break;
          case 'n':
          case 't':
            rep = num("ARBITER_TASK_INDEX");
            break;
          case 'N':
            rep = "${ARBITER_NODE_NAME}";
            break;
          case 'x':
            rep = "${SLURM_JOB_NAME}";
            break;
          case 'u':
            rep = "$(id -un)";
            break;
          case 'a':  // the element's index; a job of no array: 0
            rep = num("ARBITER_ARRAY_INDEX:-0");
            break;
          case 's':
            rep = "batch";
            break;
          case '%':
            rep = "%";
            break;
          default:
            break;
        }
        if (!rep.empty()) {
          out += rep;
          i = j;
          continue;
        }
      }
    }
    if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
    out += c;
  }
  return out + "\"";
}

bool PatternPerTask(const std::string& p) {
  return p.find("%t") != std::string::npos || p.find("%n") != std::string::npos ||
         p.find("%N") != std::string::npos;
}

// The constraint's GPU models (a|b) and node labels (key=value, joined by & or ,).
Status ParseConstraint(const std::string& c, std::vector<std::string>* models,
                       std::map<std::string, std::string>* labels) {
  if (c.find_first_of("[]*") != std::string::npos) {
    return InvalidArgument("constraint",
                           fmt::format("--constraint={}: brackets and counts are not supported; "
                                       "use MODEL, MODEL|MODEL or key=value&key=value",
                                       c));
  }
  const bool has_or = c.find('|') != std::string::npos;
  const bool has_and = c.find_first_of("&,") != std::string::npos;
  if (has_or && has_and) {
    return InvalidArgument("constraint", fmt::format("--constraint={}: mixing | with & is not "
                                                     "supported",
                                                     c));
  }
  std::string normal = c;
  std::replace(normal.begin(), normal.end(), ',', '&');
  for (const std::string& raw : Split(normal, has_or ? '|' : '&')) {
    const std::string f = Trim(raw);
    if (f.empty()) {
      return InvalidArgument("constraint", fmt::format("--constraint={}: empty feature", c));
    }
    const size_t eq = f.find('=');
    if (eq != std::string::npos) {
      if (has_or) {
        return InvalidArgument("constraint", fmt::format("--constraint={}: labels (key=value) "
                                                         "cannot be alternatives",
                                                         c));
      }
      (*labels)[f.substr(0, eq)] = f.substr(eq + 1);
    } else {
      models->push_back(f);
    }
  }
  if (!has_or && models->size() > 1) {
    return InvalidArgument("constraint",
                           fmt::format("--constraint={}: a node has one GPU model; write "
                                       "alternatives with | or node labels as key=value",
                                       c));
  }
  return Status::Ok();
}

// GPUs per node from the directives that can say it; they must agree.
Status GpusPerNode(const SlurmDirectives& d, int32_t nodes, int32_t per_node_tasks,
                   GpuRequest* out) {
  std::vector<std::pair<std::string, GpuRequest>> said;
  if (d.gpus_per_node) said.push_back({"--gpus-per-node", *d.gpus_per_node});
  if (d.gres_gpu) said.push_back({"--gres", *d.gres_gpu});
  if (d.gpus) {
    if (d.gpus->count % nodes != 0) {
      return InvalidArgument("gpus", fmt::format("--gpus={} over {} nodes: every node gets the "
                                                 "same GPUs in Arbiter; use a multiple of {} or "
                                                 "--gpus-per-node",
                                                 d.gpus->count, nodes, nodes));
    }
    said.push_back({"--gpus", GpuRequest{d.gpus->type, d.gpus->count / nodes}});
  }
  if (d.gpus_per_task) {
    said.push_back({"--gpus-per-task",
                    GpuRequest{d.gpus_per_task->type, d.gpus_per_task->count * per_node_tasks}});
  }
  *out = GpuRequest{};
  for (size_t i = 0; i < said.size(); ++i) {
    const auto& [flag, g] = said[i];
    if (i == 0) {
      *out = g;
      continue;
    }
    if (g.count != out->count) {
      return InvalidArgument("gpus", fmt::format("{} gives {} GPUs per node but {} gives {}: "
                                                 "give one of them",
                                                 said[0].first, out->count, flag, g.count));
    }
    if (!g.type.empty() && !out->type.empty() && g.type != out->type) {
      return InvalidArgument("gpus", fmt::format("{} asks for GPU type {} but {} for {}",
                                                 said[0].first, out->type, flag, g.type));
    }
    if (out->type.empty()) out->type = g.type;
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> BatchCommand(const std::string& script_text, const std::string& name,
                                      const std::vector<std::string>& args,
                                      const std::string& output, const std::string& error,
                                      bool tasks_share_files, bool append) {
  std::string w =
      "export SLURM_JOB_ID=\"$ARBITER_JOB_ID\" SLURM_JOBID=\"$ARBITER_JOB_ID\" "
      "SLURM_PROCID=\"$ARBITER_TASK_INDEX\" SLURM_NODEID=\"$ARBITER_TASK_INDEX\" "
      "SLURM_LOCALID=0 SLURMD_NODENAME=\"$ARBITER_NODE_NAME\" "
      "SLURM_JOB_NODELIST=\"${ARBITER_NODES:-$ARBITER_NODE_NAME}\" "
      "SLURM_NODELIST=\"${ARBITER_NODES:-$ARBITER_NODE_NAME}\" "
      "SLURM_RESTART_COUNT=\"$ARBITER_RESTART_COUNT\" SLURM_NNODES=\"$WORLD_SIZE\" "
      "SLURM_JOB_NUM_NODES=\"$WORLD_SIZE\" SLURM_JOB_GPUS=\"$CUDA_VISIBLE_DEVICES\" "
      "GPU_DEVICE_ORDINAL=\"$CUDA_VISIBLE_DEVICES\"\n"
      "export SLURM_NTASKS=\"${SLURM_NTASKS:-$WORLD_SIZE}\"\n"
      "export SLURM_JOB_PARTITION=\"${SLURM_JOB_PARTITION:-$ARBITER_QUEUE}\"\n"
      "export SLURM_NPROCS=\"$SLURM_NTASKS\"\n"
      // A job array's element (older clients' arrays set SLURM_ARRAY_* in the job's env instead).
      "if [ -n \"$ARBITER_ARRAY_JOB_ID\" ]; then\n"
      "  export SLURM_ARRAY_JOB_ID=\"$ARBITER_ARRAY_JOB_ID\" "
      "SLURM_ARRAY_TASK_ID=\"$ARBITER_ARRAY_INDEX\" "
      "SLURM_ARRAY_TASK_COUNT=\"$ARBITER_ARRAY_COUNT\" "
      "SLURM_ARRAY_TASK_MIN=\"$ARBITER_ARRAY_MIN\" SLURM_ARRAY_TASK_MAX=\"$ARBITER_ARRAY_MAX\" "
      "SLURM_ARRAY_TASK_STEP=\"$ARBITER_ARRAY_STEP\"\n"
      "fi\n"
      "n=0; o=$IFS; IFS=,; for g in $CUDA_VISIBLE_DEVICES; do n=$((n+1)); done; IFS=$o\n"
      "export SLURM_GPUS_ON_NODE=$n\n"
      // Several nodes: the script runs on the first; the others run its srun steps (exec/
      // srun_main.cc). Nodes without step keys (an older Arbiter) run the script on every node.
      "steps=\n"
      "if [ -n \"$ARBITER_STEP_KEY\" ] && [ \"${WORLD_SIZE:-1}\" -gt 1 ]; then\n"
      "  [ \"$ARBITER_TASK_INDEX\" = 0 ] || exec srun --arbiter-worker\n"
      "  steps=1\n"
      "fi\n"
      "s=$(mktemp \"${TMPDIR:-/tmp}/arbiter-job-$ARBITER_JOB_ID.XXXXXX\") || "
      "{ echo \"arbiter: cannot write the batch script to ${TMPDIR:-/tmp}\" >&2; exit 1; }\n"
      "trap 'rm -f \"$s\"' EXIT\n"
      "printf '%s' \"$1\" >\"$s\" && chmod 700 \"$s\" || exit 1\n"
      "shift\n"
      // The script gets SIGTERM from its process group; the wrapper waits for it to end.
      "trap : HUP INT TERM\n";
  auto redirect_with = [&](const char* redirect) {
    if (!output.empty() && !error.empty()) {
      return fmt::format("exec {}{} 2{}{}\n", redirect, PatternToShell(output), redirect,
                         PatternToShell(error));
    }
    if (!output.empty()) return fmt::format("exec {}{} 2>&1\n", redirect, PatternToShell(output));
    if (!error.empty()) return fmt::format("exec 2{}{}\n", redirect, PatternToShell(error));
    return std::string();
  };
  if (append) {
    w += redirect_with(">>");
  } else if (redirect_with(">").empty()) {
    // No -o or -e: the task's own output, as the node keeps it.
  } else if (tasks_share_files) {
    // Appended to only where every node runs the script into one file.
    w += "if [ -n \"$steps\" ]; then\n" + redirect_with(">") + "else\n" + redirect_with(">>") +
         "fi\n";
  } else {
    w += redirect_with(">");
  }
  // After the script, the other nodes' step runners end (a failure to reach them fails the job,
  // which stops them).
  w += "\"$s\" \"$@\"; rc=$?\n"
       "if [ -n \"$steps\" ]; then srun --arbiter-release || { [ \"$rc\" -ne 0 ] || rc=1; }; fi\n"
       "exit $rc\n";
  std::vector<std::string> cmd = {"/bin/sh", "-c", w, name, script_text};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

Result<ArraySpec> ParseArraySpec(std::string_view spec) {
  const std::string text(spec);
  auto bad = [&](const std::string& why) {
    return InvalidArgument("array", fmt::format("--array={}: {}", text, why));
  };
  ArraySpec out;
  const size_t percent = text.find('%');
  out.indices = text.substr(0, percent);
  if (percent != std::string::npos) {
    auto n = Number(text.substr(percent + 1), kMaxArrayRunning);
    if (!n || *n < 1) {
      return bad(
          fmt::format("'%{}': the most elements to run at once must be a whole number from "
                      "1 to {}",
                      text.substr(percent + 1), kMaxArrayRunning));
    }
    out.max_running = static_cast<int32_t>(*n);
  }
  auto expanded = ExpandArrayIndices(out.indices, "array");
  if (!expanded.ok()) return bad(expanded.status().message());
  out.expanded = std::move(expanded).value();
  return out;
}

void SetSlurmJobEnv(JobSpec* job) {
  if (!job->name.empty()) job->env["SLURM_JOB_NAME"] = job->name;
  if (!job->queue.empty()) job->env["SLURM_JOB_PARTITION"] = job->queue;
  if (job->resources.cpu_milli > 0) {
    job->env["SLURM_CPUS_ON_NODE"] = std::to_string((job->resources.cpu_milli + 999) / 1000);
  }
  if (job->resources.memory_mib > 0) {
    job->env["SLURM_MEM_PER_NODE"] = std::to_string(job->resources.memory_mib);
  }
}

namespace {

// Nodes and tasks per node.
struct Layout {
  int32_t nodes = 1;
  int32_t per_node = 1;
};

Result<Layout> NodeLayout(const SlurmDirectives& d) {
  Layout l;
  if (d.nodes) {
    l.nodes = *d.nodes;
  } else if (d.ntasks && d.ntasks_per_node) {
    l.nodes = (*d.ntasks + *d.ntasks_per_node - 1) / *d.ntasks_per_node;
  }
  if (d.ntasks_per_node) {
    l.per_node = *d.ntasks_per_node;
  } else if (d.ntasks) {
    if (*d.ntasks % l.nodes != 0) {
      return InvalidArgument("ntasks", fmt::format("--ntasks={} over {} nodes: Arbiter gives every "
                                                   "node the same share; use a multiple of {} or "
                                                   "--ntasks-per-node",
                                                   *d.ntasks, l.nodes, l.nodes));
    }
    l.per_node = *d.ntasks / l.nodes;
  }
  return l;
}

// GPUs, CPUs and memory per node (one task).
Status SetResources(const SlurmDirectives& d, const Layout& l, JobSpec* job, GpuRequest* gpus) {
  ARBITER_RETURN_IF_ERROR(GpusPerNode(d, l.nodes, l.per_node, gpus));
  job->resources.gpus = gpus->count;
  if (d.cpus_per_task && d.cpus_per_gpu) {
    return InvalidArgument("cpus-per-gpu", "give --cpus-per-task or --cpus-per-gpu, not both");
  }
  int64_t cpus = 0;
  if (d.cpus_per_task) cpus = int64_t{*d.cpus_per_task} * l.per_node;
  if (d.cpus_per_gpu) {
    if (gpus->count == 0) {
      return InvalidArgument("cpus-per-gpu", "--cpus-per-gpu needs GPUs (--gres=gpu:N, --gpus...)");
    }
    cpus = int64_t{*d.cpus_per_gpu} * gpus->count;
  }
  job->resources.cpu_milli = cpus * 1000;
  if ((d.mem_mib ? 1 : 0) + (d.mem_per_gpu_mib ? 1 : 0) + (d.mem_per_cpu_mib ? 1 : 0) > 1) {
    return InvalidArgument("mem", "give one of --mem, --mem-per-gpu and --mem-per-cpu");
  }
  if (d.mem_mib) job->resources.memory_mib = *d.mem_mib;
  if (d.mem_per_gpu_mib) {
    if (gpus->count == 0) return InvalidArgument("mem-per-gpu", "--mem-per-gpu needs GPUs");
    job->resources.memory_mib = *d.mem_per_gpu_mib * gpus->count;
  }
  if (d.mem_per_cpu_mib) {
    if (cpus == 0) {
      return InvalidArgument("mem-per-cpu",
                             "--mem-per-cpu needs --cpus-per-task or --cpus-per-gpu");
    }
    job->resources.memory_mib = *d.mem_per_cpu_mib * cpus;
  }
  return Status::Ok();
}

// GPU models (the GPU request's type, else the constraint's) and node labels.
Status SetModelsAndLabels(const SlurmDirectives& d, const GpuRequest& gpus, JobSpec* job) {
  std::vector<std::string> constraint_models;
  if (d.constraint) {
    ARBITER_RETURN_IF_ERROR(
        ParseConstraint(*d.constraint, &constraint_models, &job->node_selector));
  }
  if (!gpus.type.empty()) {
    if (!constraint_models.empty() && std::find(constraint_models.begin(), constraint_models.end(),
                                                gpus.type) == constraint_models.end()) {
      return InvalidArgument("constraint",
                             fmt::format("--constraint={} does not include the GPU type {} that "
                                         "the GPU request names",
                                         *d.constraint, gpus.type));
    }
    job->gpu_models = {gpus.type};
  } else {
    job->gpu_models = constraint_models;
  }
  if (!job->gpu_models.empty() && gpus.count == 0) {
    return InvalidArgument("constraint", fmt::format("GPU model {} without GPUs: add --gres=gpu:N "
                                                     "or --gpus-per-node N",
                                                     job->gpu_models[0]));
  }
  return Status::Ok();
}

// Walltime, the signal's lead time as the grace period, requeue as retries.
void SetTimeAndRetry(const SlurmDirectives& d, JobSpec* job, std::vector<std::string>* notes) {
  if (d.time_seconds) job->walltime_seconds = *d.time_seconds;
  if (d.signal_seconds) {
    job->grace_period_seconds = std::min<int64_t>(*d.signal_seconds, 86400);
    if (job->walltime_seconds > *d.signal_seconds) job->walltime_seconds -= *d.signal_seconds;
    if (*d.signal_name != "TERM") {
      notes->push_back(
          fmt::format("--signal={}@{}: Arbiter sends SIGTERM (not SIG{}) {} s before "
                      "the end, then SIGKILL; trap TERM in the script",
                      *d.signal_name, *d.signal_seconds, *d.signal_name, *d.signal_seconds));
    }
  }
  if (d.requeue) {
    job->retry.max_retries = *d.requeue ? 3 : 0;
    if (*d.requeue) {
      notes->push_back(
          "--requeue: preempted jobs always go back to the queue in Arbiter; the job "
          "also runs again, up to 3 times, after a node failure or a non-zero exit "
          "(#ARBITER --retries N to change)");
    }
  }
}

void SetNamesAndPlaces(const SlurmDirectives& d, const ScriptContext& ctx, JobSpec* job) {
  namespace fs = std::filesystem;
  job->queue = d.partition.value_or("");
  job->name = d.job_name.value_or(ctx.name);
  job->priority_class = d.qos.value_or("");
  if (d.dependency) job->depends_on = *d.dependency;
  job->workdir = ctx.submit_dir;
  if (d.chdir) {
    job->workdir = fs::path(*d.chdir).is_absolute()
                       ? *d.chdir
                       : (fs::path(ctx.submit_dir) / *d.chdir).lexically_normal().string();
  }
  if (d.container_image) {
    // pyxis writes registry#image; elsewhere it is registry/image.
    std::string image = *d.container_image;
    const size_t hash = image.find('#');
    if (hash != std::string::npos) image[hash] = '/';
    job->container_image = image;
  }
}

// Whether the submitter's variable `name` may travel with the job (--export): not Arbiter's own
// (its token among them), not one the node sets, not the submitting job's SLURM_* (the job gets
// its own), and a name a shell can set.
bool Exportable(const std::string& name) {
  if (name.empty() || IsReservedEnvName(name) || name.rfind("SLURM_", 0) == 0 ||
      name.rfind("SLURMD_", 0) == 0) {
    return false;
  }
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

Status ExportEnvironment(std::string_view spec_text,
                         const std::map<std::string, std::string>& environment, JobSpec* job,
                         std::vector<std::string>* notes) {
  const std::string spec(spec_text);
  std::vector<std::string> items = Split(spec, ',');
  bool all = false;
  size_t skipped = 0;
  auto put = [&](const std::string& name, const std::string& value) {
    if (value.size() > 128 * 1024) {
      ++skipped;
      return;
    }
    job->env[name] = value;
  };
  for (const std::string& item : items) {
    const std::string upper = sbatch_text::Lower(item);
    if (upper == "all") {
      all = true;
      continue;
    }
    if (upper == "none" || upper == "nil") continue;
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (!Exportable(name)) {
      return InvalidArgument("export", fmt::format("--export={}: {} is not a variable a job may "
                                                   "set",
                                                   spec, name));
    }
    if (eq != std::string::npos) {
      put(name, item.substr(eq + 1));
    } else if (auto it = environment.find(name); it != environment.end()) {
      put(name, it->second);
    }
  }
  if (all) {
    for (const auto& [name, value] : environment) {
      if (Exportable(name) && job->env.count(name) == 0) put(name, value);
    }
  }
  if (skipped > 0) {
    notes->push_back(fmt::format("--export: {} variable{} longer than 128 KiB left out", skipped,
                                 skipped == 1 ? "" : "s"));
  }
  return Status::Ok();
}

namespace {

// Nodes (--nodelist, --exclude, --exclusive) and who hears about the job (--mail-*).
void SetNodesAndMail(const SlurmDirectives& d, const ScriptContext& ctx, JobSpec* job,
                     std::vector<std::string>* notes) {
  if (d.nodelist) job->nodes = *d.nodelist;
  if (d.exclude) job->exclude_nodes = *d.exclude;
  if (d.exclusive) job->exclusive = *d.exclusive;
  if (d.mail_user || d.mail_type) {
    MailSpec mail;
    auto user = ctx.environment.find("USER");
    mail.user = d.mail_user.value_or(user != ctx.environment.end() ? user->second : "");
    if (d.mail_type) {
      for (std::string t : Split(*d.mail_type, ',')) {
        for (char& c : t) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        mail.types.push_back(std::move(t));
      }
    }
    job->mail = std::move(mail);
    notes->push_back(
        "--mail-user/--mail-type: kept with the job (arbiter show); the server's notifications "
        "deliver them where they are set up");
  }
}

void SetEnvAndCommand(const SlurmDirectives& d, const Layout& l, const ScriptContext& ctx,
                      JobSpec* job, std::vector<std::string>* notes) {
  job->env["SLURM_SUBMIT_DIR"] = ctx.submit_dir;
  if (!ctx.submit_host.empty()) job->env["SLURM_SUBMIT_HOST"] = ctx.submit_host;
  if (d.ntasks || d.ntasks_per_node) {
    job->env["SLURM_NTASKS"] = std::to_string(d.ntasks ? *d.ntasks : l.nodes * l.per_node);
    job->env["SLURM_NTASKS_PER_NODE"] = std::to_string(l.per_node);
  }
  if (d.cpus_per_task) job->env["SLURM_CPUS_PER_TASK"] = std::to_string(*d.cpus_per_task);
  // srun's steps take it as their --gpus-per-task (exec/srun_layout.h), as Slurm's do.
  if (d.gpus_per_task) job->env["SLURM_GPUS_PER_TASK"] = std::to_string(d.gpus_per_task->count);
  if (d.account) job->env["SLURM_JOB_ACCOUNT"] = *d.account;
  if (d.qos) job->env["SLURM_JOB_QOS"] = *d.qos;
  const std::string out = d.output.value_or("");
  const std::string err = d.error.value_or("");
  const bool shared = l.nodes > 1 && !(PatternPerTask(out) && (err.empty() || PatternPerTask(err)));
  job->command =
      BatchCommand(ctx.text, ctx.name, ctx.args, out, err, shared, d.open_append.value_or(false));
  if (!out.empty() || !err.empty()) {
    notes->push_back(
        fmt::format("-o/-e: the script's output goes to {} on the node, as with "
                    "sbatch; `arbiter logs` shows only what is not redirected",
                    out.empty() ? err : out));
  }
}

}  // namespace

Result<JobSpec> JobFromBatchScript(const BatchScript& script, const ScriptContext& ctx,
                                   std::vector<std::string>* notes) {
  const SlurmDirectives& d = script.slurm;
  JobSpec job;
  // 1. Nodes: one task each.
  auto layout = NodeLayout(d);
  if (!layout.ok()) return layout.status();
  job.tasks = layout->nodes;
  job.distinct_nodes = layout->nodes > 1;
  // 2. What each node needs, 3. on which GPU models and nodes.
  GpuRequest gpus;
  ARBITER_RETURN_IF_ERROR(SetResources(d, *layout, &job, &gpus));
  ARBITER_RETURN_IF_ERROR(SetModelsAndLabels(d, gpus, &job));
  // 4. Time and retries, 5. names and places, 6. the environment and the command.
  SetTimeAndRetry(d, &job, notes);
  SetNamesAndPlaces(d, ctx, &job);
  SetNodesAndMail(d, ctx, &job, notes);
  // 7. The submitter's environment (--export), then the job's own SLURM_* and the command.
  ARBITER_RETURN_IF_ERROR(
      ExportEnvironment(d.export_env.value_or("ALL"), ctx.environment, &job, notes));
  SetEnvAndCommand(d, *layout, ctx, &job, notes);
  SetSlurmJobEnv(&job);
  return job;
}

}  // namespace arbiter::cli

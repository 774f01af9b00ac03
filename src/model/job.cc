#include "model/job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "model/job_array.h"
#include "model/node.h"

namespace arbiter {

namespace {
constexpr JobType kAllTypes[] = {JobType::kTraining,   JobType::kFineTuning,
                                 JobType::kEvaluation, JobType::kBatchInference,
                                 JobType::kService,    JobType::kExperiment};
constexpr int32_t kMaxTasks = 100000;
}  // namespace

std::string_view JobTypeName(JobType t) {
  switch (t) {
    case JobType::kTraining:
      return "training";
    case JobType::kFineTuning:
      return "fine-tuning";
    case JobType::kEvaluation:
      return "evaluation";
    case JobType::kBatchInference:
      return "batch-inference";
    case JobType::kService:
      return "service";
    case JobType::kExperiment:
      return "experiment";
  }
  return "unknown";
}

bool ParseJobType(std::string_view s, JobType* out) {
  for (JobType t : kAllTypes) {
    if (JobTypeName(t) == s) {
      *out = t;
      return true;
    }
  }
  return false;
}

std::string_view DependencyTypeName(DependencyType t) {
  switch (t) {
    case DependencyType::kAfter:
      return "after";
    case DependencyType::kAfterOk:
      return "afterok";
    case DependencyType::kAfterAny:
      return "afterany";
    case DependencyType::kAfterNotOk:
      return "afternotok";
    case DependencyType::kSingleton:
      return "singleton";
  }
  return "afterok";
}

bool ParseDependencyType(std::string_view s, DependencyType* out) {
  for (DependencyType t :
       {DependencyType::kAfter, DependencyType::kAfterOk, DependencyType::kAfterAny,
        DependencyType::kAfterNotOk, DependencyType::kSingleton}) {
    if (DependencyTypeName(t) == s) {
      *out = t;
      return true;
    }
  }
  return false;
}

int64_t RetryBackoffSeconds(const RetryPolicy& p, int32_t retry) {
  int64_t b = p.backoff_seconds;
  for (int32_t i = 1; i < retry && b < p.backoff_cap_seconds; ++i) {
    b = b > p.backoff_cap_seconds / 2 ? p.backoff_cap_seconds : b * 2;  // no overflow
  }
  return std::min(b, p.backoff_cap_seconds);
}

bool ShouldRetry(const RetryPolicy& p, int32_t restarts, int32_t exit_code) {
  if (restarts >= p.max_retries) return false;
  if (p.on_exit_codes.empty()) return true;
  return std::find(p.on_exit_codes.begin(), p.on_exit_codes.end(), exit_code) !=
         p.on_exit_codes.end();
}

bool IsReservedEnvName(std::string_view name) {
  if (name.substr(0, kReservedEnvPrefix.size()) == kReservedEnvPrefix) {
    return name.substr(0, kSubmitterEnvPrefix.size()) != kSubmitterEnvPrefix;
  }
  return std::find(std::begin(kReservedEnvNames), std::end(kReservedEnvNames), name) !=
         std::end(kReservedEnvNames);
}

Status CheckSubmittedEnv(const JobSpec& job) {
  auto reserved = [](const std::string& field, const std::string& name) {
    return InvalidArgument(
        field + "." + name,
        fmt::format(
            "{} is set by Arbiter for every task (GPUs, ranks, identity, its folders) and "
            "may not be set by a job; reserved: {} and every name starting with {} (but {})",
            name, fmt::join(kReservedEnvNames, ", "), kReservedEnvPrefix, kSubmitterEnvPrefix));
  };
  for (const auto& [name, value] : job.env) {
    if (IsReservedEnvName(name)) return reserved("env", name);
  }
  for (const auto& [name, value] : job.secret_env) {
    if (IsReservedEnvName(name)) return reserved("secret_env", name);
    if (job.env.count(name)) {
      return InvalidArgument(
          "secret_env." + name,
          fmt::format("{} is also in env: give a variable in one of the two", name));
    }
  }
  return Status::Ok();
}

bool IsMailType(std::string_view type) {
  static constexpr std::string_view kTypes[] = {
      "NONE",          "BEGIN",          "END",        "FAIL",       "REQUEUE",
      "ALL",           "INVALID_DEPEND", "STAGE_OUT",  "TIME_LIMIT", "TIME_LIMIT_90",
      "TIME_LIMIT_80", "TIME_LIMIT_50",  "ARRAY_TASKS"};
  for (std::string_view t : kTypes) {
    if (t == type) return true;
  }
  return false;
}

namespace {

// Host-path mounts are binds into a container: a host process (no image) sees the node's files
// as its user does, so mounts there would promise a confinement that does not exist. A volume is
// storage of the tenant's own: a container gets it at its target, a host process finds its folder
// in ARBITER_VOLUME_<NAME>; it cannot be kept from writing there, so only containers take a volume
// read-only.
Status ValidateMountShape(const JobSpec& job, size_t i) {
  const Mount& m = job.mounts[i];
  const std::string at = fmt::format("mounts[{}]", i);
  if (!m.volume.empty() && !m.path.empty()) {
    return InvalidArgument(at + ".volume",
                           "give either path (a host path) or volume (a volume of the tenant), "
                           "not both");
  }
  if (m.volume.empty()) {
    if (job.container_image.empty()) {
      return InvalidArgument("mounts",
                             "mounts bind host paths into a container: set container_image (a "
                             "task without an image runs on the node and sees its files as its "
                             "user does)");
    }
    if (std::string why = MountPathProblem(m.path); !why.empty()) {
      return InvalidArgument(at + ".path", fmt::format("{}: {}", m.path, why));
    }
  } else {
    if (!IsValidVolumeName(m.volume)) {
      return InvalidArgument(at + ".volume",
                             fmt::format("'{}' is not a volume name: lower-case letters, digits "
                                         "and '-', starting and ending with a letter or digit "
                                         "(at most {})",
                                         m.volume, kMaxVolumeNameBytes));
    }
    if (job.container_image.empty() && !m.target.empty()) {
      return InvalidArgument(at + ".target",
                             fmt::format("a task without container_image finds volume {} at the "
                                         "folder ${} names; target is for containers",
                                         m.volume, VolumeEnvName(m.volume)));
    }
    if (job.container_image.empty() && m.read_only) {
      return InvalidArgument(at + ".mode",
                             fmt::format("a task without container_image can write to any volume "
                                         "it is given: mount volume {} with mode rw, or set "
                                         "container_image to mount it read-only",
                                         m.volume));
    }
    if (!job.container_image.empty() && m.target.empty()) {
      return InvalidArgument(
          at + ".target",
          fmt::format("is required: where volume {} is in the container", m.volume));
    }
  }
  if (m.target.empty()) return Status::Ok();
  if (std::string why = MountPathProblem(m.target); !why.empty()) {
    return InvalidArgument(at + ".target", fmt::format("{}: {}", m.target, why));
  }
  return Status::Ok();
}

Status ValidateMounts(const JobSpec& job) {
  if (job.mounts.empty()) return Status::Ok();
  if (job.mounts.size() > kMaxJobMounts) {
    return InvalidArgument(
        "mounts", fmt::format("at most {} mounts, got {}", kMaxJobMounts, job.mounts.size()));
  }
  for (size_t i = 0; i < job.mounts.size(); ++i) {
    ARBITER_RETURN_IF_ERROR(ValidateMountShape(job, i));
  }
  for (size_t i = 0; i < job.mounts.size(); ++i) {
    const Mount& mi = job.mounts[i];
    const std::string& ti = mi.target.empty() ? mi.path : mi.target;
    for (size_t k = 0; k < i; ++k) {
      const Mount& mk = job.mounts[k];
      if (!mi.volume.empty() && mi.volume == mk.volume) {
        return InvalidArgument(
            fmt::format("mounts[{}].volume", i),
            fmt::format("volume {} is already mounted by mounts[{}]", mi.volume, k));
      }
      const std::string& tk = mk.target.empty() ? mk.path : mk.target;
      if (!ti.empty() && ti == tk) {
        return InvalidArgument(fmt::format("mounts[{}].target", i),
                               fmt::format("{} is already the target of mounts[{}]", ti, k));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateJobSpec(const JobSpec& job) {
  if (!job.name.empty() && job.name.size() > 253) {
    return InvalidArgument("name", "must be at most 253 characters");
  }
  // Empty (a submission for the tenant's default queue) or an alias until the server resolves it.
  if (!job.queue.empty() && !IsValidQueueAlias(job.queue)) {
    return InvalidArgument("queue", fmt::format("'{}' is not a valid queue name", job.queue));
  }
  if (job.tasks < 1 || job.tasks > kMaxTasks) {
    return InvalidArgument("tasks",
                           fmt::format("must be between 1 and {}, got {}", kMaxTasks, job.tasks));
  }
  ARBITER_RETURN_IF_ERROR(ValidateTaskResources(job.resources, "resources"));
  for (size_t i = 0; i < job.gpu_models.size(); ++i) {
    if (job.gpu_models[i].empty()) {
      return InvalidArgument(fmt::format("gpu_models[{}]", i), "must not be empty");
    }
  }
  if (!job.gpu_models.empty() && job.resources.gpus == 0) {
    return InvalidArgument("gpu_models", "GPU models given but the job asks for no GPU");
  }
  if (job.walltime_seconds < 0) {
    return InvalidArgument("walltime_seconds",
                           fmt::format("must be >= 0, got {}", job.walltime_seconds));
  }
  if (job.retry.max_retries < 0 || job.retry.max_retries > 1000) {
    return InvalidArgument("retry.max_retries", fmt::format("must be between 0 and 1000, got {}",
                                                            job.retry.max_retries));
  }
  if (job.retry.backoff_seconds < 0 || job.retry.backoff_seconds > 86400 * 7) {
    return InvalidArgument(
        "retry.backoff_seconds",
        fmt::format("must be between 0 and 604800, got {}", job.retry.backoff_seconds));
  }
  if (job.retry.backoff_cap_seconds < job.retry.backoff_seconds) {
    return InvalidArgument("retry.backoff_cap_seconds",
                           fmt::format("must be >= backoff_seconds ({}), got {}",
                                       job.retry.backoff_seconds, job.retry.backoff_cap_seconds));
  }
  if (job.grace_period_seconds &&
      (*job.grace_period_seconds < 0 || *job.grace_period_seconds > 86400)) {
    return InvalidArgument(
        "grace_period_seconds",
        fmt::format("must be between 0 and 86400, got {}", *job.grace_period_seconds));
  }
  for (const auto* list : {&job.nodes, &job.exclude_nodes}) {
    const char* field = list == &job.nodes ? "nodes" : "exclude_nodes";
    for (size_t i = 0; i < list->size(); ++i) {
      if (!IsValidHostName((*list)[i])) {
        return InvalidArgument(fmt::format("{}[{}]", field, i),
                               fmt::format("'{}' is not a valid node name", (*list)[i]));
      }
    }
  }
  for (size_t i = 0; i < job.nodes.size(); ++i) {
    if (std::find(job.exclude_nodes.begin(), job.exclude_nodes.end(), job.nodes[i]) !=
        job.exclude_nodes.end()) {
      return InvalidArgument(fmt::format("nodes[{}]", i),
                             fmt::format("node '{}' is both listed and excluded", job.nodes[i]));
    }
  }
  if (job.mail) {
    if (job.mail->user.empty()) return InvalidArgument("mail.user", "must not be empty");
    for (size_t i = 0; i < job.mail->types.size(); ++i) {
      if (!IsMailType(job.mail->types[i])) {
        return InvalidArgument(
            fmt::format("mail.types[{}]", i),
            fmt::format("unknown mail type '{}': use BEGIN, END, FAIL, REQUEUE, ALL, "
                        "INVALID_DEPEND, TIME_LIMIT, TIME_LIMIT_90/80/50, ARRAY_TASKS or NONE",
                        job.mail->types[i]));
      }
    }
  }
  if (job.service) {
    if (job.service->name.empty()) return InvalidArgument("service.name", "must not be empty");
    if (job.service->revision < 1) {
      return InvalidArgument("service.revision",
                             fmt::format("must be >= 1, got {}", job.service->revision));
    }
    if (job.service->port < 1 || job.service->port > 65535) {
      return InvalidArgument("service.port",
                             fmt::format("must be between 1 and 65535, got {}", job.service->port));
    }
  }
  ARBITER_RETURN_IF_ERROR(ValidateMounts(job));
  if (job.array.id != 0) {
    const JobArrayElement& a = job.array;
    if (a.index < 0 || a.index > kMaxArrayIndex) {
      return InvalidArgument(
          "array.index", fmt::format("must be between 0 and {}, got {}", kMaxArrayIndex, a.index));
    }
    if (a.size < 1 || a.size > static_cast<int32_t>(kMaxArrayElements)) {
      return InvalidArgument(
          "array.size", fmt::format("must be between 1 and {}, got {}", kMaxArrayElements, a.size));
    }
    if (a.max_running < 0 || a.max_running > kMaxArrayRunning) {
      return InvalidArgument("array.max_running", fmt::format("must be between 0 and {}, got {}",
                                                              kMaxArrayRunning, a.max_running));
    }
  }
  return Status::Ok();
}

}  // namespace arbiter

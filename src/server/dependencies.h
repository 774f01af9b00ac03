// Jobs that wait for other jobs (JobSpec::depends_on, Slurm's --dependency): whether a pending
// job's dependencies hold now, still may, or never will. Pure: the scheduling driver gives it what
// it knows of the other jobs (control_plane_scheduling.cc), under the control plane's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/job.h"
#include "server/lifecycle.h"

namespace arbiter::server {

// What the driver knows of a job another one depends on.
struct DependedJob {
  JobState state = JobState::kPending;
  bool started = false;  // any run of it has started
  bool ended = false;    // in a final state and nothing of it still runs
};

struct DependencyVerdict {
  enum class Kind { kMet, kWaiting, kNever };
  Kind kind = Kind::kMet;
  // kWaiting: what it waits for ("waiting for job 12 to succeed (afterok:12)"); kNever: why it
  // can never start ("dependency never satisfied: job 12 failed (afterok:12)").
  std::string message;
};

// `find`: the job of that id, or nullopt when there is none (deleted, never existed).
// `singleton_blocker`: the earliest job of the same user and name still active before this one
// (0: none).
DependencyVerdict EvaluateDependencies(
    const std::vector<Dependency>& deps,
    const std::function<std::optional<DependedJob>(uint64_t)>& find, uint64_t singleton_blocker);

// "afterok:12", "singleton": as Slurm writes them.
std::string DependencyText(const Dependency& d);

}  // namespace arbiter::server

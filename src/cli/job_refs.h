// Job references as the job commands take them, in Slurm's forms (docs/cli.md, "Job ids"):
//
//   123          job 123; for the actions (cancel, suspend, resume, retry) and wait, the whole job
//                array when 123 is an array's id (its first element's)
//   123_7        element 7 of array 123
//   123_[1-5,9]  elements 1 to 5 and 9 of array 123 (the index syntax of --array)
//   11-20        the jobs 11 to 20 (at most kMaxJobRange ids; the commands that take several)
//
// Parsing is pure; resolving asks the server (GET /api/v1/jobs/{id}, GET /api/v1/jobs?array=A,
// GET /api/v1/arrays/{id}), so another tenant's array looks missing exactly like a missing one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client.h"
#include "common/result.h"

namespace arbiter::cli {

inline constexpr uint64_t kMaxJobRange = 10000;

struct JobRef {
  enum class Kind { kJob, kElements, kRange };
  Kind kind = Kind::kJob;
  std::string text;              // as written
  uint64_t id = 0;               // kJob: the job; kElements: the array; kRange: the first job
  uint64_t last = 0;             // kRange: the last job
  std::vector<int64_t> indices;  // kElements: ascending
  bool single_element = false;   // kElements written as 123_7 (not 123_[...])
};

// One reference; errors are InvalidArgument naming it ("job 12_x: ..."), for exit code 2.
Result<JobRef> ParseJobRef(std::string_view text);
// Several; the first error stops.
Result<std::vector<JobRef>> ParseJobRefs(const std::vector<std::string>& texts);

// What a reference stands for on the server.
struct Resolved {
  uint64_t array = 0;          // the whole job array of this id (actions, wait), else 0
  std::vector<uint64_t> jobs;  // else these jobs
};

// For the commands that act on or wait for jobs: 123 is the whole array when it is an array's id.
Result<Resolved> ResolveJobRef(ApiClient& api, const JobRef& ref);
// For the commands about one job (show, why, logs, events): 123 or 123_7. OneJobOnly says, before
// any request, when `ref` is another form (a usage error).
Status OneJobOnly(const JobRef& ref);
Result<uint64_t> ResolveOneJob(ApiClient& api, const JobRef& ref);

}  // namespace arbiter::cli

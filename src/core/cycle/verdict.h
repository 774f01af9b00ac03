// Verdicts: why a pending job did not start this cycle. A fixed, documented set of codes
// (docs/architecture.md lists them), a message that names the numbers, the job's position in its
// queue, and an estimated start when a reservation gives one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "model/time.h"

namespace arbiter::core {

enum class VerdictCode {
  kQuotaExceeded,          // a queue's or tenant's max would be exceeded
  kBorrowLimit,            // within max, but not enough idle capacity may be borrowed
  kNoFeasibleNode,         // fits the quota, but no node can take a task
  kGangIncomplete,         // some tasks of the gang fit, not all at once
  kWaitingForReservation,  // capacity is held for a job ahead of it
  kLowerPriority,          // jobs of higher priority go first
  kBudgetExhausted,        // the tenant's budget is spent and its policy blocks new starts
  kSuspended,              // suspended by its owner
  kBackoff,                // waiting out a retry backoff
  kNotAllowed,             // the queue does not take this job (type, unknown queue)
  kInadmissible,           // can never start under the current maxima or nodes (admissible.h)
  kDependency,             // waits for other jobs (depends_on; set by the server's driver)
  kArrayThrottled,         // its job array runs its most elements at once (the server's driver)
};

std::string_view VerdictCodeName(VerdictCode c);  // "QuotaExceeded", ...

struct Verdict {
  JobId job;
  VerdictCode code = VerdictCode::kNoFeasibleNode;
  std::string message;
  int32_t position = 0;  // 1-based position among the pending jobs of its queue
  std::optional<TimeMs> estimated_start;
};

}  // namespace arbiter::core

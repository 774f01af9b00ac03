// The job lifecycle: states and the transitions between them. Every transition is explicit and
// checked; an illegal one is refused (HTTP 409) with a message naming both states.
//
//   pending -> admitted -> starting -> running -> succeeded | failed | timed-out
//   running/starting/admitted -> preempting -> preempted -> pending
//   failed -> retry-wait -> pending            (by the retry policy, with backoff)
//   running/starting/admitted -> lost -> retry-wait | failed   (node down, GPU unhealthy)
//   pending | retry-wait | admitted | starting | running -> suspended -> pending (resume)
//   any non-final state -> cancelled
//   awaiting_approval -> pending | rejected    (a submission an approval rule matched;
//                                               docs/approvals.md)
#pragma once

#include <optional>
#include <string_view>

#include "common/status.h"

namespace arbiter::server {

enum class JobState {
  kPending,
  kAdmitted,
  kStarting,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kTimedOut,
  kPreempting,
  kPreempted,
  kSuspended,
  kRetryWait,
  kLost,
  kAwaitingApproval,  // matched an approval rule: not scheduled until a person decides
  kRejected,          // final: an approver refused it, or its approval request expired
};

std::string_view JobStateName(JobState s);  // "pending", "timed-out", ...
std::optional<JobState> ParseJobState(std::string_view s);

// Terminal states: succeeded, failed (when no retry follows), cancelled, timed-out, rejected.
bool IsFinal(JobState s);
// States in which the job holds resources on nodes.
bool HoldsResources(JobState s);

// Ok when `from -> to` is a legal transition, else kConflict naming both.
Status CheckTransition(JobState from, JobState to);

}  // namespace arbiter::server

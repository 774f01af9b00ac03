#include "server/lifecycle.h"

#include <fmt/format.h>

#include <array>

namespace arbiter::server {

namespace {

constexpr std::array<std::string_view, 15> kNames = {
    "pending",   "admitted",   "starting",  "running",           "succeeded",
    "failed",    "cancelled",  "timed-out", "preempting",        "preempted",
    "suspended", "retry-wait", "lost",      "awaiting_approval", "rejected"};

using S = JobState;

bool Allowed(S from, S to) {
  if (to == S::kCancelled) return !IsFinal(from) && from != S::kCancelled;
  switch (from) {
    case S::kPending:
      return to == S::kAdmitted || to == S::kSuspended;
    case S::kAdmitted:
      return to == S::kStarting || to == S::kPreempting || to == S::kSuspended || to == S::kLost ||
             to == S::kPending;  // a dispatch that no longer fits goes back to the queue
    case S::kStarting:
      return to == S::kRunning || to == S::kFailed || to == S::kPreempting || to == S::kSuspended ||
             to == S::kLost || to == S::kSucceeded || to == S::kTimedOut;
    case S::kRunning:
      return to == S::kSucceeded || to == S::kFailed || to == S::kTimedOut ||
             to == S::kPreempting || to == S::kSuspended || to == S::kLost;
    case S::kPreempting:
      return to == S::kPreempted || to == S::kSucceeded || to == S::kFailed || to == S::kLost;
    case S::kPreempted:
      return to == S::kPending;
    case S::kSuspended:
      return to == S::kPending;
    case S::kRetryWait:
      return to == S::kPending || to == S::kSuspended;
    case S::kLost:
      return to == S::kRetryWait || to == S::kFailed;
    case S::kFailed:
      return to == S::kRetryWait;  // the retry policy, or an explicit retry
    case S::kTimedOut:
    case S::kCancelled:
      return to == S::kRetryWait;  // only an explicit retry
    case S::kAwaitingApproval:
      return to == S::kPending || to == S::kRejected;
    case S::kSucceeded:
    case S::kRejected:
      return false;
  }
  return false;
}

}  // namespace

std::string_view JobStateName(JobState s) { return kNames[static_cast<size_t>(s)]; }

std::optional<JobState> ParseJobState(std::string_view s) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == s) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

bool IsFinal(JobState s) {
  return s == S::kSucceeded || s == S::kFailed || s == S::kCancelled || s == S::kTimedOut ||
         s == S::kRejected;
}

bool HoldsResources(JobState s) {
  return s == S::kAdmitted || s == S::kStarting || s == S::kRunning || s == S::kPreempting;
}

Status CheckTransition(JobState from, JobState to) {
  if (Allowed(from, to)) return Status::Ok();
  return {StatusCode::kConflict,
          fmt::format("a job in state {} cannot become {}", JobStateName(from), JobStateName(to))};
}

}  // namespace arbiter::server

#include "server/dependencies.h"

#include <fmt/format.h>

namespace arbiter::server {

std::string DependencyText(const Dependency& d) {
  if (d.type == DependencyType::kSingleton) return "singleton";
  return fmt::format("{}:{}", DependencyTypeName(d.type), d.job);
}

DependencyVerdict EvaluateDependencies(
    const std::vector<Dependency>& deps,
    const std::function<std::optional<DependedJob>(uint64_t)>& find, uint64_t singleton_blocker) {
  using Kind = DependencyVerdict::Kind;
  DependencyVerdict waiting{Kind::kMet, ""};
  for (const Dependency& d : deps) {
    const std::string text = DependencyText(d);
    if (d.type == DependencyType::kSingleton) {
      if (singleton_blocker != 0 && waiting.kind == Kind::kMet) {
        waiting = {Kind::kWaiting,
                   fmt::format("waiting for job {} of the same user and name to end ({})",
                               singleton_blocker, text)};
      }
      continue;
    }
    const std::optional<DependedJob> j = find(d.job);
    if (!j) {
      return {Kind::kNever,
              fmt::format("dependency never satisfied: job {} does not exist ({})", d.job, text)};
    }
    const std::string_view state = JobStateName(j->state);
    const bool succeeded = j->ended && j->state == JobState::kSucceeded;
    bool met = false;
    std::string_view wants;
    switch (d.type) {
      case DependencyType::kAfter:
        met = j->started || j->ended;
        wants = "start";
        break;
      case DependencyType::kAfterOk:
        if (j->ended && !succeeded) {
          return {Kind::kNever, fmt::format("dependency never satisfied: job {} {} ({})", d.job,
                                            state == "timed-out" ? "timed out" : state, text)};
        }
        met = succeeded;
        wants = "succeed";
        break;
      case DependencyType::kAfterNotOk:
        if (succeeded) {
          return {Kind::kNever,
                  fmt::format("dependency never satisfied: job {} succeeded ({})", d.job, text)};
        }
        met = j->ended;
        wants = "end without succeeding";
        break;
      case DependencyType::kAfterAny:
        met = j->ended;
        wants = "end";
        break;
      case DependencyType::kSingleton:
        break;
    }
    if (!met && waiting.kind == Kind::kMet) {
      waiting = {Kind::kWaiting,
                 fmt::format("waiting for job {} ({}) to {} ({})", d.job, state, wants, text)};
    }
  }
  return waiting;
}

}  // namespace arbiter::server

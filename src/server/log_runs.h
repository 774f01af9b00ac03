// A task's runs as its job's history tells them, for `arbiter logs`: each admission starts a run
// (the job's attempt, which the nodes keep each run's output under: node/task_logs.h), on the
// node the admission placed the task on; the events until the next admission say why the run
// ended, which the next run's separator says ("--- run 2, after a retry (exit 3) ---").
//
// The admission's event carries its attempt and the task's nodes (AdmissionDetail); events
// recorded before it did count admissions and name no node.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/records.h"

namespace arbiter::server {

struct RunHistory {
  uint64_t attempt = 0;
  std::string node;   // the task's node in this run ("": not recorded)
  std::string after;  // why the run before it ended ("preemption", "a retry (exit 3)", "the node
                      // was lost", "requeue", ...; "": the first run, or not known)
};

// The runs of task `task`, oldest first, from the job's events (oldest first).
std::vector<RunHistory> RunsFromEvents(const std::vector<store::JobEventRecord>& events,
                                       int32_t task);

// The detail of an admission's event: {"attempt": A, "nodes": [node of task 0, ...]}.
std::string AdmissionDetail(uint64_t attempt, const std::vector<std::string>& task_nodes);

// The line between two runs' output: "--- run 2, after preemption ---\n" ("--- run 2 ---\n"
// when why the last one ended is not known).
std::string RunSeparator(uint64_t attempt, std::string_view after);

}  // namespace arbiter::server

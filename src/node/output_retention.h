// The retention of a node's task output (`--output-retention-days` of an agent, the server's
// `--retention-days` for its built-in node; docs/security.md, "Output retention").
//
// A job's folders on a node (WORK_DIR/jobs/<id>: its tasks' stdout, stderr, interleaved log and
// run offsets; work/<id>, tmp/<id>, checkpoints/<id>) stay after the job ends, for `arbiter logs`.
// Over a year of jobs that is every job's output on every node's disk. Once a job has nothing
// running on the node and none of its files under jobs/<id> changed since `before_ms`, its
// output files are archived to WORK_DIR/archive/output-YYYY-MM-DD.jsonl.gz (the day of its
// newest file; one JSON line per file: {"job", "file", "modified_ms", "bytes", and "text" when
// the bytes are UTF-8, else "base64"}), the archive is synced, and then the job's folders are
// removed. A crash in between leaves the folders and their copy in the archive; the next sweep
// archives them again (the same lines twice).
//
// Thread safety: ApplyOutputRetention touches only the files. Before removing a job's folders it
// calls `remove_if_idle(job, remove)`, which must call `remove` only if no task of the job runs
// or starts on the node, under whatever lock keeps that true while `remove` runs (the executor's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"

namespace arbiter::node {

struct OutputRetentionResult {
  int64_t jobs = 0;   // jobs whose folders were archived and removed
  int64_t files = 0;  // output files archived
  int64_t bytes = 0;  // their bytes
};

// Archives and removes the output of the jobs whose files under WORK_DIR/jobs/<id> all changed
// before `before_ms`: the oldest ids first, at most `max_jobs` jobs and about `max_bytes` of
// output per call (one archive append and sync per day file), so one call stays short.
Result<OutputRetentionResult> ApplyOutputRetention(
    const std::string& work_dir, int64_t before_ms,
    const std::function<void(uint64_t job, const std::function<void()>& remove)>& remove_if_idle,
    int64_t max_jobs = 200, int64_t max_bytes = int64_t{16} << 20);

}  // namespace arbiter::node

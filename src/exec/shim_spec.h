// ShimSpec: everything `arbiter-shim` needs to run one task, as the executor hands it over on a
// pipe, and the records the shim leaves for the executor (its pid file and the task's exit).
//
// The shim (src/exec/shim_main.cc) is a small process per task between the executor (the agent,
// or the server's built-in node) and the task, as conmon or slurmstepd are: it starts the task as
// its configured user with a clean environment, is the subreaper of everything the task starts,
// reads its stdout and stderr through pipes into the task's log files (exec/log_pump.h), forwards
// stops and kills the whole tree, and writes the task's exit status to a file. So a task outlives
// a restart of its executor, which adopts it again from the pid file, and nothing a task starts
// outlives the task.
//
// Encoding: a sequence of records "<tag> <length>\n<bytes>\n"; repeated tags for lists. Unknown
// tags are refused, so executor and shim of different builds never half-understand each other.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace arbiter::exec {

struct ShimSpec {
  uint64_t job = 0;
  int32_t task = 0;
  uint64_t attempt = 0;
  std::vector<std::string> argv;  // the program and its arguments (searched in the env's PATH)
  std::vector<std::string> env;   // "NAME=value", the whole environment of the task
  std::string cwd;                // entered as the task's user
  // The task's identity; -1: keep the shim's (an executor that cannot switch users).
  int64_t uid = -1;
  int64_t gid = -1;
  std::vector<int64_t> groups;  // supplementary groups (empty: none)
  bool no_new_privs = true;     // PR_SET_NO_NEW_PRIVS: setuid programs gain nothing
  // The task's log files, opened by the shim (append, 0600) and written by it with what the task
  // writes to its stdout and stderr (pipes): each stream's own file, and both line by line in the
  // order written (log_path, "": none). Every run of a task appends to the same files; the run
  // index (runs_path, "": none) gets the run's RunStart before the task starts.
  std::string stdout_path;
  std::string stderr_path;
  std::string log_path;
  std::string runs_path;
  std::vector<std::string> cgroup_procs;  // cgroup.procs files the task's process joins
  std::vector<std::string> cgroup_dirs;   // the task's groups: their members are the task's
  int64_t rlimit_nproc = 0;               // RLIMIT_NPROC for the task (0: unchanged)
  int64_t grace_ms = 30000;               // SIGTERM, then this long, then SIGKILL
  int64_t walltime_ms = 0;  // a backstop: stopped as timed out this long after the start (0: none)
  // Stopped when the executor's heartbeat file is older than this (0: never): the executor is
  // gone, and its node's work may already run elsewhere.
  int64_t orphan_timeout_ms = 0;
  std::string heartbeat_path;
  std::string pid_path;   // "<shim pid> <attempt> <start time> <boot id>\n"
  std::string exit_path;  // ExitRecord, written once the task's processes are all gone
  // Run (as the shim's user, with the task's environment, output to the shim's stderr) once the
  // task's processes are gone and before the exit record is written: what the task leaves
  // outside its processes (a container's remains, when its podman was killed). Empty: nothing.
  std::vector<std::string> cleanup_argv;
  // A stop's SIGTERM goes to every process of the task but its first one (SIGKILL, after the
  // grace period, to all). For `podman run`, whose exit code is its container's: podman forwards
  // a SIGTERM to the container, and when the container has already ended (it got the shim's own
  // SIGTERM and exited) it kills itself with it, exiting 143 in place of the container's code.
  // The first process is signalled as well while it is the only one (the container not started).
  // Encoded only when set, so that a shim of an older build refuses only such tasks.
  bool stop_spares_main = false;
};

// How a task ended, as the shim writes it.
struct ExitRecord {
  int32_t code = 0;        // the exit code, or 128 + the signal that killed it
  bool timed_out = false;  // stopped at its walltime (the executor's SIGUSR1, or the backstop)
  bool orphaned = false;   // stopped because its executor was gone too long
  bool failed_to_start = false;
};

std::string EncodeShimSpec(const ShimSpec& s);
// False (with *error) on malformed input or an unknown tag.
bool DecodeShimSpec(const std::string& text, ShimSpec* s, std::string* error);

std::string EncodeExitRecord(const ExitRecord& r);  // "exit CODE timed_out 0 orphaned 0 ...\n"
bool DecodeExitRecord(const std::string& text, ExitRecord* r);

// Where a run's output begins in its task's three log files (stdout, stderr, both), which every
// run appends to: a run's output is from its start to the next run's. The run index holds one line
// per run, "run ATTEMPT OUT ERR LOG\n", written in one append before the run writes anything.
struct RunStart {
  uint64_t attempt = 0;
  uint64_t out = 0;  // byte offsets in the stdout, stderr and combined files
  uint64_t err = 0;
  uint64_t log = 0;
  bool operator==(const RunStart&) const = default;
};
std::string EncodeRunStart(const RunStart& r);
// Every well-formed line of a run index, in order (a torn last line is skipped).
std::vector<RunStart> DecodeRunIndex(const std::string& text);
// Appends the RunStart of `attempt` to `runs_path`, with the current sizes of the three files (a
// missing one is empty; "" : none). False when the index cannot be written.
bool AppendRunStart(const std::string& runs_path, uint64_t attempt, const std::string& out_path,
                    const std::string& err_path, const std::string& log_path);

// A pid file: "<pid> <attempt> <start time> <boot id>".
struct PidRecord {
  int64_t pid = 0;
  uint64_t attempt = 0;
  bool has_attempt = false;
  std::string start_time;
  std::string boot_id;
};
bool DecodePidRecord(const std::string& text, PidRecord* r);

// The kernel's id of this boot (pids of another boot name other processes).
std::string BootId();
// Start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat), "" when gone.
std::string ProcessStartTime(int64_t pid);
// Whether the process a pid record names still runs (same boot, same start time).
bool PidRecordAlive(const PidRecord& r);

}  // namespace arbiter::exec

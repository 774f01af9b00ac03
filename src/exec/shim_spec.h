// ShimSpec: everything `arbiter-shim` needs to run one task, as the executor hands it over on a
// pipe, and the records the shim leaves for the executor (its pid file and the task's exit).
//
// The shim (src/exec/shim_main.cc) is a small process per task between the executor (the agent,
// or the server's built-in node) and the task, as conmon or slurmstepd are: it starts the task as
// its configured user with a clean environment, is the subreaper of everything the task starts,
// forwards stops and kills the whole tree, and writes the task's exit status to a file. So a task
// outlives a restart of its executor, which adopts it again from the pid file, and nothing a task
// starts outlives the task.
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
  std::string stdout_path;      // opened by the shim (append, 0600), handed to the task
  std::string stderr_path;
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

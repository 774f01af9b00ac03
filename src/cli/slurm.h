// Slurm's vocabulary for the views a Slurm user reads (squeue, sinfo, sacct, and the columns of
// `arbiter jobs`): job and node states, durations and times as Slurm prints and reads them, and
// host lists ("gpu-[01-04],box").
//
// Job states (docs/cli.md, "Slurm's names"):
//   pending, retry-wait  PD PENDING         succeeded  CD COMPLETED
//   admitted, starting   CF CONFIGURING     failed     F  FAILED
//   running              R  RUNNING         cancelled  CA CANCELLED
//   suspended            S  SUSPENDED       timed-out  TO TIMEOUT
//   preempting, preempted PR PREEMPTED      lost       NF NODE_FAIL
//   awaiting_approval    PD PENDING         rejected   CA CANCELLED
//   an ended job whose processes are still stopping: CG COMPLETING
// Node states (sinfo): ready with nothing allocated idle, with some mix, with all its GPUs (or, on
// a node without GPUs, all its CPUs) alloc; cordoned or draining with jobs still on it drng
// (DRAINING), without drain (DRAINED); down down.
//
// Times are local, as Slurm prints them: 2024-05-01T12:00:00.
//
// Thread safety: pure functions (the local time zone is read from the environment).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::cli {

// --- Job states ------------------------------------------------------------------------------

struct SlurmState {
  std::string_view code;  // "PD"
  std::string_view name;  // "PENDING"
};

// The Slurm state of an Arbiter state; `stopping`: the job's processes are still being stopped.
SlurmState SlurmStateFor(std::string_view arbiter_state, bool stopping);
// The same for a job object of the API (its "state" and "stopping").
SlurmState SlurmStateOf(const nlohmann::json& job);

// A comma-separated list of Slurm job states, by code or name in any case ("PD,R",
// "pending,RUNNING"), or "all": the codes it selects. An unknown one is an InvalidArgument whose
// field is `flag`, with the nearest known name.
Result<std::set<std::string>> ParseSlurmJobStates(std::string_view list, std::string_view flag);
// The Arbiter states whose jobs may have one of these codes (for the server's state filter).
std::vector<std::string> ArbiterStatesFor(const std::set<std::string>& codes);

// --- Node states -----------------------------------------------------------------------------

// What sinfo needs of a node: its Arbiter state and what is allocated on it.
struct NodeUse {
  std::string state;  // ready, cordoned, draining, down
  int64_t gpus = 0;   // GPUs it has
  int64_t gpu_milli_used = 0;
  int64_t cpu_milli = 0;
  int64_t cpu_milli_used = 0;
  int64_t jobs = 0;  // jobs placed on it
};
// The node's Slurm state: compact ("mix") and long ("MIXED").
SlurmState SlurmNodeState(const NodeUse& n);
// A comma-separated list of Slurm node states ("idle,mix", "drain": DRAINED and DRAINING): the
// long names it selects. Unknown ones are an InvalidArgument whose field is `flag`.
Result<std::set<std::string>> ParseSlurmNodeStates(std::string_view list, std::string_view flag);

// --- Durations and times -----------------------------------------------------------------------

// squeue's and sinfo's form: "0:00", "5:03", "1:02:03", "2-03:04:05".
std::string SqueueDuration(int64_t seconds);
// sacct's form: "00:00:05", "01:02:03", "2-03:04:05".
std::string SacctDuration(int64_t seconds);
// "2024-05-01T12:00:00" in local time.
std::string SlurmTimestamp(int64_t epoch_seconds);
// A time as sacct's -S and -E take it, in local time: YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY],
// MMDD[YY], HH:MM[:SS] (today), now[{+|-}N[seconds|minutes|hours|days|weeks]], today, midnight,
// noon, elevenses, fika, teatime, tomorrow. Seconds since the epoch; `now` is the current time.
Result<int64_t> ParseSlurmDateTime(std::string_view text, int64_t now, std::string_view flag);

// --- Host lists ------------------------------------------------------------------------------

// Names as Slurm writes a host list, sorted: "box,gpu-[01-03,05]" (zero-padded numbers keep
// their width); "" for none.
std::string CompressHostlist(std::vector<std::string> names);
// The names of a host list ("gpu-[01-03],box"); an unbalanced bracket or a bad range is an
// InvalidArgument whose field is `flag`.
Result<std::vector<std::string>> ExpandHostlist(std::string_view list, std::string_view flag);

// "a,b,,c" -> {"a", "b", "c"}.
std::vector<std::string> SplitCommas(std::string_view text);

}  // namespace arbiter::cli

// `arbiter scancel`: Slurm's scancel for Slurm users' hands and scripts (docs/cli.md, "scancel").
// Jobs by id in the job commands' forms (job_refs.h) and by filters (-u/--user, --me,
// -p/--partition, -t/--state, -n/--name, -A/--account, -w/--nodelist); silent on success (-v says
// what it cancelled); flags Arbiter cannot honour (-s/--signal, ...) are refused by name.
//
// The pure parts are here for their tests. Thread safety: pure functions.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::cli {

// A Slurm host list: "gpu[01-03,07],cpu1" -> gpu01 gpu02 gpu03 gpu07 cpu1 (zero padding kept;
// one bracket per name). Errors are InvalidArgument for field `field`.
Result<std::vector<std::string>> ExpandHostList(std::string_view list, const std::string& field);

// scancel's --state values (PENDING or PD, RUNNING or R, SUSPENDED or S, any case, joined by
// commas) as Arbiter's job states: pending and retry-wait; admitted, starting, running and
// preempting; suspended.
Result<std::set<std::string>> ScancelStates(std::string_view list);

}  // namespace arbiter::cli

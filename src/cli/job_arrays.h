// Job arrays in listings: the elements of one array shown as one row, as squeue does.
//
// An array element's job object carries "array": {"id": A, "index": I, "size": N,
// "max_running": M} (A: the array's id, which names it as Slurm's base job id does; M: 0 or absent
// when unlimited). A row of several elements is named "A_[0-3,7]" (with "%M" for a limit, where
// asked: "A_[5-99%8]"); one element "A_7"; a job of no array its id.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace arbiter::cli {

struct ArrayInfo {
  uint64_t id = 0;
  int64_t index = 0;
  int64_t size = 0;
  int64_t max_running = 0;  // 0: no limit
};

// The job's "array" object, when it is an element of an array (and the object is well formed).
std::optional<ArrayInfo> ArrayOf(const nlohmann::json& job);

// Indices as Slurm writes them: "0-3,5,7-9" (sorted, duplicates dropped).
std::string IndexRanges(std::vector<int64_t> indices);

// One row of a listing: one job, or several elements of one array.
struct JobGroup {
  std::vector<const nlohmann::json*> jobs;  // in the listing's order; never empty
  std::optional<ArrayInfo> array;           // set for array elements
};

// Groups `jobs` (a JSON array) in their order: the elements of one array for which `collapse`
// holds become one group, at the place of the first of them; every other job is a group of its
// own. `jobs` must outlive the groups.
std::vector<JobGroup> GroupArrays(const nlohmann::json& jobs,
                                  const std::function<bool(const nlohmann::json&)>& collapse);

// The group's id: "45", "12_7", "12_[0-3,7]" ("12_[0-3,7%8]" with `with_limit` and a limit).
std::string GroupId(const JobGroup& g, bool with_limit = false);

// How many of the group's jobs are in each state, in the order of the lifecycle (running first,
// then waiting, then ended): "8 running, 90 pending, 2 succeeded".
std::string StateCounts(const JobGroup& g);

}  // namespace arbiter::cli

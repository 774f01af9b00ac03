// Job arrays' indices as Slurm writes them (--array=0-99:2,200): expanded and bounded, written back
// in short, and the lowest, highest and step that an element's SLURM_ARRAY_TASK_MIN, _MAX and _STEP
// give. One submission makes one job per index (the server expands it); the array's id is its
// first element's job id.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter {

inline constexpr size_t kMaxArrayElements = 10000;  // Slurm's default MaxArraySize is 1001
inline constexpr int64_t kMaxArrayIndex = 4000000;  // Slurm's largest MaxArraySize, less one
inline constexpr int32_t kMaxArrayRunning = 10000;  // the largest "%N"

// "0-9", "1,3,5", "0-20:5", "1-3,10" (ranges N-M, steps :S, joined by commas): every index once,
// in ascending order, 1 to kMaxArrayElements of them, each 0..kMaxArrayIndex. Errors are
// InvalidArgument for `field`, their message naming the part ("'5-2': the range ends before it
// starts"). A "%N" limit is not part of it (the caller splits it off).
Result<std::vector<int64_t>> ExpandArrayIndices(std::string_view spec, const std::string& field);

// Ascending indices written back in Slurm's syntax, shortly: "0-9", "0-20:5", "1,3,7-9".
std::string ArrayIndicesText(const std::vector<int64_t>& ascending);

// What an element's environment says of the whole array (SLURM_ARRAY_TASK_MIN, _MAX, _STEP).
struct ArrayBounds {
  int64_t min = 0;
  int64_t max = 0;
  int64_t step = 1;  // the common difference when the indices are one progression, else 1
  bool operator==(const ArrayBounds&) const = default;
};
// Requires: `ascending` is not empty.
ArrayBounds BoundsOf(const std::vector<int64_t>& ascending);

}  // namespace arbiter

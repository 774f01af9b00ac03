#include "model/job_array.h"

#include <fmt/format.h>

#include <algorithm>

namespace arbiter {

namespace {

// A whole number 0..kMaxArrayIndex, or -1.
int64_t Index(std::string_view s) {
  if (s.empty() || s.size() > 7) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v <= kMaxArrayIndex ? v : -1;
}

}  // namespace

Result<std::vector<int64_t>> ExpandArrayIndices(std::string_view spec, const std::string& field) {
  auto bad = [&field](const std::string& why) { return InvalidArgument(field, why); };
  if (spec.empty()) return bad("no indices: use N, N-M or N-M:STEP, joined by commas");
  if (spec.find('%') != std::string_view::npos) {
    return bad("'%N' (how many run at once) is not part of the indices: give it apart");
  }
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= spec.size()) {
    const size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string_view part = spec.substr(at, comma - at);
    at = comma + 1;
    const size_t colon = part.find(':');
    const std::string_view range = part.substr(0, colon);
    int64_t step = 1;
    if (colon != std::string_view::npos) {
      step = Index(part.substr(colon + 1));
      if (step < 1) return bad(fmt::format("'{}': the step must be a whole number >= 1", part));
    }
    const size_t dash = range.find('-');
    const int64_t first = Index(range.substr(0, dash));
    const int64_t last = dash == std::string_view::npos ? first : Index(range.substr(dash + 1));
    if (first < 0 || last < 0) {
      return bad(fmt::format("'{}': use indices 0 to {}, as N, N-M or N-M:STEP, joined by commas",
                             part, kMaxArrayIndex));
    }
    if (last < first) return bad(fmt::format("'{}': the range ends before it starts", part));
    if ((last - first) / step >= static_cast<int64_t>(kMaxArrayElements)) {
      return bad(fmt::format("more than {} indices", kMaxArrayElements));
    }
    for (int64_t i = first; i <= last; i += step) out.push_back(i);
    if (out.size() > 2 * kMaxArrayElements) {  // bounded before sorting; duplicates go below
      return bad(fmt::format("more than {} indices", kMaxArrayElements));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() > kMaxArrayElements) {
    return bad(fmt::format("{} indices: at most {}", out.size(), kMaxArrayElements));
  }
  return out;
}

std::string ArrayIndicesText(const std::vector<int64_t>& ascending) {
  const ArrayBounds b = ascending.empty() ? ArrayBounds{} : BoundsOf(ascending);
  if (ascending.size() >= 3 && b.step > 1) return fmt::format("{}-{}:{}", b.min, b.max, b.step);
  std::string out;
  for (size_t i = 0; i < ascending.size();) {
    size_t j = i;
    while (j + 1 < ascending.size() && ascending[j + 1] == ascending[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out +=
        j == i ? fmt::format("{}", ascending[i]) : fmt::format("{}-{}", ascending[i], ascending[j]);
    i = j + 1;
  }
  return out;
}

ArrayBounds BoundsOf(const std::vector<int64_t>& ascending) {
  ArrayBounds b{ascending.front(), ascending.back(), 1};
  if (ascending.size() < 2) return b;
  const int64_t d = ascending[1] - ascending[0];
  for (size_t i = 2; i < ascending.size(); ++i) {
    if (ascending[i] - ascending[i - 1] != d) return b;
  }
  b.step = d;
  return b;
}

}  // namespace arbiter

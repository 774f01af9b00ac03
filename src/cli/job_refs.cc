#include "cli/job_refs.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "model/job_array.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

// A job id: 1 to 18 digits, not 0.
bool ParseId(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return v > 0;
}

Status Bad(std::string_view text, const std::string& why) {
  return InvalidArgument("", fmt::format("job {}: {}", text, why));
}

constexpr const char* kForms =
    "use a job id (123), an array's element (123_7), elements (123_[1-5,9]) or a range of job ids "
    "(11-20)";

}  // namespace

Result<JobRef> ParseJobRef(std::string_view text) {
  JobRef r;
  r.text = std::string(text);
  const size_t underscore = text.find('_');
  if (underscore != std::string_view::npos) {
    r.kind = JobRef::Kind::kElements;
    if (!ParseId(text.substr(0, underscore), &r.id)) return Bad(text, kForms);
    std::string_view spec = text.substr(underscore + 1);
    r.single_element = spec.empty() || spec.front() != '[';
    if (!r.single_element) {
      if (spec.size() < 3 || spec.back() != ']') {
        return Bad(text, "elements are written ARRAY_[INDICES], as 12_[1-5,9]");
      }
      spec = spec.substr(1, spec.size() - 2);
    } else if (spec.find_first_not_of("0123456789") != std::string_view::npos) {
      return Bad(text, fmt::format("'{}' is not an index; {}", spec, kForms));
    }
    auto indices = ExpandArrayIndices(spec, "");
    if (!indices.ok()) return Bad(text, indices.status().message());
    r.indices = std::move(indices).value();
    return r;
  }
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    r.kind = JobRef::Kind::kRange;
    if (!ParseId(text.substr(0, dash), &r.id) || !ParseId(text.substr(dash + 1), &r.last)) {
      return Bad(text, kForms);
    }
    if (r.last < r.id) return Bad(text, "the range ends before it starts");
    if (r.last - r.id >= kMaxJobRange) {
      return Bad(text, fmt::format("a range holds at most {} job ids", kMaxJobRange));
    }
    return r;
  }
  if (!ParseId(text, &r.id)) return Bad(text, kForms);
  return r;
}

Result<std::vector<JobRef>> ParseJobRefs(const std::vector<std::string>& texts) {
  std::vector<JobRef> out;
  for (const std::string& t : texts) {
    auto r = ParseJobRef(t);
    if (!r.ok()) return r.status();
    out.push_back(std::move(r).value());
  }
  return out;
}

namespace {

// The elements of array `ref.id` that `ref.indices` names, by index; an error names those it
// lacks, or the array when it has none (or is not the caller's to see).
Result<std::vector<uint64_t>> ResolveElements(ApiClient& api, const JobRef& ref) {
  std::string path = fmt::format("/api/v1/jobs?array={}", ref.id);
  if (ref.indices.size() == 1) path += fmt::format("&index={}", ref.indices[0]);
  auto items = api.ListAll(path);
  if (!items.ok()) return items.status();
  std::map<int64_t, uint64_t> by_index;
  for (const json& j : *items) {
    const json& a = j.value("array", json::object());
    by_index[a.value("index", int64_t{-1})] = j.value("id", uint64_t{0});
  }
  if (by_index.empty()) {
    // No element that way: is there no such array, or no such element?
    auto array = api.Get(fmt::format("/api/v1/arrays/{}", ref.id));
    if (!array.ok()) return array.status();
    return Status(StatusCode::kNotFound,
                  fmt::format("array {} has no element {} (its indices are {})", ref.id,
                              ArrayIndicesText(ref.indices), array->value("indices", "")));
  }
  std::vector<uint64_t> jobs;
  std::vector<int64_t> missing;
  for (int64_t i : ref.indices) {
    auto it = by_index.find(i);
    if (it == by_index.end()) {
      missing.push_back(i);
    } else {
      jobs.push_back(it->second);
    }
  }
  if (!missing.empty()) {
    std::vector<int64_t> have;
    for (const auto& [i, id] : by_index) have.push_back(i);
    return Status(StatusCode::kNotFound,
                  fmt::format("array {} has no element {} (its indices are {})", ref.id,
                              ArrayIndicesText(missing), ArrayIndicesText(have)));
  }
  return jobs;
}

}  // namespace

Result<Resolved> ResolveJobRef(ApiClient& api, const JobRef& ref) {
  Resolved out;
  switch (ref.kind) {
    case JobRef::Kind::kRange:
      for (uint64_t id = ref.id; id <= ref.last; ++id) out.jobs.push_back(id);
      return out;
    case JobRef::Kind::kElements: {
      auto jobs = ResolveElements(api, ref);
      if (!jobs.ok()) return jobs.status();
      out.jobs = std::move(jobs).value();
      return out;
    }
    case JobRef::Kind::kJob:
      break;
  }
  auto job = api.Get(fmt::format("/api/v1/jobs/{}", ref.id));
  if (!job.ok()) return job.status();
  const json& a = job->value("array", json::object());
  if (a.is_object() && a.value("id", uint64_t{0}) == ref.id) {
    out.array = ref.id;
  } else {
    out.jobs.push_back(ref.id);
  }
  return out;
}

Status OneJobOnly(const JobRef& ref) {
  if (ref.kind == JobRef::Kind::kJob || ref.single_element) return Status::Ok();
  return InvalidArgument(
      "", fmt::format("job {}: this command takes one job: 123, or an array's element 123_7",
                      ref.text));
}

Result<uint64_t> ResolveOneJob(ApiClient& api, const JobRef& ref) {
  ARBITER_RETURN_IF_ERROR(OneJobOnly(ref));
  if (ref.kind == JobRef::Kind::kJob) return ref.id;
  auto jobs = ResolveElements(api, ref);
  if (!jobs.ok()) return jobs.status();
  return jobs->front();
}

}  // namespace arbiter::cli

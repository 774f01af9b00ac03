#include "sim/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "common/rng.h"
#include "model/node.h"

namespace arbiter::sim {

namespace {

constexpr int64_t kMaxSeconds = int64_t{1} << 40;
constexpr int64_t kMaxWalltime = int64_t{366} * 24 * 3600;  // as the job API
constexpr int64_t kMaxTasks = 100000;
constexpr int64_t kMaxGpusPerTask = 1024;
constexpr size_t kMaxNameLength = 63;

enum Column {
  kSubmitTime,
  kDuration,
  kTenant,
  kQueue,
  kType,
  kPriorityClass,
  kTasks,
  kGpusPerTask,
  kGpuMilli,
  kGpuModels,
  kWalltime,
  kCpuMilli,
  kMemoryMib,
  kName,
  kNumColumns,
};
constexpr int kFirstOptional = kCpuMilli;

bool IsModelName(std::string_view s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

// One data row: its fields by column, and where it came from for errors.
struct Row {
  std::string_view file;
  size_t line = 0;
  std::vector<std::string_view> fields;    // as in the file
  const std::vector<int>* position;        // Column -> index into fields, -1 when absent
  const std::vector<std::string>* header;  // names, for messages

  bool has(Column c) const { return (*position)[c] >= 0; }
  std::string_view get(Column c) const {
    return has(c) ? fields[static_cast<size_t>((*position)[c])] : std::string_view();
  }
  Status Error(Column c, const std::string& message) const {
    const int col = (*position)[c];
    return InvalidArgument(fmt::format("{}:{}:{}", file, line, col + 1),
                           fmt::format("{}: {}", (*header)[static_cast<size_t>(col)], message));
  }
  // A whole number in [lo, hi]; an empty field gives `empty_value` when `allow_empty`.
  Status Int(Column c, int64_t lo, int64_t hi, int64_t* out, bool allow_empty) const {
    const std::string_view f = get(c);
    if (f.empty() && (allow_empty || !has(c))) return Status::Ok();
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (ec != std::errc() || end != f.data() + f.size() || v < lo || v > hi) {
      return Error(c, fmt::format("expected a whole number from {} to {}, got '{}'", lo, hi, f));
    }
    *out = v;
    return Status::Ok();
  }
  Status Name(Column c, std::string* out) const {
    const std::string_view f = get(c);
    if (f.empty()) return Error(c, "must not be empty");
    if (f.size() > kMaxNameLength || !IsValidName(f)) {
      return Error(c,
                   fmt::format("'{}' is not a name: lower-case letters, digits and '-', starting "
                               "with a letter or digit, at most {} characters",
                               f, kMaxNameLength));
    }
    *out = std::string(f);
    return Status::Ok();
  }
};

struct QueueOwner {
  std::string tenant;
  size_t line = 0;
};

// Checks that every queue belongs to one tenant and that no queue is named like a tenant.
class NameRegistry {
 public:
  Status Add(const Row& r, const TraceJob& j) {
    auto [it, inserted] = queues_.emplace(j.queue, QueueOwner{j.tenant, r.line});
    if (!inserted && it->second.tenant != j.tenant) {
      return r.Error(kQueue, fmt::format("queue '{}' belongs to tenant '{}' (line {}), not '{}'",
                                         j.queue, it->second.tenant, it->second.line, j.tenant));
    }
    tenants_.emplace(j.tenant, r.line);
    auto t = tenants_.find(j.queue);
    if (t != tenants_.end()) {
      return r.Error(
          kQueue, fmt::format("queue '{}' has the name of a tenant (line {})", j.queue, t->second));
    }
    auto q = queues_.find(j.tenant);
    if (q != queues_.end()) {
      return r.Error(kTenant, fmt::format("tenant '{}' has the name of a queue (line {})", j.tenant,
                                          q->second.line));
    }
    return Status::Ok();
  }

 private:
  std::unordered_map<std::string, QueueOwner> queues_;
  std::unordered_map<std::string, size_t> tenants_;
};

Status ParseRow(const Row& r, size_t row_number, TraceJob* j) {
  j->line = r.line;
  ARBITER_RETURN_IF_ERROR(r.Int(kSubmitTime, 0, kMaxSeconds, &j->submit_time, false));
  ARBITER_RETURN_IF_ERROR(r.Int(kDuration, 0, kMaxSeconds, &j->duration, false));
  ARBITER_RETURN_IF_ERROR(r.Name(kTenant, &j->tenant));
  ARBITER_RETURN_IF_ERROR(r.Name(kQueue, &j->queue));
  if (!ParseJobType(r.get(kType), &j->type)) {
    return r.Error(kType, fmt::format("expected training, fine-tuning, evaluation, "
                                      "batch-inference, service or experiment, got '{}'",
                                      r.get(kType)));
  }
  ARBITER_RETURN_IF_ERROR(r.Name(kPriorityClass, &j->priority_class));
  int64_t tasks = 0;
  int64_t gpus = 0;
  int64_t milli = 0;
  ARBITER_RETURN_IF_ERROR(r.Int(kTasks, 1, kMaxTasks, &tasks, false));
  ARBITER_RETURN_IF_ERROR(r.Int(kGpusPerTask, 0, kMaxGpusPerTask, &gpus, false));
  ARBITER_RETURN_IF_ERROR(r.Int(kGpuMilli, 0, kMilliPerGpu, &milli, false));
  if (gpus == 0 && milli != 0) {
    return r.Error(kGpuMilli, fmt::format("must be 0 without GPUs, got {}", milli));
  }
  if (gpus > 0 && milli == 0) return r.Error(kGpuMilli, "must be 1 to 1000 with GPUs, got 0");
  if (gpus > 1 && milli < kMilliPerGpu) {
    return r.Error(kGpuMilli,
                   fmt::format("below 1000 only for one GPU per task, got {} with gpus_per_task {}",
                               milli, gpus));
  }
  j->tasks = static_cast<int32_t>(tasks);
  j->resources.gpus = static_cast<int32_t>(gpus);
  j->resources.gpu_milli = gpus > 0 ? static_cast<int32_t>(milli) : int32_t{kMilliPerGpu};
  const std::string_view models = r.get(kGpuModels);
  if (!models.empty()) {
    for (std::string_view m : SplitFields(models, '|')) {
      if (!IsModelName(m)) {
        return r.Error(kGpuModels, fmt::format("'{}' is not a GPU model name in '{}'", m, models));
      }
      if (std::find(j->gpu_models.begin(), j->gpu_models.end(), m) != j->gpu_models.end()) {
        return r.Error(kGpuModels, fmt::format("'{}' is listed twice in '{}'", m, models));
      }
      j->gpu_models.emplace_back(m);
    }
    if (gpus == 0) return r.Error(kGpuModels, "only for jobs with GPUs");
  }
  ARBITER_RETURN_IF_ERROR(r.Int(kWalltime, 0, kMaxWalltime, &j->walltime, true));
  ARBITER_RETURN_IF_ERROR(r.Int(kCpuMilli, 0, kMaxSeconds, &j->resources.cpu_milli, true));
  ARBITER_RETURN_IF_ERROR(r.Int(kMemoryMib, 0, kMaxSeconds, &j->resources.memory_mib, true));
  j->name = std::string(r.get(kName));
  if (j->name.empty()) j->name = fmt::format("job-{}", row_number);
  return Status::Ok();
}

// Maps the header's names to columns; errors name the header's column.
Status ParseHeader(std::string_view text, std::string_view file, size_t line,
                   std::vector<std::string>* names, std::vector<int>* position) {
  const std::vector<std::string_view>& known = TraceColumns();
  position->assign(kNumColumns, -1);
  const std::vector<std::string_view> fields = SplitFields(text, ',');
  for (size_t i = 0; i < fields.size(); ++i) {
    names->emplace_back(fields[i]);
    auto it = std::find(known.begin(), known.end(), fields[i]);
    const std::string where = fmt::format("{}:{}:{}", file, line, i + 1);
    if (it == known.end()) {
      return InvalidArgument(where, fmt::format("unknown column '{}'; the columns are {}",
                                                fields[i], fmt::join(known, ", ")));
    }
    const auto c = static_cast<size_t>(it - known.begin());
    if ((*position)[c] >= 0) {
      return InvalidArgument(where, fmt::format("column '{}' appears twice", fields[i]));
    }
    (*position)[c] = static_cast<int>(i);
  }
  for (int c = 0; c < kFirstOptional; ++c) {
    if ((*position)[static_cast<size_t>(c)] < 0) {
      return InvalidArgument(
          fmt::format("{}:{}:1", file, line),
          fmt::format("the header lacks the required column '{}'", known[static_cast<size_t>(c)]));
    }
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string_view>& TraceColumns() {
  static const std::vector<std::string_view> kColumns = {
      "submit_time",    "duration",  "tenant",        "queue",     "type",
      "priority_class", "tasks",     "gpus_per_task", "gpu_milli", "gpu_models",
      "walltime",       "cpu_milli", "memory_mib",    "name"};
  return kColumns;
}

std::string Trace::Where(const TraceJob& job, std::string_view column) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == column) return fmt::format("{}:{}:{}", file, job.line, i + 1);
  }
  return fmt::format("{}:{}", file, job.line);
}

Result<Trace> ParseTrace(std::string_view text, std::string_view file) {
  Trace trace;
  trace.file = std::string(file);
  std::vector<int> position;
  NameRegistry names;
  bool have_header = false;
  size_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (line == 1 && l.substr(0, 3) == "\xEF\xBB\xBF") l.remove_prefix(3);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty() || l.front() == '#') continue;
    if (!have_header) {
      ARBITER_RETURN_IF_ERROR(ParseHeader(l, file, line, &trace.columns, &position));
      have_header = true;
      continue;
    }
    Row r{file, line, SplitFields(l, ','), &position, &trace.columns};
    if (r.fields.size() != trace.columns.size()) {
      return InvalidArgument(fmt::format("{}:{}:1", file, line),
                             fmt::format("expected {} comma-separated columns, got {} in '{}'",
                                         trace.columns.size(), r.fields.size(), l));
    }
    for (size_t i = 0; i < r.fields.size(); ++i) {
      if (r.fields[i].find('"') != std::string_view::npos) {
        return InvalidArgument(fmt::format("{}:{}:{}", file, line, i + 1),
                               fmt::format("{}: quoted fields are not supported, got '{}'",
                                           trace.columns[i], r.fields[i]));
      }
    }
    TraceJob j;
    ARBITER_RETURN_IF_ERROR(ParseRow(r, trace.jobs.size() + 1, &j));
    ARBITER_RETURN_IF_ERROR(names.Add(r, j));
    trace.jobs.push_back(std::move(j));
  }
  if (!have_header) {
    return InvalidArgument(fmt::format("{}:1:1", file),
                           fmt::format("empty file: expected a header naming the columns {}",
                                       fmt::join(TraceColumns(), ",")));
  }
  return trace;
}

Result<Trace> LoadTrace(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseTrace(*text, path);
}

std::string FormatTrace(const std::vector<TraceJob>& jobs) {
  std::string out = fmt::format("{}\n", fmt::join(TraceColumns(), ","));
  for (const TraceJob& j : jobs) {
    const TaskResources& r = j.resources;
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                   j.submit_time, j.duration, j.tenant, j.queue, JobTypeName(j.type),
                   j.priority_class, j.tasks, r.gpus, r.gpus > 0 ? r.gpu_milli : 0,
                   fmt::join(j.gpu_models, "|"), j.walltime, r.cpu_milli, r.memory_mib, j.name);
  }
  return out;
}

void JitterArrivals(std::vector<TraceJob>* jobs, double seconds, uint64_t seed) {
  if (!(seconds > 0)) return;
  Rng rng(seed ^ 0x6a09e667f3bcc908ULL);  // apart from the policies' draws of the same seed
  for (TraceJob& j : *jobs) {
    j.submit_time += static_cast<int64_t>(rng.UniformDouble() * seconds);
  }
}

}  // namespace arbiter::sim

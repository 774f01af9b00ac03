#include "sim/openb.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "sim/text.h"

namespace arbiter::sim {

namespace {

constexpr std::string_view kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model";
constexpr std::string_view kPodHeaderLong =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time";
constexpr std::string_view kPodHeaderShort = "name,cpu_milli,memory_mib,num_gpu,gpu_milli";
constexpr int64_t kMaxGpusPerTask = 64;
constexpr int64_t kMaxGpusPerNode = 256;

// One data row split into fields, with where it came from for errors.
struct Row {
  std::string_view file;
  size_t line = 0;
  std::vector<std::string_view> fields;
  const std::vector<std::string_view>* names = nullptr;

  Status Error(size_t col, const std::string& message) const {
    return InvalidArgument(fmt::format("{}:{}:{}", file, line, col + 1),
                           fmt::format("{}: {}", (*names)[col], message));
  }
  // A whole number in [lo, hi] in column `col`; `allow_empty` gives `empty_value` for "".
  Status Int(size_t col, int64_t lo, int64_t hi, int64_t* out, bool allow_empty = false,
             int64_t empty_value = -1) const {
    const std::string_view f = fields[col];
    if (f.empty() && allow_empty) {
      *out = empty_value;
      return Status::Ok();
    }
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
    if (ec != std::errc() || end != f.data() + f.size() || v < lo || v > hi) {
      return Error(col, fmt::format("expected a whole number from {} to {}, got '{}'", lo, hi, f));
    }
    *out = v;
    return Status::Ok();
  }
};

// Calls row(line_number, fields) for every non-empty line after the header; `header` gets the
// header line. Stops at the first error.
template <typename F>
Status ForEachLine(std::string_view text, std::string_view* header, F&& row) {
  size_t line = 0;
  size_t pos = 0;
  bool have_header = false;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty()) continue;
    if (!have_header) {
      if (line == 1 && l.size() >= 3 && l.substr(0, 3) == "\xEF\xBB\xBF") l.remove_prefix(3);
      *header = l;
      have_header = true;
      continue;
    }
    ARBITER_RETURN_IF_ERROR(row(line, l));
  }
  return Status::Ok();
}

Status CheckFieldCount(const Row& r, std::string_view raw) {
  if (r.fields.size() == r.names->size()) return Status::Ok();
  return InvalidArgument(fmt::format("{}:{}:1", r.file, r.line),
                         fmt::format("expected {} comma-separated columns, got {} in '{}'",
                                     r.names->size(), r.fields.size(), raw));
}

}  // namespace

int64_t TraceGpuMemoryMib(std::string_view model) {
  if (model == "V100M32") return 32768;
  if (model == "A10") return 24576;
  if (model == "G2") return 32768;
  if (model == "G3") return 81920;
  return 16384;  // P100, T4, V100M16, G1 and unknown names
}

Result<TraceCluster> ParseOpenbNodes(std::string_view text, std::string_view file) {
  static const std::vector<std::string_view> kNames = SplitFields(kNodeHeader, ',');
  TraceCluster out;
  std::unordered_set<std::string> seen;
  std::string_view header;
  Status st = ForEachLine(text, &header, [&](size_t line, std::string_view raw) -> Status {
    if (header != kNodeHeader) {
      return InvalidArgument(
          fmt::format("{}:1:1", file),
          fmt::format("expected the header '{}', got '{}'", kNodeHeader, header));
    }
    Row r{file, line, SplitFields(raw, ','), &kNames};
    ARBITER_RETURN_IF_ERROR(CheckFieldCount(r, raw));
    Node n;
    n.name = std::string(r.fields[0]);
    if (!IsValidHostName(n.name)) return r.Error(0, fmt::format("'{}' is not a node name", n.name));
    if (!seen.insert(n.name).second) return r.Error(0, fmt::format("duplicate node '{}'", n.name));
    int64_t gpus = 0;
    ARBITER_RETURN_IF_ERROR(r.Int(1, 0, int64_t{1} << 40, &n.cpu_milli));
    ARBITER_RETURN_IF_ERROR(r.Int(2, 0, int64_t{1} << 40, &n.memory_mib));
    ARBITER_RETURN_IF_ERROR(r.Int(3, 0, kMaxGpusPerNode, &gpus));
    const std::string model(r.fields[4]);
    if (gpus > 0 && model.empty()) return r.Error(4, "a node with GPUs needs a GPU model");
    if (gpus == 0 && !model.empty()) {
      return r.Error(4, fmt::format("a node without GPUs has no GPU model, got '{}'", model));
    }
    if (gpus > 0) {
      bool known = false;
      for (const GpuModel& m : out.models) known = known || m.name == model;
      if (!known) out.models.push_back({model, TraceGpuMemoryMib(model), 0});
    }
    for (int32_t g = 0; g < gpus; ++g)
      n.gpus.push_back({g, model, TraceGpuMemoryMib(model), true, 0});
    out.nodes.push_back(std::move(n));
    return Status::Ok();
  });
  ARBITER_RETURN_IF_ERROR(st);
  if (header.empty()) {
    return InvalidArgument(fmt::format("{}:1:1", file),
                           fmt::format("empty file: expected the header '{}'", kNodeHeader));
  }
  if (header != kNodeHeader) {
    return InvalidArgument(fmt::format("{}:1:1", file),
                           fmt::format("expected the header '{}', got '{}'", kNodeHeader, header));
  }
  return out;
}

Result<std::vector<TraceTask>> ParseOpenbPods(std::string_view text, std::string_view file) {
  static const std::vector<std::string_view> kLong = SplitFields(kPodHeaderLong, ',');
  static const std::vector<std::string_view> kShort = SplitFields(kPodHeaderShort, ',');
  std::vector<TraceTask> out;
  std::string_view header;
  auto bad_header = [&]() {
    return InvalidArgument(fmt::format("{}:1:1", file),
                           fmt::format("expected the header '{}' or '{}', got '{}'", kPodHeaderLong,
                                       kPodHeaderShort, header));
  };
  Status st = ForEachLine(text, &header, [&](size_t line, std::string_view raw) -> Status {
    const bool is_long = header == kPodHeaderLong;
    if (!is_long && header != kPodHeaderShort) return bad_header();
    Row r{file, line, SplitFields(raw, ','), is_long ? &kLong : &kShort};
    ARBITER_RETURN_IF_ERROR(CheckFieldCount(r, raw));
    TraceTask t;
    t.name = std::string(r.fields[0]);
    if (t.name.empty()) return r.Error(0, "must not be empty");
    int64_t num_gpu = 0;
    int64_t gpu_milli = 0;
    ARBITER_RETURN_IF_ERROR(r.Int(1, 0, int64_t{1} << 40, &t.resources.cpu_milli));
    ARBITER_RETURN_IF_ERROR(r.Int(2, 0, int64_t{1} << 40, &t.resources.memory_mib));
    ARBITER_RETURN_IF_ERROR(r.Int(3, 0, kMaxGpusPerTask, &num_gpu));
    ARBITER_RETURN_IF_ERROR(r.Int(4, 0, kMilliPerGpu, &gpu_milli));
    if (num_gpu == 0 && gpu_milli != 0) {
      return r.Error(4, fmt::format("must be 0 for a task without GPUs, got {}", gpu_milli));
    }
    if (num_gpu > 0 && gpu_milli == 0) return r.Error(4, "must be above 0 for a task with GPUs");
    if (num_gpu > 1 && gpu_milli < kMilliPerGpu) {
      return r.Error(4, fmt::format("below 1000 only for one GPU, got {} with num_gpu {}",
                                    gpu_milli, num_gpu));
    }
    t.resources.gpus = static_cast<int32_t>(num_gpu);
    t.resources.gpu_milli = num_gpu > 0 ? static_cast<int32_t>(gpu_milli) : kMilliPerGpu;
    if (is_long) {
      t.gpu_spec = std::string(r.fields[5]);
      for (std::string_view m : SplitFields(r.fields[5], '|')) {
        if (m.empty()) continue;
        if (std::find(t.gpu_models.begin(), t.gpu_models.end(), m) == t.gpu_models.end()) {
          t.gpu_models.emplace_back(m);
        }
      }
      t.qos = std::string(r.fields[6]);
      ARBITER_RETURN_IF_ERROR(r.Int(8, 0, int64_t{1} << 40, &t.creation_time, true));
      ARBITER_RETURN_IF_ERROR(r.Int(9, 0, int64_t{1} << 40, &t.deletion_time, true));
      ARBITER_RETURN_IF_ERROR(r.Int(10, 0, int64_t{1} << 40, &t.scheduled_time, true));
    }
    out.push_back(std::move(t));
    return Status::Ok();
  });
  ARBITER_RETURN_IF_ERROR(st);
  if (header != kPodHeaderLong && header != kPodHeaderShort) return bad_header();
  return out;
}

Result<TraceCluster> LoadOpenbNodes(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbNodes(*text, path);
}

Result<std::vector<TraceTask>> LoadOpenbPods(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseOpenbPods(*text, path);
}

}  // namespace arbiter::sim

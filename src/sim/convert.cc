#include "sim/convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/rng.h"
#include "sim/text.h"

namespace arbiter::sim {

namespace {

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

bool IsOnline(const std::string& qos) { return qos == "LS" || qos == "Guaranteed"; }

// An exponential draw with the given mean, rounded down to whole seconds.
int64_t Exponential(Rng& rng, double mean) {
  const double u = rng.UniformDouble();  // [0, 1)
  return static_cast<int64_t>(std::floor(-mean * std::log1p(-u)));
}

}  // namespace

std::string PriorityClassForQos(const std::string& qos) {
  if (qos == "LS") return "critical";
  if (qos == "Guaranteed") return "high";
  if (qos == "BE") return "best-effort";
  return "normal";  // Burstable, and pod lists without qos
}

JobType JobTypeForQos(const std::string& qos) {
  if (qos == "LS") return JobType::kService;
  if (qos == "Burstable") return JobType::kBatchInference;
  if (qos == "BE") return JobType::kExperiment;
  return JobType::kTraining;  // Guaranteed, and pod lists without qos
}

Result<std::vector<TraceJob>> ConvertOpenbPods(const std::vector<TraceTask>& pods,
                                               const ConvertOptions& o) {
  if (o.tenants < 1 || o.tenants > 1000) {
    return InvalidArgument("tenants", fmt::format("must be 1 to 1000, got {}", o.tenants));
  }
  if (!(o.time_scale > 0) || o.time_scale > 1e6) {
    return InvalidArgument("time_scale", fmt::format("must be above 0, got {}", o.time_scale));
  }
  if (!(o.interarrival >= 0) || !(o.mean_duration > 0)) {
    return InvalidArgument("interarrival",
                           "the mean inter-arrival time must be >= 0 and the mean duration > 0");
  }
  size_t timed = 0;
  int64_t first = std::numeric_limits<int64_t>::max();
  int64_t last = 0;
  for (const TraceTask& p : pods) {
    if (p.creation_time < 0) continue;
    ++timed;
    first = std::min(first, p.creation_time);
    last = std::max({last, p.creation_time, p.deletion_time});
  }
  if (timed != 0 && timed != pods.size()) {
    for (const TraceTask& p : pods) {
      if (p.creation_time < 0) {
        return InvalidArgument(
            "creation_time",
            fmt::format("pod '{}' has no creation_time while {} other pods have one", p.name,
                        timed));
      }
    }
  }
  Rng rng(o.seed);
  int64_t clock = 0;
  std::vector<TraceJob> jobs;
  jobs.reserve(pods.size());
  for (const TraceTask& p : pods) {
    TraceJob j;
    j.name = p.name;
    if (timed > 0) {
      j.submit_time = static_cast<int64_t>(
          std::floor(static_cast<double>(p.creation_time - first) * o.time_scale));
      const int64_t end = p.deletion_time >= 0 ? p.deletion_time : last;
      j.duration = std::max<int64_t>(0, end - p.creation_time);
    } else {
      // Draw the arrival first, then the duration, pod after pod: the sequence is fixed by the
      // seed and the file order.
      clock += Exponential(rng, o.interarrival);
      j.submit_time = clock;
      j.duration = std::max<int64_t>(1, Exponential(rng, o.mean_duration));
    }
    const uint64_t k = Fnv1a(p.name) % static_cast<uint64_t>(o.tenants);
    j.tenant = fmt::format("tenant-{}", k);
    j.queue = fmt::format("{}-{}", j.tenant, IsOnline(p.qos) ? "online" : "batch");
    j.type = JobTypeForQos(p.qos);
    j.priority_class = PriorityClassForQos(p.qos);
    j.tasks = 1;
    j.resources = p.resources;
    j.gpu_models = p.gpu_models;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

int RunConvertCommand(const ConvertCommandOptions& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "arbiter simulate convert: %s\n", st.ToString().c_str());
    return 2;
  };
  auto pods = LoadOpenbPods(o.pods_path);
  if (!pods.ok()) return fail(pods.status());
  auto jobs = ConvertOpenbPods(*pods, o.convert);
  if (!jobs.ok()) return fail(jobs.status());
  const std::string text = FormatTrace(*jobs);
  if (o.out_path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  if (Status st = WriteTextFile(o.out_path, text, "trace"); !st.ok()) return fail(st);
  std::fprintf(stderr, "convert: %zu jobs from %s to %s\n", jobs->size(), o.pods_path.c_str(),
               o.out_path.c_str());
  return 0;
}

}  // namespace arbiter::sim

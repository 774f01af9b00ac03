#include "sim/replay_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>

#include "api/config_codec.h"
#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "sim/inflate_command.h"
#include "sim/openb.h"
#include "sim/replay_html.h"
#include "sim/spread.h"
#include "sim/text.h"

namespace arbiter::sim {

namespace {

std::string Stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// One row of the table: a label and a cell per report.
struct TableRow {
  std::string label;
  std::vector<std::string> cells;
};

void AddRow(std::vector<TableRow>* rows, const std::vector<ReplayReport>& reports,
            std::string label, const std::function<std::string(const ReplayReport&)>& cell) {
  TableRow row{std::move(label), {}};
  for (const ReplayReport& r : reports) row.cells.push_back(cell(r));
  rows->push_back(std::move(row));
}

std::string Num(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

std::string Quartet(const Stats& s) {
  return fmt::format("{:.0f} / {:.0f} / {:.0f} / {:.0f}", s.p50, s.p95, s.p99, s.max);
}

// Rows of one breakdown (by queue or by type): the groups are the same in every report.
template <typename Group, typename F>
void AddGroupRows(std::vector<TableRow>* rows, const std::vector<ReplayReport>& reports,
                  const std::vector<Group> ReplayReport::*groups, F&& cell) {
  if (reports.empty()) return;
  const std::vector<Group>& first = reports.front().*groups;
  for (size_t g = 0; g < first.size(); ++g) {
    AddRow(rows, reports, "  " + first[g].name,
           [&](const ReplayReport& r) { return cell((r.*groups)[g]); });
  }
}

std::string Render(const std::vector<TableRow>& rows, const std::vector<ReplayReport>& reports) {
  size_t label_width = 0;
  std::vector<size_t> widths(reports.size(), 0);
  for (size_t i = 0; i < reports.size(); ++i) widths[i] = reports[i].policy.size();
  for (const TableRow& row : rows) {
    if (row.cells.empty()) continue;  // a heading stands alone
    label_width = std::max(label_width, row.label.size());
    for (size_t i = 0; i < row.cells.size(); ++i) {
      widths[i] = std::max(widths[i], row.cells[i].size());
    }
  }
  std::string out = fmt::format("{:<{}}", "", label_width);
  for (size_t i = 0; i < reports.size(); ++i) {
    out += fmt::format("  {:>{}}", reports[i].policy, widths[i]);
  }
  out += "\n";
  for (const TableRow& row : rows) {
    if (row.cells.empty()) {
      out += row.label + "\n";
      continue;
    }
    out += fmt::format("{:<{}}", row.label, label_width);
    for (size_t i = 0; i < row.cells.size(); ++i) {
      out += fmt::format("  {:>{}}", row.cells[i], widths[i]);
    }
    out += "\n";
  }
  return out;
}

// The cluster: an openb node list, or the configuration's nodes.
Result<core::Cluster> BuildCluster(const ReplayCommandOptions& o,
                                   const api::ClusterConfig& config) {
  if (!o.nodes_path.empty() && !config.nodes.empty()) {
    return InvalidArgument("nodes", fmt::format("{} has nodes and --nodes is given: give the "
                                                "nodes once",
                                                o.config_path));
  }
  if (o.nodes_path.empty()) {
    if (config.nodes.empty()) {
      return InvalidArgument("nodes", "give --nodes NODES.csv or a --config with nodes");
    }
    return core::Cluster::Build(config.gpu_models, config.nodes);
  }
  auto nodes = LoadOpenbNodes(o.nodes_path);
  if (!nodes.ok()) return nodes.status();
  return core::Cluster::Build(nodes->models, nodes->nodes);
}

Result<api::ClusterConfig> LoadConfig(const std::string& path) {
  if (path.empty()) return api::ClusterConfig{};
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto parsed = api::ParseConfigYaml(*text);
  if (!parsed.ok()) {
    const Status& st = parsed.status();
    return InvalidArgument(st.field().empty() ? path : fmt::format("{}: {}", path, st.field()),
                           st.message());
  }
  return std::move(*parsed);
}

// The services of every --services file and the request traces of --requests.
struct LoadedServices {
  std::vector<ServiceSpec> specs;
  std::vector<std::vector<TraceRequest>> requests;
};

Result<LoadedServices> LoadServices(const ReplayCommandOptions& o) {
  LoadedServices out;
  if (o.services_paths.empty()) {
    if (!o.requests_paths.empty()) {
      return InvalidArgument("requests", "--requests needs --services");
    }
    if (o.static_replicas >= 0) {
      return InvalidArgument("static-replicas", "--static-replicas needs --services");
    }
    return out;
  }
  if (!(o.requests.compress > 0)) {
    return InvalidArgument("requests-compress", "must be > 0");
  }
  if (o.requests.prefill_ms_per_token < 0 || o.requests.decode_ms_per_token < 0) {
    return InvalidArgument("prefill-ms-per-token", "the per-token times must be >= 0");
  }
  if (o.replica_startup_seconds < 0) {
    return InvalidArgument("replica-startup", "must be >= 0");
  }
  for (const std::string& p : o.services_paths) {
    auto specs = LoadServiceSpecs(p);
    if (!specs.ok()) return specs.status();
    for (ServiceSpec& s : *specs) {
      for (const ServiceSpec& seen : out.specs) {
        if (seen.name == s.name) {
          return InvalidArgument(fmt::format("{}: name", p),
                                 fmt::format("service '{}' is given twice", s.name));
        }
      }
      out.specs.push_back(std::move(s));
    }
  }
  if (o.requests_paths.size() > 1 && o.requests_paths.size() != out.specs.size()) {
    return InvalidArgument("requests",
                           fmt::format("{} --requests files for {} services: give one for all, "
                                       "or one per service in order",
                                       o.requests_paths.size(), out.specs.size()));
  }
  for (const std::string& p : o.requests_paths) {
    auto r = LoadAzureRequests(p);
    if (!r.ok()) return r.status();
    out.requests.push_back(std::move(*r));
  }
  return out;
}

// A pod list converted with the replay's seed.
Result<Trace> ConvertReplayPods(const ReplayCommandOptions& o) {
  auto pods = LoadOpenbPods(o.pods_path);
  if (!pods.ok()) return pods.status();
  ConvertOptions convert = o.convert;
  convert.seed = o.seed;
  auto jobs = ConvertOpenbPods(*pods, convert);
  if (!jobs.ok()) return jobs.status();
  Trace trace;
  trace.file = o.pods_path;  // no columns: errors name the pod's line
  trace.jobs = std::move(*jobs);
  for (size_t i = 0; i < trace.jobs.size(); ++i) trace.jobs[i].line = i + 2;
  return trace;
}

// The trace: Arbiter's format, or a pod list converted with the replay's seed; its arrivals
// jittered with that seed when asked.
Result<Trace> LoadReplayTrace(const ReplayCommandOptions& o) {
  Result<Trace> trace = o.trace_path.empty() ? ConvertReplayPods(o) : LoadTrace(o.trace_path);
  if (trace.ok()) JitterArrivals(&trace->jobs, o.arrival_jitter_seconds, o.seed);
  return trace;
}

Result<std::vector<core::Profile>> BuildProfiles(const std::vector<std::string>& names) {
  std::vector<core::Profile> profiles;
  for (const std::string& name : names) {
    auto spec = core::Profile::Named(name);
    if (!spec.ok()) return spec.status();
    auto profile = core::Profile::Build(*spec);
    if (!profile.ok()) return profile.status();
    profiles.push_back(std::move(*profile));
  }
  return profiles;
}

// One policy's replay, with progress on stderr at most every 2 s of wall time.
ReplayReport RunPolicy(const ReplayWorkload& workload, const core::Profile& profile,
                       const std::string& policy, ReplayOptions ro) {
  const auto t0 = std::chrono::steady_clock::now();
  auto last_print = t0;
  ro.progress = [&](const ReplayProgress& pr) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_print < std::chrono::seconds(2)) return;
    last_print = now;
    std::fprintf(stderr,
                 "replay: %s: virtual time %.1f h, %lld cycles, %lld of %lld jobs ended, %zu "
                 "pending, %zu running\n",
                 policy.c_str(), static_cast<double>(pr.now) / 3.6e6,
                 static_cast<long long>(pr.cycles), static_cast<long long>(pr.ended),
                 static_cast<long long>(pr.total), pr.pending, pr.running);
  };
  ReplayReport r = RunReplay(workload, profile, policy, ro);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "replay: %s: %lld completed, %lld timed out, %lld dropped, %lld unfinished; "
               "%lld cycles in %.2f s\n",
               policy.c_str(), static_cast<long long>(r.completed),
               static_cast<long long>(r.timed_out), static_cast<long long>(r.dropped),
               static_cast<long long>(r.unfinished), static_cast<long long>(r.cycles),
               r.wall_seconds);
  return r;
}

// Per service: requests against the SLO, latency, replicas, scale-up and reclaim, GPU-hours.
void AddServiceRows(std::vector<TableRow>* rows, const std::vector<ReplayReport>& reports) {
  if (reports.empty()) return;
  const size_t n = reports.front().services.size();
  for (size_t k = 0; k < n; ++k) {
    auto add = [&](std::string label, const std::function<std::string(const ServiceReport&)>& f) {
      AddRow(rows, reports, "  " + std::move(label), [&](const ReplayReport& r) {
        return k < r.services.size() ? f(r.services[k]) : std::string("-");
      });
    };
    const ServiceReport& first = reports.front().services[k];
    rows->push_back({fmt::format("service {} (queue {}, SLO: first token within {} ms)", first.name,
                                 first.queue, first.slo_latency_ms),
                     {}});
    add("replicas", [](const ServiceReport& s) { return s.scaling; });
    add("requests / within the SLO (%)", [](const ServiceReport& s) {
      return fmt::format("{} / {:.2f}", s.requests, s.within_slo_pct);
    });
    add("timed out / rejected / waiting at the end", [](const ServiceReport& s) {
      return fmt::format("{} / {} / {}", s.timed_out, s.rejected, s.waiting_at_end);
    });
    add("wait p50 / p99 (s)", [](const ServiceReport& s) {
      return fmt::format("{:.2f} / {:.2f}", s.wait.p50, s.wait.p99);
    });
    add("latency p50 / p99 (s)", [](const ServiceReport& s) {
      return fmt::format("{:.2f} / {:.2f}", s.latency.p50, s.latency.p99);
    });
    add("ready replicas min / avg / max", [](const ServiceReport& s) {
      return fmt::format("{} / {:.2f} / {}", s.ready_min, s.ready_avg, s.ready_max);
    });
    add("scale-ups / downs",
        [](const ServiceReport& s) { return fmt::format("{} / {}", s.scale_ups, s.scale_downs); });
    add("decision to ready p50 / p99 (s)", [](const ServiceReport& s) {
      return fmt::format("{:.0f} / {:.0f}", s.scale_up.p50, s.scale_up.p99);
    });
    add("reclaims (victims), p50 / p99 (s)", [](const ServiceReport& s) {
      return fmt::format("{} ({}), {:.0f} / {:.0f}", s.reclaim.count, s.reclaim_victims,
                         s.reclaim.p50, s.reclaim.p99);
    });
    add("GPU-hours held", [](const ServiceReport& s) { return Num(s.gpu_hours, 1); });
  }
}

}  // namespace

std::string FormatReplayTable(const std::vector<ReplayReport>& reports) {
  std::vector<TableRow> rows;
  auto add = [&](std::string label, const std::function<std::string(const ReplayReport&)>& f) {
    AddRow(&rows, reports, std::move(label), f);
  };
  auto heading = [&](std::string label) { rows.push_back({std::move(label), {}}); };
  add("jobs", [](const ReplayReport& r) { return fmt::format("{}", r.jobs); });
  add("completed", [](const ReplayReport& r) { return fmt::format("{}", r.completed); });
  add("timed out", [](const ReplayReport& r) { return fmt::format("{}", r.timed_out); });
  add("dropped", [](const ReplayReport& r) { return fmt::format("{}", r.dropped); });
  add("unfinished", [](const ReplayReport& r) { return fmt::format("{}", r.unfinished); });
  add("jobs that waited", [](const ReplayReport& r) { return fmt::format("{}", r.jobs_waited); });
  add("wait p50 / p95 / p99 / max (s)", [](const ReplayReport& r) { return Quartet(r.wait); });
  add("JCT p50 / p95 / p99 / max (s)", [](const ReplayReport& r) { return Quartet(r.jct); });
  add("GPU allocation, time-averaged (%)",
      [](const ReplayReport& r) { return Num(r.gpu_alloc_pct, 2); });
  add("GPU allocation while work queued or arriving (%), over (h)", [](const ReplayReport& r) {
    return fmt::format("{} over {}", Num(r.gpu_alloc_busy_pct, 2), Num(r.busy_hours, 2));
  });
  add("GPU allocation per day (%): first / min / max", [](const ReplayReport& r) {
    if (r.gpu_alloc_daily_pct.empty()) return std::string("-");
    const auto [lo, hi] =
        std::minmax_element(r.gpu_alloc_daily_pct.begin(), r.gpu_alloc_daily_pct.end());
    return fmt::format("{} / {} / {}", Num(r.gpu_alloc_daily_pct.front(), 2), Num(*lo, 2),
                       Num(*hi, 2));
  });
  add("idle GPU-hours while jobs waited",
      [](const ReplayReport& r) { return Num(r.gpu_hours_idle_while_waiting, 1); });
  add("preemptions (priority / reclaim / anywhere)", [](const ReplayReport& r) {
    return fmt::format("{} ({} / {} / {})", r.preemptions, r.preemptions_by_reason[0],
                       r.preemptions_by_reason[1], r.preemptions_by_reason[2]);
  });
  add("GPU-hours lost to preemption",
      [](const ReplayReport& r) { return Num(r.gpu_hours_lost_to_preemption, 1); });
  add("makespan (h)", [](const ReplayReport& r) { return Num(r.makespan_seconds / 3600.0, 2); });
  add("Jain's index, makespan / while waiting", [](const ReplayReport& r) {
    return fmt::format("{:.3f} / {:.3f}", r.jain, r.jain_while_waiting);
  });
  if (!reports.empty() && !reports.front().services.empty()) {
    add("GPU-hours of the trace's jobs",
        [](const ReplayReport& r) { return Num(r.gpu_hours_jobs, 1); });
  }
  add("cycles", [](const ReplayReport& r) { return fmt::format("{}", r.cycles); });
  add("wall time (s)", [](const ReplayReport& r) { return Num(r.wall_seconds, 2); });
  heading("wait by queue, p50 / p95 / p99 / max (s)");
  AddGroupRows(&rows, reports, &ReplayReport::queues,
               [](const QueueReport& q) { return Quartet(q.wait); });
  heading("wait by job type, p50 / p95 / p99 / max (s)");
  AddGroupRows(&rows, reports, &ReplayReport::types,
               [](const GroupReport& g) { return Quartet(g.wait); });
  heading("JCT by job type, p50 / p95 / p99 / max (s)");
  AddGroupRows(&rows, reports, &ReplayReport::types,
               [](const GroupReport& g) { return Quartet(g.jct); });
  heading("GPU share by queue, overall / while waiting / entitled (%)");
  AddGroupRows(&rows, reports, &ReplayReport::queues, [](const QueueReport& q) {
    return fmt::format("{:.2f} / {:.2f} / {:.2f}", q.gpu_share_pct, q.share_while_waiting_pct,
                       q.entitlement_pct);
  });
  AddServiceRows(&rows, reports);
  std::string out = Render(rows, reports);
  for (const ReplayReport& r : reports) {
    if (r.dropped_jobs.empty()) continue;
    std::map<std::string, int64_t> reasons;
    for (const EndedJob& j : r.dropped_jobs) ++reasons[j.reason];
    out += fmt::format("dropped by {} ({} jobs):\n", r.policy, r.dropped);
    for (const auto& [reason, count] : reasons) out += fmt::format("  {} x {}\n", count, reason);
  }
  if (!reports.empty()) {
    for (const ServiceReport& s : reports.front().services) {
      out += fmt::format("service {}: its queue {}\n", s.name, s.lending);
    }
    for (const ReplayReport& r : reports) {
      for (const ServiceReport& s : r.services) {
        if (!s.note.empty()) {
          out +=
              fmt::format("service {} under {}: no replica placed: {}\n", s.name, r.policy, s.note);
        }
      }
    }
  }
  return out;
}

std::string ReplayCommandLine(const ReplayCommandOptions& o) {
  std::string cmd = "arbiter simulate replay";
  if (!o.nodes_path.empty()) cmd += fmt::format(" --nodes {}", o.nodes_path);
  if (!o.config_path.empty()) cmd += fmt::format(" --config {}", o.config_path);
  if (!o.trace_path.empty()) cmd += fmt::format(" --trace {}", o.trace_path);
  if (!o.pods_path.empty()) {
    cmd += fmt::format(
        " --pods {} --tenants {} --time-scale {} --interarrival {} --mean-duration {}", o.pods_path,
        o.convert.tenants, o.convert.time_scale, o.convert.interarrival, o.convert.mean_duration);
  }
  for (const std::string& p : o.policies) cmd += fmt::format(" --policy {}", p);
  cmd += o.seeds.empty() ? fmt::format(" --seed {}", o.seed) : fmt::format(" --seeds {}", o.seeds);
  if (o.arrival_jitter_seconds > 0) {
    cmd += fmt::format(" --arrival-jitter {}", o.arrival_jitter_seconds);
  }
  cmd += fmt::format(" --cycle-interval {} --runtime-estimates {}", o.cycle_interval_seconds,
                     o.runtime_estimates);
  if (o.time_limit_seconds > 0) cmd += fmt::format(" --time-limit {}", o.time_limit_seconds);
  if (o.no_preemption) cmd += " --no-preemption";
  for (const std::string& p : o.services_paths) cmd += fmt::format(" --services {}", p);
  for (const std::string& p : o.requests_paths) cmd += fmt::format(" --requests {}", p);
  if (!o.services_paths.empty()) {
    cmd += fmt::format(
        " --requests-offset {} --requests-compress {} --prefill-ms-per-token {} "
        "--decode-ms-per-token {} --replica-startup {}",
        o.requests.offset_seconds, o.requests.compress, o.requests.prefill_ms_per_token,
        o.requests.decode_ms_per_token, o.replica_startup_seconds);
  }
  if (o.static_replicas >= 0) cmd += fmt::format(" --static-replicas {}", o.static_replicas);
  return cmd;
}

Result<LoadedReplay> LoadReplay(const ReplayCommandOptions& o) {
  if (o.pods_path.empty() == o.trace_path.empty()) {
    return InvalidArgument("trace", "give one of --trace TRACE.csv and --pods PODS.csv");
  }
  if (o.policies.empty()) return InvalidArgument("policy", "give at least one --policy");
  auto config = LoadConfig(o.config_path);
  if (!config.ok()) return config.status();
  auto cluster = BuildCluster(o, *config);
  if (!cluster.ok()) return cluster.status();
  auto profiles = BuildProfiles(o.policies);
  if (!profiles.ok()) return profiles.status();
  auto trace = LoadReplayTrace(o);
  if (!trace.ok()) return trace.status();
  const std::vector<PriorityClass> classes =
      config->priority_classes.empty() ? DefaultPriorityClasses() : config->priority_classes;
  std::vector<QueueSpec> specs;
  for (const api::TenantConfig& t : config->tenants) {
    specs.insert(specs.end(), t.queues.begin(), t.queues.end());
  }
  if (specs.empty()) specs = DefaultQueueTree(*trace, *cluster);
  auto tree = core::QuotaTree::Build(specs, cluster->models());
  if (!tree.ok()) return tree.status();
  LoadedReplay out;
  out.cluster = std::make_unique<core::Cluster>(std::move(*cluster));
  out.tree = std::make_unique<core::QuotaTree>(std::move(*tree));
  auto workload = CompileReplay(*trace, *out.cluster, *out.tree, classes);
  if (!workload.ok()) return workload.status();
  out.workload = std::move(*workload);
  out.profiles = std::move(*profiles);
  return out;
}

namespace {

Result<RuntimeEstimates> ParseRuntimeEstimates(std::string_view s) {
  if (s == "history") return RuntimeEstimates::kHistory;
  if (s == "none") return RuntimeEstimates::kNone;
  if (s == "oracle") return RuntimeEstimates::kOracle;
  return InvalidArgument("runtime-estimates",
                         fmt::format("expected history, none or oracle, got '{}'", s));
}

// One replay of every policy at o.seed: the reports, and their JSON objects.
Status ReplayOnce(const ReplayCommandOptions& o, std::vector<ReplayReport>* reports,
                  nlohmann::json* results) {
  auto fail = [](const Status& st) { return st; };
  auto estimates = ParseRuntimeEstimates(o.runtime_estimates);
  if (!estimates.ok()) return estimates.status();
  auto config = LoadConfig(o.config_path);
  if (!config.ok()) return fail(config.status());
  auto cluster = BuildCluster(o, *config);
  if (!cluster.ok()) return fail(cluster.status());
  auto profiles = BuildProfiles(o.policies);
  if (!profiles.ok()) return fail(profiles.status());
  auto trace = LoadReplayTrace(o);
  if (!trace.ok()) return fail(trace.status());
  auto services = LoadServices(o);
  if (!services.ok()) return fail(services.status());
  const std::vector<PriorityClass> classes =
      config->priority_classes.empty() ? DefaultPriorityClasses() : config->priority_classes;
  std::vector<QueueSpec> specs;
  for (const api::TenantConfig& t : config->tenants) {
    specs.insert(specs.end(), t.queues.begin(), t.queues.end());
  }
  if (specs.empty()) {
    specs = DefaultQueueTree(*trace, *cluster);
    AddServiceQueues(services->specs, cluster->capacity()[core::kDimGpu], &specs);
  }
  const std::vector<std::string> lending =
      ApplyReclaimDeadlines(services->specs, *trace, classes, &specs);
  auto tree = core::QuotaTree::Build(specs, cluster->models());
  if (!tree.ok()) return fail(tree.status());
  auto workload = CompileReplay(*trace, *cluster, *tree, classes);
  if (!workload.ok()) return fail(workload.status());
  const TimeMs start = workload->jobs.empty() ? 0 : workload->jobs.front().pending.submit_time;
  std::vector<std::vector<ServiceRequest>> requests;
  for (size_t i = 0; i < services->specs.size(); ++i) {
    const size_t r = services->requests.size() == 1 ? 0 : i;
    requests.push_back(r < services->requests.size()
                           ? PlaceRequests(services->requests[r], start, o.requests)
                           : std::vector<ServiceRequest>{});
  }
  const Status compiled =
      CompileServices(services->specs, std::move(requests), lending, classes, &*workload);
  if (!compiled.ok()) return fail(compiled);
  std::fprintf(stderr, "replay: %zu nodes, %lld GPUs, %zu jobs in %zu queues\n",
               cluster->num_nodes(),
               static_cast<long long>(cluster->capacity()[core::kDimGpu] / kMilliPerGpu),
               workload->jobs.size(), workload->queues.size());

  ReplayOptions ro;
  ro.seed = o.seed;
  ro.runtime_estimates = *estimates;
  ro.cycle_interval = SecondsToMs(o.cycle_interval_seconds);
  ro.time_limit = SecondsToMs(o.time_limit_seconds);
  ro.preemption = !o.no_preemption;
  ro.replica_startup = static_cast<DurationMs>(std::llround(o.replica_startup_seconds * 1000.0));
  // The runs: each policy, and with --static-replicas each policy again with static services.
  struct Arm {
    size_t profile;
    std::string label;
    int32_t static_replicas;
  };
  std::vector<Arm> arms;
  for (size_t p = 0; p < profiles->size(); ++p) {
    arms.push_back({p, o.policies[p], -1});
    if (o.static_replicas >= 0 && !workload->services.empty()) {
      arms.push_back(
          {p, fmt::format("{} static {}", o.policies[p], o.static_replicas), o.static_replicas});
    }
  }
  for (const Arm& arm : arms) {
    ro.static_replicas = arm.static_replicas;
    ReplayReport r = RunPolicy(*workload, (*profiles)[arm.profile], arm.label, ro);
    nlohmann::json j = ReplayReportJson(r);
    j["trace"] = Stem(o.trace_path.empty() ? o.pods_path : o.trace_path);
    j["nodes"] = Stem(o.nodes_path.empty() ? o.config_path : o.nodes_path);
    if (!o.config_path.empty()) j["config"] = Stem(o.config_path);
    j["cycle_interval_seconds"] = o.cycle_interval_seconds;
    j["preemption"] = !o.no_preemption;
    if (!workload->services.empty()) {
      j["static_replicas"] = arm.static_replicas;
      j["replica_startup_seconds"] = o.replica_startup_seconds;
      j["requests_model"] = {{"offset_seconds", o.requests.offset_seconds},
                             {"compress", o.requests.compress},
                             {"prefill_ms_per_token", o.requests.prefill_ms_per_token},
                             {"decode_ms_per_token", o.requests.decode_ms_per_token}};
    }
    j["runtime_estimates"] = o.runtime_estimates;
    j["wall_seconds"] = r.wall_seconds;
    results->push_back(std::move(j));
    reports->push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The figures whose spread over seeds the multi-seed table gives.
struct SpreadFigure {
  const char* key;
  const char* label;
  int digits;
  double (*get)(const ReplayReport&);
};

const std::vector<SpreadFigure>& SpreadFigures() {
  static const std::vector<SpreadFigure> kFigures = {
      {"jobs_waited", "jobs that waited", 1,
       [](const ReplayReport& r) { return static_cast<double>(r.jobs_waited); }},
      {"wait_mean_s", "wait mean (s)", 1, [](const ReplayReport& r) { return r.wait.mean; }},
      {"wait_p99_s", "wait p99 (s)", 0, [](const ReplayReport& r) { return r.wait.p99; }},
      {"wait_max_s", "wait max (s)", 0, [](const ReplayReport& r) { return r.wait.max; }},
      {"gpu_hours_idle_while_waiting", "idle GPU-hours while jobs waited", 1,
       [](const ReplayReport& r) { return r.gpu_hours_idle_while_waiting; }},
      {"gpu_alloc_busy_pct", "GPU allocation while work queued or arriving (%)", 2,
       [](const ReplayReport& r) { return r.gpu_alloc_busy_pct; }},
      {"preemptions", "preemptions", 1,
       [](const ReplayReport& r) { return static_cast<double>(r.preemptions); }},
  };
  return kFigures;
}

nlohmann::json SpreadObject(const Spread& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"sd", s.sd}, {"ci95_lo", s.lo}, {"ci95_hi", s.hi}};
}

}  // namespace

nlohmann::json ReplaySeedSpread(const std::vector<ReplayReport>& runs,
                                const std::vector<uint64_t>& seeds) {
  std::vector<std::string> labels;  // in order of first appearance
  for (const ReplayReport& r : runs) {
    if (std::find(labels.begin(), labels.end(), r.policy) == labels.end()) {
      labels.push_back(r.policy);
    }
  }
  // by_label[k][seed] = the run
  auto find = [&](const std::string& label, uint64_t seed) -> const ReplayReport* {
    for (const ReplayReport& r : runs) {
      if (r.policy == label && r.seed == seed) return &r;
    }
    return nullptr;
  };
  nlohmann::json policies = nlohmann::json::array();
  nlohmann::json differences = nlohmann::json::array();
  for (const std::string& label : labels) {
    nlohmann::json p{{"policy", label}};
    nlohmann::json used = nlohmann::json::array();
    for (uint64_t seed : seeds) {
      if (find(label, seed) != nullptr) used.push_back(seed);
    }
    p["seeds"] = used;
    for (const SpreadFigure& f : SpreadFigures()) {
      std::vector<double> v;
      for (uint64_t seed : seeds) {
        if (const ReplayReport* r = find(label, seed)) v.push_back(f.get(*r));
      }
      p[f.key] = SpreadObject(Spread::Of(v));
    }
    policies.push_back(std::move(p));
    if (label == labels.front()) continue;
    nlohmann::json d{{"policy", label}, {"from", labels.front()}};
    for (const SpreadFigure& f : SpreadFigures()) {
      std::vector<double> v;
      for (uint64_t seed : seeds) {
        const ReplayReport* a = find(label, seed);
        const ReplayReport* b = find(labels.front(), seed);
        if (a != nullptr && b != nullptr) v.push_back(f.get(*a) - f.get(*b));
      }
      d[f.key] = SpreadObject(Spread::Of(v));
    }
    differences.push_back(std::move(d));
  }
  return {{"policies", policies}, {"differences", differences}};
}

std::string FormatReplaySpread(const nlohmann::json& spread) {
  auto cell = [](const nlohmann::json& s, int digits, bool sign) {
    const int n = s["n"].get<int>();
    const char* f = sign ? "{:+.{}f}" : "{:.{}f}";
    std::string out = fmt::format(fmt::runtime(f), s["mean"].get<double>(), digits);
    if (n >= 2) {
      out += fmt::format(fmt::runtime(std::string(" [") + f + ", " + f + "]"),
                         s["ci95_lo"].get<double>(), digits, s["ci95_hi"].get<double>(), digits);
    }
    return out;
  };
  const nlohmann::json& policies = spread["policies"];
  const size_t n = policies.empty() ? 0 : policies[0]["seeds"].size();
  std::string out = fmt::format("mean over {} seed{} [95% t-interval]\n", n, n == 1 ? "" : "s");
  constexpr int kLabel = 52;
  constexpr int kColumn = 30;
  out += fmt::format("{:<{}}", "", kLabel);
  for (const nlohmann::json& p : policies) {
    out += fmt::format("{:>{}}", p["policy"].get<std::string>(), kColumn);
  }
  out += "\n";
  for (const SpreadFigure& f : SpreadFigures()) {
    out += fmt::format("{:<{}}", f.label, kLabel);
    for (const nlohmann::json& p : policies) {
      out += fmt::format("{:>{}}", cell(p[f.key], f.digits, false), kColumn);
    }
    out += "\n";
  }
  for (const nlohmann::json& d : spread["differences"]) {
    out += fmt::format("{} minus {}, paired by seed\n", d["policy"].get<std::string>(),
                       d["from"].get<std::string>());
    for (const SpreadFigure& f : SpreadFigures()) {
      out += fmt::format("  {:<{}}{:>{}}\n", f.label, kLabel - 2, cell(d[f.key], f.digits, true),
                         kColumn);
    }
  }
  return out;
}

int RunReplayCommand(const ReplayCommandOptions& o) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "arbiter simulate replay: %s\n", st.ToString().c_str());
    return 2;
  };
  if (o.pods_path.empty() == o.trace_path.empty()) {
    return fail(InvalidArgument("trace", "give one of --trace TRACE.csv and --pods PODS.csv"));
  }
  if (o.policies.empty()) return fail(InvalidArgument("policy", "give at least one --policy"));
  if (o.cycle_interval_seconds <= 0) {
    return fail(InvalidArgument("cycle-interval", "must be at least 1 second"));
  }
  std::vector<ReplayReport> reports;
  nlohmann::json results = nlohmann::json::array();
  // The report as JSON (--json FILE, or - for stdout instead of the table), and the table.
  auto emit = [&](const nlohmann::json& report, const std::function<std::string()>& table) {
    if (o.json_path == "-") {
      std::printf("%s\n", report.dump(1).c_str());
      return 0;
    }
    if (!o.json_path.empty()) {
      const Status st = WriteTextFile(o.json_path, report.dump(1) + "\n", "report");
      if (!st.ok()) return fail(st);
    }
    const std::string text = table();
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  };
  if (!o.seeds.empty()) {
    auto seeds = ParseSeeds(o.seeds);
    if (!seeds.ok()) return fail(seeds.status());
    for (uint64_t seed : *seeds) {
      ReplayCommandOptions one = o;
      one.seed = seed;
      const Status st = ReplayOnce(one, &reports, &results);
      if (!st.ok()) return fail(st);
    }
    const nlohmann::json spread = ReplaySeedSpread(reports, *seeds);
    return emit(nlohmann::json{{"results", results}, {"spread", spread}},
                [&] { return FormatReplaySpread(spread); });
  }
  const Status once = ReplayOnce(o, &reports, &results);
  if (!once.ok()) return fail(once);
  if (!o.html_path.empty()) {
    const Status st = report::WriteHtml(
        ReplayHtmlReport(reports, Stem(o.trace_path.empty() ? o.pods_path : o.trace_path),
                         Stem(o.nodes_path.empty() ? o.config_path : o.nodes_path),
                         ReplayCommandLine(o)),
        o.html_path);
    if (!st.ok()) return fail(st);
  }
  const nlohmann::json report =
      results.size() == 1 ? results[0] : nlohmann::json{{"results", results}};
  return emit(report, [&] { return FormatReplayTable(reports); });
}

}  // namespace arbiter::sim

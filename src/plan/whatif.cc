#include "plan/whatif.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "core/cluster.h"
#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "sim/replay.h"
#include "sim/replay_html.h"
#include "sim/trace.h"

namespace arbiter::plan {

namespace {

constexpr double kMsPerHour = 3.6e6;

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// Nearest rank: the value at rank ceil(p/100 x n) of the sorted values.
Waits WaitsOf(std::vector<double> v) {
  Waits w;
  w.count = static_cast<int64_t>(v.size());
  if (v.empty()) return w;
  std::sort(v.begin(), v.end());
  auto at = [&](double p) {
    const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
  };
  w.p50 = at(50);
  w.p90 = at(90);
  w.p99 = at(99);
  w.max = v.back();
  return w;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// ---- The workload ----

// One job as the replay sees it: when it arrives (ms from the start of the period), how long it
// runs, and whether it counts in the figures.
struct Item {
  const RecordedJob* job = nullptr;
  int64_t arrival = 0;  // ms from since
  int64_t run = 0;      // ms
  bool counted = true;  // false: carried in
};

// Which jobs take part, and how. Jobs that arrived before the period count only when they held
// GPUs at its start (carried in); jobs that arrived after it are left out.
std::vector<Item> ItemsOf(const History& h, PlanReport* rep) {
  std::vector<Item> items;
  for (const RecordedJob& j : h.jobs) {
    if (j.submit_ms >= h.until_ms) continue;
    Item it;
    it.job = &j;
    if (j.submit_ms < h.since_ms) {
      const bool held = j.admitted_ms >= 0 && j.admitted_ms < h.since_ms &&
                        (j.ended_ms < 0 || j.ended_ms > h.since_ms);
      // Pending at the start: it arrives at the start and runs its run.
      const bool pending = j.admitted_ms < 0 || j.admitted_ms >= h.since_ms;
      if (!held && !pending) continue;
      it.counted = false;
      it.arrival = 0;
      if (held) {
        it.run = (j.ended_ms < 0 ? h.until_ms : j.ended_ms) - h.since_ms;
      } else if (j.admitted_ms >= 0) {
        it.run =
            (j.ended_ms < 0 ? std::max(h.until_ms, j.admitted_ms) : j.ended_ms) - j.admitted_ms;
      } else {
        it.run = j.walltime_seconds > 0 ? j.walltime_seconds * 1000 : h.until_ms - h.since_ms;
      }
      ++rep->carried_in;
    } else {
      it.arrival = j.submit_ms - h.since_ms;
      if (j.admitted_ms >= 0) {
        // Still running: at least until the end of the period.
        it.run =
            (j.ended_ms < 0 ? std::max(h.until_ms, j.admitted_ms) : j.ended_ms) - j.admitted_ms;
      } else {
        it.run = j.walltime_seconds > 0 ? j.walltime_seconds * 1000 : h.until_ms - j.submit_ms;
      }
      ++rep->jobs;
    }
    it.run = std::max<int64_t>(it.run, 0);
    items.push_back(it);
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.arrival < b.arrival; });
  return items;
}

// Leaves out the jobs whose queue the configuration no longer has (the replay
// could not place them anywhere), counting why.
void DropUnknown(const History& h, std::vector<Item>* items, PlanReport* rep) {
  std::map<std::string, const QueueSpec*> queues;
  std::map<std::string, std::string> tenant_of;  // queue -> its tenant
  for (const QueueSpec& q : h.queues) queues[q.name] = &q;
  std::set<std::string> parents;
  for (const QueueSpec& q : h.queues) {
    if (!q.parent.empty()) parents.insert(q.parent);
  }
  for (const QueueSpec& q : h.queues) {
    std::string t = q.name;
    for (int depth = 0; depth < 64; ++depth) {
      auto it = queues.find(t);
      if (it == queues.end() || it->second->is_tenant || it->second->parent.empty()) break;
      t = it->second->parent;
    }
    tenant_of[q.name] = t;
  }
  std::map<std::string, int64_t> reasons;
  std::vector<Item> kept;
  for (const Item& it : *items) {
    const RecordedJob& j = *it.job;
    std::string why;
    auto q = queues.find(j.queue);
    if (q == queues.end() || q->second->is_tenant || parents.count(j.queue) > 0) {
      why = fmt::format("queue '{}' is not a leaf queue of the configuration", j.queue);
    } else if (tenant_of[j.queue] != j.tenant) {
      why = fmt::format("queue '{}' no longer belongs to tenant '{}'", j.queue, j.tenant);
    }
    if (why.empty()) {
      kept.push_back(it);
      continue;
    }
    ++reasons[why];
    ++rep->skipped;
    if (it.counted) --rep->jobs;
  }
  for (const auto& [why, n] : reasons)
    rep->skipped_reasons.push_back(fmt::format("{} x {}", n, why));
  *items = std::move(kept);
}

// The classes the replay knows: the configured ones and, as the server treats a job without a
// class (or of a class no longer configured), "": priority 0, preemptible at once, no grace.
std::vector<PriorityClass> ClassesOf(const History& h) {
  std::vector<PriorityClass> classes = h.classes;
  PriorityClass none;
  none.name = "";
  none.value = 0;
  none.min_runtime_seconds = 0;
  none.grace_period_seconds = 0;
  classes.push_back(none);
  return classes;
}

sim::Trace TraceOf(const History& h, const std::vector<Item>& items) {
  std::set<std::string> classes;
  for (const PriorityClass& c : h.classes) classes.insert(c.name);
  sim::Trace t;
  t.file = "history";
  t.jobs.reserve(items.size());
  for (const Item& it : items) {
    const RecordedJob& j = *it.job;
    sim::TraceJob tj;
    tj.name = j.name.empty() ? fmt::format("job-{}", j.id) : j.name;
    tj.submit_time = it.arrival / 1000;
    tj.duration = it.run / 1000;
    tj.tenant = j.tenant;
    tj.queue = j.queue;
    tj.type = j.type;
    tj.priority_class = classes.count(j.priority_class) > 0 ? j.priority_class : "";
    tj.tasks = j.tasks;
    tj.resources = j.resources;
    tj.gpu_models = j.gpu_models;
    tj.walltime = j.walltime_seconds;
    t.jobs.push_back(std::move(tj));
  }
  return t;
}

// ---- Changes ----

// The cluster and configuration a variant replays on.
struct Setup {
  std::vector<Node> nodes;
  std::vector<QueueSpec> queues;
  std::string policy;
};

Result<Node> NodeShape(const History& h, const std::vector<Node>& nodes, const std::string& model,
                       int32_t gpus_per_node, const char* field) {
  auto gm = std::find_if(h.models.begin(), h.models.end(),
                         [&](const GpuModel& m) { return m.name == model; });
  if (gm == h.models.end()) {
    std::vector<std::string> names;
    for (const GpuModel& m : h.models) names.push_back(m.name);
    return InvalidArgument(
        std::string(field),
        fmt::format("GPU model '{}' is not configured; the models are {}", model,
                    names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  for (const Node& n : nodes) {
    if (n.gpus.empty()) continue;
    if (std::all_of(n.gpus.begin(), n.gpus.end(), [&](const Gpu& g) { return g.model == model; })) {
      Node shape = n;
      if (gpus_per_node > 0) {
        shape.gpus.resize(static_cast<size_t>(gpus_per_node), n.gpus.front());
        for (size_t i = 0; i < shape.gpus.size(); ++i)
          shape.gpus[i].index = static_cast<int32_t>(i);
      }
      return shape;
    }
  }
  if (gpus_per_node <= 0) {
    return InvalidArgument(std::string(field),
                           fmt::format("no node has GPUs of model {} to take the shape from; "
                                       "give the GPUs per node (COUNTx{}:GPUS)",
                                       model, model));
  }
  Node shape;
  for (const Node& n : nodes) {
    shape.cpu_milli = std::max(shape.cpu_milli, n.cpu_milli);
    shape.memory_mib = std::max(shape.memory_mib, n.memory_mib);
  }
  for (int32_t i = 0; i < gpus_per_node; ++i) {
    Gpu g;
    g.index = i;
    g.model = model;
    g.memory_mib = gm->memory_mib;
    shape.gpus.push_back(g);
  }
  return shape;
}

Status AddNodes(const History& h, const Change& c, Setup* s) {
  auto shape = NodeShape(h, s->nodes, c.model, c.gpus_per_node, "add_nodes");
  if (!shape.ok()) return shape.status();
  std::set<std::string> names;
  for (const Node& n : s->nodes) names.insert(n.name);
  int32_t made = 0;
  for (int32_t i = 1; made < c.count; ++i) {
    const std::string name = fmt::format("plan-{}-{}", Lower(c.model), i);
    if (names.count(name) > 0) continue;
    Node n = *shape;
    n.name = name;
    n.state = NodeState::kReady;
    n.images.clear();
    s->nodes.push_back(std::move(n));
    names.insert(name);
    ++made;
  }
  return Status::Ok();
}

Status ApplyQuota(const Change& c, Setup* s) {
  for (QueueSpec& q : s->queues) {
    if (q.name != c.name) continue;
    QuotaLimits& l = q.quota[c.resource];
    if (c.limit == "guaranteed") l.guaranteed = c.value;
    if (c.limit == "max") l.max = c.value;
    if (c.limit == "lending_limit") l.lending_limit = c.value;
    return Status::Ok();
  }
  return InvalidArgument("quota",
                         fmt::format("'{}': no tenant or queue named '{}'", c.text, c.name));
}

Result<Setup> SetupOf(const History& h, const Variant& v) {
  Setup s{h.nodes, h.queues, h.policy};
  for (const Change& c : v.changes) {
    switch (c.kind) {
      case Change::Kind::kAddNodes:
        ARBITER_RETURN_IF_ERROR(AddNodes(h, c, &s));
        break;
      case Change::Kind::kRemoveNode: {
        auto it = std::find_if(s.nodes.begin(), s.nodes.end(),
                               [&](const Node& n) { return n.name == c.name; });
        if (it == s.nodes.end()) {
          return InvalidArgument("remove_node", fmt::format("no node named '{}'", c.name));
        }
        s.nodes.erase(it);
        break;
      }
      case Change::Kind::kQuota:
        ARBITER_RETURN_IF_ERROR(ApplyQuota(c, &s));
        break;
      case Change::Kind::kPolicy:
        if (!core::Profile::Named(c.name).ok()) {
          return InvalidArgument("policy",
                                 fmt::format("unknown policy '{}'; the policies are {}", c.name,
                                             fmt::join(core::Profile::NamedProfiles(), ", ")));
        }
        s.policy = c.name;
        break;
    }
  }
  return s;
}

// ---- Figures ----

// The GPUs (milli) of a job: tasks x GPUs x share.
int64_t GpuMilli(const RecordedJob& j) { return int64_t{j.tasks} * j.resources.total_gpu_milli(); }

// Per-queue and per-type waits and counts, from each counted job's wait and state.
struct JobFigure {
  const RecordedJob* job;
  double wait_seconds;
  bool started;
  bool waiting_at_end;
  int32_t preemptions;
};

void GroupFiguresOf(const History& h, const std::vector<JobFigure>& figs, Outcome* out) {
  std::map<std::string, std::vector<double>> by_queue;
  std::map<int, std::vector<double>> by_type;
  std::map<std::string, GroupFigures> queues;
  std::map<int, GroupFigures> types;
  std::vector<double> all;
  for (const JobFigure& f : figs) {
    const RecordedJob& j = *f.job;
    out->jobs.push_back({j.id, f.wait_seconds, f.started, f.preemptions});
    GroupFigures& q = queues[j.queue];
    GroupFigures& t = types[static_cast<int>(j.type)];
    for (GroupFigures* g : {&q, &t}) {
      g->started += f.started ? 1 : 0;
      g->waiting_at_end += f.waiting_at_end ? 1 : 0;
      g->preemptions += f.preemptions;
    }
    q.tenant = j.tenant;
    by_queue[j.queue].push_back(f.wait_seconds);
    by_type[static_cast<int>(j.type)].push_back(f.wait_seconds);
    all.push_back(f.wait_seconds);
  }
  out->wait = WaitsOf(std::move(all));
  for (const QueueSpec& qs : h.queues) {
    auto it = queues.find(qs.name);
    if (it == queues.end()) continue;
    it->second.name = qs.name;
    it->second.wait = WaitsOf(std::move(by_queue[qs.name]));
    out->queues.push_back(std::move(it->second));
  }
  for (auto& [type, g] : types) {
    g.name = std::string(JobTypeName(static_cast<JobType>(type)));
    g.wait = WaitsOf(std::move(by_type[type]));
    out->types.push_back(std::move(g));
  }
}

void BudgetsOf(const History& h, Outcome* out) {
  const double period_hours = static_cast<double>(h.until_ms - h.since_ms) / kMsPerHour;
  for (const TenantBudget& b : h.budgets) {
    BudgetUse u;
    u.tenant = b.tenant;
    for (const GroupFigures& q : out->queues) {
      if (q.tenant == b.tenant) u.gpu_hours += q.gpu_hours;
    }
    u.budget_gpu_hours = b.period_hours > 0 ? b.gpu_hours * period_hours / b.period_hours : 0;
    u.used_pct = u.budget_gpu_hours > 0 ? 100.0 * u.gpu_hours / u.budget_gpu_hours : 0;
    out->budgets.push_back(std::move(u));
  }
}

int64_t GpusOf(const std::vector<Node>& nodes) {
  int64_t n = 0;
  for (const Node& node : nodes) n += static_cast<int64_t>(node.gpus.size());
  return n;
}

// What happened: waits from the record, allocation and idle GPUs from a sweep over each job's
// pending and running intervals inside the period (the last run of each job: earlier runs of
// preempted jobs are not recorded).
Outcome RecordedOutcome(const History& h, const std::vector<Item>& items) {
  Outcome out;
  out.label = "recorded";
  out.nodes = static_cast<int64_t>(h.nodes.size());
  out.gpus = GpusOf(h.nodes);
  std::vector<JobFigure> figs;
  // (time, change of allocated milli, change of waiting jobs)
  std::vector<std::tuple<int64_t, int64_t, int64_t>> events;
  std::map<std::string, double> queue_hours;
  for (const Item& it : items) {
    const RecordedJob& j = *it.job;
    const bool admitted = j.admitted_ms >= 0 && j.admitted_ms < h.until_ms;
    if (admitted) {
      const int64_t from = std::max(j.admitted_ms, h.since_ms);
      const int64_t to = j.ended_ms < 0 ? h.until_ms : std::min(j.ended_ms, h.until_ms);
      if (to > from) {
        events.emplace_back(from, GpuMilli(j), 0);
        events.emplace_back(to, -GpuMilli(j), 0);
        queue_hours[j.queue] +=
            static_cast<double>(GpuMilli(j)) / 1000.0 * static_cast<double>(to - from) / kMsPerHour;
      }
      out.preemptions += it.counted ? j.preemptions : 0;
    }
    if (!it.counted) continue;
    int64_t wait = j.recorded_wait_ms;
    if (wait < 0) wait = (admitted ? j.admitted_ms : h.until_ms) - j.submit_ms;
    wait = std::clamp<int64_t>(wait, 0, h.until_ms - j.submit_ms);
    const int64_t pending_end = admitted ? j.admitted_ms : h.until_ms;
    if (pending_end > j.submit_ms) {
      events.emplace_back(j.submit_ms, 0, 1);
      events.emplace_back(pending_end, 0, -1);
    }
    figs.push_back({&j, Seconds(wait), admitted, !admitted, j.preemptions});
  }
  GroupFiguresOf(h, figs, &out);
  for (GroupFigures& q : out.queues) q.gpu_hours = queue_hours[q.name];
  std::sort(events.begin(), events.end());
  const int64_t capacity = out.gpus * 1000;
  int64_t alloc = 0, waiting = 0, last = h.since_ms;
  double alloc_ms = 0, idle_ms = 0;  // milli-GPU x ms
  for (const auto& [t, d_alloc, d_wait] : events) {
    const auto span = static_cast<double>(t - last);
    alloc_ms += static_cast<double>(alloc) * span;
    if (waiting > 0) idle_ms += static_cast<double>(std::max<int64_t>(capacity - alloc, 0)) * span;
    alloc += d_alloc;
    waiting += d_wait;
    last = t;
  }
  out.gpu_hours_allocated = alloc_ms / 1000.0 / kMsPerHour;
  out.idle_gpu_hours_while_waiting = idle_ms / 1000.0 / kMsPerHour;
  const double period_gpu_hours =
      static_cast<double>(out.gpus) * static_cast<double>(h.until_ms - h.since_ms) / kMsPerHour;
  out.gpu_alloc_pct = period_gpu_hours > 0 ? 100.0 * out.gpu_hours_allocated / period_gpu_hours : 0;
  BudgetsOf(h, &out);
  return out;
}

// One replay of the items on a setup.
Result<Outcome> ReplayOutcome(const History& h, const std::vector<Item>& items, const Setup& s,
                              std::string label, sim::ReplayReport* report_out) {
  Outcome out;
  out.label = std::move(label);
  out.nodes = static_cast<int64_t>(s.nodes.size());
  out.gpus = GpusOf(s.nodes);
  auto cluster = core::Cluster::Build(h.models, s.nodes);
  if (!cluster.ok()) return InvalidArgument("cluster", cluster.status().ToString());
  auto tree = core::QuotaTree::Build(s.queues, h.models);
  if (!tree.ok()) return InvalidArgument("quota", tree.status().ToString());
  const sim::Trace trace = TraceOf(h, items);
  auto w = sim::CompileReplay(trace, *cluster, *tree, ClassesOf(h));
  if (!w.ok()) return InvalidArgument("jobs", w.status().ToString());
  // The trace format holds whole seconds: the recorded milliseconds go back in (the compiled jobs
  // keep the trace's order, which is the items').
  for (size_t i = 0; i < items.size(); ++i) {
    w->jobs[i].pending.submit_time = items[i].arrival;
    w->jobs[i].duration = items[i].run;
  }
  auto spec = core::Profile::Named(s.policy);
  if (!spec.ok()) return InvalidArgument("policy", spec.status().message());
  auto profile = core::Profile::Build(*spec);
  if (!profile.ok()) return InvalidArgument("policy", profile.status().message());
  sim::ReplayOptions o;
  o.cycle_interval = std::max<int64_t>(h.cycle_interval_ms, 1);
  o.time_limit = h.until_ms - h.since_ms;
  o.stop_latency = std::max<int64_t>(h.stop_latency_ms, 0);
  // The history was decided by a server, whose cycles place against their own pending jobs.
  o.typical_from_pending = true;
  o.job_results = true;
  o.max_series_points = 200;
  sim::ReplayReport r = sim::RunReplay(*w, *profile, s.policy, o);
  std::vector<JobFigure> figs;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].counted) continue;
    const sim::JobResult& jr = r.job_results[i];
    // A job that never started (dropped: it fits nowhere on this cluster; or still pending when
    // the replay ended) waited from its arrival to the end of the period.
    const int64_t wait = jr.started ? jr.wait : h.until_ms - h.since_ms - items[i].arrival;
    figs.push_back({items[i].job, Seconds(wait), jr.started, !jr.started, jr.preempted});
  }
  GroupFiguresOf(h, figs, &out);
  const double hours = r.makespan_seconds / 3600.0;
  for (GroupFigures& q : out.queues) {
    for (const sim::QueueReport& qr : r.queues) {
      if (qr.name == q.name)
        q.gpu_hours = qr.gpu_share_pct / 100.0 * static_cast<double>(out.gpus) * hours;
    }
  }
  out.gpu_hours_allocated = r.gpu_hours_allocated;
  out.idle_gpu_hours_while_waiting = r.gpu_hours_idle_while_waiting;
  out.preemptions = r.preemptions;
  out.cycles = r.cycles;
  const double period_gpu_hours =
      static_cast<double>(out.gpus) * static_cast<double>(h.until_ms - h.since_ms) / kMsPerHour;
  out.gpu_alloc_pct = period_gpu_hours > 0 ? 100.0 * out.gpu_hours_allocated / period_gpu_hours : 0;
  BudgetsOf(h, &out);
  if (report_out != nullptr) {
    r.job_results.clear();
    r.policy = out.label;
    *report_out = std::move(r);
  }
  return out;
}

// The items of a history, checked: the period, its size, jobs whose queue is gone.
Result<std::vector<Item>> Prepare(const History& h, PlanReport* rep) {
  if (h.until_ms <= h.since_ms) {
    return InvalidArgument("until", "the period is empty: until must be after since");
  }
  rep->since_ms = h.since_ms;
  rep->until_ms = h.until_ms;
  rep->policy = h.policy;
  std::vector<Item> items = ItemsOf(h, rep);
  if (items.size() > kMaxReplayJobs) {
    return InvalidArgument("since",
                           fmt::format("{} jobs in the period, more than the {} one replay takes: "
                                       "give a shorter period",
                                       items.size(), kMaxReplayJobs));
  }
  DropUnknown(h, &items, rep);
  return items;
}

Result<int64_t> ParseAmount(std::string_view text, std::string_view resource,
                            std::string_view field, std::string_view whole) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 1e12) {
    return InvalidArgument(
        std::string(field),
        fmt::format("'{}': the value must be a number >= 0, got '{}'", whole, text));
  }
  if (resource == "memory") return static_cast<int64_t>(std::llround(v));
  return static_cast<int64_t>(std::llround(v * 1000.0));  // GPUs and cores -> milli
}

}  // namespace

Result<Change> ParseAddNodes(std::string_view text, std::string_view field) {
  const Status bad = InvalidArgument(
      std::string(field),
      fmt::format("must be COUNTxMODEL or COUNTxMODEL:GPUS (4xH100-80G), got '{}'", text));
  const size_t x = text.find('x');
  if (x == 0 || x == std::string_view::npos) return bad;
  Change c;
  c.kind = Change::Kind::kAddNodes;
  c.text = std::string(text);
  int64_t n = 0;
  for (char ch : text.substr(0, x)) {
    if (ch < '0' || ch > '9' || n > 100000) return bad;
    n = n * 10 + (ch - '0');
  }
  if (n < 1 || n > 10000) {
    return InvalidArgument(std::string(field),
                           fmt::format("'{}': between 1 and 10000 nodes", text));
  }
  c.count = static_cast<int32_t>(n);
  std::string_view rest = text.substr(x + 1);
  const size_t colon = rest.find(':');
  c.model = std::string(rest.substr(0, colon));
  if (c.model.empty()) return bad;
  if (colon != std::string_view::npos) {
    int64_t g = 0;
    const std::string_view gpus = rest.substr(colon + 1);
    if (gpus.empty()) return bad;
    for (char ch : gpus) {
      if (ch < '0' || ch > '9' || g > 10000) return bad;
      g = g * 10 + (ch - '0');
    }
    if (g < 1 || g > 1024) {
      return InvalidArgument(std::string(field),
                             fmt::format("'{}': between 1 and 1024 GPUs per node", text));
    }
    c.gpus_per_node = static_cast<int32_t>(g);
  }
  return c;
}

Result<Change> ParseQuota(std::string_view text, std::string_view field) {
  const Status bad = InvalidArgument(
      std::string(field),
      fmt::format("must be QUEUE.LIMIT.RESOURCE=VALUE (vision.guaranteed.gpu=32; LIMIT: "
                  "guaranteed, max or lending_limit; RESOURCE: gpu, gpu:MODEL, cpu or "
                  "memory), got '{}'",
                  text));
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return bad;
  const std::string_view key = text.substr(0, eq);
  const size_t d1 = key.find('.');
  if (d1 == std::string_view::npos || d1 == 0) return bad;
  const size_t d2 = key.find('.', d1 + 1);
  if (d2 == std::string_view::npos) return bad;
  Change c;
  c.kind = Change::Kind::kQuota;
  c.text = std::string(text);
  c.name = std::string(key.substr(0, d1));
  c.limit = std::string(key.substr(d1 + 1, d2 - d1 - 1));
  c.resource = std::string(key.substr(d2 + 1));
  if (c.limit != "guaranteed" && c.limit != "max" && c.limit != "lending_limit") return bad;
  if (c.resource != "gpu" && c.resource != "cpu" && c.resource != "memory" &&
      !(c.resource.rfind("gpu:", 0) == 0 && c.resource.size() > 4)) {
    return bad;
  }
  auto v = ParseAmount(text.substr(eq + 1), c.resource, field, text);
  if (!v.ok()) return v.status();
  c.value = *v;
  return c;
}

Change RemoveNode(std::string name) {
  Change c;
  c.kind = Change::Kind::kRemoveNode;
  c.text = name;
  c.name = std::move(name);
  return c;
}

Change UsePolicy(std::string name) {
  Change c;
  c.kind = Change::Kind::kPolicy;
  c.text = name;
  c.name = std::move(name);
  return c;
}

std::vector<Variant> VariantsOf(const std::vector<Change>& changes) {
  std::vector<Variant> out;
  for (const Change& c : changes) {
    std::string label;
    switch (c.kind) {
      case Change::Kind::kAddNodes:
        label = "add " + c.text;
        break;
      case Change::Kind::kRemoveNode:
        label = "remove " + c.text;
        break;
      case Change::Kind::kQuota:
        label = "quota " + c.text;
        break;
      case Change::Kind::kPolicy:
        label = "policy " + c.text;
        break;
    }
    out.push_back({std::move(label), {c}});
  }
  if (changes.size() > 1) out.push_back({"all changes", changes});
  return out;
}

Result<PlanReport> ReplayHistory(const History& h, const std::vector<Variant>& variants) {
  PlanReport rep;
  auto items = Prepare(h, &rep);
  if (!items.ok()) return items.status();
  // Every variant's changes are checked before anything is replayed.
  std::vector<Setup> setups;
  for (const Variant& v : variants) {
    auto s = SetupOf(h, v);
    if (!s.ok()) return s.status();
    setups.push_back(std::move(*s));
  }
  rep.stop_latency_ms = std::max<int64_t>(h.stop_latency_ms, 0);
  rep.stop_latency_samples = h.stop_latency_samples;
  rep.recorded = RecordedOutcome(h, *items);
  rep.replays.emplace_back();
  auto base =
      ReplayOutcome(h, *items, Setup{h.nodes, h.queues, h.policy}, "baseline", &rep.replays.back());
  if (!base.ok()) return base.status();
  rep.baseline = std::move(*base);
  for (size_t i = 0; i < variants.size(); ++i) {
    sim::ReplayReport report;
    auto o = ReplayOutcome(h, *items, setups[i], variants[i].label, &report);
    if (o.ok()) {
      rep.replays.push_back(std::move(report));
      rep.variants.push_back(std::move(*o));
    } else {
      Outcome failed;
      failed.label = variants[i].label;
      failed.note = o.status().ToString();
      rep.variants.push_back(std::move(failed));
    }
  }
  return rep;
}

namespace {

// The worst queue's p90 wait (queues with jobs).
CapacityProbe Probe(int32_t nodes, const Outcome& o, int64_t target_ms) {
  CapacityProbe p;
  p.nodes = nodes;
  for (const GroupFigures& q : o.queues) {
    if (q.wait.count > 0 && q.wait.p90 >= p.worst_p90_seconds) {
      p.worst_p90_seconds = q.wait.p90;
      p.worst_queue = q.name;
    }
  }
  p.meets = p.worst_p90_seconds * 1000.0 <= static_cast<double>(target_ms);
  return p;
}

}  // namespace

Result<CapacityAnswer> FindCapacity(const History& h, const CapacityQuery& q) {
  if (q.target_wait_p90_ms < 0) {
    return InvalidArgument("target_wait_p90", "must be a duration >= 0");
  }
  if (q.max_nodes < 1 || q.max_nodes > 10000) {
    return InvalidArgument("max_nodes",
                           fmt::format("must be between 1 and 10000, got {}", q.max_nodes));
  }
  if (q.model.empty()) return InvalidArgument("model", "give the GPU model of the nodes to add");
  PlanReport rep;
  auto items = Prepare(h, &rep);
  if (!items.ok()) return items.status();
  auto shape = NodeShape(h, h.nodes, q.model, q.gpus_per_node, "model");
  if (!shape.ok()) return shape.status();
  CapacityAnswer a;
  a.model = q.model;
  a.gpus_per_node = static_cast<int32_t>(shape->gpus.size());
  for (const GpuModel& m : h.models) {
    if (m.name == q.model)
      a.price_per_gpu_hour = static_cast<double>(m.price_milli_per_hour) / 1000.0;
  }
  std::map<int32_t, Outcome> tried;
  auto run = [&](int32_t n) -> Result<CapacityProbe> {
    Setup s{h.nodes, h.queues, h.policy};
    if (n > 0) {
      Change c;
      c.kind = Change::Kind::kAddNodes;
      c.count = n;
      c.model = q.model;
      c.gpus_per_node = q.gpus_per_node;
      ARBITER_RETURN_IF_ERROR(AddNodes(h, c, &s));
    }
    auto o = ReplayOutcome(h, *items, s, n == 0 ? "baseline" : fmt::format("add {}x{}", n, q.model),
                           nullptr);
    if (!o.ok()) return o.status();
    CapacityProbe p = Probe(n, *o, q.target_wait_p90_ms);
    a.probes.push_back(p);
    tried.emplace(n, std::move(*o));
    return p;
  };
  // Exponential: 0, 1, 2, 4, ... (max_nodes last), until one meets the target.
  int32_t miss = -1, meet = -1;
  for (int32_t n = 0;; n = n == 0 ? 1 : std::min(n * 2, q.max_nodes)) {
    auto p = run(n);
    if (!p.ok()) return p.status();
    if (p->meets) {
      meet = n;
      break;
    }
    miss = n;
    if (n >= q.max_nodes) break;
  }
  a.baseline = tried.at(0);
  if (meet < 0) return a;  // even max_nodes is not enough
  // Binary search in (miss, meet]: the fewest that meet it.
  while (meet - miss > 1) {
    const int32_t mid = miss + (meet - miss) / 2;
    auto p = run(mid);
    if (!p.ok()) return p.status();
    (p->meets ? meet : miss) = mid;
  }
  a.found = true;
  a.nodes = meet;
  a.with_nodes = tried.at(meet);
  a.cost_per_hour = static_cast<double>(meet) * a.gpus_per_node * a.price_per_gpu_hour;
  a.cost_per_30_days = a.cost_per_hour * 24 * 30;
  return a;
}

}  // namespace arbiter::plan

namespace arbiter::plan {

namespace {

using nlohmann::json;

double Round(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}

json GroupJson(const GroupFigures& g, bool queue) {
  json j = {{"jobs", g.wait.count},
            {"started", g.started},
            {"waiting_at_end", g.waiting_at_end},
            {"wait_p50_s", Round(g.wait.p50, 3)},
            {"wait_p90_s", Round(g.wait.p90, 3)},
            {"wait_p99_s", Round(g.wait.p99, 3)},
            {"wait_max_s", Round(g.wait.max, 3)},
            {"preemptions", g.preemptions}};
  if (queue) j["gpu_hours"] = Round(g.gpu_hours, 3);
  return j;
}

json OutcomeJson(const Outcome& o) {
  json j = {{"label", o.label},
            {"nodes", o.nodes},
            {"gpus", o.gpus},
            {"jobs", o.wait.count},
            {"wait_p50_s", Round(o.wait.p50, 3)},
            {"wait_p90_s", Round(o.wait.p90, 3)},
            {"wait_p99_s", Round(o.wait.p99, 3)},
            {"wait_max_s", Round(o.wait.max, 3)},
            {"gpu_alloc_pct", Round(o.gpu_alloc_pct, 2)},
            {"gpu_hours_allocated", Round(o.gpu_hours_allocated, 3)},
            {"idle_gpu_hours_while_waiting", Round(o.idle_gpu_hours_while_waiting, 3)},
            {"preemptions", o.preemptions}};
  if (o.label != "recorded") j["cycles"] = o.cycles;
  if (!o.note.empty()) j["note"] = o.note;
  if (!o.budgets.empty()) {
    json b = json::array();
    for (const BudgetUse& u : o.budgets) {
      b.push_back({{"tenant", u.tenant},
                   {"gpu_hours", Round(u.gpu_hours, 3)},
                   {"budget_gpu_hours", Round(u.budget_gpu_hours, 3)},
                   {"used_pct", Round(u.used_pct, 2)}});
    }
    j["budgets"] = std::move(b);
  }
  return j;
}

// One group (a queue or a job type) across the sides: `recorded`, `replayed`, `variants`.
json GroupsJson(const PlanReport& r, const std::vector<GroupFigures> Outcome::*groups,
                const char* key, bool queue) {
  json out = json::array();
  auto find = [&](const Outcome& o, const std::string& name) -> const GroupFigures* {
    for (const GroupFigures& g : o.*groups) {
      if (g.name == name) return &g;
    }
    return nullptr;
  };
  std::vector<std::string> names;
  for (const GroupFigures& g : r.recorded.*groups) names.push_back(g.name);
  for (const std::string& name : names) {
    const GroupFigures* rec = find(r.recorded, name);
    json j = {{key, name}};
    if (queue) j["tenant"] = rec->tenant;
    j["recorded"] = GroupJson(*rec, queue);
    if (const GroupFigures* b = find(r.baseline, name)) j["replayed"] = GroupJson(*b, queue);
    json vs = json::array();
    for (const Outcome& v : r.variants) {
      const GroupFigures* g = find(v, name);
      if (g == nullptr) continue;
      json vj = GroupJson(*g, queue);
      vj["label"] = v.label;
      vs.push_back(std::move(vj));
    }
    j["variants"] = std::move(vs);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

nlohmann::json PlanReportJson(const PlanReport& r, bool with_jobs) {
  json runs = json::array({OutcomeJson(r.recorded), OutcomeJson(r.baseline)});
  for (const Outcome& v : r.variants) runs.push_back(OutcomeJson(v));
  json out = {{"since_ms", r.since_ms},
              {"until_ms", r.until_ms},
              {"policy", r.policy},
              {"stop_latency_ms", r.stop_latency_ms},
              {"stop_latency_samples", r.stop_latency_samples},
              {"jobs", r.jobs},
              {"carried_in", r.carried_in},
              {"skipped", r.skipped},
              {"skipped_reasons", r.skipped_reasons},
              {"runs", std::move(runs)},
              {"queues", GroupsJson(r, &Outcome::queues, "queue", true)},
              {"types", GroupsJson(r, &Outcome::types, "type", false)}};
  if (with_jobs) {
    // Each outcome lists the same counted jobs in the same order (RecordedOutcome and
    // ReplayOutcome walk the same items).
    std::vector<const Outcome*> all = {&r.recorded, &r.baseline};
    for (const Outcome& v : r.variants) all.push_back(&v);
    json jobs = json::array();
    for (size_t i = 0; i < r.recorded.jobs.size(); ++i) {
      json runs_of_job = json::array();
      for (const Outcome* o : all) {
        if (i >= o->jobs.size() || o->jobs[i].id != r.recorded.jobs[i].id) continue;
        const JobOutcome& jo = o->jobs[i];
        runs_of_job.push_back({{"label", o->label},
                               {"wait_s", Round(jo.wait_seconds, 3)},
                               {"started", jo.started},
                               {"preemptions", jo.preemptions}});
      }
      jobs.push_back({{"id", r.recorded.jobs[i].id}, {"runs", std::move(runs_of_job)}});
    }
    out["per_job"] = std::move(jobs);
  }
  return out;
}

std::string PlanHtml(const PlanReport& r, const std::string& command) {
  return sim::report::RenderHtml(
      sim::ReplayHtmlReport(r.replays, "recorded history", "the cluster", command));
}

nlohmann::json CapacityAnswerJson(const CapacityAnswer& a, const CapacityQuery& q) {
  json probes = json::array();
  for (const CapacityProbe& p : a.probes) {
    probes.push_back({{"nodes", p.nodes},
                      {"worst_wait_p90_s", Round(p.worst_p90_seconds, 3)},
                      {"worst_queue", p.worst_queue},
                      {"meets_target", p.meets}});
  }
  json queues = json::array();
  for (const GroupFigures& g : a.baseline.queues) {
    json j = {{"queue", g.name}, {"tenant", g.tenant}, {"baseline", GroupJson(g, true)}};
    if (a.with_nodes) {
      for (const GroupFigures& w : a.with_nodes->queues) {
        if (w.name == g.name) j["with_nodes"] = GroupJson(w, true);
      }
    }
    queues.push_back(std::move(j));
  }
  json j = {{"model", a.model},
            {"gpus_per_node", a.gpus_per_node},
            {"target_wait_p90_s", Round(static_cast<double>(q.target_wait_p90_ms) / 1000.0, 3)},
            {"max_nodes", q.max_nodes},
            {"found", a.found},
            {"nodes", a.found ? json(a.nodes) : json(nullptr)},
            {"price_per_gpu_hour", a.price_per_gpu_hour},
            {"cost_per_hour", a.found ? json(Round(a.cost_per_hour, 3)) : json(nullptr)},
            {"cost_per_30_days", a.found ? json(Round(a.cost_per_30_days, 2)) : json(nullptr)},
            {"probes", std::move(probes)},
            {"baseline", OutcomeJson(a.baseline)},
            {"queues", std::move(queues)}};
  if (a.with_nodes) j["with_nodes"] = OutcomeJson(*a.with_nodes);
  if (!a.found) {
    j["note"] = fmt::format(
        "even {} nodes of {} do not bring every queue's p90 wait within the "
        "target",
        q.max_nodes, q.model);
  }
  return j;
}

}  // namespace arbiter::plan

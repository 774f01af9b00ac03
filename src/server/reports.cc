#include "server/reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <set>
#include <span>
#include <tuple>

#include "plan/forecast.h"
#include "server/serving_stats.h"
#include "store/job_waits.h"
#include "store/usage_rollup.h"

namespace arbiter::server::reports {
namespace {

using nlohmann::json;

constexpr double kMilliMsPerGpuHour = 1000.0 * 3'600'000.0;
constexpr double kMsPerHour = 3'600'000.0;

constexpr std::array<std::string_view, 10> kNames = {
    "usage",   "wait",          "failures",          "preemptions", "fairness",
    "cluster", "fragmentation", "idle-while-queued", "serving",     "forecast"};

// Rounds to 6 decimals so that tables do not show binary noise (0.30000000000000004).
json Num(double x) { return std::round(x * 1e6) / 1e6; }
json Hours(double milli_ms) { return Num(milli_ms / kMilliMsPerGpuHour); }

// Length of [s, e) inside [a, b).
int64_t Overlap(int64_t s, int64_t e, int64_t a, int64_t b) {
  return std::max<int64_t>(0, std::min(e, b) - std::max(s, a));
}

std::string Rfc3339(int64_t ms) {
  const std::time_t s = ms / 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  if (ms % 1000 == 0) {
    return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

const std::string& KeyOf(GroupBy g, const std::string& tenant, const std::string& queue,
                         const std::string& user, const std::string& type,
                         const std::string& model) {
  switch (g) {
    case GroupBy::kTenant:
      return tenant;
    case GroupBy::kQueue:
      return queue;
    case GroupBy::kUser:
      return user;
    case GroupBy::kType:
      return type;
    case GroupBy::kGpuModel:
      return model;
  }
  return tenant;
}

const std::string& KeyOf(GroupBy g, const JobInfo& j) {
  return KeyOf(g, j.tenant, j.queue, j.user, j.type, j.gpu_model);
}

// A cluster sample's figures (docs/reports.md, "Cluster samples"), parsed once.
struct Sample {
  int64_t at = 0, interval = 0;
  json data;
  int64_t Int(const char* k) const {
    auto it = data.find(k);
    return it != data.end() && it->is_number() ? it->get<int64_t>() : 0;
  }
  bool Has(const char* k) const {
    auto it = data.find(k);
    return it != data.end() && it->is_number();
  }
};

std::vector<Sample> ParseSamples(const std::vector<store::ClusterSampleRecord>& records) {
  std::vector<Sample> out;
  for (const store::ClusterSampleRecord& r : records) {
    json d = json::parse(r.data_json, nullptr, /*allow_exceptions=*/false);
    if (!d.is_object()) continue;  // unreadable: left out (docs/reports.md)
    out.push_back({r.at_ms, r.interval_ms, std::move(d)});
  }
  return out;
}

// o[k], or null (which iterates as empty) when o has no k. A reference, so that ranging over
// Field(...).items() does not range over a destroyed temporary.
const json& Field(const json& o, const char* k) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  auto it = o.find(k);
  return it != o.end() ? *it : kNull;
}

std::string Str(const json& o, const char* k) {
  auto it = o.find(k);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The window one set of rows is computed for, with the inputs already scoped to a tenant.
struct Ctx {
  int64_t a = 0, b = 0;
  GroupBy group = GroupBy::kTenant;
  bool grouped = true;  // false: the report's rows are not grouped (cluster, fragmentation, ...)
  const Inputs* in = nullptr;
  const std::vector<Sample>* samples = nullptr;
};

// ---- GPU time from the records ----------------------------------------------------------------

// The part of a usage record inside [a, b): its GPU time and, pro rata, its cost.
template <typename Fn>
void AddRecordPart(const store::UsageRecord& u, int64_t a, int64_t b, Fn& fn) {
  const int64_t ov = Overlap(u.start_ms, u.end_ms, a, b);
  if (ov <= 0) return;
  fn(u.tenant, u.queue, u.user, u.job_type, u.gpu_model,
     static_cast<double>(u.gpu_milli) * static_cast<double>(ov),
     static_cast<double>(u.cost_micro) * static_cast<double>(ov) /
         static_cast<double>(u.end_ms - u.start_ms));
}

// Calls fn(tenant, queue, user, job_type, gpu_model, milli_ms, cost_micro) for the GPU time
// inside [a, b), part by part. From the raw history: each stored record's overlap. From the
// aggregates: the rollup of the whole hours [A, B) = [ceil_hour(a), floor_hour(b)), and the stored
// records' overlap with the partial hours [a, A) and [B, b) only (all of [a, b) when it holds no
// whole hour). Open intervals count in full either way.
// The rollup rows of the whole hours [from, to): a search of usage_rollups, which is in (from_ms,
// to_ms) order, so a series of many windows does not scan every window's rows for each.
std::span<const store::UsageRollupRecord> RollupsOf(const Inputs& in, int64_t from, int64_t to) {
  using Row = store::UsageRollupRecord;
  const std::pair<int64_t, int64_t> window(from, to);
  const auto lo = std::lower_bound(
      in.usage_rollups.begin(), in.usage_rollups.end(), window,
      [](const Row& r, const auto& w) { return std::pair(r.from_ms, r.to_ms) < w; });
  const auto hi = std::upper_bound(
      lo, in.usage_rollups.end(), window,
      [](const auto& w, const Row& r) { return w < std::pair(r.from_ms, r.to_ms); });
  return {lo, hi};
}

template <typename Fn>
void ForEachUsage(const Inputs& in, int64_t a, int64_t b, Fn fn) {
  for (const store::UsageRecord& u : in.open_usage) AddRecordPart(u, a, b, fn);
  const int64_t whole_from = store::CeilTo(a, store::kRollupHourMs);
  const int64_t whole_to = store::FloorTo(b, store::kRollupHourMs);
  if (!in.aggregated || whole_from >= whole_to) {
    for (const store::UsageRecord& u : in.usage) AddRecordPart(u, a, b, fn);
    return;
  }
  for (const store::UsageRollupRecord& r : RollupsOf(in, whole_from, whole_to)) {
    fn(r.tenant, r.queue, r.user, r.job_type, r.gpu_model, static_cast<double>(r.gpu_milli_ms),
       r.cost_micro);
  }
  for (const store::UsageRecord& u : in.usage) {
    AddRecordPart(u, a, whole_from, fn);
    AddRecordPart(u, whole_to, b, fn);
  }
}

// A tenant's GPU time in [start, now): the budget's used figure.
double BudgetUsed(const Inputs& in, const std::string& tenant, int64_t start) {
  double used = 0;
  auto add = [&](const std::string& t, const std::string&, const std::string&, const std::string&,
                 const std::string&, double milli_ms, double) {
    if (t == tenant) used += milli_ms;
  };
  const int64_t hour = store::FloorTo(in.now_ms, store::kRollupHourMs);
  for (const store::UsageRecord& u : in.open_usage) AddRecordPart(u, start, in.now_ms, add);
  if (!in.aggregated || start >= hour) {
    for (const store::UsageRecord& u : in.usage) AddRecordPart(u, start, in.now_ms, add);
    return used;
  }
  for (const store::UsageRollupRecord& r : RollupsOf(in, start, hour)) {
    if (r.tenant == tenant) used += static_cast<double>(r.gpu_milli_ms);
  }
  for (const store::UsageRecord& u : in.usage) AddRecordPart(u, hour, in.now_ms, add);
  return used;
}

// ---- usage ----------------------------------------------------------------------------------

Table Usage(const Ctx& c) {
  struct Acc {
    double alloc = 0, cost_micro = 0, busy = 0;
    bool has_busy = false;
  };
  std::map<std::string, Acc> acc;
  ForEachUsage(
      *c.in, c.a, c.b,
      [&](const std::string& tenant, const std::string& queue, const std::string& user,
          const std::string& type, const std::string& model, double milli_ms, double cost_micro) {
        Acc& x = acc[KeyOf(c.group, tenant, queue, user, type, model)];
        x.alloc += milli_ms;
        x.cost_micro += cost_micro;  // the part of the cost inside the period, pro rata
      });
  for (const Sample& s : *c.samples) {
    const int64_t ov = Overlap(s.at, s.at + s.interval, c.a, c.b);
    if (ov <= 0) continue;
    for (const json& r : Field(s.data, "running")) {
      const std::string key = KeyOf(c.group, Str(r, "tenant"), Str(r, "queue"), Str(r, "user"),
                                    Str(r, "type"), Str(r, "gpu_model"));
      Acc& x = acc[key];
      auto busy = r.find("busy");
      if (busy != r.end() && busy->is_number()) {
        x.busy += busy->get<double>() * static_cast<double>(ov);
        x.has_busy = true;
      }
    }
  }
  const bool budgets = c.group == GroupBy::kTenant;
  Table t;
  t.columns = {std::string(GroupByName(c.group)), "gpu_hours", "busy_gpu_hours", "cost"};
  if (budgets) {
    for (const TenantBudget& b : c.in->budgets) acc.try_emplace(b.tenant);
    for (const char* col :
         {"budget_gpu_hours", "budget_used_gpu_hours", "budget_used_pct", "forecast_gpu_hours"}) {
      t.columns.emplace_back(col);
    }
  }
  for (const auto& [key, x] : acc) {
    std::vector<json> row = {key, Hours(x.alloc), x.has_busy ? Hours(x.busy) : json(nullptr),
                             Num(x.cost_micro / 1e6)};
    if (budgets) {
      auto b = std::find_if(c.in->budgets.begin(), c.in->budgets.end(),
                            [&](const TenantBudget& tb) { return tb.tenant == key; });
      if (b == c.in->budgets.end() || b->gpu_hours <= 0) {
        row.insert(row.end(), 4, json(nullptr));
      } else {
        // used = GPU time of the tenant in [period start, now); forecast = used at the same rate
        // until the period's end: used x (end - start) / (now - start).
        const auto [ps, pe] = BudgetPeriod(b->period, c.in->now_ms);
        const double used = BudgetUsed(*c.in, key, ps);
        const double elapsed = static_cast<double>(c.in->now_ms - ps);
        const double forecast = elapsed > 0 ? used * static_cast<double>(pe - ps) / elapsed : used;
        const double budget = static_cast<double>(b->gpu_hours) * kMilliMsPerGpuHour;
        row.push_back(b->gpu_hours);
        row.push_back(Hours(used));
        row.push_back(Num(100.0 * used / budget));
        row.push_back(Hours(forecast));
      }
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

// ---- wait -----------------------------------------------------------------------------------

// The job events to replay: none when the report reads the aggregates.
const std::vector<store::JobEventRecord>& RawEvents(const Inputs& in) {
  static const std::vector<store::JobEventRecord> kNone;
  return in.aggregated ? kNone : in.events;
}

// Nearest rank: the smallest value with at least p% of the values at or below it.
double Percentile(const std::vector<int64_t>& sorted, double p) {
  const size_t n = sorted.size();
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  return static_cast<double>(sorted[rank - 1]);
}

using WaitKey = std::pair<std::string, std::string>;  // group, type
using WaitValues = std::map<WaitKey, std::vector<int64_t>>;
using Waiting = std::map<WaitKey, std::pair<int64_t, int64_t>>;  // jobs pending at b, longest wait

// From the aggregates: the facts' waits that ended with an admission inside [a, b), and those
// that overlap b (since < b <= at) or are still open (pending jobs): the jobs waiting at b.
void WaitsFromFacts(const Ctx& c, WaitValues& waits, Waiting& waiting) {
  const bool by_type = c.group == GroupBy::kType;
  auto key = [&](const std::string& tenant, const std::string& queue, const std::string& user,
                 const std::string& type, const std::string& model) -> WaitKey {
    return {by_type ? std::string() : KeyOf(c.group, tenant, queue, user, type, model), type};
  };
  auto still_waiting = [&](const WaitKey& k, int64_t since) {
    auto& w = waiting[k];
    ++w.first;
    w.second = std::max(w.second, c.b - since);
  };
  // The key of each attribution, once: a quarter holds millions of waits and a few thousand
  // attributions.
  const store::JobWaits& in = c.in->waits;
  std::vector<WaitKey> keys;
  std::vector<std::vector<int64_t>*> values;
  keys.reserve(in.attributions.size());
  values.reserve(in.attributions.size());
  for (const store::WaitAttribution& at : in.attributions) {
    keys.push_back(key(at.tenant, at.queue, at.user, at.job_type, at.gpu_model));
    values.push_back(&waits[keys.back()]);
  }
  for (const store::JobWait& w : in.waits) {
    if (w.admitted && w.at_ms >= c.a && w.at_ms < c.b) {
      values[w.attribution]->push_back(w.at_ms - w.since_ms);
    }
    if (w.since_ms < c.b && w.at_ms >= c.b) still_waiting(keys[w.attribution], w.since_ms);
  }
  std::erase_if(waits, [](const auto& kv) { return kv.second.empty(); });
  for (const PendingJob& p : c.in->pending) {
    if (p.since_ms >= c.b) continue;
    const JobInfo& j = p.info;
    still_waiting(key(j.tenant, j.queue, j.user, j.type, j.gpu_model), p.since_ms);
  }
}

Table Wait(const Ctx& c) {
  const bool by_type = c.group == GroupBy::kType;
  using Key = WaitKey;
  WaitValues waits;
  Waiting waiting;
  std::map<uint64_t, int64_t> pending_since;
  if (c.in->aggregated) WaitsFromFacts(c, waits, waiting);
  for (const store::JobEventRecord& e : RawEvents(*c.in)) {
    if (e.at_ms >= c.b) continue;  // after the period (seq order is time order but for clock steps)
    auto j = c.in->jobs.find(e.job_id);
    if (j == c.in->jobs.end()) continue;
    if (e.to_state == "pending") {
      if (e.from_state != "pending") pending_since[e.job_id] = e.at_ms;
      continue;
    }
    auto since = pending_since.find(e.job_id);
    if (since == pending_since.end()) continue;
    if (e.to_state == "admitted" && e.at_ms >= c.a) {
      waits[{by_type ? std::string() : KeyOf(c.group, j->second), j->second.type}].push_back(
          e.at_ms - since->second);
    }
    pending_since.erase(since);  // admitted, or left pending otherwise (cancelled, suspended)
  }
  for (const auto& [id, since] : pending_since) {
    const JobInfo& j = c.in->jobs.at(id);
    auto& w = waiting[{by_type ? std::string() : KeyOf(c.group, j), j.type}];
    ++w.first;
    w.second = std::max(w.second, c.b - since);
  }
  Table t;
  if (!by_type) t.columns.emplace_back(GroupByName(c.group));
  for (const char* col : {"type", "admissions", "wait_p50_s", "wait_p90_s", "wait_p99_s",
                          "wait_max_s", "waiting_at_end", "longest_waiting_s"}) {
    t.columns.emplace_back(col);
  }
  std::set<Key> keys;
  for (const auto& [k, v] : waits) keys.insert(k);
  for (const auto& [k, v] : waiting) keys.insert(k);
  for (const Key& k : keys) {
    std::vector<json> row;
    if (!by_type) row.push_back(k.first);
    row.push_back(k.second);
    auto w = waits.find(k);
    if (w == waits.end()) {
      row.push_back(0);
      row.insert(row.end(), 4, json(nullptr));
    } else {
      std::vector<int64_t>& v = w->second;
      std::sort(v.begin(), v.end());
      row.push_back(v.size());
      for (double p : {50.0, 90.0, 99.0}) row.push_back(Num(Percentile(v, p) / 1000.0));
      row.push_back(Num(static_cast<double>(v.back()) / 1000.0));
    }
    auto q = waiting.find(k);
    row.push_back(q == waiting.end() ? 0 : q->second.first);
    row.push_back(q == waiting.end() ? json(nullptr)
                                     : Num(static_cast<double>(q->second.second) / 1000.0));
    t.rows.push_back(std::move(row));
  }
  return t;
}

// ---- failures -------------------------------------------------------------------------------

Table Failures(const Ctx& c) {
  struct Acc {
    int64_t runs = 0, succeeded = 0, failed = 0;
    std::map<std::string, int64_t> causes;
  };
  std::map<std::string, Acc> acc;
  for (const store::JobFactRecord& f : c.in->facts) {
    if (!c.in->aggregated) break;
    if (f.at_ms < c.a || f.at_ms >= c.b) continue;
    if (f.kind != "succeeded" && f.kind != "failed") continue;
    Acc& x = acc[KeyOf(c.group, f.tenant, f.queue, f.user, f.job_type, f.gpu_model)];
    ++x.runs;
    if (f.kind == "succeeded") {
      ++x.succeeded;
    } else {
      ++x.failed;
      ++x.causes[f.reason];
    }
  }
  for (const store::JobEventRecord& e : RawEvents(*c.in)) {
    if (e.at_ms < c.a || e.at_ms >= c.b) continue;
    auto j = c.in->jobs.find(e.job_id);
    if (j == c.in->jobs.end()) continue;
    // One outcome per run: succeeded, failed, timed_out or lost. A lost run that has no retries
    // left then fails ("lost, and no retries left"): that is the same run, counted once.
    const bool ok = e.to_state == "succeeded";
    const bool bad = e.to_state == "timed-out" || e.to_state == "lost" ||
                     (e.to_state == "failed" && e.from_state != "lost");
    if (!ok && !bad) continue;
    Acc& x = acc[KeyOf(c.group, j->second)];
    ++x.runs;
    if (ok) {
      ++x.succeeded;
    } else {
      ++x.failed;
      ++x.causes[FailureCause(e.to_state, e.reason)];
    }
  }
  Table t;
  t.columns = {std::string(GroupByName(c.group)),
               "runs",
               "succeeded",
               "failed",
               "failure_rate",
               "top_causes"};
  for (const auto& [key, x] : acc) {
    std::vector<std::pair<std::string, int64_t>> causes(x.causes.begin(), x.causes.end());
    std::stable_sort(causes.begin(), causes.end(),
                     [](const auto& l, const auto& r) { return l.second > r.second; });
    std::string top;
    for (size_t i = 0; i < causes.size() && i < 3; ++i) {
      top += fmt::format("{}{} ({})", i > 0 ? "; " : "", causes[i].first, causes[i].second);
    }
    t.rows.push_back({key, x.runs, x.succeeded, x.failed,
                      Num(static_cast<double>(x.failed) / static_cast<double>(x.runs)), top});
  }
  return t;
}

// ---- preemptions ----------------------------------------------------------------------------

// "preempted by job 12 (reclaim)" -> "reclaim".
std::string PreemptionReason(const std::string& reason) {
  const size_t open = reason.rfind('(');
  const size_t close = reason.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return "other";
  return reason.substr(open + 1, close - open - 1);
}

Table Preemptions(const Ctx& c) {
  struct Acc {
    int64_t count = 0;
    std::set<uint64_t> jobs;
    double lost = 0;
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;
  std::map<uint64_t, int64_t> run_start;  // when the current run's tasks were all running
  if (c.in->aggregated) {
    for (const store::JobFactRecord& f : c.in->facts) {
      if (f.kind != "preempted" || f.at_ms < c.a || f.at_ms >= c.b) continue;
      Acc& x = acc[{KeyOf(c.group, f.tenant, f.queue, f.user, f.job_type, f.gpu_model),
                    PreemptionReason(f.reason)}];
      ++x.count;
      x.jobs.insert(f.job_id);
      x.lost += static_cast<double>(f.lost_milli_ms);
    }
  }
  for (const store::JobEventRecord& e : RawEvents(*c.in)) {
    if (e.at_ms >= c.b) continue;
    auto j = c.in->jobs.find(e.job_id);
    if (j == c.in->jobs.end()) continue;
    if (e.to_state == "running") {
      run_start[e.job_id] = e.at_ms;
    } else if (e.to_state == "admitted") {
      run_start.erase(e.job_id);
    } else if (e.to_state == "preempting" && e.at_ms >= c.a) {
      Acc& x = acc[{KeyOf(c.group, j->second), PreemptionReason(e.reason)}];
      ++x.count;
      x.jobs.insert(e.job_id);
      // Work lost: the run from its start to the preemption, at the job's GPUs.
      auto s = run_start.find(e.job_id);
      if (s != run_start.end()) {
        x.lost +=
            static_cast<double>(j->second.gpu_milli) * static_cast<double>(e.at_ms - s->second);
      }
    }
  }
  Table t;
  t.columns = {std::string(GroupByName(c.group)), "reason", "preemptions", "jobs",
               "gpu_hours_lost"};
  for (const auto& [key, x] : acc) {
    t.rows.push_back({key.first, key.second, x.count, x.jobs.size(), Hours(x.lost)});
  }
  return t;
}

// ---- fairness -------------------------------------------------------------------------------

Table Fairness(const Ctx& c) {
  const bool tenants = c.group == GroupBy::kTenant;
  std::map<std::string, int64_t> guaranteed;
  std::map<std::string, std::string> parent;
  for (const Entitlement& e : c.in->entitlements) {
    if (e.is_tenant == tenants) guaranteed[e.name] = e.guaranteed_gpu_milli;
    if (!e.is_tenant) parent[e.name] = e.parent;
  }
  // A queue's GPU time is its own jobs' and its descendants'.
  std::map<std::string, double> used;
  ForEachUsage(*c.in, c.a, c.b,
               [&](const std::string& tenant, const std::string& queue, const std::string&,
                   const std::string&, const std::string&, double x, double) {
                 if (tenants) {
                   used[tenant] += x;
                   return;
                 }
                 std::string q = queue;
                 for (int depth = 0; !q.empty() && depth < 64 && q != tenant; ++depth) {
                   used[q] += x;
                   auto p = parent.find(q);
                   q = p == parent.end() ? std::string() : p->second;
                 }
               });
  for (const auto& [name, g] : guaranteed) used.try_emplace(name, 0.0);
  // x_i = used_i / entitled_i over the groups with an entitlement;
  // Jain's index = (sum x_i)^2 / (n x sum x_i^2): 1 when every group got the same share of its
  // entitlement, 1/n when one group got everything.
  const double span = static_cast<double>(c.b - c.a);
  double sum = 0, sum_sq = 0;
  int64_t n = 0;
  for (const auto& [name, g] : guaranteed) {
    if (g <= 0) continue;
    const double x = used[name] / (static_cast<double>(g) * span);
    sum += x;
    sum_sq += x * x;
    ++n;
  }
  const json jain =
      n > 0 && sum_sq > 0 ? Num(sum * sum / (static_cast<double>(n) * sum_sq)) : json(nullptr);
  Table t;
  t.columns = {std::string(GroupByName(c.group)),
               "gpu_hours",
               "guaranteed_gpus",
               "entitled_gpu_hours",
               "share_of_entitlement",
               "jain_index"};
  for (const auto& [name, u] : used) {
    auto g = guaranteed.find(name);
    const int64_t gm = g == guaranteed.end() ? 0 : g->second;
    const double entitled = static_cast<double>(gm) * span;
    t.rows.push_back({name, Hours(u), Num(static_cast<double>(gm) / 1000.0), Hours(entitled),
                      gm > 0 ? Num(u / entitled) : json(nullptr), jain});
  }
  return t;
}

// ---- cluster, fragmentation, idle-while-queued (from the samples) ---------------------------

Table Cluster(const Ctx& c) {
  if (c.grouped && c.group == GroupBy::kQueue) {
    // Backlog by queue: time-weighted means over the samples.
    struct Acc {
      double jobs = 0, gpus = 0;
      int64_t max_jobs = 0;
    };
    std::map<std::string, Acc> acc;
    double covered = 0;
    for (const Sample& s : *c.samples) {
      const int64_t ov = Overlap(s.at, s.at + s.interval, c.a, c.b);
      if (ov <= 0) continue;
      covered += static_cast<double>(ov);
      for (const auto& [q, v] : Field(s.data, "queues").items()) {
        Acc& x = acc[q];
        const int64_t jobs = v.value("pending_jobs", int64_t{0});
        x.jobs += static_cast<double>(jobs * ov);
        x.gpus += static_cast<double>(v.value("pending_gpus", int64_t{0}) * ov);
        x.max_jobs = std::max(x.max_jobs, jobs);
      }
    }
    Table t;
    t.columns = {"queue", "avg_pending_jobs", "avg_pending_gpus", "max_pending_jobs"};
    for (const auto& [q, x] : acc) {
      t.rows.push_back({q, Num(x.jobs / covered), Num(x.gpus / covered / 1000.0), x.max_jobs});
    }
    return t;
  }
  double total = 0, alloc = 0, idle_nodes = 0, jobs = 0, gpus = 0, covered = 0;
  int64_t max_jobs = 0, samples = 0;
  for (const Sample& s : *c.samples) {
    const int64_t ov = Overlap(s.at, s.at + s.interval, c.a, c.b);
    if (ov <= 0) continue;
    const double w = static_cast<double>(ov);
    ++samples;
    covered += w;
    total += static_cast<double>(s.Int("gpus_total")) * w;
    alloc += static_cast<double>(s.Int("gpus_allocated")) * w;
    idle_nodes += static_cast<double>(s.Int("idle_nodes")) * w;
    int64_t pending = 0;
    for (const auto& [q, v] : Field(s.data, "queues").items()) {
      pending += v.value("pending_jobs", int64_t{0});
      gpus += static_cast<double>(v.value("pending_gpus", int64_t{0})) * w;
    }
    jobs += static_cast<double>(pending) * w;
    max_jobs = std::max(max_jobs, pending);
  }
  // Busy GPU time from the GPU telemetry samples, pro rata of each row's part in the period.
  // GPU memory in use: the telemetry-time-weighted mean over the GPUs, and the highest.
  double busy_ms = 0, span_ms = 0, memory_mib_ms = 0;
  int64_t memory_max = 0;
  bool telemetry = false;
  for (const store::GpuSampleRecord& g : c.in->gpu_samples) {
    const int64_t ov = Overlap(g.at_ms, g.at_ms + g.resolution_ms, c.a, c.b);
    if (ov <= 0) continue;
    telemetry = true;
    const double part = static_cast<double>(ov) / static_cast<double>(g.resolution_ms);
    busy_ms += static_cast<double>(g.busy_ms) * part;
    span_ms += static_cast<double>(g.span_ms) * part;
    memory_mib_ms += static_cast<double>(g.memory_mib_ms) * part;
    memory_max = std::max(memory_max, g.memory_max_mib);
  }
  Table t;
  t.columns = {"samples",          "gpu_hours_total",         "gpu_hours_allocated",
               "allocation_rate",  "busy_gpu_hours",          "utilization",
               "node_idle_hours",  "avg_pending_jobs",        "avg_pending_gpus",
               "max_pending_jobs", "avg_gpu_memory_used_mib", "max_gpu_memory_used_mib"};
  const double busy_milli_ms = busy_ms * 1000.0;
  t.rows.push_back({samples, Hours(total), Hours(alloc),
                    total > 0 ? Num(alloc / total) : json(nullptr),
                    telemetry ? Hours(busy_milli_ms) : json(nullptr),
                    telemetry && total > 0 ? Num(busy_milli_ms / total) : json(nullptr),
                    Num(idle_nodes / kMsPerHour), covered > 0 ? Num(jobs / covered) : json(nullptr),
                    covered > 0 ? Num(gpus / covered / 1000.0) : json(nullptr), max_jobs,
                    span_ms > 0 ? Num(memory_mib_ms / span_ms) : json(nullptr),
                    telemetry ? json(memory_max) : json(nullptr)});
  return t;
}

Table Fragmentation(const Ctx& c) {
  double free = 0, frag = 0, covered = 0;
  int64_t max_frag = 0, samples = 0;
  for (const Sample& s : *c.samples) {
    const int64_t ov = Overlap(s.at, s.at + s.interval, c.a, c.b);
    if (ov <= 0) continue;
    const double w = static_cast<double>(ov);
    ++samples;
    covered += w;
    free += static_cast<double>(s.Int("gpus_free")) * w;
    frag += static_cast<double>(s.Int("fragmented")) * w;
    max_frag = std::max(max_frag, s.Int("fragmented"));
  }
  Table t;
  t.columns = {"samples",          "free_gpu_hours",      "fragmented_gpu_hours",
               "fragmented_share", "avg_fragmented_gpus", "max_fragmented_gpus"};
  t.rows.push_back({samples, Hours(free), Hours(frag), free > 0 ? Num(frag / free) : json(nullptr),
                    covered > 0 ? Num(frag / covered / 1000.0) : json(nullptr),
                    Num(static_cast<double>(max_frag) / 1000.0)});
  return t;
}

Table IdleWhileQueued(const Ctx& c) {
  struct Acc {
    double job_ms = 0, idle = 0;
  };
  std::map<std::string, Acc> acc;
  Acc any;
  for (const Sample& s : *c.samples) {
    const int64_t ov = Overlap(s.at, s.at + s.interval, c.a, c.b);
    if (ov <= 0) continue;
    const double w = static_cast<double>(ov);
    const json& waiting = Field(s.data, "waiting");
    const int64_t jobs = waiting.is_object() ? waiting.value("jobs", int64_t{0}) : 0;
    if (jobs <= 0) continue;
    const double idle = static_cast<double>(s.Int("gpus_free")) * w;
    any.job_ms += static_cast<double>(jobs) * w;
    any.idle += idle;
    for (const auto& [reason, n] : Field(waiting, "by_reason").items()) {
      if (!n.is_number() || n.get<int64_t>() <= 0) continue;
      Acc& x = acc[reason];
      x.job_ms += n.get<double>() * w;
      x.idle += idle;
    }
  }
  Table t;
  t.columns = {"reason", "waiting_job_hours", "idle_gpu_hours"};
  t.rows.push_back({"(any)", Num(any.job_ms / kMsPerHour), Hours(any.idle)});
  for (const auto& [reason, x] : acc) {
    t.rows.push_back({reason, Num(x.job_ms / kMsPerHour), Hours(x.idle)});
  }
  return t;
}

// The inputs restricted to one tenant's records.
// ---- serving ----------------------------------------------------------------------------------

// Per service and revision, and per service over its revisions (revision null): the gateways'
// requests and errors, latency quantiles from the summed histograms, the share of minutes that
// met the objective, ready replicas and the GPU time of its replicas (docs/reports.md).
Table Serving(const Ctx& c) {
  struct Acc {
    ServingFigures sum;
    int64_t minutes = 0;  // minutes with requests
    int64_t latency_ok = 0, availability_ok = 0, both_ok = 0;
    double milli_ms = 0, cost_micro = 0;
    // Ready replicas: the revisions' samples of one minute add up for the service's row.
    std::map<int64_t, ServingFigures> ready_by_minute;
  };
  const Inputs& in = *c.in;
  std::map<std::pair<std::string, int64_t>, Acc> accs;  // revision -1: the service's total
  // A minute's figures per (service, revision), and per service.
  std::map<std::tuple<std::string, int64_t, int64_t>, ServingFigures> minutes;
  for (const store::ServingStatRecord& r : in.serving) {
    if (r.minute_ms < c.a || r.minute_ms >= c.b) continue;
    const ServingFigures f = ServingFiguresFromJson(r.data_json);
    minutes[{r.service, r.revision, r.minute_ms}].Add(f);
    minutes[{r.service, -1, r.minute_ms}].Add(f);
  }
  for (const auto& [key, f] : minutes) {
    const auto& [service, revision, minute] = key;
    Acc& a = accs[{service, revision}];
    a.sum.Add(f);
    if (revision >= 0) a.ready_by_minute[minute].Add(f);
    if (f.requests == 0) continue;
    ++a.minutes;
    auto info = in.services.find(service);
    if (info == in.services.end() || info->second.latency_ms <= 0) continue;
    // A minute meets the latency objective when its share of requests within latency_ms is at
    // least the percentile; the availability one when its share of requests not failed is.
    const bool lat =
        ShareWithinMs(f.latency, static_cast<double>(info->second.latency_ms)) * 100.0 + 1e-9 >=
        info->second.percentile;
    const bool avail =
        (1.0 - static_cast<double>(f.errors()) / static_cast<double>(f.requests)) * 100.0 + 1e-9 >=
        info->second.availability;
    a.latency_ok += lat ? 1 : 0;
    a.availability_ok += avail ? 1 : 0;
    a.both_ok += lat && avail ? 1 : 0;
  }
  // GPU time of the replicas inside the window (the serving report reads the raw records).
  std::vector<const store::UsageRecord*> records;
  for (const store::UsageRecord& u : in.usage) records.push_back(&u);
  for (const store::UsageRecord& u : in.open_usage) records.push_back(&u);
  for (const store::UsageRecord* up : records) {
    const store::UsageRecord& u = *up;
    auto j = in.jobs.find(u.job_id);
    if (j == in.jobs.end() || j->second.service.empty()) continue;
    const int64_t ov = Overlap(u.start_ms, u.end_ms, c.a, c.b);
    if (ov <= 0) continue;
    const double part =
        u.end_ms > u.start_ms ? static_cast<double>(ov) / (u.end_ms - u.start_ms) : 0.0;
    for (int64_t rev : {j->second.revision, int64_t{-1}}) {
      Acc& a = accs[{j->second.service, rev}];
      a.milli_ms += static_cast<double>(u.gpu_milli) * static_cast<double>(ov);
      a.cost_micro += static_cast<double>(u.cost_micro) * part;
    }
  }
  Table t;
  t.columns = {"service",
               "revision",
               "requests",
               "errors",
               "error_rate",
               "p50_ms",
               "p99_ms",
               "availability",
               "slo_latency_attainment",
               "slo_availability_attainment",
               "slo_met",
               "replicas_min",
               "replicas_avg",
               "replicas_max",
               "gpu_hours",
               "cost",
               "cost_per_1k_requests"};
  for (const auto& [key, a] : accs) {
    const auto& [service, revision] = key;
    const ServingFigures& f = a.sum;
    const bool any = f.requests > 0;
    auto info = in.services.find(service);
    const bool slo = info != in.services.end() && info->second.latency_ms > 0 && a.minutes > 0;
    auto share = [&](int64_t n) { return slo ? Num(static_cast<double>(n) / a.minutes) : json(); };
    // Ready replicas per minute: a revision's samples; a service's, the sum over its revisions
    // of their average (and of their minima and maxima).
    std::map<int64_t, std::array<double, 3>> ready;  // minute -> avg, min, max
    for (const auto& [k, other] : accs) {
      if (k.first != service || k.second < 0 || (revision >= 0 && k.second != revision)) continue;
      for (const auto& [minute, m] : other.ready_by_minute) {
        if (m.ready_samples == 0) continue;
        std::array<double, 3>& r = ready[minute];
        r[0] += static_cast<double>(m.ready_sum) / static_cast<double>(m.ready_samples);
        r[1] += static_cast<double>(m.ready_min);
        r[2] += static_cast<double>(m.ready_max);
      }
    }
    double rmin = 0, rmax = 0, rsum = 0;
    for (const auto& [minute, r] : ready) {
      rmin = minute == ready.begin()->first ? r[1] : std::min(rmin, r[1]);
      rmax = std::max(rmax, r[2]);
      rsum += r[0];
    }
    const size_t rsamples = ready.size();
    const double cost = a.cost_micro / 1e6;
    t.rows.push_back(
        {service, revision >= 0 ? json(revision) : json(), f.requests, f.errors(),
         any ? Num(static_cast<double>(f.errors()) / f.requests) : json(),
         any ? Num(LatencyQuantileMs(f.latency, 0.5)) : json(),
         any ? Num(LatencyQuantileMs(f.latency, 0.99)) : json(),
         any ? Num(100.0 * (1.0 - static_cast<double>(f.errors()) / f.requests)) : json(),
         share(a.latency_ok), share(a.availability_ok), share(a.both_ok),
         rsamples > 0 ? Num(rmin) : json(),
         rsamples > 0 ? Num(rsum / static_cast<double>(rsamples)) : json(),
         rsamples > 0 ? Num(rmax) : json(), Hours(a.milli_ms), in.has_prices ? Num(cost) : json(),
         in.has_prices && any ? Num(cost / static_cast<double>(f.requests) * 1000.0) : json()});
  }
  return t;
}

Inputs ScopeToTenant(const Inputs& in, const std::string& tenant) {
  Inputs out;
  out.now_ms = in.now_ms;
  out.aggregated = in.aggregated;
  for (const auto& u : in.usage) {
    if (u.tenant == tenant) out.usage.push_back(u);
  }
  for (const auto& u : in.open_usage) {
    if (u.tenant == tenant) out.open_usage.push_back(u);
  }
  for (const auto& r : in.usage_rollups) {
    if (r.tenant == tenant) out.usage_rollups.push_back(r);
  }
  for (const auto& f : in.facts) {
    if (f.tenant == tenant) out.facts.push_back(f);
  }
  out.waits = store::WaitsOfTenant(in.waits, tenant);
  for (const auto& p : in.pending) {
    if (p.info.tenant == tenant) out.pending.push_back(p);
  }
  for (const auto& [id, j] : in.jobs) {
    if (j.tenant == tenant) out.jobs.emplace(id, j);
  }
  for (const auto& e : in.events) {
    if (out.jobs.contains(e.job_id)) out.events.push_back(e);
  }
  for (const auto& s : in.cluster_samples) {
    json d = json::parse(s.data_json, nullptr, false);
    if (!d.is_object()) continue;
    json running = json::array();
    for (const json& r : Field(d, "running")) {
      if (Str(r, "tenant") == tenant) running.push_back(r);
    }
    out.cluster_samples.push_back({s.at_ms, s.interval_ms, json{{"running", running}}.dump()});
  }
  for (const auto& b : in.budgets) {
    if (b.tenant == tenant) out.budgets.push_back(b);
  }
  for (const auto& e : in.entitlements) {
    if (e.tenant == tenant) out.entitlements.push_back(e);
  }
  for (const auto& [name, info] : in.services) {
    if (info.tenant == tenant) out.services.emplace(name, info);
  }
  for (const auto& r : in.serving) {
    if (out.services.contains(r.service)) out.serving.push_back(r);
  }
  out.has_prices = in.has_prices;
  return out;
}

// ---- forecast -------------------------------------------------------------------------------

// The waits of the period: the stored ones (aggregates), or those of the raw events' facts (made
// in `made`).
const store::JobWaits& WaitsOfPeriod(const Inputs& in, store::JobWaits& made) {
  if (in.aggregated) return in.waits;
  std::vector<store::JobFactRecord> all;
  std::map<uint64_t, FactState> states;
  for (const store::JobEventRecord& e : in.events) {
    auto j = in.jobs.find(e.job_id);
    if (j != in.jobs.end()) FactsOfEvent(e, j->second, states[e.job_id], all);
  }
  made = store::WaitsOfFacts(all);
  return made;
}

// GPU time demanded in each whole day of [c.a, c.b) per group, milli-GPU ms: allocated (the usage
// records' GPU time) plus queued (each waiting job's GPUs for the time it waited in that day).
std::map<std::string, std::vector<double>> DailyDemand(const Ctx& c) {
  const auto days = static_cast<size_t>((c.b - c.a) / kDayMs);
  std::map<std::string, std::vector<double>> out;
  auto at = [&](const std::string& key) -> std::vector<double>& {
    std::vector<double>& v = out[key];
    if (v.empty()) v.assign(days, 0);
    return v;
  };
  for (size_t d = 0; d < days; ++d) {
    const int64_t a = c.a + static_cast<int64_t>(d) * kDayMs;
    ForEachUsage(*c.in, a, a + kDayMs,
                 [&](const std::string& tenant, const std::string& queue, const std::string& user,
                     const std::string& type, const std::string& model, double milli_ms, double) {
                   at(KeyOf(c.group, tenant, queue, user, type, model))[d] += milli_ms;
                 });
  }
  auto queued = [&](const std::string& key, int64_t since, int64_t until, int64_t gpu_milli) {
    since = std::max(since, c.a);
    until = std::min(until, c.b);
    if (gpu_milli <= 0 || since >= until) return;
    std::vector<double>& v = at(key);
    for (int64_t s = since; s < until;) {
      const auto d = static_cast<size_t>((s - c.a) / kDayMs);
      const int64_t e = std::min(until, c.a + static_cast<int64_t>(d + 1) * kDayMs);
      v[d] += static_cast<double>(gpu_milli) * static_cast<double>(e - s);
      s = e;
    }
  };
  store::JobWaits made;
  const store::JobWaits& waits = WaitsOfPeriod(*c.in, made);
  std::vector<std::string> keys;
  for (const store::WaitAttribution& who : waits.attributions) {
    keys.push_back(KeyOf(c.group, who.tenant, who.queue, who.user, who.job_type, who.gpu_model));
  }
  for (const store::JobWait& w : waits.waits) {
    queued(keys[w.attribution], w.since_ms, w.at_ms, w.gpu_milli);
  }
  for (const PendingJob& p : c.in->pending) {
    queued(KeyOf(c.group, p.info), p.since_ms, c.in->now_ms, p.info.gpu_milli);
  }
  return out;
}

// Per group: its history (a row a day), then per model the forecast (a row a day ahead, with the
// 80% band) and the backtest (one row: sMAPE and the band's coverage over the history).
Table Forecast(const Ctx& c, int64_t horizon_days) {
  Table t;
  t.columns = {std::string(GroupByName(c.group)),
               "date",
               "kind",
               "model",
               "gpu_hours",
               "lo80",
               "hi80",
               "smape_pct",
               "coverage_pct",
               "backtest_points"};
  auto date = [](int64_t ms) { return Rfc3339(ms).substr(0, 10); };
  const plan::ForecastOptions opts{
      .season = 7, .horizon = static_cast<int>(horizon_days), .level = 0.8};
  for (const auto& [key, milli_ms] : DailyDemand(c)) {
    std::vector<double> hours;
    for (double v : milli_ms) hours.push_back(v / kMilliMsPerGpuHour);
    for (size_t d = 0; d < hours.size(); ++d) {
      t.rows.push_back({key, date(c.a + static_cast<int64_t>(d) * kDayMs), "history", nullptr,
                        Num(hours[d]), nullptr, nullptr, nullptr, nullptr, nullptr});
    }
    for (plan::ForecastModel m :
         {plan::ForecastModel::kSeasonalNaive, plan::ForecastModel::kSeasonalTrend}) {
      Result<plan::Forecast> f = plan::Fit(m, hours, opts);
      if (!f.ok()) continue;  // too short a history for this model
      const std::string model(plan::ForecastModelName(m));
      for (size_t h = 0; h < f->points.size(); ++h) {
        const plan::ForecastPoint& p = f->points[h];
        t.rows.push_back({key, date(c.b + static_cast<int64_t>(h) * kDayMs), "forecast", model,
                          Num(p.mean), Num(p.lo), Num(p.hi), nullptr, nullptr, nullptr});
      }
      const plan::Backtest b = plan::RunBacktest(m, hours, opts);
      t.rows.push_back({key, nullptr, "backtest", model, nullptr, nullptr, nullptr,
                        b.points > 0 ? Num(b.smape) : json(nullptr),
                        b.points > 0 ? Num(100 * b.coverage) : json(nullptr), b.points});
    }
  }
  return t;
}

std::optional<GroupBy> DefaultGroup(std::string_view name) {
  if (name == "usage" || name == "forecast") return GroupBy::kTenant;
  if (name == "wait" || name == "failures" || name == "preemptions" || name == "fairness") {
    return GroupBy::kQueue;
  }
  return std::nullopt;
}

Table Window(std::string_view name, const Ctx& c) {
  if (name == "serving") return Serving(c);
  if (name == "usage") return Usage(c);
  if (name == "wait") return Wait(c);
  if (name == "failures") return Failures(c);
  if (name == "preemptions") return Preemptions(c);
  if (name == "fairness") return Fairness(c);
  if (name == "cluster") return Cluster(c);
  if (name == "fragmentation") return Fragmentation(c);
  return IdleWhileQueued(c);
}

Table Run(std::string_view name, const Query& q, const Inputs& in, std::optional<GroupBy> group);

}  // namespace

std::string_view GroupByName(GroupBy g) {
  switch (g) {
    case GroupBy::kTenant:
      return "tenant";
    case GroupBy::kQueue:
      return "queue";
    case GroupBy::kUser:
      return "user";
    case GroupBy::kType:
      return "type";
    case GroupBy::kGpuModel:
      return "gpu_model";
  }
  return "tenant";
}

std::optional<GroupBy> ParseGroupBy(std::string_view s) {
  if (s == "tenant") return GroupBy::kTenant;
  if (s == "queue") return GroupBy::kQueue;
  if (s == "user") return GroupBy::kUser;
  if (s == "type") return GroupBy::kType;
  if (s == "gpu_model" || s == "gpu-model") return GroupBy::kGpuModel;
  return std::nullopt;
}

std::span<const std::string_view> ReportNames() { return kNames; }

bool IsClusterWide(std::string_view name) {
  return name == "cluster" || name == "fragmentation" || name == "idle-while-queued";
}

Result<Table> Compute(std::string_view name, const Query& q, const Inputs& in) {
  if (std::find(kNames.begin(), kNames.end(), name) == kNames.end()) {
    return InvalidArgument(
        "report", fmt::format("unknown report '{}'; one of: {}", name, fmt::join(kNames, ", ")));
  }
  if (q.to_ms <= q.from_ms) {
    return InvalidArgument(
        "to", fmt::format("must be after from ({} <= {})", Rfc3339(q.to_ms), Rfc3339(q.from_ms)));
  }
  if (q.step_ms < 0) return InvalidArgument("step", "must be > 0");
  if (q.step_ms > 0 && (q.to_ms - q.from_ms + q.step_ms - 1) / q.step_ms > kMaxSteps) {
    return InvalidArgument("step", fmt::format("gives more than {} steps over the period; use a "
                                               "longer step or a shorter period",
                                               kMaxSteps));
  }
  if (name == "forecast") {
    if (q.step_ms != 0) return InvalidArgument("step", "the forecast is by day: it takes no step");
    const Query d = ForecastDays(q);
    const int64_t days = d.to_ms > d.from_ms ? (d.to_ms - d.from_ms) / kDayMs : 0;
    if (days < 7) {
      return InvalidArgument(
          "since", fmt::format("the forecast needs at least 7 whole UTC days of history (its "
                               "season is a week); the period holds {}",
                               days));
    }
    if (days > kMaxSteps) {
      return InvalidArgument(
          "since", fmt::format("the forecast reads at most {} days of history", kMaxSteps));
    }
    if (q.horizon_ms < 0 || q.horizon_ms > kForecastMaxHorizonDays * kDayMs) {
      return InvalidArgument("horizon",
                             fmt::format("must be 1 to {} days ahead", kForecastMaxHorizonDays));
    }
  }
  std::optional<GroupBy> group = q.group_by ? q.group_by : DefaultGroup(name);
  if (name == "fairness" && group != GroupBy::kTenant && group != GroupBy::kQueue) {
    return InvalidArgument("group_by", "fairness is by tenant or by queue");
  }
  if (name == "cluster" && q.group_by && *q.group_by != GroupBy::kQueue) {
    return InvalidArgument("group_by", "the cluster report is for the whole cluster or by queue");
  }
  if ((name == "fragmentation" || name == "idle-while-queued") && q.group_by) {
    return InvalidArgument("group_by", fmt::format("the {} report has no grouping", name));
  }
  Inputs scoped;
  const Inputs* use = &in;
  if (!q.tenant.empty()) {
    scoped = ScopeToTenant(in, q.tenant);
    use = &scoped;
  }
  try {
    return Run(name, q, *use, group);
  } catch (const std::exception& e) {
    // Samples are written by the server; one of another shape is a bug, not bad input.
    return Internal(fmt::format("report {}: unreadable sample: {}", name, e.what()));
  }
}

namespace {
Table Run(std::string_view name, const Query& q, const Inputs& in, std::optional<GroupBy> group) {
  const std::vector<Sample> samples = ParseSamples(in.cluster_samples);
  Ctx c;
  c.group = group.value_or(GroupBy::kTenant);
  c.grouped = group.has_value();
  c.in = &in;
  c.samples = &samples;
  if (name == "forecast") {
    const Query d = ForecastDays(q);
    c.a = d.from_ms;
    c.b = d.to_ms;
    const int64_t horizon = q.horizon_ms == 0
                                ? kForecastHorizonDays
                                : std::max<int64_t>(1, (q.horizon_ms + kDayMs - 1) / kDayMs);
    return Forecast(c, horizon);
  }
  if (q.step_ms == 0) {
    c.a = q.from_ms;
    c.b = q.to_ms;
    return Window(name, c);
  }
  Table out;
  for (int64_t a = q.from_ms; a < q.to_ms; a += q.step_ms) {
    c.a = a;
    c.b = std::min(q.to_ms, a + q.step_ms);
    Table t = Window(name, c);
    if (out.columns.empty()) {
      out.columns = {"period_start"};
      out.columns.insert(out.columns.end(), t.columns.begin(), t.columns.end());
    }
    for (auto& row : t.rows) {
      row.insert(row.begin(), Rfc3339(a));
      out.rows.push_back(std::move(row));
    }
  }
  return out;
}
}  // namespace

json ToJson(std::string_view name, const Query& q, const Table& t) {
  json rows = json::array();
  for (const auto& r : t.rows) {
    json o = json::object();
    for (size_t i = 0; i < t.columns.size() && i < r.size(); ++i) o[t.columns[i]] = r[i];
    rows.push_back(std::move(o));
  }
  std::optional<GroupBy> group = q.group_by ? q.group_by : DefaultGroup(name);
  return {{"report", name},
          {"from", Rfc3339(q.from_ms)},
          {"to", Rfc3339(q.to_ms)},
          {"group_by", group ? json(GroupByName(*group)) : json(nullptr)},
          {"step_seconds", q.step_ms > 0 ? json(q.step_ms / 1000) : json(nullptr)},
          {"columns", t.columns},
          {"rows", std::move(rows)}};
}

namespace {
std::string CsvField(const json& v) {
  std::string s;
  if (v.is_null()) return s;
  s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  out += '"';
  return out;
}
}  // namespace

std::string ToCsv(const Table& t) {
  std::string out;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    out += fmt::format("{}{}", i > 0 ? "," : "", CsvField(t.columns[i]));
  }
  out += "\r\n";
  for (const auto& r : t.rows) {
    for (size_t i = 0; i < r.size(); ++i)
      out += fmt::format("{}{}", i > 0 ? "," : "", CsvField(r[i]));
    out += "\r\n";
  }
  return out;
}

std::string FailureCause(std::string_view to_state, std::string_view reason) {
  if (to_state == "timed-out") return "timeout";
  if (to_state == "lost") return "lost node";
  constexpr std::string_view kExit = "a task exited with code ";
  if (reason.starts_with(kExit)) return fmt::format("exit code {}", reason.substr(kExit.size()));
  return std::string(reason);
}

void FactsOfEvent(const store::JobEventRecord& e, const JobInfo& info, FactState& state,
                  std::vector<store::JobFactRecord>& out) {
  auto fact = [&](const char* kind, int64_t since, int64_t lost, std::string reason) {
    out.push_back({0, e.job_id, e.at_ms, kind, info.tenant, info.queue, info.user, info.type,
                   info.gpu_model, std::min(since, e.at_ms), lost, std::move(reason),
                   info.gpu_milli});
  };
  // A wait: from the event into pending (from another state) to the first event out of it.
  if (e.to_state == "pending") {
    if (e.from_state != "pending") state.pending_since = e.at_ms;
  } else if (state.pending_since) {
    fact(e.to_state == "admitted" ? "admitted" : "unqueued", *state.pending_since, 0, "");
    state.pending_since.reset();
  }
  // An outcome: the first final event of a run (a lost run that then fails is counted once).
  if (e.to_state == "succeeded") {
    fact("succeeded", e.at_ms, 0, "");
  } else if (e.to_state == "timed-out" || e.to_state == "lost" ||
             (e.to_state == "failed" && e.from_state != "lost")) {
    fact("failed", e.at_ms, 0, FailureCause(e.to_state, e.reason));
  }
  // A preemption loses the run since it reached running, at the job's GPUs.
  if (e.to_state == "running") {
    state.running_since = e.at_ms;
  } else if (e.to_state == "admitted") {
    state.running_since.reset();
  } else if (e.to_state == "preempting") {
    const int64_t lost =
        state.running_since ? info.gpu_milli * (e.at_ms - *state.running_since) : 0;
    fact("preempted", state.running_since.value_or(e.at_ms), lost, e.reason);
  }
}

Query ForecastDays(const Query& q) {
  Query d = q;
  d.from_ms = store::CeilTo(q.from_ms, kDayMs);
  d.to_ms = store::FloorTo(q.to_ms, kDayMs);
  d.step_ms = kDayMs;
  return d;
}

std::pair<int64_t, int64_t> BudgetPeriod(std::string_view period, int64_t now_ms) {
  const std::time_t s = now_ms / 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  tm.tm_hour = 0;
  tm.tm_min = 0;
  tm.tm_sec = 0;
  if (period == "week") {
    tm.tm_mday -= (tm.tm_wday + 6) % 7;
  } else if (period == "month") {
    tm.tm_mday = 1;
  }
  std::tm end = tm;
  if (period == "week") {
    end.tm_mday += 7;
  } else if (period == "month") {
    end.tm_mon += 1;
  } else {
    end.tm_mday += 1;
  }
  return {static_cast<int64_t>(timegm(&tm)) * 1000, static_cast<int64_t>(timegm(&end)) * 1000};
}

std::string_view WaitReason(std::string_view code, int64_t free_allowed_milli, int64_t free_milli,
                            int64_t needed_milli) {
  if (code == "QuotaExceeded") return "quota";
  if (code == "BorrowLimit") return "borrow_limit";
  if (code == "BudgetExhausted") return "budget";
  if (code == "Inadmissible") return "inadmissible";
  if (code == "GangIncomplete") return "gang";
  if (code == "WaitingForReservation") return "reservation";
  if (code == "LowerPriority") return "priority";
  // Holds the job's owner chose: not the cluster's doing.
  if (code == "Dependency") return "dependency";
  if (code == "ArrayThrottled") return "array_throttle";
  if (code == "NoFeasibleNode") {
    if (free_allowed_milli >= needed_milli) return "fragmented";
    if (free_milli >= needed_milli) return "wrong_model";
    return "no_capacity";
  }
  if (code.empty()) return "not_yet_scheduled";
  return "other";
}

}  // namespace arbiter::server::reports

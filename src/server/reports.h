// Reports: who used how much, how long each team waited, how often jobs failed or were preempted,
// and where GPUs sat idle while jobs queued, for any period. docs/reports.md defines every column.
//
// Every figure is computed from stored records only: usage records (one per task interval), job
// events, and the server's cluster samples (sampler.h) and GPU telemetry samples. Compute() is a
// pure function of those inputs and the query, so the same records always give the same table;
// the server gathers the inputs (ControlPlane::Report) and renders the table as JSON or CSV.
//
// Units: GPU amounts are milli-GPU in the records (fixed point), GPU time milli-GPU x ms; the
// tables show GPU-hours (1 GPU-hour = 1000 x 3,600,000 milli-GPU ms), seconds and currency units
// as numbers, and null where the records say nothing (no telemetry, no entitlement).
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "store/records.h"

namespace arbiter::server::reports {

enum class GroupBy { kTenant, kQueue, kUser, kType, kGpuModel };
std::string_view GroupByName(GroupBy g);                  // "tenant", ..., "gpu_model"
std::optional<GroupBy> ParseGroupBy(std::string_view s);  // also accepts "gpu-model"

// The report names, in the order docs/reports.md lists them.
std::span<const std::string_view> ReportNames();
// Whether the report describes the whole cluster (cluster, fragmentation, idle-while-queued)
// rather than rows that belong to tenants.
bool IsClusterWide(std::string_view name);

struct Query {
  int64_t from_ms = 0;  // the period [from_ms, to_ms)
  int64_t to_ms = 0;
  std::optional<GroupBy> group_by;  // unset: the report's default (docs/reports.md)
  int64_t step_ms = 0;              // > 0: one set of rows per step, labelled by period_start
  std::string tenant;               // not empty: only this tenant's records (a tenant's user)
  std::string service{};            // serving: not empty: only this service
  int64_t horizon_ms = 0;           // forecast: how far ahead (0: kForecastHorizonDays)
};

// The most steps a series may have.
inline constexpr int64_t kMaxSteps = 1000;

// The forecast report (docs/reports.md, "forecast"): GPU-hours demanded per UTC day, allocated
// plus queued, with a weekly season, forecast by plan/forecast.h's models.
inline constexpr int64_t kDayMs = 86'400'000;
inline constexpr int64_t kForecastHorizonDays = 14;
inline constexpr int64_t kForecastMaxHorizonDays = 366;
inline constexpr int64_t kForecastDefaultHistoryDays = 56;  // when no from or since is given
// The whole UTC days of the query's period that the forecast reads: [floor_day(from),
// floor_day(to)), one step a day (today, not over yet, is left out).
Query ForecastDays(const Query& q);

// What a job's events are grouped by (from the job's record).
struct JobInfo {
  std::string tenant, queue, user, type, gpu_model;
  int64_t gpu_milli = 0;  // all tasks together: tasks x gpus x gpu_milli
  std::string service{};  // a service's replica: its service ("" for other jobs)
  int64_t revision = 0;   // and revision
};

// A service, for the serving report: its tenant and objective (latency_ms 0: none).
struct ServiceInfo {
  std::string tenant;
  int64_t latency_ms = 0;
  double percentile = 99;
  double availability = 99.9;
};

struct TenantBudget {
  std::string tenant;
  int64_t gpu_hours = 0;  // per period
  std::string period;     // "day", "week" or "month" (UTC)
};

// A queue's (or a tenant's) guaranteed GPUs, for the fairness report.
struct Entitlement {
  std::string name;    // queue or tenant name
  std::string tenant;  // its tenant (itself for a tenant)
  std::string parent;  // the parent queue ("" for a tenant; the tenant for a top-level queue)
  bool is_tenant = false;
  int64_t guaranteed_gpu_milli = 0;
};

// A job pending now (an open wait, for waiting_at_end): its attribution and when it entered
// pending.
struct PendingJob {
  uint64_t job_id = 0;
  JobInfo info;
  int64_t since_ms = 0;
};

struct Inputs {
  // Two ways to give the same records (docs/reports.md, "How the reports read the records"):
  //  - aggregated = false: the raw history: `usage` holds every stored usage record overlapping
  //    the period (and the current budget periods), `events` every job event in seq order (a
  //    job's whole history, to know when it began waiting) and `jobs` every job they name;
  //  - aggregated = true: the report aggregates (ReadReportRecords, report_inputs.h): usage and
  //    fairness take the GPU time of each window's whole hours [ceil_hour(a), floor_hour(b)) from
  //    `usage_rollups` (one row set per such range, from_ms/to_ms naming it, and one per budget
  //    period [start, floor_hour(now)), in (from_ms, to_ms) order, as ReadReportRecords reads
  //    them) and only the partial hours from `usage` (the stored
  //    records that overlap them); wait and the forecast's queued demand read `waits` (the
  //    waits among the job facts, compact) and `pending`; failures and preemptions read `facts`.
  // Both give identical tables (reports_aggregates_test.cc).
  bool aggregated = false;
  std::vector<store::UsageRecord> usage;
  std::vector<store::JobEventRecord> events;
  std::map<uint64_t, JobInfo> jobs;
  std::vector<store::UsageRollupRecord> usage_rollups;
  std::vector<store::JobFactRecord> facts;
  store::JobWaits waits;
  std::vector<PendingJob> pending;
  // Intervals still open (tasks holding GPUs now, not stored yet), with end_ms = now_ms; counted
  // in both ways.
  std::vector<store::UsageRecord> open_usage;
  std::vector<store::ClusterSampleRecord> cluster_samples;  // in at_ms order
  std::vector<store::GpuSampleRecord> gpu_samples;
  std::vector<TenantBudget> budgets;
  std::vector<Entitlement> entitlements;
  // Serving: the services (by name, deleted ones included where their rows remain) and their
  // per-minute figures over the period (store::ServingStatRecord); whether any GPU model has a
  // price (else the cost columns are null).
  std::map<std::string, ServiceInfo> services;
  std::vector<store::ServingStatRecord> serving;
  bool has_prices = false;
  int64_t now_ms = 0;
};

// A table: cells are strings, numbers or null.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<nlohmann::json>> rows;
};

// Computes report `name` (one of ReportNames()). InvalidArgument naming the field ("report",
// "from", "to", "step", "group_by") for a query it cannot answer.
Result<Table> Compute(std::string_view name, const Query& q, const Inputs& in);

// {"report", "from", "to", "group_by", "step", "columns", "rows": [{column: value}]}; times as
// RFC 3339 UTC.
nlohmann::json ToJson(std::string_view name, const Query& q, const Table& t);
// RFC 4180: a header line, then one line per row; null is an empty field.
std::string ToCsv(const Table& t);

// The cause of a failed run from its final event: "timeout", "lost node", "exit code N", else
// the event's reason.
std::string FailureCause(std::string_view to_state, std::string_view reason);

// What the reports keep of a job between its events, to make its facts (persisted with the job).
struct FactState {
  std::optional<int64_t> pending_since;  // it entered pending then and has not left
  std::optional<int64_t> running_since;  // its current run last reached running then
};
// The facts (store::JobFactRecord) that event `e` of job `info` makes, appended to `out`; updates
// `state`. Event by event in seq order, this finds what the raw-history reports find: a wait ends
// at the first event out of pending ("admitted" or "unqueued"), an outcome is a first final
// event (lost -> failed counted once), a preemption loses the run since it reached running.
void FactsOfEvent(const store::JobEventRecord& e, const JobInfo& info, FactState& state,
                  std::vector<store::JobFactRecord>& out);

// [start, end) of the budget period ("day", "week" from Monday, "month") that holds `now`, UTC.
std::pair<int64_t, int64_t> BudgetPeriod(std::string_view period, int64_t now_ms);

// The reason a waiting job could not use free GPUs, as the samples record it: a verdict code
// mapped to "quota", "borrow_limit", "budget", "inadmissible", "gang", "reservation", "priority",
// and kNoFeasibleNode refined by the free GPUs into "fragmented" (enough free GPUs of an allowed
// model in total, not on few enough nodes), "wrong_model" (enough free GPUs, but of other models)
// or "no_capacity".
std::string_view WaitReason(std::string_view verdict_code, int64_t free_allowed_milli,
                            int64_t free_milli, int64_t needed_milli);

}  // namespace arbiter::server::reports

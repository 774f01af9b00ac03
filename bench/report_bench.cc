// Reports over a long history (Google Benchmark): a usage report over 365 days and a wait report
// over 90 days, read the aggregated way (usage rollups, job facts: what the server does) and the
// raw way (every usage record and job event of the history, with the job map), on one generated
// SQLite store. docs/benchmarks.md has the figures and the command.
//
//   build/bench/report_bench [--jobs-per-day N]   (default 200; one year of history)
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "server/report_inputs.h"
#include "server/reports.h"
#include "store/sqlite/sqlite_store.h"

namespace {

namespace reports = arbiter::server::reports;
namespace store = arbiter::store;

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int64_t kDays = 365;
constexpr int64_t kNow = kT0 + kDays * kDay + 7 * kHour + 123'456;
int jobs_per_day = 200;

struct World {
  std::string dir;
  std::unique_ptr<store::Store> store;
  std::map<uint64_t, reports::JobInfo> jobs;  // what the raw way needs in memory
  size_t events = 0, usage = 0, facts = 0;
};

// One year: every day `jobs_per_day` jobs in 4 tenants x 3 queues x 10 users, each waiting up to
// 3 h, running up to 12 h; one in 10 preempted and run again, one in 8 failing.
World& TheWorld() {
  static World* w = [] {
    auto* world = new World;
    world->dir = fmt::format("/tmp/report_bench_{}", ::getpid());
    std::filesystem::remove_all(world->dir);
    std::filesystem::create_directories(world->dir);
    world->store = std::move(store::OpenSqliteStore(world->dir + "/arbiter.db", {})).value();
    std::mt19937 rng(1);
    auto pick = [&](int64_t lo, int64_t hi) {
      return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo));
    };
    uint64_t id = 0, seq = 0;
    for (int64_t day = 0; day < kDays; ++day) {
      store::WriteBatch b;
      std::vector<store::JobFactRecord> facts;
      for (int k = 0; k < jobs_per_day; ++k) {
        ++id;
        const int tenant = static_cast<int>(rng() % 4);
        reports::JobInfo j{fmt::format("team-{}", tenant),
                           fmt::format("team-{}-q{}", tenant, rng() % 3),
                           fmt::format("user-{}", rng() % 10),
                           rng() % 3 ? "training" : "inference",
                           rng() % 2 ? "H100" : "A100",
                           1000 * pick(1, 9),
                           "",
                           0};
        world->jobs[id] = j;
        reports::FactState state;
        int64_t t = kT0 + day * kDay + pick(0, kDay);
        std::string at_state;
        auto event = [&](int64_t dt, const std::string& to, const std::string& reason) {
          t += dt;
          store::JobEventRecord e{++seq, id, t, at_state, to, reason, "{}"};
          reports::FactsOfEvent(e, j, state, facts);
          b.AppendJobEvent(std::move(e));
          at_state = to;
          ++world->events;
        };
        event(0, "pending", "submitted");
        for (int run = 0; run < 2; ++run) {
          event(pick(1000, 3 * kHour), "admitted", "admitted");
          const int64_t admitted = t;
          event(pick(1000, 60'000), "running", "running");
          const int64_t length = pick(60'000, 12 * kHour);
          const bool preempt = run == 0 && rng() % 10 == 0;
          if (preempt) {
            event(length, "preempting", "preempted by job 1 (priority)");
          } else if (rng() % 8 == 0) {
            event(length, "failed", "a task exited with code 1");
          } else {
            event(length, "succeeded", "all tasks exited 0");
          }
          b.AppendUsage({0, id, 0, j.tenant, j.queue, j.user, j.type, j.gpu_model, j.gpu_milli, 0,
                         admitted, t, j.gpu_milli * (t - admitted) / 1800});
          ++world->usage;
          if (!preempt) break;
          event(1000, "pending", "requeued");
        }
      }
      world->facts += facts.size();
      for (auto& f : facts) b.AppendJobFact(std::move(f));
      if (!world->store->Write(std::move(b)).ok()) std::abort();
    }
    return world;
  }();
  return *w;
}

reports::Query Period(int64_t days) {
  reports::Query q;
  q.to_ms = kNow;
  q.from_ms = kNow - days * kDay;
  return q;
}

// The server's way: the aggregates (ReadReportRecords), then Compute.
void BM_Aggregated(benchmark::State& state, const char* name) {
  World& w = TheWorld();
  const reports::Query q = Period(state.range(0));
  size_t rows = 0;
  for (auto _ : state) {
    reports::Inputs in;
    in.now_ms = kNow;
    if (!reports::ReadReportRecords(*w.store, name, q, in).ok()) std::abort();
    auto t = reports::Compute(name, q, in);
    if (!t.ok()) std::abort();
    rows = t->rows.size();
  }
  state.counters["rows"] = static_cast<double>(rows);
}

// The raw history: the usage records of the period, every job event, the job map.
void BM_Raw(benchmark::State& state, const char* name) {
  World& w = TheWorld();
  const reports::Query q = Period(state.range(0));
  for (auto _ : state) {
    reports::Inputs in;
    in.now_ms = kNow;
    in.jobs = w.jobs;
    if (std::strcmp(name, "usage") == 0) {
      in.usage = std::move(w.store->Usage(q.from_ms, q.to_ms)).value();
    } else {
      for (uint64_t after = 0;;) {
        auto page = std::move(w.store->EventsSince(after, 10'000)).value();
        if (page.empty()) break;
        after = page.back().seq;
        in.events.insert(in.events.end(), page.begin(), page.end());
      }
    }
    auto t = reports::Compute(name, q, in);
    if (!t.ok()) std::abort();
  }
}

BENCHMARK_CAPTURE(BM_Aggregated, usage, "usage")
    ->Arg(1)
    ->Arg(30)
    ->Arg(365)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Raw, usage, "usage")->Arg(1)->Arg(365)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Aggregated, wait, "wait")->Arg(1)->Arg(90)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Raw, wait, "wait")->Arg(1)->Arg(90)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--jobs-per-day") == 0) {
      jobs_per_day = std::atoi(argv[i + 1]);
      for (int k = i; k + 2 < argc + 1; ++k) argv[k] = argv[k + 2];
      argc -= 2;
      break;
    }
  }
  benchmark::Initialize(&argc, argv);
  World& w = TheWorld();
  std::fprintf(stderr, "history: %d days, %zu jobs, %zu events, %zu usage records, %zu facts\n",
               static_cast<int>(kDays), w.jobs.size(), w.events, w.usage, w.facts);
  // Bytes per job of each table and index (SQLite's dbstat: the pages each one uses), after the
  // writer has checkpointed and the file was vacuumed.
  w.store->Close();
  sqlite3* db = nullptr;
  if (sqlite3_open((w.dir + "/arbiter.db").c_str(), &db) == SQLITE_OK) {
    sqlite3_exec(db, "VACUUM", nullptr, nullptr, nullptr);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT name, sum(pgsize) FROM dbstat WHERE name IN ('job_events', "
                       "'job_events_by_job', 'usage', 'usage_by_end', 'usage_by_start', "
                       "'usage_by_tenant', 'usage_rollups', 'job_facts', 'job_facts_by_time') "
                       "GROUP BY name ORDER BY name",
                       -1, &s, nullptr);
    while (s != nullptr && sqlite3_step(s) == SQLITE_ROW) {
      const double bytes = static_cast<double>(sqlite3_column_int64(s, 1));
      std::fprintf(stderr, "%-20s %12.0f bytes  %8.1f bytes/job\n",
                   reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), bytes,
                   bytes / static_cast<double>(w.jobs.size()));
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  w.store = std::move(store::OpenSqliteStore(w.dir + "/arbiter.db", {})).value();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove_all(w.dir);
  return 0;
}

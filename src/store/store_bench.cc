// store_bench: write throughput of the SQLite store (or, with --store, the PostgreSQL store).
//
//   store_bench [--threads N] [--batches B] [--mode sync|async] [--normal] [--submission]
//               [--ends] [--dir DIR] [--store postgres://USER@HOST/DB]
//
// N threads each write B single-job batches (one PutJob of a realistic job record; with
// --submission also the job's first event and an audit record, as a submission writes). With
// --ends, each batch is what the end of a run writes instead: the job's row, its final event, its
// report fact and the usage record of its one task (1 to 3 hours long, so the store adds it to two
// to four hourly rollups and one or two daily ones). In `sync` mode
// each thread waits for every write before the next, as the server's request handlers do (one
// acknowledgement per request); in `async` mode each thread enqueues all its batches, then waits.
// --normal uses synchronous=NORMAL instead of FULL. Prints jobs/s and the group commit figures.
#include <fmt/format.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace {

using arbiter::store::JobRecord;
using arbiter::store::WriteBatch;

// One job's put, or (submission) a job, its first event and an audit record, as a submission
// through the server writes them.
arbiter::store::WriteBatch JobBatch(uint64_t id, bool submission) {
  JobRecord j;
  j.id = id;
  j.tenant = "research";
  j.queue = "research-train";
  j.user = "alice";
  j.name = fmt::format("llm-finetune-{}", id);
  j.type = "training";
  j.state = "pending";
  j.spec_json = fmt::format(
      R"({{"tasks":2,"resources":{{"gpu":8000,"gpu_memory_mib":81920,"cpu":64000,)"
      R"("memory_mib":524288}},"gpu_models":["A100-80G","H100"],"image":"registry/llm:{}",)"
      R"("command":["torchrun","--nnodes=2","train.py"],"priority_class":"normal",)"
      R"("walltime_seconds":86400,"retry":{{"max_attempts":3,"backoff_seconds":30}}}})",
      id);
  j.status_json = R"({"attempts":0,"preemptions":0})";
  j.idempotency_key = fmt::format("req-{}", id);
  j.submitted_at_ms = 1'700'000'000'000 + static_cast<int64_t>(id);
  j.updated_at_ms = j.submitted_at_ms;
  WriteBatch b;
  const int64_t at = j.submitted_at_ms;
  b.PutJob(std::move(j));
  if (submission) {
    b.AppendJobEvent({0, id, at, "", "pending", "submitted", "{}"});
    b.AppendAudit({0, at, "alice", "job.submit", fmt::format("job/{}", id), "ok", "{}", "tok-1",
                   "10.0.0.1", "research"});
  }
  return b;
}

// The end of job `id`'s run: its row, its event, its fact and its task's usage record.
arbiter::store::WriteBatch EndBatch(uint64_t id) {
  WriteBatch b = JobBatch(id, false);
  const int64_t end = 1'767'225'600'000 + static_cast<int64_t>(id) * 7'919;
  const int64_t start = end - 3'600'000 - static_cast<int64_t>(id % 7'200'000);
  b.AppendJobEvent({0, id, end, "running", "succeeded", "all tasks exited 0", "{}"});
  b.AppendJobFact({0, id, end, "succeeded", "research", "research-train", "alice", "training",
                   "H100", end, 0, ""});
  b.AppendUsage({0, id, 0, "research", "research-train", "alice", "training", "H100", 8000, 81920,
                 start, end, 8000 * (end - start) / 1800});
  return b;
}

int Usage() {
  std::fprintf(stderr,
               "usage: store_bench [--threads N] [--batches B] [--mode sync|async] [--normal] "
               "[--submission] [--ends] [--dir DIR] [--store postgres://USER@HOST/DB]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 8;
  int batches = 2000;
  bool sync = true;
  bool normal = false;
  bool submission = false;  // a job, its event and an audit record per batch
  bool ends = false;        // batches of run ends instead of submissions
  std::string dir;
  std::string url;  // --store: a PostgreSQL database instead of SQLite in --dir
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(next());
    } else if (a == "--batches" && i + 1 < argc) {
      batches = std::atoi(next());
    } else if (a == "--mode" && i + 1 < argc) {
      std::string m = next();
      if (m != "sync" && m != "async") return Usage();
      sync = m == "sync";
    } else if (a == "--normal") {
      normal = true;
    } else if (a == "--submission") {
      submission = true;
    } else if (a == "--ends") {
      ends = true;
    } else if (a == "--dir" && i + 1 < argc) {
      dir = next();
    } else if (a == "--store" && i + 1 < argc) {
      url = next();
    } else {
      return Usage();
    }
  }
  if (threads < 1 || batches < 1) return Usage();

  std::string tmp;
  if (dir.empty()) {
    tmp = (std::filesystem::temp_directory_path() / "store_bench.XXXXXX").string();
    if (mkdtemp(tmp.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = tmp;
  }
  const std::string path = dir + "/arbiter.db";
  arbiter::store::SqliteOptions options;
  options.synchronous_full = !normal;
  auto store = url.empty() ? arbiter::store::OpenSqliteStore(path, options)
                           : arbiter::store::OpenPostgresStore(url);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }

  std::vector<int> failures(static_cast<size_t>(threads), 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::shared_future<arbiter::Status>> pending;
      for (int i = 0; i < batches; ++i) {
        const auto id = static_cast<uint64_t>(t) * static_cast<uint64_t>(batches) +
                        static_cast<uint64_t>(i) + 1;
        auto f = (*store)->WriteAsync(ends ? EndBatch(id) : JobBatch(id, submission));
        if (sync) {
          failures[static_cast<size_t>(t)] += f.get().ok() ? 0 : 1;
        } else {
          pending.push_back(std::move(f));
        }
      }
      for (auto& f : pending) failures[static_cast<size_t>(t)] += f.get().ok() ? 0 : 1;
    });
  }
  for (auto& w : workers) w.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const arbiter::store::StoreStats s = (*store)->stats();
  (*store)->Close();

  int failed = 0;
  for (int f : failures) failed += f;
  const double jobs = static_cast<double>(threads) * batches;
  fmt::print(
      "threads={} batches/thread={} mode={} synchronous={} batches={}\n"
      "jobs/s={:.0f} ({:.0f} jobs in {:.3f} s, {} failed)\n"
      "commits={} batches/commit={:.1f} max_group={} mean_commit_us={:.0f} max_commit_us={}\n",
      threads, batches, sync ? "sync" : "async", normal ? "NORMAL" : "FULL",
      ends ? "run ends" : (submission ? "submissions with event and audit" : "submissions"),
      jobs / seconds, jobs, seconds, failed, s.commits,
      s.commits > 0 ? static_cast<double>(s.batches) / static_cast<double>(s.commits) : 0.0,
      s.max_group,
      s.commits > 0 ? static_cast<double>(s.total_commit_us) / static_cast<double>(s.commits) : 0.0,
      s.max_commit_us);
  if (!tmp.empty()) std::filesystem::remove_all(tmp);
  return failed == 0 ? 0 : 1;
}

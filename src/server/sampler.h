// Sampler: the server's metering thread. Every `interval_ms` it records a cluster sample and the
// GPUs' telemetry samples (ControlPlane::RecordSamples); every `compact_every_ms` it applies the
// samples' retention (CompactSamples), and, with a history retention set, every
// `history_every_ms` the raw history's (history_retention.h). docs/reports.md describes the
// samples and their retention; docs/store.md the history's.
//
// Thread safety: Start() and Stop() from one thread; Tick() may be called from tests instead of
// Start() (with an injected clock, no thread is needed).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "server/control_plane.h"
#include "store/store.h"

namespace arbiter::server {

struct SampleRetention {
  DurationMs raw_gpu_ms = int64_t{14} * 24 * 3'600'000;      // 1-minute GPU samples: 14 days
  DurationMs hourly_gpu_ms = int64_t{396} * 24 * 3'600'000;  // hourly GPU samples: 13 months
  DurationMs cluster_ms = int64_t{90} * 24 * 3'600'000;      // cluster samples: 90 days
};

// The retention op for `now`: roll up raw GPU samples older than raw_gpu_ms, delete hourly ones
// older than hourly_gpu_ms and cluster samples older than cluster_ms.
store::op::CompactSamples RetentionAt(const SampleRetention& r, TimeMs now);

struct SamplerOptions {
  DurationMs interval_ms = 60'000;  // 1 s .. 1 h
  DurationMs compact_every_ms = 3'600'000;
  SampleRetention retention;
  // --retention-days: job events and usage records older than this many whole days are archived
  // under archive_dir and deleted (ApplyHistoryRetention); 0 keeps them forever.
  int history_days = 0;
  std::string archive_dir;
  DurationMs history_every_ms = 3'600'000;
};

class Sampler {
 public:
  Sampler(ControlPlane* cp, store::Store* store, SamplerOptions options, NowFn now);
  ~Sampler();

  // One step at now(): a sample when at least an interval has passed since the last (or none was
  // taken), then the retention when it is due. Returns the first error.
  Status Tick();

  void Start();  // a thread that ticks every interval
  void Stop();   // idempotent

 private:
  ControlPlane* cp_;
  store::Store* store_;
  SamplerOptions options_;
  NowFn now_;
  TimeMs last_sample_ = 0;
  TimeMs last_compact_ = 0;
  TimeMs last_history_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace arbiter::server

// ServiceProber: the readiness and liveness probes of services' replicas (docs/services.md).
//
// The service controller hands it the replicas that run (SetTargets: job, attempt, host and
// port, the probes) at every reconcile and reads what the probes found (Results). A probe is an
// HTTP GET of the probe's path; a 2xx or 3xx answer within its timeout is a success. A replica is
// ready once readiness succeeded success_threshold times in a row, and stops being ready after
// failure_threshold failures in a row; liveness failing failure_threshold times in a row marks it
// failed (the controller restarts it). Probes start initial_delay after the replica started and
// run every period.
//
// Owns: the targets and their results, under its own mutex (a leaf: it calls nothing while
// holding it), and its worker threads. Probes run on `threads` workers without the lock, each
// due probe taken by the first idle worker, so one slow replica (a probe waits at most its
// timeout, at most 60 s) holds one worker, never the probes of the others.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/service.h"
#include "model/time.h"

namespace arbiter::server {

struct ProbeTarget {
  uint64_t job = 0;
  uint64_t attempt = 0;
  std::string host;
  int32_t port = 0;
  ProbeSpec readiness;
  std::optional<ProbeSpec> liveness;
  TimeMs started_ms = 0;  // when its process started (wall clock): probes begin after the delay
};

struct ProbeStatus {
  bool ready = false;
  bool live_failed = false;  // liveness failed failure_threshold times in a row
  int32_t successes = 0;     // readiness, in a row
  int32_t failures = 0;      // readiness, in a row
  int32_t live_failures = 0;
  std::string last_error;  // of the last failed probe ("" after a success)
  int64_t probes = 0;      // probes done (both kinds)
};

class ServiceProber {
 public:
  // One probe: "" on success, else why it failed. Runs on a worker thread.
  using ProbeFn = std::function<std::string(const std::string& host, int32_t port,
                                            const std::string& path, DurationMs timeout_ms)>;
  // `now`: the wall clock (started_ms is on it). `probe`: null for HTTP GET (HttpProbe).
  ServiceProber(std::function<TimeMs()> now, size_t threads = 8, ProbeFn probe = nullptr);
  ~ServiceProber();

  void Start();
  // Stops the workers after the probes in flight (each at most its timeout).
  void Stop();

  // The replicas to probe now. A target new by (job, attempt, host, port) starts afresh (not
  // ready); targets not listed are forgotten.
  void SetTargets(const std::vector<ProbeTarget>& targets);
  // By job id.
  std::map<uint64_t, ProbeStatus> Results() const;

  // HTTP GET http://host:port/path, with the timeout for connecting and for the answer.
  static std::string HttpProbe(const std::string& host, int32_t port, const std::string& path,
                               DurationMs timeout_ms);

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    ProbeTarget target;
    ProbeStatus status;
    Clock::time_point next_ready;
    Clock::time_point next_live;
    bool in_flight = false;
    uint64_t generation = 0;  // a result for an older generation is dropped
  };
  void Work();
  // The entry and kind due first, or null; `*due`: when.
  Entry* NextDueLocked(bool* live, Clock::time_point* due);
  void Record(Entry& e, bool live, const std::string& error);

  std::function<TimeMs()> now_;
  size_t threads_;
  ProbeFn probe_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Entry> entries_;  // by job id
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace arbiter::server

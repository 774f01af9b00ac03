// LeaseKeeper: one server's side of the leadership lease, when several servers share a store
// (docs/operations.md, "Several servers"; Store::AcquireLease).
//
// Every renew interval the keeper calls Attempt(): it takes or renews the lease and writes this
// server's row (Store::PutServer). A follower that gets the lease is elected (Event::kElected,
// with a new term); a leader whose renewal fails or finds the lease taken has lost it
// (Event::kLost). Independently, Expired() says whether a leader went longer than the lease
// without a successful renewal, measured by this process's monotonic clock from the start of its
// last successful renewal: the store's lease began after that start, so by then the store may
// have given the lease to another server, and the leader must stop writing at once. The store's
// fence (Store::SetFence) makes sure that nothing a deposed leader writes commits meanwhile.
//
// The keeper decides; its caller acts (the server: RunServer starts leading on kElected and steps
// down on kLost or Expired). Start() runs Attempt() on its own thread ("lease keeper") and
// Expired() on another ("lease watchdog"), because an attempt may block on an unreachable store
// for longer than the lease.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"

namespace arbiter::server {

struct LeaseOptions {
  std::string id;   // this server: unique per process
  std::string url;  // where other servers, agents and clients reach it
  int64_t lease_ms = 10000;
  int64_t renew_ms = 2000;
  int64_t started_at_ms = 0;  // wall clock, for its row
};

// What a follower knows of the leader, and this server's own role.
struct LeaderInfo {
  bool leader = false;     // this server leads
  uint64_t term = 0;       // the term it leads, or the newest it has seen
  std::string leader_id;   // "" when no server holds an unexpired lease
  std::string leader_url;  // likewise
};

class LeaseKeeper {
 public:
  // Milliseconds of a monotonic clock (steady_clock in the server; a fake one in tests).
  using MonoClock = std::function<int64_t()>;
  enum class Event { kNone, kElected, kLost };

  LeaseKeeper(store::Store* store, LeaseOptions options, MonoClock clock);
  ~LeaseKeeper();

  // One attempt to take or renew the lease, then this server's row. Returns what changed.
  Event Attempt();
  // True when this server leads and its last successful renewal started more than lease_ms ago.
  bool Expired() const;
  // Ends this server's lease (SIGTERM), so that a follower takes over at once; its row says
  // "stopped".
  void Release();

  // Runs Attempt() every renew_ms and Expired() every few ms on their threads; `on_elected` runs
  // on the keeper thread after kElected, `on_lost` (with the reason) on whichever thread saw it,
  // once. Stop() ends both threads.
  void Start(std::function<void(uint64_t term)> on_elected,
             std::function<void(const std::string& why)> on_lost);
  void Stop();

  LeaderInfo info() const;
  // arbiter_leader, arbiter_leader_term, arbiter_leader_changes_total and
  // arbiter_lease_renew_seconds in the text exposition format (docs/metrics.md).
  std::string MetricsText() const;

  // The buckets of arbiter_lease_renew_seconds (upper bounds, seconds).
  static constexpr double kRenewBuckets[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5};

 private:
  void ObserveRenew(double seconds);
  void Lost(const std::string& why);

  store::Store* const store_;
  const LeaseOptions o_;
  const MonoClock clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  LeaderInfo info_;                  // guarded by mu_
  int64_t last_renew_start_ms_ = 0;  // of the last successful attempt as leader; guarded by mu_
  uint64_t changes_ = 0;             // leader changes seen (holder or term); guarded by mu_
  std::string last_holder_;          // guarded by mu_
  uint64_t last_term_ = 0;           // guarded by mu_
  std::vector<uint64_t> renew_counts_ =
      std::vector<uint64_t>(std::size(kRenewBuckets) + 1);  // guarded by mu_
  double renew_sum_ = 0;                                    // guarded by mu_
  uint64_t renew_total_ = 0;                                // guarded by mu_
  bool stop_ = false;                                       // guarded by mu_
  bool lost_ = false;                                       // on_lost_ ran; guarded by mu_
  std::function<void(uint64_t)> on_elected_;
  std::function<void(const std::string&)> on_lost_;
  std::thread keeper_;
  std::thread watchdog_;
};

}  // namespace arbiter::server

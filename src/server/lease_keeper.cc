#include "server/lease_keeper.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

namespace arbiter::server {

LeaseKeeper::LeaseKeeper(store::Store* store, LeaseOptions options, MonoClock clock)
    : store_(store), o_(std::move(options)), clock_(std::move(clock)) {}

LeaseKeeper::~LeaseKeeper() { Stop(); }

LeaseKeeper::Event LeaseKeeper::Attempt() {
  uint64_t term = 0;
  bool was_leader = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_) return Event::kNone;  // stepping down: nothing more to decide
    was_leader = info_.leader;
    if (was_leader) term = info_.term;
  }
  const int64_t start = clock_();
  const auto t0 = std::chrono::steady_clock::now();
  auto lease = store_->AcquireLease(o_.id, o_.url, term, o_.lease_ms);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Event ev = Event::kNone;
  std::string role = "follower";
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (was_leader) ObserveRenew(seconds);
    if (!lease.ok()) {
      if (was_leader) {
        info_.leader = false;
        ev = Event::kLost;
      }
      spdlog::warn("lease: {} failed: {}", was_leader ? "renewal" : "attempt",
                   lease.status().ToString());
    } else {
      const bool alive = lease->expires_at_ms > lease->now_ms;
      const bool leads = alive && lease->holder == o_.id;
      if (lease->holder != last_holder_ || lease->term != last_term_) {
        if (!last_holder_.empty()) ++changes_;
        last_holder_ = lease->holder;
        last_term_ = lease->term;
      }
      info_.term = lease->term;
      info_.leader_id = alive ? lease->holder : "";
      info_.leader_url = alive ? lease->holder_url : "";
      if (leads) {
        last_renew_start_ms_ = start;
        if (!was_leader) ev = Event::kElected;
        info_.leader = true;
        role = "leader";
      } else if (was_leader) {
        info_.leader = false;
        ev = Event::kLost;
      }
    }
    if (lost_) ev = Event::kNone;  // the watchdog stepped down meanwhile
    term = info_.term;
  }
  store::ServerRecord row{o_.id, o_.url, role, term, o_.started_at_ms, 0};
  if (Status st = store_->PutServer(row); !st.ok()) {
    spdlog::debug("lease: cannot write this server's row: {}", st.ToString());
  }
  return ev;
}

bool LeaseKeeper::Expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_.leader && clock_() - last_renew_start_ms_ > o_.lease_ms;
}

void LeaseKeeper::Release() {
  uint64_t term = 0;
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader = info_.leader;
    term = info_.term;
    info_.leader = false;
  }
  if (leader) {
    if (Status st = store_->ReleaseLease(o_.id, term); !st.ok()) {
      spdlog::warn("lease: cannot release term {}: {}", term, st.ToString());
    } else {
      spdlog::info("lease: released term {}", term);
    }
  }
  (void)store_->PutServer({o_.id, o_.url, "stopped", term, o_.started_at_ms, 0});
}

void LeaseKeeper::Lost(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lost_) return;
    lost_ = true;
    info_.leader = false;
  }
  if (on_lost_) on_lost_(why);
}

void LeaseKeeper::Start(std::function<void(uint64_t term)> on_elected,
                        std::function<void(const std::string& why)> on_lost) {
  on_elected_ = std::move(on_elected);
  on_lost_ = std::move(on_lost);
  keeper_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      const Event ev = Attempt();
      if (ev == Event::kElected && on_elected_) on_elected_(info().term);
      if (ev == Event::kLost) Lost("the lease's renewal failed or another server holds it");
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(o_.renew_ms), [&] { return stop_; });
    }
  });
  watchdog_ = std::thread([this] {
    // A tenth of the renew interval, at most 50 ms: a leader notices its deadline that late.
    const int64_t tick = std::clamp<int64_t>(o_.renew_ms / 10, 1, 50);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      const bool expired = info_.leader && clock_() - last_renew_start_ms_ > o_.lease_ms;
      if (expired) {
        lock.unlock();
        Lost(fmt::format("no successful renewal within the lease ({} ms)", o_.lease_ms));
        lock.lock();
      }
      cv_.wait_for(lock, std::chrono::milliseconds(tick), [&] { return stop_; });
    }
  });
}

void LeaseKeeper::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (keeper_.joinable() && keeper_.get_id() != std::this_thread::get_id()) keeper_.join();
  if (watchdog_.joinable() && watchdog_.get_id() != std::this_thread::get_id()) watchdog_.join();
}

LeaderInfo LeaseKeeper::info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return info_;
}

void LeaseKeeper::ObserveRenew(double seconds) {
  size_t i = 0;
  while (i < std::size(kRenewBuckets) && seconds > kRenewBuckets[i]) ++i;
  ++renew_counts_[i];
  renew_sum_ += seconds;
  ++renew_total_;
}

std::string LeaseKeeper::MetricsText() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = fmt::format(
      "# HELP arbiter_leader 1 while this server leads (holds the store's lease), else 0\n"
      "# TYPE arbiter_leader gauge\narbiter_leader {}\n"
      "# HELP arbiter_leader_term The term this server leads, or the newest it has seen\n"
      "# TYPE arbiter_leader_term gauge\narbiter_leader_term {}\n"
      "# HELP arbiter_leader_changes_total Leader changes (a new holder or term of the lease) "
      "this server has seen since it started\n"
      "# TYPE arbiter_leader_changes_total counter\narbiter_leader_changes_total {}\n"
      "# HELP arbiter_lease_renew_seconds Time of a leader's lease renewal in the store\n"
      "# TYPE arbiter_lease_renew_seconds histogram\n",
      info_.leader ? 1 : 0, info_.term, changes_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < std::size(kRenewBuckets); ++i) {
    cumulative += renew_counts_[i];
    out += fmt::format("arbiter_lease_renew_seconds_bucket{{le=\"{}\"}} {}\n", kRenewBuckets[i],
                       cumulative);
  }
  cumulative += renew_counts_.back();
  out += fmt::format(
      "arbiter_lease_renew_seconds_bucket{{le=\"+Inf\"}} {}\narbiter_lease_renew_seconds_sum "
      "{}\narbiter_lease_renew_seconds_count {}\n",
      cumulative, renew_sum_, renew_total_);
  return out;
}

}  // namespace arbiter::server

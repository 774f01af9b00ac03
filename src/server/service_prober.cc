#include "server/service_prober.h"

#include <fmt/format.h>
#include <httplib.h>
#include <pthread.h>

#include <algorithm>

namespace arbiter::server {

ServiceProber::ServiceProber(std::function<TimeMs()> now, size_t threads, ProbeFn probe)
    : now_(std::move(now)), threads_(std::max<size_t>(1, threads)), probe_(std::move(probe)) {
  if (!probe_) probe_ = &ServiceProber::HttpProbe;
}

ServiceProber::~ServiceProber() { Stop(); }

void ServiceProber::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!workers_.empty()) return;
  stop_ = false;
  for (size_t i = 0; i < threads_; ++i) {
    workers_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "arbiter-probe");
      Work();
    });
  }
}

void ServiceProber::Stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    workers.swap(workers_);
  }
  cv_.notify_all();
  for (std::thread& t : workers) t.join();
}

void ServiceProber::SetTargets(const std::vector<ProbeTarget>& targets) {
  const TimeMs now = now_();
  const Clock::time_point steady = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint64_t, Entry> next;
  for (const ProbeTarget& t : targets) {
    auto it = entries_.find(t.job);
    if (it != entries_.end() && it->second.target.attempt == t.attempt &&
        it->second.target.host == t.host && it->second.target.port == t.port) {
      Entry e = std::move(it->second);
      e.target = t;  // probe settings may change; the counts stay
      next.emplace(t.job, std::move(e));
      continue;
    }
    Entry e;
    e.target = t;
    e.generation = ++generation_;
    // The first probes come initial_delay after the process started.
    auto first = [&](const ProbeSpec& p) {
      const DurationMs wait = std::max<DurationMs>(0, t.started_ms + p.initial_delay_ms - now);
      return steady + std::chrono::milliseconds(wait);
    };
    e.next_ready = first(t.readiness);
    e.next_live = t.liveness ? first(*t.liveness) : Clock::time_point::max();
    next.emplace(t.job, std::move(e));
  }
  entries_.swap(next);
  cv_.notify_all();
}

std::map<uint64_t, ProbeStatus> ServiceProber::Results() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint64_t, ProbeStatus> out;
  for (const auto& [job, e] : entries_) out.emplace(job, e.status);
  return out;
}

ServiceProber::Entry* ServiceProber::NextDueLocked(bool* live, Clock::time_point* due) {
  Entry* best = nullptr;
  for (auto& [job, e] : entries_) {
    if (e.in_flight) continue;
    if (best == nullptr || e.next_ready < *due) {
      best = &e;
      *due = e.next_ready;
      *live = false;
    }
    if (e.target.liveness && e.next_live < *due) {
      best = &e;
      *due = e.next_live;
      *live = true;
    }
  }
  return best;
}

void ServiceProber::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    bool live = false;
    Clock::time_point due;
    Entry* e = NextDueLocked(&live, &due);
    if (e == nullptr) {
      cv_.wait(lock);
      continue;
    }
    if (due > Clock::now()) {
      // Woken early by new targets, a finished probe or Stop: look again.
      cv_.wait_until(lock, std::min(due, Clock::now() + std::chrono::seconds(1)));
      continue;
    }
    e->in_flight = true;
    const uint64_t job = e->target.job;
    const uint64_t generation = e->generation;
    const ProbeSpec spec = live ? *e->target.liveness : e->target.readiness;
    const std::string host = e->target.host;
    const int32_t port = e->target.port;
    lock.unlock();
    const std::string error = probe_(host, port, spec.path, spec.timeout_ms);
    lock.lock();
    auto it = entries_.find(job);
    if (it == entries_.end() || it->second.generation != generation) continue;  // replaced
    Entry& entry = it->second;
    entry.in_flight = false;
    Record(entry, live, error);
    const auto next = Clock::now() + std::chrono::milliseconds(spec.period_ms);
    (live ? entry.next_live : entry.next_ready) = next;
    cv_.notify_all();  // another worker may wait for this entry
  }
}

void ServiceProber::Record(Entry& e, bool live, const std::string& error) {
  ProbeStatus& s = e.status;
  ++s.probes;
  s.last_error =
      error.empty() ? "" : fmt::format("{} probe: {}", live ? "liveness" : "readiness", error);
  if (live) {
    s.live_failures = error.empty() ? 0 : s.live_failures + 1;
    if (s.live_failures >= e.target.liveness->failure_threshold) s.live_failed = true;
    return;
  }
  if (error.empty()) {
    s.failures = 0;
    ++s.successes;
    if (s.successes >= e.target.readiness.success_threshold) s.ready = true;
  } else {
    s.successes = 0;
    ++s.failures;
    if (s.failures >= e.target.readiness.failure_threshold) s.ready = false;
  }
}

std::string ServiceProber::HttpProbe(const std::string& host, int32_t port, const std::string& path,
                                     DurationMs timeout_ms) {
  httplib::Client client(host, port);
  const time_t sec = static_cast<time_t>(timeout_ms / 1000);
  const time_t usec = static_cast<time_t>((timeout_ms % 1000) * 1000);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  client.set_keep_alive(false);
  auto r = client.Get(path);
  if (!r) {
    return fmt::format("GET http://{}:{}{}: {}", host, port, path, httplib::to_string(r.error()));
  }
  if (r->status < 200 || r->status >= 400) {
    return fmt::format("GET http://{}:{}{}: HTTP {}", host, port, path, r->status);
  }
  return "";
}

}  // namespace arbiter::server

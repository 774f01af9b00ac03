// The HTTP server's threads. cpp-httplib serves a keep-alive connection on one thread until it
// closes, so a fixed pool of N threads serves N connections and starves the rest: agents holding
// long-poll watches, or more concurrent clients than threads, would wait until someone's
// connection idled out. This pool starts a thread whenever a connection arrives and none is
// idle, up to a bound. A thread beyond the initial ones that stays idle for `idle_exit_ms` exits,
// and the memory freed by a burst's threads is handed back to the system, so that a burst of
// connections does not keep its threads and their memory for the life of the process.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace arbiter::net {

class ElasticThreadPool : public httplib::TaskQueue {
 public:
  // `initial` threads start at once and stay; at most `max` ever run (a connection beyond that
  // waits for one to close). idle_exit_ms 0: threads never exit. `gauge`, when given, follows
  // the number of threads (it must outlive the pool).
  ElasticThreadPool(size_t initial, size_t max, int64_t idle_exit_ms = 0,
                    std::atomic<int64_t>* gauge = nullptr);
  ~ElasticThreadPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  size_t threads() const;

 private:
  void StartThreadLocked();
  void Work(std::list<std::thread>::iterator self);
  // Joins threads that have exited (their std::thread objects wait in exited_).
  void JoinExited();
  void ReleaseMemory();

  const size_t min_;
  const size_t max_;
  const int64_t idle_exit_ms_;
  std::atomic<int64_t>* const gauge_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  size_t idle_ = 0;                          // threads waiting for a task; guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::list<std::thread> threads_;           // running; guarded by mu_; joined at shutdown
  std::vector<std::thread> exited_;          // returned from Work, to join; guarded by mu_
  size_t exits_since_release_ = 0;           // guarded by mu_
};

}  // namespace arbiter::net

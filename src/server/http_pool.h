// The HTTP server's threads. cpp-httplib serves a keep-alive connection on one thread until it
// closes, so a fixed pool of N threads serves N connections and starves the rest: agents holding
// long-poll watches, or more concurrent clients than threads, would wait until someone's
// connection idled out. This pool starts a thread whenever a connection arrives and none is
// idle, up to a bound, and keeps its threads (idle ones cost a little memory) until shutdown.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace arbiter::server {

class ElasticThreadPool : public httplib::TaskQueue {
 public:
  // `initial` threads start at once; at most `max` ever run (a connection beyond that waits for
  // one to close).
  ElasticThreadPool(size_t initial, size_t max);
  ~ElasticThreadPool() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  size_t threads() const;

 private:
  void StartThreadLocked();
  void Work();

  const size_t max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  size_t idle_ = 0;                          // threads waiting for a task; guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;         // guarded by mu_; joined at shutdown
};

}  // namespace arbiter::server

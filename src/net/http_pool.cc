#include "net/http_pool.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>

// tcmalloc's call to hand free memory back, when the program is linked with it (weak: absent
// otherwise, and glibc's malloc_trim does the same there).
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace arbiter::net {

ElasticThreadPool::ElasticThreadPool(size_t initial, size_t max, int64_t idle_exit_ms,
                                     std::atomic<int64_t>* gauge)
    : min_(std::min(initial, std::max<size_t>(1, max))),
      max_(std::max<size_t>(1, max)),
      idle_exit_ms_(idle_exit_ms),
      gauge_(gauge) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < min_; ++i) StartThreadLocked();
}

ElasticThreadPool::~ElasticThreadPool() { shutdown(); }

// A thread counts as idle from its start, so that tasks queued before it runs do not each start
// another.
void ElasticThreadPool::StartThreadLocked() {
  ++idle_;
  threads_.emplace_back();
  auto self = std::prev(threads_.end());
  *self = std::thread([this, self] { Work(self); });
  if (gauge_ != nullptr) gauge_->fetch_add(1, std::memory_order_relaxed);
}

void ElasticThreadPool::enqueue(std::function<void()> fn) {
  JoinExited();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(fn));
    // Every queued task needs a thread of its own: a task is a connection, served until it closes.
    if (tasks_.size() > idle_ && threads_.size() < max_) StartThreadLocked();
  }
  cv_.notify_one();
}

void ElasticThreadPool::shutdown() {
  std::list<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
  JoinExited();
}

size_t ElasticThreadPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void ElasticThreadPool::JoinExited() {
  std::vector<std::thread> exited;
  {
    std::lock_guard<std::mutex> lock(mu_);
    exited.swap(exited_);
  }
  for (std::thread& t : exited) t.join();
}

void ElasticThreadPool::ReleaseMemory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    malloc_trim(0);
  }
}

void ElasticThreadPool::Work(std::list<std::thread>::iterator self) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    auto ready = [this] { return stopping_ || !tasks_.empty(); };
    if (idle_exit_ms_ > 0) {
      if (!cv_.wait_for(lock, std::chrono::milliseconds(idle_exit_ms_), ready)) {
        // Idle for the whole period: a thread beyond the initial ones leaves. (At shutdown the
        // list was swapped out and every thread is joined from there instead.)
        if (threads_.size() > min_ && !stopping_) {
          --idle_;
          exited_.push_back(std::move(*self));
          threads_.erase(self);
          if (gauge_ != nullptr) gauge_->fetch_sub(1, std::memory_order_relaxed);
          // After a burst, once the pool is back to its floor (or every so often on the way),
          // the memory its threads and connections used goes back to the system.
          const bool release = threads_.size() <= min_ || ++exits_since_release_ >= 64;
          if (release) exits_since_release_ = 0;
          lock.unlock();
          if (release) ReleaseMemory();
          return;
        }
        continue;
      }
    } else {
      cv_.wait(lock, ready);
    }
    if (tasks_.empty()) {  // stopping, nothing left to serve
      if (gauge_ != nullptr) gauge_->fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    --idle_;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++idle_;
  }
}

}  // namespace arbiter::net

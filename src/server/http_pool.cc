#include "server/http_pool.h"

#include <algorithm>

namespace arbiter::server {

ElasticThreadPool::ElasticThreadPool(size_t initial, size_t max) : max_(std::max<size_t>(1, max)) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < std::min(initial, max_); ++i) StartThreadLocked();
}

ElasticThreadPool::~ElasticThreadPool() { shutdown(); }

// A thread counts as idle from its start, so that tasks queued before it runs do not each start
// another.
void ElasticThreadPool::StartThreadLocked() {
  ++idle_;
  threads_.emplace_back([this] { Work(); });
}

void ElasticThreadPool::enqueue(std::function<void()> fn) {
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
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t ElasticThreadPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void ElasticThreadPool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, nothing left to serve
    --idle_;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++idle_;
  }
}

}  // namespace arbiter::server

#include "gateway/wait_queue.h"

namespace arbiter::gateway {

bool WaitQueue::Push(std::shared_ptr<Waiter> w, int64_t max) {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(waiters_.size()) >= max || w->queued_) return false;
  Waiter* raw = w.get();
  raw->pos_ = waiters_.insert(waiters_.end(), std::move(w));
  raw->queued_ = true;
  size_.store(static_cast<int64_t>(waiters_.size()), std::memory_order_relaxed);
  return true;
}

void WaitQueue::PushFront(std::shared_ptr<Waiter> w) {
  std::lock_guard<std::mutex> lock(mu_);
  if (w->queued_) return;
  Waiter* raw = w.get();
  raw->pos_ = waiters_.insert(waiters_.begin(), std::move(w));
  raw->queued_ = true;
  size_.store(static_cast<int64_t>(waiters_.size()), std::memory_order_relaxed);
}

std::shared_ptr<Waiter> WaitQueue::Pop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiters_.empty()) return nullptr;
  std::shared_ptr<Waiter> w = std::move(waiters_.front());
  waiters_.pop_front();
  w->queued_ = false;
  size_.store(static_cast<int64_t>(waiters_.size()), std::memory_order_relaxed);
  return w;
}

bool WaitQueue::Remove(const Waiter* w) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!w->queued_) return false;
  Waiter* mutable_w = const_cast<Waiter*>(w);
  mutable_w->queued_ = false;
  waiters_.erase(mutable_w->pos_);
  size_.store(static_cast<int64_t>(waiters_.size()), std::memory_order_relaxed);
  return true;
}

std::vector<std::shared_ptr<Waiter>> WaitQueue::TakeAll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Waiter>> out;
  out.reserve(waiters_.size());
  for (auto& w : waiters_) {
    w->queued_ = false;
    out.push_back(std::move(w));
  }
  waiters_.clear();
  size_.store(0, std::memory_order_relaxed);
  return out;
}

}  // namespace arbiter::gateway

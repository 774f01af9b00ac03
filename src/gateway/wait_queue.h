// The bounded wait queue of one service: requests that found no replica under its
// max_concurrency wait here, oldest first, until a replica frees a slot (Pop), the routing table
// changes (TakeAll) or their deadline passes (Remove).
//
// Thread safety: every method may be called from any thread (one mutex, held for O(1) work but
// TakeAll). size() is a relaxed read, so that the proxy's hot path checks "anyone waiting?"
// without the lock.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

namespace arbiter::gateway {

// What waits. Whoever takes a waiter out with Pop or TakeAll calls `w->Wake(std::move(w))`
// once: Wake only schedules the retry on the waiter's own thread and hands `self` (the last
// reference the caller holds) to it, so that a waiter is never destroyed on another thread.
class Waiter {
 public:
  virtual ~Waiter() = default;
  virtual void Wake(std::shared_ptr<Waiter> self) = 0;

 private:
  friend class WaitQueue;
  std::list<std::shared_ptr<Waiter>>::iterator pos_;  // valid while queued_
  bool queued_ = false;                               // guarded by the queue's mutex
};

class WaitQueue {
 public:
  // Appends `w` unless `max` requests already wait (false: the caller answers 503).
  bool Push(std::shared_ptr<Waiter> w, int64_t max);
  // Puts back, at the head, a woken waiter that found every replica busy again: it keeps its
  // place (it was admitted before, so the bound does not apply).
  void PushFront(std::shared_ptr<Waiter> w);
  // The oldest waiter, taken out; null when none.
  std::shared_ptr<Waiter> Pop();
  // Takes `w` out if it still waits (false: someone popped it and its Wake is on its way).
  bool Remove(const Waiter* w);
  // Every waiter, oldest first, taken out.
  std::vector<std::shared_ptr<Waiter>> TakeAll();

  int64_t size() const { return size_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mu_;
  std::list<std::shared_ptr<Waiter>> waiters_;  // guarded by mu_
  std::atomic<int64_t> size_{0};
};

}  // namespace arbiter::gateway

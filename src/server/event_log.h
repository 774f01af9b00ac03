// EventLog: the recent job, node and configuration events, for GET /api/v1/events (SSE).
//
// Owns: the last kMaxEvents events and their sequence numbers. Lock: its own mutex (mu_), a leaf:
// it calls nothing while holding it. The control plane pushes events while holding its own lock,
// so the events' order is the order of the changes; readers wait here without ever taking the
// control plane's lock, so a follower of the stream never waits for a scheduling cycle.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace arbiter::server {

struct ServerEvent {
  uint64_t seq = 0;
  std::string kind;    // "job", "node" or "config"
  std::string tenant;  // a job's tenant: only its readers see it ("": everyone)
  std::string data;    // the event's JSON object, as text
};

class EventLog {
 public:
  static constexpr size_t kMaxEvents = 10000;

  // Appends an event (its seq is the next one) and wakes the readers.
  void Push(std::string kind, std::string tenant, std::string data);
  // The kept events after `seq`, waiting up to `wait_ms` when there are none (or until Close).
  std::vector<ServerEvent> After(uint64_t seq, int64_t wait_ms) const;
  uint64_t last_seq() const;
  // Wakes every reader, now and from then on (at shutdown).
  void Close();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<ServerEvent> events_;
  uint64_t seq_ = 0;
  bool closed_ = false;
};

}  // namespace arbiter::server

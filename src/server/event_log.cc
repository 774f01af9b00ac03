#include "server/event_log.h"

#include <chrono>

namespace arbiter::server {

void EventLog::Push(std::string kind, std::string tenant, std::string data) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({++seq_, std::move(kind), std::move(tenant), std::move(data)});
    while (events_.size() > kMaxEvents) events_.pop_front();
  }
  cv_.notify_all();
}

std::vector<ServerEvent> EventLog::After(uint64_t seq, int64_t wait_ms) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return closed_ || seq_ > seq; });
  std::vector<ServerEvent> out;
  for (const ServerEvent& e : events_) {
    if (e.seq > seq) out.push_back(e);
  }
  return out;
}

uint64_t EventLog::last_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

void EventLog::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

}  // namespace arbiter::server

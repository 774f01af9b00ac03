// RoutesBoard: the gateways' routing table as last published (GET /api/v1/gateway/routes).
//
// The service controller publishes the table after every reconcile; a new version is made only
// when the table changed. Gateways long-poll: Wait returns at once when the version differs from
// the one they have, else when it changes or the wait is over. Versions start from the server's
// clock at start, so a gateway that kept a version across a server restart gets the new table at
// once.
//
// Owns: the table's text and version, under its own mutex (a leaf). Thread safety: every method
// may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "model/time.h"

namespace arbiter::server {

class RoutesBoard {
 public:
  explicit RoutesBoard(uint64_t first_version) : version_(first_version) {}

  // Publishes `services` (the table's "services" array) when it differs from the last.
  void Publish(const nlohmann::json& services);
  // {"version": V, "services": [...]} once the version differs from `known`, or after `wait_ms`
  // (the same version), or at shutdown.
  std::string Wait(uint64_t known, DurationMs wait_ms);
  uint64_t version() const;
  // Ends every wait (shutdown).
  void WakeAll();

 private:
  std::string TextLocked() const;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t version_;
  nlohmann::json services_ = nlohmann::json::array();
  bool stopping_ = false;
};

}  // namespace arbiter::server

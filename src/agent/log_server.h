// LogServer: the agent's small HTTP port from which the server reads task logs (it proxies
// GET /api/v1/jobs/{id}/logs to it). One route, GET /v1/logs/<job>/<task> with stream=stdout|
// stderr, offset=N, follow=true (until the task's process ends, or idle_ms without new bytes),
// probe=true (only whether the log exists); the bearer token announced at registration is
// required. Bind 127.0.0.1:0 by default; --listen 0.0.0.0:PORT when the server is elsewhere.
//
// Threads: cpp-httplib's pool; Stop() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/result.h"

namespace httplib {
class Server;
}

namespace arbiter::agent {

class LogServer {
 public:
  using RunningFn = std::function<bool(uint64_t job, int32_t task)>;
  LogServer(std::string work_dir, std::string token, RunningFn running);
  ~LogServer();

  // Binds host:port (0: any free port) and serves on a thread; returns the port.
  Result<int> Start(const std::string& host, int port);
  void Stop();

 private:
  std::string work_dir_;
  std::string token_;
  RunningFn running_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace arbiter::agent

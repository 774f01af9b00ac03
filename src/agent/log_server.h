// LogServer: the agent's small HTTP port from which the server reads task logs (it proxies
// GET /api/v1/jobs/{id}/logs to it; node/task_logs.h says how they are kept). Two routes:
//
//   GET /v1/logs/<job>/<task>        a log: stream=combined|stdout|stderr (default stdout),
//                                    run=A (that run's part; without it the whole file, every
//                                    run), offset=N, follow=true (until the run's processes
//                                    end here, or idle_ms without new bytes), probe=true (only
//                                    whether it exists)
//   GET /v1/logs/<job>/<task>/runs   {"runs": [A, ...]}: the runs this node has logs of
//
// The bearer token announced at registration is required. Bind 127.0.0.1:0 by default;
// --listen 0.0.0.0:PORT when the server is elsewhere.
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
struct Request;
struct Response;
}  // namespace httplib

namespace arbiter::agent {

class LogServer {
 public:
  // The run (attempt) of the task whose processes run here now; 0: none.
  using RunningFn = std::function<uint64_t(uint64_t job, int32_t task)>;
  LogServer(std::string work_dir, std::string token, RunningFn running);
  ~LogServer();

  // Binds host:port (0: any free port) and serves on a thread; returns the port.
  Result<int> Start(const std::string& host, int port);
  void Stop();

 private:
  std::string work_dir_;
  std::string token_;
  RunningFn running_;
  void ServeLog(const httplib::Request& req, httplib::Response& res);
  void ServeRuns(const httplib::Request& req, httplib::Response& res);

  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace arbiter::agent

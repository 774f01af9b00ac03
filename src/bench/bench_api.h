// BenchApi: the calls a benchmark makes to the server it started (127.0.0.1:PORT, a bearer
// token, keep-alive), each expecting one status.
//
// Thread safety: one thread at a time (one keep-alive connection).
#pragma once

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace arbiter::bench {

class BenchApi {
 public:
  BenchApi(int port, const std::string& token) : client_("127.0.0.1", port) {
    client_.set_keep_alive(true);
    client_.set_tcp_nodelay(true);
    client_.set_bearer_token_auth(token);
    client_.set_read_timeout(30);
  }
  // GET, or POST with `body` (JSON; null: none). The answer's JSON when the status is `want`;
  // throws std::runtime_error otherwise, naming the call.
  nlohmann::json Call(const std::string& method, const std::string& path,
                      const nlohmann::json& body, int want) {
    auto r = method == "GET"
                 ? client_.Get(path)
                 : client_.Post(path, body.is_null() ? "" : body.dump(), "application/json");
    if (!r) {
      throw std::runtime_error(
          fmt::format("{} {}: {}", method, path, httplib::to_string(r.error())));
    }
    if (r->status != want) {
      throw std::runtime_error(fmt::format("{} {}: HTTP {}: {}", method, path, r->status, r->body));
    }
    return r->body.empty() ? nlohmann::json() : nlohmann::json::parse(r->body);
  }

 private:
  httplib::Client client_;
};

}  // namespace arbiter::bench

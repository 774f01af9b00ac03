// The client side of the `arbiter` commands: where the server and the token come from, the HTTP
// client that talks to the REST API, and how failures become messages and exit codes.
//
// Settings, first found wins:
//   1. the flags --server URL and --token TOKEN
//   2. the environment: ARBITER_SERVER, ARBITER_TOKEN (and ARBITER_QUEUE, the default queue)
//   3. the configuration file written by `arbiter login`: $ARBITER_CONFIG, else
//      $XDG_CONFIG_HOME/arbiter/config.yaml, else $HOME/.config/arbiter/config.yaml
//   4. the server http://127.0.0.1:8080 (what `make run` starts); no token.
//
// Errors are Status values; Fail() prints them ("error: ...") and returns the exit code
// (docs/cli.md). Messages say what to do: a refused connection names the URL and how to start or
// point at a server; a missing or refused token says how to log in.
//
// Thread safety: an ApiClient is used by one thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace arbiter::cli {

// Exit codes of the client commands (docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // the server refused, or the job did not succeed
inline constexpr int kExitUsage = 2;        // bad flags or input, found before any request
inline constexpr int kExitUnreachable = 3;  // no answer from the server
inline constexpr int kExitAuth = 4;         // no token, a refused token, or a forbidden action
inline constexpr int kExitTimeout = 5;      // `wait --timeout` ran out before the job ended
inline constexpr int kExitUnavailable = 6;  // the server (or this version) does not offer it yet

inline constexpr const char* kDefaultServer = "http://127.0.0.1:8080";

// The exit code of a failure reported by the server or the connection.
int ExitCodeFor(const Status& s);
// The message of `s` as printed: "field: message" unless the message already names the field.
std::string Describe(const Status& s);
// Prints "error: ..." to stderr; returns ExitCodeFor(s), or `exit_code` when given.
int Fail(const Status& s);
int Fail(const Status& s, int exit_code);

// The saved settings (config.yaml): server, token and an optional default queue.
struct ClientConfig {
  std::string server;
  std::string token;
  std::string queue;
};

// The configuration file's path (see above); "" when neither HOME nor the variables are set.
std::string ConfigPath();
// A missing file is an empty configuration; a malformed one an error naming the file.
Result<ClientConfig> ReadConfigFile(const std::string& path);
// Writes the file (mode 0600, folders made as needed).
Status WriteConfigFile(const std::string& path, const ClientConfig& c);

// The flags every client command takes.
struct ClientFlags {
  std::string server;
  std::string token;
};

struct Connection {
  std::string server;  // normalised: scheme://host[:port][/base], no trailing slash
  std::string token;
  std::string queue;  // the default queue ("" : none)
};

// Resolves the settings in the order above.
Result<Connection> ResolveConnection(const ClientFlags& flags);
// "http://h:1/" -> "http://h:1"; "h:8080" -> "http://h:8080". Errors name what is wrong.
Result<std::string> NormaliseServerUrl(std::string_view url);

struct HttpReply {
  int status = 0;
  std::string body;
  std::string content_type;
};

using HeaderMap = std::multimap<std::string, std::string>;

class ApiClient {
 public:
  explicit ApiClient(Connection c);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  const Connection& connection() const { return c_; }

  // JSON calls: the parsed body of a 2xx answer, else the server's error as a Status.
  Result<nlohmann::json> Get(const std::string& path);
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body,
                              const HeaderMap& headers = {});
  Result<nlohmann::json> Put(const std::string& path, const std::string& body,
                             const std::string& content_type);
  // Any answer the server gave (errors only when there was none).
  Result<HttpReply> Send(const std::string& method, const std::string& path,
                         const std::string& body, const std::string& content_type,
                         const HeaderMap& headers = {});
  // A streaming GET: `on_data` gets the body as it arrives and returns false to stop. An answer
  // that is not 2xx is returned as the server's error. `read_timeout_s`: the longest silence.
  Status Stream(const std::string& path, const std::function<bool(std::string_view)>& on_data,
                int read_timeout_s);
  // Every item of a paginated list (`items`, `next_cursor`), following the cursor.
  Result<nlohmann::json> ListAll(const std::string& path_with_query);

  // The Status for an error answer (the server's {"error": {...}} body, or the HTTP status).
  Status FromReply(const HttpReply& r) const;

 private:
  Status NeedToken() const;
  Status FromTransportError(int error, const std::string& path) const;
  std::unique_ptr<httplib::Client> Open(int read_timeout_s) const;

  Connection c_;
  std::string origin_;     // scheme://host:port
  std::string base_path_;  // "" or "/prefix"
};

}  // namespace arbiter::cli

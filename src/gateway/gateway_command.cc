#include "gateway/gateway_command.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "common/server_list.h"

namespace arbiter::gateway {

namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return code;
}

// The option's flag name, for errors from GatewayOptions fields.
std::string FlagOf(const std::string& field) {
  if (field == "listen") return "--listen";
  if (field == "routes_file") return "--routes-file";
  if (field == "server_url") return "--server";
  return field;
}

}  // namespace

int RunGateway(GatewayCommandOptions o) {
  if (o.log_format == "json") {
    spdlog::set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","message":"%v"})");
  }
  GatewayOptions& g = o.gateway;
  if (g.server_url.empty() && g.routes_file.empty()) {
    return Fail(2, "--server URL (with a token) or --routes-file FILE is required");
  }
  for (const std::string& url : SplitServerUrls(g.server_url)) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return Fail(2, fmt::format("--server {}: must be http://HOST:PORT (several: separated by "
                                 "commas)",
                                 url));
    }
  }
  if (g.token.empty() && !o.token_file.empty()) {
    std::ifstream f(o.token_file);
    if (!f || !std::getline(f, g.token) || g.token.empty()) {
      return Fail(2, fmt::format("--token-file {}: cannot read a token from it", o.token_file));
    }
    while (!g.token.empty() && (g.token.back() == '\r' || g.token.back() == ' ')) {
      g.token.pop_back();
    }
  }
  if (g.token.empty()) {
    if (const char* env = std::getenv("ARBITER_TOKEN"); env != nullptr) g.token = env;
  }
  if (!g.server_url.empty() && g.token.empty()) {
    return Fail(2, "--server needs a token: --token-file FILE, --token or $ARBITER_TOKEN");
  }

  // Signals go to this thread's sigwait only: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Gateway gateway(g);
  if (Status st = gateway.Start(); !st.ok()) {
    const std::string flag = FlagOf(st.field());
    return Fail(st.code() == StatusCode::kInvalidArgument ? 2 : 1,
                flag.empty() ? st.message() : flag + ": " + st.message());
  }
  std::printf("gateway listening on http://%s/\n", gateway.address().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("gateway: signal {}: stopping", sig);
  gateway.Stop();
  return 0;
}

}  // namespace arbiter::gateway

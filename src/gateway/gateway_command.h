// `arbiter gateway`: runs the gateway of online services until SIGINT or SIGTERM.
#pragma once

#include <string>

#include "gateway/gateway.h"

namespace arbiter::gateway {

struct GatewayCommandOptions {
  GatewayOptions gateway;
  std::string token_file;  // first line: the token (else --token, else $ARBITER_TOKEN)
  std::string log_format = "text";
};

// Prints `gateway listening on http://HOST:PORT/` once it serves; returns the exit code (0 after
// a signal, 1 when it cannot start, 2 for bad flags).
int RunGateway(GatewayCommandOptions options);

}  // namespace arbiter::gateway

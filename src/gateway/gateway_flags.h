// Registers `arbiter gateway` on the binary's CLI11 app (src/app/main.cc). Call once per process
// (the options are static).
#pragma once

namespace CLI {
class App;
}

namespace arbiter::gateway {

// Sets *exit_code when the command runs.
void RegisterGatewayCommand(CLI::App& app, int* exit_code);

}  // namespace arbiter::gateway

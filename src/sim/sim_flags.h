// Registers `arbiter simulate` on the binary's CLI11 app (src/app/main.cc): its flags live here,
// next to the code they configure. Call once per process (the options are static).
#pragma once

namespace CLI {
class App;
}

namespace arbiter::sim {

// Sets *exit_code when the command runs.
void RegisterSimulateCommand(CLI::App& app, int* exit_code);

}  // namespace arbiter::sim

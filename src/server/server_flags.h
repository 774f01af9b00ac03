// Registers `arbiter server` on the binary's CLI11 app (src/app/main.cc): its flags live here, next
// to the code they configure. Call once per process (the options are static).
#pragma once

namespace CLI {
class App;
}

namespace arbiter::server {

// Sets *exit_code when the command runs.
void RegisterServerCommand(CLI::App& app, int* exit_code);
// Registers `arbiter admin` (migrate-store): offline operations on a server's store.
void RegisterAdminCommand(CLI::App& app, int* exit_code);

}  // namespace arbiter::server

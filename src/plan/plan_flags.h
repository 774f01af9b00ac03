// `arbiter simulate calibrate`: the expected start's calibration on a trace
// (plan/start_calibration.h). Registered under `simulate`, beside `simulate replay`, whose trace,
// cluster and queue options it shares (sim/replay_command.h loads them).
#pragma once

namespace CLI {
class App;
}

namespace arbiter::plan {

// Adds `calibrate` to the `simulate` subcommand of `app` (RegisterSimulateCommand first).
void RegisterCalibrateCommand(CLI::App& app, int* exit_code);

}  // namespace arbiter::plan

// A job that checkpoints: run first, it prints "started" and waits; on SIGTERM it saves
// "step-42" in ARBITER_CHECKPOINT_DIR and exits 0. Run again, it prints where it resumed from and
// its ARBITER_RESTART_COUNT, and exits 0. Its whole output after one preemption is
// kCheckpointJobOutput (its stdout file); its log as `arbiter logs` shows it, kCheckpointJobLog.
#pragma once

namespace arbiter::testing {

inline constexpr const char* kCheckpointJobScript =
    "if [ -f \"$ARBITER_CHECKPOINT_DIR/ckpt\" ]; then "
    "  echo \"resumed from $(cat $ARBITER_CHECKPOINT_DIR/ckpt) restart=$ARBITER_RESTART_COUNT\";"
    "  exit 0; fi; "
    "trap 'echo step-42 > \"$ARBITER_CHECKPOINT_DIR/ckpt\"; exit 0' TERM; "
    "echo started; while true; do sleep 0.1; done";
inline constexpr const char* kCheckpointJobOutput = "started\nresumed from step-42 restart=1\n";
inline constexpr const char* kCheckpointJobLog =
    "started\n--- run 2, after preemption ---\nresumed from step-42 restart=1\n";

}  // namespace arbiter::testing

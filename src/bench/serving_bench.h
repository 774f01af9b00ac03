// `arbiter bench serving`: autoscaling an online service and lending its idle GPUs to training,
// against a service with a fixed replica count, on a real inference trace.
//
// Two arms run one after the other on the same cluster shape, each with a fresh `arbiter server`
// in a temporary folder (its built-in node with fake GPUs, or `--agents` real agents), its
// built-in gateway, and the configuration of serving_bench.cc's ClusterConfig: one tenant with a
// `serving` queue guaranteed the GPUs of the peak's replicas and a `training` queue guaranteed
// none, which borrows what is idle. In each:
//
//  - a service `chat` of arbiter-echo-server replicas (1 GPU each, at most `max_concurrency`
//    requests at once), each request's service time from its token counts
//    (serving_model.h ServiceTimeModel) passed as `?delay_ms=`;
//  - a backlog of preemptible 1-GPU training jobs (shell scripts) that checkpoint every
//    `checkpoint_s` into $ARBITER_CHECKPOINT_DIR (a temp file renamed), resume from it, and end
//    after `train_work_s` seconds of work, each recording its runs for the figures;
//  - open-loop load (open_loop.h) through the gateway: the trace's arrivals compressed by
//    `speedup` under a day/night multiplier (serving_model.h DayNight), for `duration_s`.
//
// Arm `static`: the service has the peak's replica count throughout; training runs on the rest.
// Arm `arbiter`: replicas {min, max = the peak's count} with autoscaling; training borrows the
// serving queue's idle guarantee and the server reclaims it when the service scales up.
#pragma once

#include <string>

namespace arbiter::bench {

struct ServingBenchOptions {
  std::string binary;       // the arbiter executable ("" : this process's own)
  std::string echo_server;  // "" : arbiter-echo-server beside the arbiter executable
  std::string trace = "../shared/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv";
  double duration_s = 120;  // of load, per arm
  double speedup = 30;      // trace seconds per second at the day's peak
  double period_s = 0;      // of the day/night multiplier (0: duration_s: one night-day-night)
  double trough = 0.1;      // the multiplier at night (1 at the peak)
  double prefill_ms_per_token = 0.02;
  double decode_ms_per_token = 0.5;
  int gpus = 8;              // in the cluster
  int agents = 0;            // 0: the server's built-in node has them all; else split over agents
  double slo_ms = 1000;      // latency target of each request
  int max_concurrency = 8;   // requests a replica serves at once
  double utilization = 0.8;  // of a replica's slots, what the peak's count and autoscaling aim at
  int static_replicas = 0;   // 0: the peak's need from the schedule (PeakReplicas)
  int min_replicas = 1;      // the arbiter arm's minimum
  int train_work_s = 40;     // each training job's work
  int checkpoint_s = 10;     // between its checkpoints
  int grace_s = 3;           // the training class's grace period (SIGTERM to SIGKILL)
  int reclaim_deadline_s = 10;  // the service's reclaim_deadline_seconds
  std::string arms = "static,arbiter";
  bool keep = false;  // keep the temporary folder (logs, stores, the training jobs' records)
  bool json = false;
};

int RunServingBench(const ServingBenchOptions& options);

}  // namespace arbiter::bench

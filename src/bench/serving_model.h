// The pure parts of `arbiter bench serving` (serving_bench.h): the inference trace, the day/night
// rate multiplier that turns it into an arrival schedule, each request's service time from its
// token counts, and the figures computed from what the run recorded.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace arbiter::bench {

// One request of an Azure LLM inference trace (AzureLLMInferenceTrace_*.csv: the header
// "TIMESTAMP,ContextTokens,GeneratedTokens", then "2023-11-16 18:15:46.6805900,374,44" lines).
struct TraceRequest {
  double at_s = 0;  // seconds after the trace's first request
  int context_tokens = 0;
  int generated_tokens = 0;
};

// Reads a trace; false with `error` naming the line and the field for anything else. Requests
// are returned in time order (the file's order, sorted when it is not).
bool ParseLlmTrace(std::istream& in, std::vector<TraceRequest>* out, std::string* error);

// The day/night pattern: the trace's arrival rate times
//   m(t) = trough + (1 - trough) * (1 - cos(2 pi t / period)) / 2,
// t in seconds of the run: the night's trough at t = 0, the day's peak (m = 1) at period / 2.
struct DayNight {
  double period_s = 150;
  double trough = 0.1;  // 0..1
};
double RateMultiplier(const DayNight& d, double t);
// Trace seconds replayed by run time t at `speedup` trace seconds per second at the peak: the
// integral of speedup * m over [0, t].
double TraceSecondsAt(const DayNight& d, double speedup, double t);

// A request's service time: prefill in proportion to its prompt, decode to its output.
struct ServiceTimeModel {
  double prefill_ms_per_token = 0.02;
  double decode_ms_per_token = 0.5;
};
int ServiceTimeMs(const ServiceTimeModel& m, int context_tokens, int generated_tokens);

struct Arrival {
  double at_s = 0;   // when it is sent, seconds after the run's start
  int delay_ms = 0;  // its service time
};

// The arrival schedule of a run of `duration_s`: the trace's requests (from its start, again from
// its start when it runs out, one mean gap after its last request) at the run times where
// TraceSecondsAt reaches their trace times. Open loop: each is sent at its time, whatever the
// answers.
std::vector<Arrival> ArrivalSchedule(const std::vector<TraceRequest>& trace, const DayNight& d,
                                     double speedup, double duration_s,
                                     const ServiceTimeModel& model);

// The replicas the busiest `window_s` of the schedule needs: its work (service time per second)
// over what one replica does at `utilization` (0..1] of its `max_concurrency` slots; at least 1.
int PeakReplicas(const std::vector<Arrival>& arrivals, double window_s, int max_concurrency,
                 double utilization);

// The p-th percentile (0..100) by linear interpolation; 0 for none.
double Percentile(std::vector<double> v, double p);

struct RequestOutcome {
  double latency_ms = 0;  // from its scheduled send time to the end of its answer
  bool ok = false;        // answered 200
};

struct LatencyFigures {
  int64_t requests = 0;
  int64_t failed = 0;
  double slo_attainment = 0;  // share of all requests answered 200 within the SLO (0..1)
  double p50_ms = 0;          // of the requests answered 200
  double p99_ms = 0;
};
LatencyFigures ComputeLatencies(const std::vector<RequestOutcome>& outcomes, double slo_ms);

// One run of a training job as its script records it, one line each: "start MS STEP" (its
// resumed progress), "ckpt MS STEP" (a checkpoint saved), "term MS STEP" (SIGTERM: it stops,
// losing the steps since its last checkpoint), "end MS STEP" (its work is done).
struct TrainingRun {
  int64_t start_ms = 0;
  int64_t last_checkpoint_ms = 0;  // 0: none in this run
  int64_t end_ms = 0;              // 0: still running
  bool terminated = false;         // ended by SIGTERM (preempted, or stopped at the end)
  bool finished = false;           // its work done
};
// The runs of one job's record; lines it cannot read are skipped.
std::vector<TrainingRun> ParseTrainingRuns(const std::string& text);

struct TrainingFigures {
  double gpu_hours = 0;       // the runs' GPU time within the window
  double lost_gpu_hours = 0;  // runs terminated within the window: their time since the later of
                              // their start and their last checkpoint
  int64_t preemptions = 0;    // runs terminated within the window
  int64_t jobs_finished = 0;  // runs that finished within the window
};
// Over runs of 1-GPU-each jobs (times x `gpus`), counting [window_start_ms, window_end_ms] only;
// a run still going counts until the window's end.
TrainingFigures ComputeTraining(const std::vector<TrainingRun>& runs, int64_t window_start_ms,
                                int64_t window_end_ms, double gpus);

}  // namespace arbiter::bench

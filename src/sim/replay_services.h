// Online services in the replay (docs/simulator.md, "Services in the replay"): a service's
// request trace, the time each request takes, the queue of requests at its replicas, and the
// service compiled against the cluster and the queue tree. RunReplay (sim/replay.h) drives them:
// one autoscaling sample and decision per virtual second (core::Autoscaler, unchanged), replicas
// as pending jobs of type service placed by the same scheduling cycle as the trace's jobs.
//
// The request model, per service:
//   service time   = prefill + decode
//   prefill (ms)   = prefill_ms_per_token x ContextTokens
//   decode (ms)    = decode_ms_per_token x GeneratedTokens
//   slots          = ready replicas x max_concurrency (max_concurrency 0: no limit once a replica
//                    is ready; none while no replica is ready)
//   Requests wait in one first-come-first-served queue in front of the slots (the gateway's):
//   a request starts when a slot is free, holds it for its service time and leaves. It gives up
//   after request_queue.timeout_ms of waiting (timed out); it is turned away when
//   request_queue.max requests already wait (rejected). A replica that goes away stops taking
//   requests; those it serves finish (drained).
//   wait           = start - arrival (0 when a ready replica had room at the arrival)
//   latency        = wait + service time
//   within the SLO when wait + prefill (the time to the first token) <= slo.latency_ms
//   concurrency    = requests in flight or waiting, averaged over each second (the autoscaler's
//                    metric, as the gateways measure it); rps = the arrivals of that second
//
// Thread safety: plain values and pure functions; a RequestQueue has one owner.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "core/autoscale/autoscaler.h"
#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"
#include "model/priority.h"
#include "model/queue.h"
#include "model/service.h"

namespace arbiter::sim {

struct ReplayWorkload;
struct Trace;

// One request of an LLM trace (the Azure LLM inference trace's TIMESTAMP, ContextTokens,
// GeneratedTokens).
struct TraceRequest {
  TimeMs at = 0;  // ms after the file's first request
  int64_t context_tokens = 0;
  int64_t generated_tokens = 0;
};

// Loads an Azure LLM inference trace (AzureLLMInferenceTrace_*.csv: a header naming TIMESTAMP,
// ContextTokens and GeneratedTokens in any order; TIMESTAMP "YYYY-MM-DD HH:MM:SS[.fraction]").
// Requests in time order. Errors name the file and line ("f.csv:12: ContextTokens: ...").
Result<std::vector<TraceRequest>> LoadAzureRequests(const std::string& path);

// How a request trace overlays the batch trace, and what a request costs.
struct RequestModel {
  // The first request arrives `offset_seconds` after the replay's start (the batch trace's first
  // submit time); request i at start + offset + (at_i - at_0) / compress.
  double offset_seconds = 0;
  double compress = 1;  // > 0; 60: an hour of requests in a minute
  double prefill_ms_per_token = 0.25;
  double decode_ms_per_token = 20;
};

// A request in the replay's virtual time.
struct ServiceRequest {
  TimeMs arrival = 0;
  DurationMs prefill_ms = 0;
  DurationMs service_ms = 0;  // prefill + decode
};

// The trace's requests placed at virtual times from `start` by the model, in time order (times
// and durations rounded to whole ms, at least 1 ms of service).
std::vector<ServiceRequest> PlaceRequests(const std::vector<TraceRequest>& trace, TimeMs start,
                                          const RequestModel& model);

// What became of a service's requests.
struct RequestOutcomes {
  int64_t arrived = 0;
  int64_t served = 0;  // started (finished, or in flight at the end)
  int64_t within_slo = 0;
  int64_t timed_out = 0;
  int64_t rejected = 0;
  int64_t waiting_at_end = 0;
  std::vector<double> wait_seconds;     // per served request
  std::vector<double> latency_seconds;  // per served request
};

// The first-come-first-served queue of one service's requests in front of its replicas' slots.
class RequestQueue {
 public:
  // `requests` must outlive the queue, in time order. queue_max 0: no limit; timeout 0: none.
  RequestQueue(const std::vector<ServiceRequest>* requests, int32_t max_concurrency,
               int64_t queue_max, DurationMs queue_timeout, DurationMs slo_ms, TimeMs start);

  // Runs the queue over [now, t): arrivals, starts, completions and timeouts before t.
  void AdvanceTo(TimeMs t);
  // From now (after AdvanceTo(now)) `ready` replicas serve: waiting requests start when there is
  // room.
  void SetReady(int32_t ready);
  // The autoscaler's sample of [the last sample, now): the time-averaged requests in flight or
  // waiting, and the arrivals per second; the next sample starts now.
  core::AutoscaleSample TakeSample();

  TimeMs now() const { return now_; }
  bool waiting() const { return !waiting_.empty(); }
  size_t in_flight() const { return busy_.size(); }
  // The outcomes so far (requests still waiting counted in waiting_at_end).
  RequestOutcomes Outcomes() const;

 private:
  int64_t Slots() const;
  void Start(TimeMs t);
  void Integrate(TimeMs t);

  const std::vector<ServiceRequest>* requests_;
  int32_t max_concurrency_;
  int64_t queue_max_;
  DurationMs timeout_;
  DurationMs slo_ms_;
  int32_t ready_ = 0;
  size_t next_ = 0;
  std::deque<size_t> waiting_;
  std::priority_queue<TimeMs, std::vector<TimeMs>, std::greater<>> busy_;  // completion times
  TimeMs now_;
  TimeMs sample_from_;
  double sample_integral_ = 0;  // (in flight + waiting) x ms since sample_from_
  int64_t sample_arrivals_ = 0;
  RequestOutcomes out_;
};

// A service ready to replay: its replicas' job and its requests.
struct ReplayService {
  std::string name;
  uint32_t queue = 0;        // index into ReplayWorkload::queues
  core::PendingJob replica;  // a replica as submitted (id, submit time set per replica)
  DurationMs min_runtime = 0;
  DurationMs grace_period = 0;
  bool autoscaled = false;
  int32_t replicas = 1;  // the fixed count, or where autoscaling starts
  int32_t min_replicas = 0;
  int32_t max_replicas = 0;
  AutoscalingSpec autoscaling;
  int32_t max_concurrency = 0;
  RequestQueueSpec request_queue;
  DurationMs slo_ms = 500;
  int64_t reclaim_deadline_seconds = 0;
  std::string lending;  // how its queue lends its guarantee, for people
  std::vector<ServiceRequest> requests;
};

// The services of a file: one or more YAML documents (separated by `---`) or a JSON object, each
// the API's service object (api/service_codec.h), with or without `kind: Service`. Errors name
// the file and the field.
Result<std::vector<ServiceSpec>> LoadServiceSpecs(const std::string& path);

// The service's leaf queue in the replay: spec.queue, or the service's name without one.
std::string ServiceQueueName(const ServiceSpec& spec);
// GPU milli one replica asks for.
int64_t ReplicaGpuMilli(const ServiceSpec& spec);

// Adds the queues of services that the tree lacks to a generated tree (DefaultQueueTree): per
// such service a tenant (spec.tenant, or "serving") and a leaf queue guaranteed what the service
// holds at most (max replicas, or the fixed count, x GPUs per replica); the other queues'
// guarantees shrink in proportion so that the sum stays within the cluster:
//   G'(q) = floor(G(q) x (capacity - services' guarantees) / capacity)
void AddServiceQueues(const std::vector<ServiceSpec>& services, int64_t capacity_milli,
                      std::vector<QueueSpec>* specs);

// reclaim_deadline_seconds: training may borrow a service queue's idle guarantee only with a grace
// period within the deadline. The replay hands the deadline to the core as the server does
// (CycleInput::lend_grace_limits: a job slower to stop does not get that queue's idle guarantee,
// and a reclaim by that queue ignores its victims' minimum runtime); `specs` is left as it is.
// Returns one line per service saying which of the trace's classes may borrow.
std::vector<std::string> ApplyReclaimDeadlines(const std::vector<ServiceSpec>& services,
                                               const Trace& trace,
                                               const std::vector<PriorityClass>& classes,
                                               std::vector<QueueSpec>* specs);

// Compiles the services into the workload (after CompileReplay): their queues join
// workload->queues when no job uses them. `requests[i]` are service i's requests; `lending[i]`
// is ApplyReclaimDeadlines' line (may be empty). Errors name services[i] and the field.
Status CompileServices(const std::vector<ServiceSpec>& services,
                       std::vector<std::vector<ServiceRequest>> requests,
                       const std::vector<std::string>& lending,
                       const std::vector<PriorityClass>& classes, ReplayWorkload* workload);

}  // namespace arbiter::sim

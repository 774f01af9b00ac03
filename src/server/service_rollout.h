// The service controller's decisions as pure functions (docs/services.md): how many replicas each
// revision wants, which replicas to start and which to drain in a rolling update, how long a
// replacement waits after failures, and the weights the gateways route by.
//
// Rules (written out where each is computed):
//   desired(r)  = 0 when replicas = 0 or r's target percent p is 0 (or r has none), else
//                 max(1, ceil(replicas x p / 100))
//   start       one replica of revision r while it has fewer than desired(r) and
//                 total < desired_total + max_surge      (total: live, not draining, every
//                 revision)
//   drain       a surplus replica (its revision has more than desired): one that is not ready at
//                 once; a ready one only while ready_total - 1 >= desired_total - max_unavailable
//   weight(r)   = p(r) x min(1, ready(r) / desired(r)) for revisions with p > 0; the rest
//                 (100 - their sum) goes to revisions with p = 0 that still have ready replicas,
//                 in proportion to those
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/service.h"
#include "model/time.h"

namespace arbiter::server {

// A replica as the controller sees it.
enum class ReplicaPhase {
  kPending,   // its job waits for a place, or is placed and not running yet
  kStarting,  // running, readiness not passed yet (or failing)
  kReady,     // running and ready: in the routes
  kDraining,  // out of the routes, waiting for in-flight requests before it is stopped
};
std::string_view ReplicaPhaseName(ReplicaPhase p);  // "pending", "starting", "ready", "draining"

struct ReplicaView {
  uint64_t job = 0;
  int64_t revision = 0;
  ReplicaPhase phase = ReplicaPhase::kPending;
};

// Replicas each revision wants (revisions absent want 0).
std::map<int64_t, int32_t> DesiredReplicas(int32_t replicas,
                                           const std::vector<TrafficSplit>& traffic);

struct RolloutPlan {
  std::map<int64_t, int32_t> desired;
  std::vector<int64_t> start;   // one replica of each listed revision (a revision may repeat)
  std::vector<uint64_t> drain;  // replicas (job ids) to take out: ready ones drain, others stop
};

// One reconcile step of one service. `replicas`: its live replicas (draining ones included).
// `may_start`: false while the service backs off after failures (nothing is started).
RolloutPlan PlanRollout(int32_t replicas, const RolloutSpec& rollout,
                        const std::vector<TrafficSplit>& traffic,
                        const std::vector<ReplicaView>& live, bool may_start);

// A revision's share of the requests as the routes give it (may be fractional).
struct RouteWeight {
  int64_t revision = 0;
  double percent = 0;
};
// The weights of every revision with p > 0 or with ready replicas, ascending by revision.
std::vector<RouteWeight> RouteWeights(const std::vector<TrafficSplit>& traffic,
                                      const std::map<int64_t, int32_t>& desired,
                                      const std::map<int64_t, int32_t>& ready);

// The wait before the next replica may start after `failures` consecutive failed replicas:
// 0 for none, then 1 s, 2 s, 4 s, ... at most 60 s.
DurationMs ReplaceBackoffMs(int32_t failures);

// The target of a rollback: [{P, 100}] where P is the highest revision below the one that now
// has the most traffic (ties: the highest of them), among `revisions`; false when there is none.
bool RollbackTarget(const std::vector<TrafficSplit>& traffic, const std::vector<int64_t>& revisions,
                    int64_t latest, int64_t* out);

// The default traffic: the latest revision gets everything.
std::vector<TrafficSplit> LatestTraffic(int64_t latest);

}  // namespace arbiter::server

// The gateway's live routing state and its choices: which revision (weighted by percent) and
// which replica (the less loaded of two picked at random, never above max_concurrency, skipping
// replicas ejected after a failed connect).
//
// A Table is built from a RouteTable (routes.h) each time the server sends a new version and is
// then immutable; io threads read it through their own shared_ptr. Replica and ServiceShared
// objects carry what must outlive one table: a replica's outstanding requests and ejection, a
// service's wait queue. BuildTable reuses them from the previous table by id and name, so a
// request in flight on a replica that left the table still releases its slot there (draining).
//
// Thread safety: Table is immutable. Replica's counters are atomics touched by every io thread.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gateway/routes.h"
#include "gateway/stats.h"
#include "gateway/wait_queue.h"

namespace arbiter::gateway {

struct Replica {
  std::string id;
  std::string address;
  uint64_t serial = 0;  // unique for the gateway's life: keys the io threads' connection pools
  sockaddr_storage addr{};
  socklen_t addr_len = 0;  // 0: the address did not resolve (never chosen)

  std::atomic<int64_t> outstanding{0};       // requests sent and not answered, all threads
  std::atomic<int64_t> ejected_until_ms{0};  // steady-clock ms; skipped until then

  bool Ejected(int64_t now_ms) const {
    return ejected_until_ms.load(std::memory_order_relaxed) > now_ms;
  }
};

// What lives as long as the service's name stays in the table.
struct ServiceShared {
  WaitQueue queue;
};

struct Revision {
  int64_t revision = 0;
  std::string label;  // the number as text: X-Arbiter-Revision
  double percent = 0;
  std::vector<std::shared_ptr<Replica>> replicas;
  std::vector<RouteCounters*> counters;  // per io thread
};

struct Service {
  std::string name;
  std::string tenant;
  int64_t max_concurrency = 0;
  int64_t queue_max = 0;
  int64_t queue_timeout_ms = 0;
  std::vector<Revision> revisions;
  std::vector<const Revision*> routable;  // revisions with at least one replica
  std::vector<double> routable_weights;   // their percents, renormalised to sum 1
  std::shared_ptr<ServiceShared> shared;
  // Counters of requests that no revision could take (no replica anywhere): the revision with
  // the highest percent, else revision 0.
  std::vector<RouteCounters*> unrouted_counters;
  int64_t unrouted_revision = 0;
};

struct Table {
  int64_t version = 0;
  bool loaded = false;  // false: no table yet (answers are 503, not 404)
  std::vector<std::unique_ptr<Service>> services;
  std::unordered_map<std::string, const Service*> by_name;
  std::unordered_map<std::string, const Service*> by_host;

  const Service* FindByName(std::string_view name) const;
  const Service* FindByHost(std::string_view normalized_host) const;
};

// Resolves HOST:PORT into `replica`'s addr/addr_len; false when it does not resolve.
using Resolver = std::function<bool(const std::string& address, Replica* replica)>;

// The table of `spec`, reusing `previous`'s replicas (same id and address) and services (same
// name). `next_serial` numbers new replicas. Counters come from `stats` for `shards` io
// threads.
std::shared_ptr<const Table> BuildTable(const RouteTable& spec, const Table* previous,
                                        const Resolver& resolve, Stats& stats, int shards,
                                        uint64_t* next_serial);

// The revision a uniform random number u in [0, 1) picks among service.routable by weight;
// null when no revision has a replica.
const Revision* PickRevision(const Service& service, double u);

// The outcome of AcquireReplica.
struct Acquired {
  std::shared_ptr<Replica> replica;  // null: none was free
  bool any_candidate = false;        // a replica other than `exclude` exists (it was full)
};

// Picks a replica of `revision` by the power of two choices (two at random, the one with fewer
// outstanding requests) among those under `max_concurrency` (0: unlimited), not ejected and not
// `exclude`, and counts one more outstanding request on it. When every candidate is ejected,
// ejections are ignored (a revision whose replicas all failed a connect is still tried).
// `random` is a fresh 64-bit random number.
Acquired AcquireReplica(const Revision& revision, int64_t max_concurrency, int64_t now_ms,
                        const Replica* exclude, uint64_t random);

}  // namespace arbiter::gateway

// Webhooks: people hear about their jobs and their tenant's budget without watching a terminal
// (docs/webhooks.md).
//
// A webhook is an API object (not configuration) that belongs to a user (the events of that
// user's jobs), a tenant (its jobs' events and its budget's) or the cluster (everything; admins).
// An event (job.succeeded, budget.80, ...) makes one delivery per matching hook: a signed HTTP
// POST, retried with exponential backoff and jitter on connection errors, timeouts, 5xx and 429
// until it is delivered, refused (another 4xx) or too old. Deliveries are durable: each is
// written to the store when the event happens and after every attempt, and the pending ones are
// loaded again at start, so a restart resumes them (with the same delivery id).
//
// Webhooks owns the hooks, the pending deliveries and the budget alerts already sent, under its
// own mutex: a leaf, taken after ControlPlane::mu_ where both are held (events are raised under
// mu_), never the other way round. Network I/O happens on its own worker thread, never under
// either lock. Store writes are enqueued (WriteAsync) under the lock, so a delivery's writes
// commit in the order they happened; nothing waits for them but the API's creation and deletion.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/result.h"
#include "model/time.h"
#include "server/auth.h"
#include "store/store.h"

namespace arbiter::server {

class ServerMetrics;

// The events a hook may subscribe to, in the order docs/webhooks.md lists them. "ping" (POST
// .../test) is sent to a hook whatever it subscribes to and cannot be subscribed to.
inline constexpr std::string_view kWebhookEvents[] = {
    "job.succeeded", "job.failed",   "job.preempted", "job.awaiting_approval",
    "job.approved",  "job.rejected", "budget.80",     "budget.100"};
inline constexpr std::string_view kWebhookPing = "ping";

// The event a job's transition raises ("" for none): succeeded; failed and timed-out
// (job.failed); preempted; awaiting_approval (at submission); awaiting_approval -> pending
// (job.approved); rejected.
std::string_view JobWebhookEvent(std::string_view from, std::string_view to);

// The X-Arbiter-Signature header's value: "t=UNIXSECONDS,v1=HEX", HEX = lower-case hex of
// HMAC-SHA256(secret, "UNIXSECONDS." + body).
std::string WebhookSignature(std::string_view secret, int64_t unix_seconds, std::string_view body);

// A hook's URL: http or https, with a host, at most 2048 characters, no spaces or control
// characters. Errors name the field "url".
Status ValidateWebhookUrl(std::string_view url);

// When and how often a delivery is retried (server flags --webhook-*).
struct WebhookRetryPolicy {
  int64_t base_delay_ms = 10'000;           // the wait after the first failed attempt
  int64_t max_delay_ms = 3'600'000;         // waits double up to this
  int32_t max_attempts = 20;                // then the delivery fails
  int64_t max_age_ms = 86'400'000;          // no attempt starts later than this after the event
  int64_t timeout_ms = 10'000;              // connecting, and reading the answer, each
  int64_t retention_ms = 7 * 86'400'000LL;  // finished deliveries are kept this long
};

// The wait before the next attempt after `failed` failed attempts (>= 1): full exponential
// backoff d = min(max_delay, base_delay * 2^(failed-1)), jittered to a uniform point of
// [d/2, d) by `unit` in [0, 1), so that deliveries that failed together do not retry together.
int64_t WebhookRetryDelayMs(const WebhookRetryPolicy& p, int32_t failed, double unit);

// Whether an attempt that got `status` is retried: 0 (no answer: the connection failed or timed
// out), 408, 429 and 5xx. 2xx is delivered; other statuses fail the delivery at once.
bool WebhookStatusRetryable(int status);

// The Slack message of an event: {"text": "..."}, one readable line.
std::string WebhookSlackBody(std::string_view event, const nlohmann::json& payload);

// What one attempt got: an HTTP status, or 0 and an error (connection refused, timeout, ...).
struct WebhookResponse {
  int status = 0;
  std::string error;
};
// Sends one request; the default posts with cpp-httplib's client (https included).
using WebhookSender = std::function<WebhookResponse(
    const std::string& url, const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body, int64_t timeout_ms)>;

class Webhooks {
 public:
  // `metrics` may be null (tests). `now`: milliseconds since the epoch.
  Webhooks(store::Store* store, std::function<TimeMs()> now, ServerMetrics* metrics);
  ~Webhooks();
  Webhooks(const Webhooks&) = delete;
  Webhooks& operator=(const Webhooks&) = delete;

  // Before Start.
  void SetPolicy(const WebhookRetryPolicy& p);
  void SetSender(WebhookSender sender);
  // Whether a tenant exists (for an admin's tenant-scoped hook); called without any lock of ours.
  void SetTenantCheck(std::function<bool(const std::string&)> exists);

  // The hooks, the pending deliveries and the budget alerts sent, from the store's state.
  void Load(const store::StoreState& state);
  // Starts the worker thread; Stop ends it (idempotent; the destructor stops it too).
  void Start();
  void Stop();

  // The API (docs/webhooks.md, "Who may"). Create answers the hook with its secret, the only time
  // the secret is shown; the others never show it.
  Result<nlohmann::json> Create(const Principal& p, const nlohmann::json& body);
  Result<nlohmann::json> List(const Principal& p);
  Result<nlohmann::json> Delete(const Principal& p, const std::string& id);
  // The newest `limit` deliveries of the hook, newest first.
  Result<nlohmann::json> Deliveries(const Principal& p, const std::string& id, size_t limit);
  // Queues a ping to the hook; answers the delivery.
  Result<nlohmann::json> Test(const Principal& p, const std::string& id);

  // Events. `job`: the job's fields as the body shows them. Cheap when no hook exists.
  void JobEvent(std::string_view event, const std::string& tenant, const std::string& user,
                nlohmann::json job);
  // A tenant's budget use in its current period (starting at `period_start`): raises budget.80
  // and budget.100 once per period each, when the use reaches 80% and 100% of the budget.
  void BudgetUse(const std::string& tenant, const std::string& period, TimeMs period_start,
                 int64_t used_gpu_milli_ms, double budget_gpu_hours);

  // One pass of the worker: every due delivery attempted once, in order of due time; returns how
  // many were attempted. The worker thread calls it; tests call it with a fake clock and sender.
  size_t RunDue();
  // How many deliveries are pending (tests, metrics).
  size_t pending() const;

 private:
  struct Hook {
    store::WebhookRecord record;
    std::string url, scope, format, description;
    std::vector<std::string> events;
  };
  struct Delivery {
    std::string id, hook_id, event;
    std::string body;
    std::string state = "pending";
    int32_t attempts = 0;
    TimeMs created_at = 0, next_at = 0, updated_at = 0, delivered_at = 0;
    int last_status = 0;
    std::string last_error;
    nlohmann::json log = nlohmann::json::array();
    bool in_flight = false;
  };
  // The budget alerts sent in a tenant's current period.
  struct BudgetAlerts {
    TimeMs period_start = 0;
    int level = 0;  // 0, 80 or 100: the highest crossing sent
  };

  static nlohmann::json HookJson(const Hook& h);
  static nlohmann::json DeliveryJson(const Delivery& d);
  static store::WebhookDeliveryRecord DeliveryRecord(const Delivery& d);
  static Delivery FromRecord(const store::WebhookDeliveryRecord& r);
  static bool ParseHook(const store::WebhookRecord& r, Hook* h);
  // Requires mu_.
  bool MaySeeLocked(const Principal& p, const Hook& h) const;
  // The hook `id` if `p` may manage it, else 404 as for a missing one; another's hook is
  // audited as `action` when that is not empty.
  Result<Hook*> FindLocked(const Principal& p, const std::string& id, std::string_view action);
  // An audit record, enqueued (not waited for).
  void AuditLocked(const Principal& p, std::string action, const std::string& id,
                   std::string result);
  // A delivery of `event` with `payload` (id, event and at are filled in) to `h`; its id.
  std::string QueueLocked(const Hook& h, std::string_view event, nlohmann::json payload,
                          store::WriteBatch* b);
  void EmitLocked(std::string_view event, const std::string& tenant, const std::string& user,
                  const nlohmann::json& payload);
  void WriteLocked(store::WriteBatch b);
  void WorkerLoop();

  store::Store* store_;
  std::function<TimeMs()> now_;
  ServerMetrics* metrics_;
  WebhookRetryPolicy policy_;
  WebhookSender sender_;
  std::function<bool(const std::string&)> tenant_exists_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Hook> hooks_;           // by id; guarded by mu_
  std::map<std::string, Delivery> pending_;     // by id; guarded by mu_
  std::map<std::string, BudgetAlerts> budget_;  // by tenant; guarded by mu_
  std::atomic<bool> any_hooks_{false};
  uint64_t rng_state_ = 0x9e3779b97f4a7c15ull;  // jitter; guarded by mu_
  TimeMs last_prune_ = 0;                       // guarded by mu_
  bool stopping_ = false;                       // guarded by mu_
  bool kicked_ = false;                         // a delivery was queued; guarded by mu_
  std::thread worker_;
};

}  // namespace arbiter::server

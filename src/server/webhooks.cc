#include "server/webhooks.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include "server/control_plane_helpers.h"
#include "server/metrics.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr const char* kBudgetAlertsKey = "webhook_budget_alerts";
constexpr size_t kMaxUrlBytes = 2048;
constexpr size_t kMaxDescriptionBytes = 200;
constexpr size_t kMaxLogEntries = 20;         // attempts kept in a delivery's log
constexpr size_t kMaxHooksPerOwner = 50;      // per user, per tenant and for the cluster
constexpr int64_t kPruneEveryMs = 3'600'000;  // finished deliveries pruned hourly
constexpr double kMilliMsPerGpuHour = 1000.0 * 3'600'000.0;

bool KnownEvent(std::string_view e) {
  return std::find(std::begin(kWebhookEvents), std::end(kWebhookEvents), e) !=
         std::end(kWebhookEvents);
}

std::string EventList() {
  std::string out;
  for (std::string_view e : kWebhookEvents) out += fmt::format("{}{}", out.empty() ? "" : ", ", e);
  return out;
}

// "job 42 (train) of alice in lab/research"
std::string JobPhrase(const json& job) {
  std::string s = fmt::format("Job {}", job.value("id", json(0)).dump());
  const std::string name = job.value("name", "");
  if (!name.empty()) s += fmt::format(" ({})", name);
  s += fmt::format(" of {} in {}/{}", job.value("user", ""), job.value("tenant", ""),
                   job.value("queue", ""));
  return s;
}

WebhookResponse HttpSend(const std::string& url,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         const std::string& body, int64_t timeout_ms) {
  // scheme://host[:port][/path]; ValidateWebhookUrl checked the form.
  const size_t scheme_end = url.find("://");
  const size_t path_start = url.find('/', scheme_end + 3);
  const std::string origin = url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  httplib::Client client(origin);
  if (!client.is_valid()) return {0, fmt::format("cannot reach {}", origin)};
  const time_t sec = static_cast<time_t>(timeout_ms / 1000);
  const time_t usec = static_cast<time_t>((timeout_ms % 1000) * 1000);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  client.set_follow_location(false);
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  auto res = client.Post(path, h, body, "application/json");
  if (!res) return {0, httplib::to_string(res.error())};
  return {res->status, ""};
}

}  // namespace

std::string_view JobWebhookEvent(std::string_view from, std::string_view to) {
  if (to == "succeeded") return "job.succeeded";
  if (to == "failed" || to == "timed-out") return "job.failed";
  if (to == "preempted") return "job.preempted";
  if (to == "awaiting_approval") return "job.awaiting_approval";
  if (to == "rejected") return "job.rejected";
  if (from == "awaiting_approval" && to == "pending") return "job.approved";
  return "";
}

std::string WebhookSignature(std::string_view secret, int64_t unix_seconds, std::string_view body) {
  std::string message = fmt::format("{}.", unix_seconds);
  message.append(body);
  return fmt::format("t={},v1={}", unix_seconds, HmacHex(secret, message));
}

Status ValidateWebhookUrl(std::string_view url) {
  if (url.empty()) return InvalidArgument("url", "is required");
  if (url.size() > kMaxUrlBytes) {
    return InvalidArgument("url", fmt::format("is {} bytes; at most {}", url.size(), kMaxUrlBytes));
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return InvalidArgument("url", "must not contain spaces or control characters");
    }
  }
  std::string_view rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
  } else {
    return InvalidArgument("url", fmt::format("must be an http:// or https:// URL, got '{}'", url));
  }
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.empty() || authority.front() == ':') {
    return InvalidArgument("url", "has no host");
  }
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument("url", "must not carry credentials (user@host)");
  }
  if (rest.find('#') != std::string_view::npos) {
    return InvalidArgument("url", "must not have a fragment (#...)");
  }
  return Status::Ok();
}

int64_t WebhookRetryDelayMs(const WebhookRetryPolicy& p, int32_t failed, double unit) {
  int64_t d = std::max<int64_t>(1, p.base_delay_ms);
  for (int32_t i = 1; i < failed && d < p.max_delay_ms; ++i) d *= 2;
  d = std::min(d, std::max<int64_t>(1, p.max_delay_ms));
  unit = std::clamp(unit, 0.0, 1.0);
  return d / 2 + static_cast<int64_t>(static_cast<double>(d - d / 2) * unit);
}

bool WebhookStatusRetryable(int status) {
  return status == 0 || status == 408 || status == 429 || (status >= 500 && status <= 599);
}

std::string WebhookSlackBody(std::string_view event, const json& payload) {
  std::string text;
  const json job = payload.value("job", json::object());
  const std::string reason = job.value("reason", "");
  const std::string because = reason.empty() ? "" : ": " + reason;
  if (event == "job.succeeded") {
    text = fmt::format(":white_check_mark: {} succeeded", JobPhrase(job));
  } else if (event == "job.failed") {
    std::string exit;
    if (job.contains("exit_code") && job["exit_code"].is_number()) {
      exit = fmt::format(" (exit code {})", job["exit_code"].get<int64_t>());
    }
    text =
        fmt::format(":x: {} {}{}{}", JobPhrase(job),
                    job.value("state", "") == "timed-out" ? "timed out" : "failed", exit, because);
  } else if (event == "job.preempted") {
    text = fmt::format(":warning: {} was preempted{}", JobPhrase(job), because);
  } else if (event == "job.awaiting_approval") {
    text = fmt::format(":hourglass: {} awaits approval{}", JobPhrase(job), because);
  } else if (event == "job.approved") {
    text = fmt::format(":thumbsup: {} was approved{}", JobPhrase(job), because);
  } else if (event == "job.rejected") {
    text = fmt::format(":no_entry: {} was rejected{}", JobPhrase(job), because);
  } else if (event == "budget.80" || event == "budget.100") {
    const json b = payload.value("budget", json::object());
    text = fmt::format(
        "{} Tenant {} has used {}% of its {:g} GPU-hour {} budget ({:.1f} GPU-hours)",
        event == "budget.80" ? ":warning:" : ":rotating_light:", payload.value("tenant", ""),
        b.value("percent", 0), b.value("gpu_hours", 0.0), b.value("period", ""),
        b.value("gpu_hours_used", 0.0));
  } else {
    text = fmt::format("Arbiter webhook test: {} ({})", payload.value("webhook", ""),
                       std::string(event));
  }
  return json{{"text", text}}.dump();
}

Webhooks::Webhooks(store::Store* store, std::function<TimeMs()> now, ServerMetrics* metrics)
    : store_(store), now_(std::move(now)), metrics_(metrics), sender_(HttpSend) {}

Webhooks::~Webhooks() { Stop(); }

void Webhooks::SetPolicy(const WebhookRetryPolicy& p) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_ = p;
}

void Webhooks::SetSender(WebhookSender sender) {
  std::lock_guard<std::mutex> lock(mu_);
  sender_ = std::move(sender);
}

void Webhooks::SetTenantCheck(std::function<bool(const std::string&)> exists) {
  std::lock_guard<std::mutex> lock(mu_);
  tenant_exists_ = std::move(exists);
}

bool Webhooks::ParseHook(const store::WebhookRecord& r, Hook* h) {
  const json spec = json::parse(r.spec_json, nullptr, false);
  if (!spec.is_object()) return false;
  h->record = r;
  h->url = spec.value("url", "");
  h->scope = spec.value("scope", "user");
  h->format = spec.value("format", "json");
  h->description = spec.value("description", "");
  h->events.clear();
  for (const json& e : spec.value("events", json::array())) {
    if (e.is_string()) h->events.push_back(e.get<std::string>());
  }
  return true;
}

Webhooks::Delivery Webhooks::FromRecord(const store::WebhookDeliveryRecord& r) {
  Delivery d;
  d.id = r.id;
  d.hook_id = r.webhook_id;
  d.state = r.state;
  d.created_at = r.created_at_ms;
  d.updated_at = r.updated_at_ms;
  const json data = json::parse(r.data_json, nullptr, false);
  if (!data.is_object()) return d;
  d.event = data.value("event", "");
  d.body = data.value("body", "");
  d.attempts = data.value("attempts", 0);
  d.next_at = data.value("next_attempt_ms", int64_t{0});
  d.delivered_at = data.value("delivered_at_ms", int64_t{0});
  d.last_status = data.value("last_status", 0);
  d.last_error = data.value("last_error", "");
  if (data.contains("log") && data["log"].is_array()) d.log = data["log"];
  return d;
}

store::WebhookDeliveryRecord Webhooks::DeliveryRecord(const Delivery& d) {
  const json data = {{"event", d.event},
                     {"body", d.body},
                     {"attempts", d.attempts},
                     {"next_attempt_ms", d.next_at},
                     {"delivered_at_ms", d.delivered_at},
                     {"last_status", d.last_status},
                     {"last_error", d.last_error},
                     {"log", d.log}};
  return {d.id, d.hook_id, d.state, d.created_at, d.updated_at, data.dump()};
}

json Webhooks::HookJson(const Hook& h) {
  return {{"id", h.record.id},
          {"url", h.url},
          {"events", h.events},
          {"scope", h.scope},
          {"format", h.format},
          {"description", h.description},
          {"tenant", h.record.tenant.empty() ? json(nullptr) : json(h.record.tenant)},
          {"user", h.record.user},
          {"created_at", Iso8601(h.record.created_at_ms)}};
}

json Webhooks::DeliveryJson(const Delivery& d) {
  json log = json::array();
  for (const json& e : d.log) {
    log.push_back({{"at", Iso8601(e.value("at", int64_t{0}))},
                   {"status", e.value("status", 0) > 0 ? json(e.value("status", 0)) : json()},
                   {"error", e.value("error", "").empty() ? json() : json(e.value("error", ""))},
                   {"duration_ms", e.value("duration_ms", int64_t{0})}});
  }
  return {{"id", d.id},
          {"webhook_id", d.hook_id},
          {"event", d.event},
          {"state", d.state},
          {"attempts", d.attempts},
          {"status", d.last_status > 0 ? json(d.last_status) : json(nullptr)},
          {"error", d.last_error.empty() ? json(nullptr) : json(d.last_error)},
          {"created_at", Iso8601(d.created_at)},
          {"next_attempt_at", d.state == "pending" ? json(Iso8601(d.next_at)) : json(nullptr)},
          {"delivered_at", TimeJson(d.delivered_at)},
          {"log", log}};
}

void Webhooks::Load(const store::StoreState& state) {
  std::lock_guard<std::mutex> lock(mu_);
  hooks_.clear();
  pending_.clear();
  budget_.clear();
  for (const store::WebhookRecord& r : state.webhooks) {
    Hook h;
    if (ParseHook(r, &h)) hooks_.emplace(r.id, std::move(h));
  }
  for (const store::WebhookDeliveryRecord& r : state.pending_deliveries) {
    if (hooks_.count(r.webhook_id) == 0) continue;
    pending_.emplace(r.id, FromRecord(r));
  }
  for (const store::KvRecord& kv : state.kv) {
    if (kv.key != kBudgetAlertsKey) continue;
    const json j = json::parse(kv.value, nullptr, false);
    if (!j.is_object()) continue;
    for (const auto& [tenant, a] : j.items()) {
      budget_[tenant] = {a.value("period_start", int64_t{0}), a.value("level", 0)};
    }
  }
  any_hooks_ = !hooks_.empty();
}

void Webhooks::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker_.joinable() || stopping_) return;
  worker_ = std::thread([this] { WorkerLoop(); });
}

void Webhooks::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

void Webhooks::WorkerLoop() {
  for (;;) {
    RunDue();
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    // Until the earliest pending attempt is due, at most a second (the clock may jump), or
    // until an event or Stop wakes us.
    const TimeMs now = now_();
    int64_t wait_ms = 1000;
    for (const auto& [id, d] : pending_) {
      if (!d.in_flight) wait_ms = std::min<int64_t>(wait_ms, std::max<int64_t>(0, d.next_at - now));
    }
    if (wait_ms > 0 && !kicked_) {
      cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] { return stopping_ || kicked_; });
    }
    kicked_ = false;
    if (stopping_) return;
  }
}

void Webhooks::WriteLocked(store::WriteBatch b) {
  if (store_ != nullptr && !b.empty()) (void)store_->WriteAsync(std::move(b));
}

size_t Webhooks::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

size_t Webhooks::RunDue() {
  std::unique_lock<std::mutex> lock(mu_);
  const TimeMs start = now_();
  if (start - last_prune_ >= kPruneEveryMs) {
    last_prune_ = start;
    store::WriteBatch b;
    b.PruneWebhookDeliveries({start - policy_.retention_ms});
    WriteLocked(std::move(b));
  }
  // In order of due time, then of the events (deliveries due together go in the order their
  // events happened).
  // (Ids begin with their creation time and a sequence number: see QueueLocked.)
  std::vector<std::pair<TimeMs, std::string>> due;
  for (const auto& [id, d] : pending_) {
    if (!d.in_flight && d.next_at <= start) due.emplace_back(d.next_at, id);
  }
  std::sort(due.begin(), due.end());
  size_t attempted = 0;
  for (const auto& [at, id] : due) {
    if (stopping_) break;
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    auto hit = hooks_.find(it->second.hook_id);
    if (hit == hooks_.end()) {  // deleted with its hook
      pending_.erase(it);
      continue;
    }
    Delivery& d = it->second;
    const std::string url = hit->second.url;
    const TimeMs sent_at = now_();
    const std::string body = d.body;
    const std::vector<std::pair<std::string, std::string>> headers = {
        {"User-Agent", "Arbiter-Webhooks/1"},
        {"X-Arbiter-Event", d.event},
        {"X-Arbiter-Delivery", d.id},
        {"X-Arbiter-Webhook", d.hook_id},
        {"X-Arbiter-Signature", WebhookSignature(hit->second.record.secret, sent_at / 1000, body)}};
    const WebhookSender send = sender_;
    const int64_t timeout_ms = policy_.timeout_ms;
    d.in_flight = true;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    WebhookResponse r = send(url, headers, body, timeout_ms);
    const int64_t took =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    lock.lock();
    ++attempted;
    it = pending_.find(id);
    if (it == pending_.end()) continue;  // its hook was deleted meanwhile
    Delivery& e = it->second;
    e.in_flight = false;
    const TimeMs now = now_();
    ++e.attempts;
    e.updated_at = now;
    e.last_status = r.status;
    e.last_error = r.status > 0 && (r.status < 200 || r.status > 299) && r.error.empty()
                       ? fmt::format("HTTP {}", r.status)
                       : r.error;
    if (r.status >= 200 && r.status <= 299) e.last_error.clear();
    e.log.push_back(
        {{"at", sent_at}, {"status", r.status}, {"error", e.last_error}, {"duration_ms", took}});
    if (e.log.size() > kMaxLogEntries) e.log.erase(e.log.begin());
    const char* result = r.status >= 200 && r.status <= 299 ? "delivered"
                         : r.status == 0                    ? "connection_error"
                                                            : "http_error";
    if (metrics_ != nullptr) metrics_->WebhookAttempt(result);
    if (r.status >= 200 && r.status <= 299) {
      e.state = "delivered";
      e.delivered_at = now;
    } else {
      rng_state_ = rng_state_ * 6364136223846793005ull + 1442695040888963407ull;
      const double unit = static_cast<double>(rng_state_ >> 11) / 9007199254740992.0;  // 2^53
      const TimeMs next = now + WebhookRetryDelayMs(policy_, e.attempts, unit);
      if (WebhookStatusRetryable(r.status) && e.attempts < policy_.max_attempts &&
          next - e.created_at <= policy_.max_age_ms) {
        e.next_at = next;
      } else {
        e.state = "failed";
      }
    }
    store::WriteBatch b;
    b.PutWebhookDelivery(DeliveryRecord(e));
    WriteLocked(std::move(b));
    if (e.state != "pending") {
      if (metrics_ != nullptr) metrics_->WebhookDeliveryEnded(e.event, e.state);
      pending_.erase(it);
    }
  }
  return attempted;
}

std::string Webhooks::QueueLocked(const Hook& h, std::string_view event, json payload,
                                  store::WriteBatch* b) {
  const TimeMs now = now_();
  Delivery d;
  // Unique and unguessable, and in the order the events happened (by time, then by a sequence
  // of this process), so that deliveries due together are sent in that order.
  static std::atomic<uint64_t> sequence{0};
  d.id = fmt::format("dlv_{:011x}{:05x}{}", now, ++sequence & 0xfffff, NewSecretHex(6));
  d.hook_id = h.record.id;
  d.event = std::string(event);
  d.created_at = d.updated_at = d.next_at = now;
  payload["id"] = d.id;
  payload["event"] = d.event;
  payload["at"] = Iso8601(now);
  d.body = h.format == "slack" ? WebhookSlackBody(event, payload) : payload.dump();
  b->PutWebhookDelivery(DeliveryRecord(d));
  std::string id = d.id;
  pending_.emplace(id, std::move(d));
  kicked_ = true;
  cv_.notify_one();
  return id;
}

void Webhooks::EmitLocked(std::string_view event, const std::string& tenant,
                          const std::string& user, const json& payload) {
  const bool budget = event.rfind("budget.", 0) == 0;
  store::WriteBatch b;
  for (const auto& [id, h] : hooks_) {
    if (std::find(h.events.begin(), h.events.end(), event) == h.events.end()) continue;
    const bool match = h.scope == "cluster"  ? true
                       : h.scope == "tenant" ? h.record.tenant == tenant
                                             : !budget && h.record.user == user;
    if (match) QueueLocked(h, event, payload, &b);
  }
  WriteLocked(std::move(b));
}

void Webhooks::JobEvent(std::string_view event, const std::string& tenant, const std::string& user,
                        json job) {
  if (event.empty() || !any_hooks_.load(std::memory_order_relaxed)) return;
  const json payload = {{"tenant", tenant}, {"user", user}, {"job", std::move(job)}};
  std::lock_guard<std::mutex> lock(mu_);
  EmitLocked(event, tenant, user, payload);
}

void Webhooks::BudgetUse(const std::string& tenant, const std::string& period, TimeMs period_start,
                         int64_t used_gpu_milli_ms, double budget_gpu_hours) {
  if (budget_gpu_hours <= 0) return;
  const double used_hours = static_cast<double>(used_gpu_milli_ms) / kMilliMsPerGpuHour;
  const double percent = used_hours / budget_gpu_hours * 100.0;
  const int level = percent >= 100.0 ? 100 : percent >= 80.0 ? 80 : 0;
  std::lock_guard<std::mutex> lock(mu_);
  BudgetAlerts& a = budget_[tenant];
  if (a.period_start != period_start) a = {period_start, 0};
  if (level <= a.level) return;
  for (int threshold : {80, 100}) {
    if (a.level >= threshold || level < threshold) continue;
    const json payload = {{"tenant", tenant},
                          {"user", nullptr},
                          {"budget",
                           {{"period", period},
                            {"period_start", Iso8601(period_start)},
                            {"gpu_hours", budget_gpu_hours},
                            {"gpu_hours_used", std::round(used_hours * 1000.0) / 1000.0},
                            {"percent", static_cast<int64_t>(std::floor(percent))},
                            {"threshold", threshold}}}};
    EmitLocked(fmt::format("budget.{}", threshold), tenant, "", payload);
  }
  a.level = level;
  json all = json::object();
  for (const auto& [t, s] : budget_)
    all[t] = {{"period_start", s.period_start}, {"level", s.level}};
  store::WriteBatch b;
  b.PutKv({kBudgetAlertsKey, all.dump()});
  WriteLocked(std::move(b));
}

bool Webhooks::MaySeeLocked(const Principal& p, const Hook& h) const {
  switch (p.role) {
    case Role::kAdmin:
      return true;
    case Role::kTenantAdmin:
      return !p.tenant.empty() && h.record.tenant == p.tenant;
    case Role::kMember:
    case Role::kViewer:
      return h.scope == "user" && h.record.user == p.user;
    case Role::kNode:
      return false;
  }
  return false;
}

void Webhooks::AuditLocked(const Principal& p, std::string action, const std::string& id,
                           std::string result) {
  store::WriteBatch b;
  b.AppendAudit({0, now_(), p.user.empty() ? "anonymous" : p.user, std::move(action),
                 "webhook/" + id, std::move(result), "{}", p.token_id});
  WriteLocked(std::move(b));
}

Result<Webhooks::Hook*> Webhooks::FindLocked(const Principal& p, const std::string& id,
                                             std::string_view action) {
  auto it = hooks_.find(id);
  if (it == hooks_.end() || !MaySeeLocked(p, it->second)) {
    // Another's hook looks missing to the caller; the audit log says what it was.
    if (it != hooks_.end() && !action.empty()) {
      AuditLocked(p, std::string(action), id, "denied: another's webhook");
    }
    return NotFoundError(fmt::format("webhook {} not found", id));
  }
  return &it->second;
}

Result<json> Webhooks::Create(const Principal& p, const json& body) {
  if (p.role == Role::kNode) return Forbidden("nodes may not manage webhooks");
  if (p.role == Role::kViewer) return Forbidden("viewers may not create webhooks");
  if (!body.is_object()) return InvalidArgument("", "the body must be a JSON object");
  static const std::vector<std::string> kFields = {"url",    "events",      "scope",
                                                   "format", "description", "tenant"};
  for (const auto& [k, v] : body.items()) {
    if (std::find(kFields.begin(), kFields.end(), k) == kFields.end()) {
      return InvalidArgument(k,
                             "unknown field; a webhook takes url, events, scope, format, "
                             "description and tenant");
    }
  }
  // A string field's value (`fallback` when absent); false, with *error, when it is not a string.
  auto text = [&](const char* field, const char* fallback, std::string* out) {
    if (!body.contains(field)) {
      *out = fallback;
      return Status::Ok();
    }
    if (!body[field].is_string()) return InvalidArgument(field, "must be a string");
    *out = body[field].get<std::string>();
    return Status::Ok();
  };
  std::string url, scope, format, description, tenant;
  ARBITER_RETURN_IF_ERROR(text("url", "", &url));
  ARBITER_RETURN_IF_ERROR(ValidateWebhookUrl(url));
  ARBITER_RETURN_IF_ERROR(text("scope", "user", &scope));
  ARBITER_RETURN_IF_ERROR(text("format", "json", &format));
  ARBITER_RETURN_IF_ERROR(text("description", "", &description));
  ARBITER_RETURN_IF_ERROR(text("tenant", "", &tenant));
  if (format != "json" && format != "slack") {
    return InvalidArgument("format", fmt::format("must be json or slack, got '{}'", format));
  }
  if (description.size() > kMaxDescriptionBytes) {
    return InvalidArgument("description", fmt::format("is {} bytes; at most {}", description.size(),
                                                      kMaxDescriptionBytes));
  }
  if (!body.contains("events") || !body["events"].is_array() || body["events"].empty()) {
    return InvalidArgument("events", fmt::format("must be a non-empty list of: {}", EventList()));
  }
  std::vector<std::string> events;
  for (const json& e : body["events"]) {
    if (!e.is_string() || !KnownEvent(e.get<std::string>())) {
      return InvalidArgument(
          "events", fmt::format("unknown event {}; the events are: {}", e.dump(), EventList()));
    }
    if (std::find(events.begin(), events.end(), e.get<std::string>()) == events.end()) {
      events.push_back(e.get<std::string>());
    }
  }
  // Who may: a user-scoped hook is its creator's own; tenant-scoped ones are for its tenant's
  // admins (and admins, naming the tenant); cluster-wide ones for admins.
  std::string owner_tenant;
  if (scope == "user") {
    if (!tenant.empty()) return InvalidArgument("tenant", "only a tenant-scoped hook names one");
    owner_tenant = p.tenant;
  } else if (scope == "tenant") {
    if (p.role == Role::kAdmin) {
      if (tenant.empty())
        return InvalidArgument("tenant", "an admin's tenant hook names its tenant");
      std::function<bool(const std::string&)> exists;
      {
        std::lock_guard<std::mutex> lock(mu_);
        exists = tenant_exists_;
      }
      if (exists && !exists(tenant)) {
        return InvalidArgument("tenant", fmt::format("tenant '{}' not found", tenant));
      }
      owner_tenant = tenant;
    } else if (p.role == Role::kTenantAdmin) {
      if (!tenant.empty() && tenant != p.tenant) {
        return InvalidArgument("tenant", fmt::format("tenant '{}' not found", tenant));
      }
      owner_tenant = p.tenant;
    } else {
      return Forbidden("only tenant admins and admins may create tenant-scoped webhooks");
    }
  } else if (scope == "cluster") {
    if (p.role != Role::kAdmin) return Forbidden("only admins may create cluster-wide webhooks");
    if (!tenant.empty()) return InvalidArgument("tenant", "a cluster-wide hook names no tenant");
  } else {
    return InvalidArgument("scope",
                           fmt::format("must be user, tenant or cluster, got '{}'", scope));
  }

  const json spec = {{"url", url},
                     {"events", events},
                     {"scope", scope},
                     {"format", format},
                     {"description", description}};
  Hook h;
  h.record = {"wh_" + NewSecretHex(8),     owner_tenant, p.user, spec.dump(),
              "whsec_" + NewSecretHex(24), now_()};
  ParseHook(h.record, &h);
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t same_owner = 0;
    for (const auto& [id, o] : hooks_) {
      same_owner += o.scope == scope && o.record.tenant == owner_tenant &&
                    (scope != "user" || o.record.user == p.user);
    }
    if (same_owner >= kMaxHooksPerOwner) {
      return Status(StatusCode::kResourceExhausted,
                    fmt::format("at most {} {}-scoped webhooks per owner; delete one first",
                                kMaxHooksPerOwner, scope));
    }
    store::WriteBatch b;
    b.PutWebhook(h.record);
    b.AppendAudit({0, now_(), p.user, "webhook.create", "webhook/" + h.record.id, "ok",
                   json{{"url", url}, {"scope", scope}, {"events", events}}.dump(), p.token_id});
    if (store_ != nullptr) done = store_->WriteAsync(std::move(b));
    hooks_.emplace(h.record.id, h);
    any_hooks_ = true;
  }
  if (done.valid()) ARBITER_RETURN_IF_ERROR(done.get());
  json out = HookJson(h);
  out["secret"] = h.record.secret;
  return out;
}

Result<json> Webhooks::List(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not manage webhooks");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const auto& [id, h] : hooks_) {
    if (MaySeeLocked(p, h)) items.push_back(HookJson(h));
  }
  return json{{"items", items}};
}

Result<json> Webhooks::Delete(const Principal& p, const std::string& id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not manage webhooks");
  if (p.role == Role::kViewer) return Forbidden("viewers may not delete webhooks");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = FindLocked(p, id, "webhook.delete");
    if (!found.ok()) return found.status();
    out = HookJson(**found);
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = it->second.hook_id == id ? pending_.erase(it) : std::next(it);
    }
    hooks_.erase(id);
    any_hooks_ = !hooks_.empty();
    store::WriteBatch b;
    b.DeleteWebhook(id);
    b.AppendAudit({0, now_(), p.user, "webhook.delete", "webhook/" + id, "ok", "{}", p.token_id});
    if (store_ != nullptr) done = store_->WriteAsync(std::move(b));
  }
  if (done.valid()) ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> Webhooks::Deliveries(const Principal& p, const std::string& id, size_t limit) {
  if (p.role == Role::kNode) return Forbidden("nodes may not manage webhooks");
  {
    std::lock_guard<std::mutex> lock(mu_);
    ARBITER_RETURN_IF_ERROR(FindLocked(p, id, "").status());
  }
  std::vector<store::WebhookDeliveryRecord> records;
  if (store_ != nullptr) {
    // Anything enqueued before is committed first (an empty batch is a barrier), so the log
    // shows every attempt made so far.
    (void)store_->Write(store::WriteBatch());
    auto read = store_->WebhookDeliveries(id, limit);
    if (!read.ok()) return read.status();
    records = std::move(read).value();
  }
  json items = json::array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const store::WebhookDeliveryRecord& r : records) {
    auto it = pending_.find(r.id);  // the live one is as new as the stored one, or newer
    items.push_back(DeliveryJson(it != pending_.end() ? it->second : FromRecord(r)));
  }
  return json{{"items", items}};
}

Result<json> Webhooks::Test(const Principal& p, const std::string& id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not manage webhooks");
  if (p.role == Role::kViewer) return Forbidden("viewers may not test webhooks");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = FindLocked(p, id, "webhook.test");
    if (!found.ok()) return found.status();
    Hook* h = *found;
    const json payload = {{"tenant", h->record.tenant.empty() ? json() : json(h->record.tenant)},
                          {"user", p.user},
                          {"webhook", h->record.id}};
    store::WriteBatch b;
    out = DeliveryJson(pending_.at(QueueLocked(*h, kWebhookPing, payload, &b)));
    if (store_ != nullptr) done = store_->WriteAsync(std::move(b));
  }
  if (done.valid()) ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

}  // namespace arbiter::server

// Quota requests (docs/approvals.md, "Quota requests"): a member or tenant admin asks for more
// guaranteed capacity for one of its tenant's queues until a time; an admin approves it (the
// change is applied to the configuration as an `arbiter apply` would, and undone at `until`) or
// rejects it.
//
// States: pending -> approved -> reverted; pending -> rejected; pending -> expired (nobody decided
// before `until`).
//
// Amounts are kept as the configuration keeps them: "gpu" and "cpu" (and "gpu:MODEL") in
// thousandths, "memory" in MiB; the API writes them in units (16, 0.5, 524288).
//
// Stored: one kv record per request, "quota_request/ID", its JSON (QuotaRequestToJson).
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/config.h"
#include "common/result.h"
#include "model/time.h"

namespace arbiter::server {

inline constexpr std::string_view kQuotaRequestKeyPrefix = "quota_request/";
inline constexpr size_t kMaxQuotaRequestReasonBytes = 1000;
inline constexpr int64_t kMaxQuotaRequestDays = 366;  // `until` at most this far ahead

// POST /api/v1/quota-requests' body, checked.
struct QuotaRequestInput {
  std::string queue;
  std::map<std::string, int64_t> guaranteed;  // by resource key, in the configuration's units
  TimeMs until_ms = 0;
  std::string reason;
};

struct QuotaRequest {
  uint64_t id = 0;
  std::string tenant, queue, user, reason;
  std::map<std::string, int64_t> guaranteed;
  TimeMs until_ms = 0;
  TimeMs created_ms = 0;
  std::string state = "pending";  // pending | approved | rejected | expired | reverted
  std::string decided_by;
  TimeMs decided_ms = 0;
  std::string comment;
  // Approved: the queue's guaranteed amounts before (nullopt: none) and the configuration's
  // changes the approval made.
  std::map<std::string, std::optional<int64_t>> before;
  std::vector<api::ConfigChange> changes;
  // Reverted: when, the changes undoing it, and the amounts left as they were because the
  // configuration changed them since ("gpu: 24 (changed since)").
  TimeMs reverted_ms = 0;
  std::vector<api::ConfigChange> revert_changes;
  std::vector<std::string> kept;
};

// The body: {queue, guaranteed: {gpu: 16, cpu: 64, memory: "512Gi", "gpu:MODEL": 8}, until:
// "2027-01-31" (the end of that day, UTC) | RFC 3339 | milliseconds, reason}. Errors name the
// field. `now`: `until` must be after it and at most kMaxQuotaRequestDays ahead.
Result<QuotaRequestInput> ParseQuotaRequestBody(std::string_view body, TimeMs now);

// An amount as the API writes it: units for gpu and cpu (thousandths kept), MiB for memory.
nlohmann::json QuotaAmountJson(const std::string& key, int64_t amount);

// The stored and listed form (without what depends on the reader).
nlohmann::json QuotaRequestToJson(const QuotaRequest& r);
Result<QuotaRequest> QuotaRequestFromJson(std::string_view text);

}  // namespace arbiter::server

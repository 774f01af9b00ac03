// The columns of the store's tables, key first, in the order records bind and read them: shared
// by the SQLite and PostgreSQL stores, whose schemas have the same tables and columns.
//
// Thread safety: constants.
#pragma once

#include <array>
#include <span>
#include <string_view>

namespace arbiter::store {

using Columns = std::span<const std::string_view>;

inline constexpr std::array<std::string_view, 3> kTenantCols = {"name", "spec_json",
                                                                "created_at_ms"};
inline constexpr std::array<std::string_view, 4> kQueueCols = {"name", "tenant", "parent",
                                                               "spec_json"};
inline constexpr std::array<std::string_view, 4> kUserCols = {"name", "tenant", "role",
                                                              "created_at_ms"};
inline constexpr std::array<std::string_view, 11> kTokenCols = {
    "id",      "hash_hex", "user", "tenant", "role", "kind", "created_at_ms", "expires_at_ms",
    "revoked", "node",     "scope"};
inline constexpr std::array<std::string_view, 2> kPriorityClassCols = {"name", "spec_json"};
inline constexpr std::array<std::string_view, 2> kGpuModelCols = {"name", "spec_json"};
inline constexpr std::array<std::string_view, 4> kNodeCols = {"name", "spec_json", "state",
                                                              "updated_at_ms"};
inline constexpr std::array<std::string_view, 14> kJobCols = {"id",
                                                              "tenant",
                                                              "queue",
                                                              "user",
                                                              "name",
                                                              "type",
                                                              "state",
                                                              "spec_json",
                                                              "status_json",
                                                              "idempotency_key",
                                                              "submitted_at_ms",
                                                              "updated_at_ms",
                                                              "secret_env_json",
                                                              "request_digest"};
inline constexpr std::array<std::string_view, 2> kKvCols = {"key", "value"};
inline constexpr std::array<std::string_view, 7> kEventCols = {
    "seq", "job_id", "at_ms", "from_state", "to_state", "reason", "detail_json"};
inline constexpr std::array<std::string_view, 13> kUsageCols = {
    "seq",       "job_id",    "task",           "tenant",   "queue",  "user",      "job_type",
    "gpu_model", "gpu_milli", "gpu_memory_mib", "start_ms", "end_ms", "cost_micro"};
inline constexpr std::array<std::string_view, 10> kAuditCols = {
    "seq",    "at_ms",       "actor",    "action", "target",
    "result", "detail_json", "token_id", "source", "tenant"};
inline constexpr std::array<std::string_view, 3> kClusterSampleCols = {"at_ms", "interval_ms",
                                                                       "data_json"};
inline constexpr std::array<std::string_view, 8> kGpuSampleCols = {
    "resolution_ms", "node",           "gpu",          "at_ms", "span_ms",
    "busy_ms",       "memory_max_mib", "memory_mib_ms"};
inline constexpr std::array<std::string_view, 5> kServiceCols = {
    "name", "tenant", "spec_json", "secret_env_json", "updated_at_ms"};
inline constexpr std::array<std::string_view, 4> kServingStatCols = {"minute_ms", "service",
                                                                     "revision", "data_json"};
inline constexpr std::array<std::string_view, 6> kWebhookCols = {
    "id", "tenant", "user", "spec_json", "secret", "created_at_ms"};
inline constexpr std::array<std::string_view, 13> kJobFactCols = {
    "seq",      "job_id",    "at_ms",    "kind",          "tenant", "queue",    "user",
    "job_type", "gpu_model", "since_ms", "lost_milli_ms", "reason", "gpu_milli"};
inline constexpr std::array<std::string_view, 9> kUsageRollupCols = {
    "span_ms",  "at_ms",     "tenant",       "queue",     "user",
    "job_type", "gpu_model", "gpu_milli_ms", "cost_micro"};
inline constexpr std::array<std::string_view, 6> kWebhookDeliveryCols = {
    "id", "webhook_id", "state", "created_at_ms", "updated_at_ms", "data_json"};

}  // namespace arbiter::store

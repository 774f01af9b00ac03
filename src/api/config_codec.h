// The declarative configuration as YAML (or JSON, which is YAML): PUT /api/v1/config and
// `arbiter apply -f`.
//
//   gpu_models:
//     - {name: A100-80G, memory_mib: 81920, price_per_hour: 2.5}
//   priority_classes:
//     - {name: critical, value: 1000, preemptible: false}
//     - {name: normal, value: 100, preemptible: true}
//   tenants:
//     - name: vision
//       budget: {gpu_hours: 5000, period: month, on_exhausted: best-effort}
//       guaranteed: {gpu: 16}
//       queues:
//         - name: vision-train
//           guaranteed: {gpu: 8}          # any model; per model: {gpu: {A100-80G: 8}}
//           max: {gpu: 16, cpu: 64, memory: 512Gi}
//           lending_limit: {gpu: 8}
//           weight: 1
//           default_walltime_seconds: 86400
//           allowed_types: [training, fine-tuning, experiment]
//           fair_share: {half_life_seconds: 86400}
//           queues: [...]                 # child queues
//   users:
//     - {name: alice, tenant: vision, role: member}
//   approvals:                            # docs/approvals.md
//     - name: big-jobs
//       when: {gpus_at_least: 32}         # gpu_hours_at_least, priority_class, queue, type
//       approvers: {role: tenant-admin}   # or {users: [carol, dave]}
//       expires_after_seconds: 86400
//   nodes:
//     - {name: gpu-01, cpu_milli: 128000, memory_mib: 1048576, rack: r1, block: b1,
//        labels: {zone: a}, taints: [{key: dedicated, value: inference}],
//        gpus: {count: 8, model: A100-80G, nvlink_domains: 2}}
//
// Quota amounts: gpu and cpu in units (8, 0.5: exact to thousandths, stored in milli), memory in
// MiB or with a binary suffix ("64Gi"). A per-model gpu map may also hold `any` (the amount of
// any model). Prices in currency per GPU-hour, stored in thousandths. docs/config.md lists every
// field, its default and its bounds.
//
// Every error is InvalidArgument whose field() is the dotted path ("tenants[0].queues[1].max.gpu",
// "users[2].tenant"), or empty for errors about the whole document (too large, not YAML); the
// message says what is allowed and where (line, column). Checked: unknown keys, types, ranges,
// names, duplicate names (queue names are unique across all tenants), references (GPU models of
// quotas and nodes, users' tenants), max below guaranteed, child queues guaranteeing more than
// their parent. The quota tree's own checks still run where the server compiles it
// (QuotaTree::Build).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "api/config.h"
#include "common/result.h"

namespace arbiter::api {

inline constexpr size_t kMaxConfigBytes = size_t{8} << 20;   // 8 MiB
inline constexpr size_t kMaxConfigDepth = 64;                // open mappings and lists at once
inline constexpr size_t kMaxConfigValues = size_t{1} << 21;  // values, aliases expanded

inline constexpr size_t kMaxGpuModels = 16;  // as the scheduling core (core::kMaxGpuModels)
inline constexpr size_t kMaxPriorityClasses = 64;
inline constexpr size_t kMaxTenants = 1000;
inline constexpr size_t kMaxQueues = 10000;  // all tenants and queues together
inline constexpr size_t kMaxAliases = 16;    // per queue
inline constexpr size_t kMaxQueueDepth = 8;  // levels of queues below a tenant
inline constexpr size_t kMaxUsers = 100000;
inline constexpr size_t kMaxNodes = 20000;
inline constexpr size_t kMaxApprovalRules = 256;
inline constexpr size_t kMaxApprovers = 256;  // users named by one rule
inline constexpr size_t kMaxIdentityMappings = 1024;
inline constexpr int64_t kMaxApprovalExpirySeconds = int64_t{366} * 86400;
inline constexpr size_t kMaxGpusPerNode = 64;
inline constexpr size_t kMaxLabels = 64;  // per node
inline constexpr size_t kMaxTaints = 64;  // per node

Result<ClusterConfig> ParseConfigYaml(std::string_view yaml);

// Names no configured or created user may take: "admin" (the bootstrap admin, whose token the
// server writes to DATA_DIR/admin.token) and "anonymous" (what the audit records for calls
// without a user). A user by either name would be indistinguishable from them in the audit.
bool IsReservedUserName(std::string_view name);

// The canonical form: sections and fields in a fixed order, defaults left out, amounts as
// ParseConfigYaml reads them. ParseConfigYaml(DumpConfigYaml(c)) gives `c` back, and dumping that
// gives the same text. Requires: `c` as ParseConfigYaml returns it (a tenant's queues list starts
// with the tenant and names existing parents; quota keys cpu, memory, gpu, gpu:<model>).
std::string DumpConfigYaml(const ClusterConfig& c);

}  // namespace arbiter::api

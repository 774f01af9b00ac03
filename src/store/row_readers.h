// Rows to records, for both stores: each reader takes the columns of its table's Columns list
// (store/columns.h) in order from a row of the store's own Row type (sqlite::Row, postgres::Row:
// Text, Int, Uint, Int32, Bool, Bytes). Generic lambdas, so they can be called and passed to a
// connection's Query alike.
#pragma once

#include "store/records.h"

namespace arbiter::store {

inline constexpr auto ReadTenant = [](auto& r) -> TenantRecord {
  TenantRecord t;
  t.name = r.Text();
  t.spec_json = r.Text();
  t.created_at_ms = r.Int();
  return t;
};

inline constexpr auto ReadQueue = [](auto& r) -> QueueRecord {
  QueueRecord q;
  q.name = r.Text();
  q.tenant = r.Text();
  q.parent = r.Text();
  q.spec_json = r.Text();
  return q;
};

inline constexpr auto ReadUser = [](auto& r) -> UserRecord {
  UserRecord u;
  u.name = r.Text();
  u.tenant = r.Text();
  u.role = r.Text();
  u.created_at_ms = r.Int();
  return u;
};

inline constexpr auto ReadToken = [](auto& r) -> TokenRecord {
  TokenRecord t;
  t.id = r.Text();
  t.hash_hex = r.Text();
  t.user = r.Text();
  t.tenant = r.Text();
  t.role = r.Text();
  t.kind = r.Text();
  t.created_at_ms = r.Int();
  t.expires_at_ms = r.Int();
  t.revoked = r.Bool();
  t.node = r.Text();
  t.scope = r.Text();
  return t;
};

inline constexpr auto ReadPriorityClass = [](auto& r) -> PriorityClassRecord {
  PriorityClassRecord p;
  p.name = r.Text();
  p.spec_json = r.Text();
  return p;
};

inline constexpr auto ReadGpuModel = [](auto& r) -> GpuModelRecord {
  GpuModelRecord g;
  g.name = r.Text();
  g.spec_json = r.Text();
  return g;
};

inline constexpr auto ReadNode = [](auto& r) -> NodeRecord {
  NodeRecord n;
  n.name = r.Text();
  n.spec_json = r.Text();
  n.state = r.Text();
  n.updated_at_ms = r.Int();
  return n;
};

inline constexpr auto ReadJob = [](auto& r) -> JobRecord {
  JobRecord j;
  j.id = r.Uint();
  j.tenant = r.Text();
  j.queue = r.Text();
  j.user = r.Text();
  j.name = r.Text();
  j.type = r.Text();
  j.state = r.Text();
  j.spec_json = r.Text();
  j.status_json = r.Text();
  j.idempotency_key = r.Text();
  j.submitted_at_ms = r.Int();
  j.updated_at_ms = r.Int();
  j.secret_env_json = r.Text();
  j.request_digest = r.Text();
  return j;
};

inline constexpr auto ReadKv = [](auto& r) -> KvRecord {
  KvRecord kv;
  kv.key = r.Text();
  kv.value = r.Bytes();  // the BLOB's (BYTEA's) bytes
  return kv;
};

inline constexpr auto ReadEvent = [](auto& r) -> JobEventRecord {
  JobEventRecord e;
  e.seq = r.Uint();
  e.job_id = r.Uint();
  e.at_ms = r.Int();
  e.from_state = r.Text();
  e.to_state = r.Text();
  e.reason = r.Text();
  e.detail_json = r.Text();
  return e;
};

inline constexpr auto ReadUsage = [](auto& r) -> UsageRecord {
  UsageRecord u;
  u.seq = r.Uint();
  u.job_id = r.Uint();
  u.task = r.Int32();
  u.tenant = r.Text();
  u.queue = r.Text();
  u.user = r.Text();
  u.job_type = r.Text();
  u.gpu_model = r.Text();
  u.gpu_milli = r.Int();
  u.gpu_memory_mib = r.Int();
  u.start_ms = r.Int();
  u.end_ms = r.Int();
  u.cost_micro = r.Int();
  return u;
};

inline constexpr auto ReadAudit = [](auto& r) -> AuditRecord {
  AuditRecord a;
  a.seq = r.Uint();
  a.at_ms = r.Int();
  a.actor = r.Text();
  a.action = r.Text();
  a.target = r.Text();
  a.result = r.Text();
  a.detail_json = r.Text();
  a.token_id = r.Text();
  a.source = r.Text();
  a.tenant = r.Text();
  return a;
};

inline constexpr auto ReadClusterSample = [](auto& r) -> ClusterSampleRecord {
  ClusterSampleRecord c;
  c.at_ms = r.Int();
  c.interval_ms = r.Int();
  c.data_json = r.Text();
  return c;
};

inline constexpr auto ReadGpuSample = [](auto& r) -> GpuSampleRecord {
  GpuSampleRecord g;
  g.resolution_ms = r.Int();
  g.node = r.Text();
  g.gpu = r.Int32();
  g.at_ms = r.Int();
  g.span_ms = r.Int();
  g.busy_ms = r.Int();
  g.memory_max_mib = r.Int();
  g.memory_mib_ms = r.Int();
  return g;
};

inline constexpr auto ReadService = [](auto& r) -> ServiceRecord {
  ServiceRecord s;
  s.name = r.Text();
  s.tenant = r.Text();
  s.spec_json = r.Text();
  s.secret_env_json = r.Text();
  s.updated_at_ms = r.Int();
  return s;
};

inline constexpr auto ReadServingStat = [](auto& r) -> ServingStatRecord {
  ServingStatRecord s;
  s.minute_ms = r.Int();
  s.service = r.Text();
  s.revision = r.Int();
  s.data_json = r.Text();
  return s;
};

inline constexpr auto ReadWebhook = [](auto& r) -> WebhookRecord {
  WebhookRecord w;
  w.id = r.Text();
  w.tenant = r.Text();
  w.user = r.Text();
  w.spec_json = r.Text();
  w.secret = r.Text();
  w.created_at_ms = r.Int();
  return w;
};

inline constexpr auto ReadWebhookDelivery = [](auto& r) -> WebhookDeliveryRecord {
  WebhookDeliveryRecord d;
  d.id = r.Text();
  d.webhook_id = r.Text();
  d.state = r.Text();
  d.created_at_ms = r.Int();
  d.updated_at_ms = r.Int();
  d.data_json = r.Text();
  return d;
};

inline constexpr auto ReadJobFact = [](auto& r) -> JobFactRecord {
  JobFactRecord f;
  f.seq = r.Uint();
  f.job_id = r.Uint();
  f.at_ms = r.Int();
  f.kind = r.Text();
  f.tenant = r.Text();
  f.queue = r.Text();
  f.user = r.Text();
  f.job_type = r.Text();
  f.gpu_model = r.Text();
  f.since_ms = r.Int();
  f.lost_milli_ms = r.Int();
  f.reason = r.Text();
  f.gpu_milli = r.Int();
  return f;
};

// A sum of rollup rows: tenant, queue, user, job_type, gpu_model, sum(gpu_milli_ms),
// sum(cost_micro) (from_ms and to_ms are the caller's).
inline constexpr auto ReadRollupSum = [](auto& r) -> UsageRollupRecord {
  UsageRollupRecord u;
  u.tenant = r.Text();
  u.queue = r.Text();
  u.user = r.Text();
  u.job_type = r.Text();
  u.gpu_model = r.Text();
  u.gpu_milli_ms = r.Int();
  u.cost_micro = r.Double();
  return u;
};

}  // namespace arbiter::store

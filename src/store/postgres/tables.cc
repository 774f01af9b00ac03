#include "store/postgres/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace arbiter::store::postgres {

std::string Join(Columns cols, std::string_view prefix) {
  std::string out;
  for (size_t i = 0; i < cols.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}\"{}\"", prefix, cols[i]);
  }
  return out;
}

std::string Placeholders(size_t n) {
  std::string out;
  for (size_t i = 1; i <= n; ++i) out += fmt::format("{}${}", i > 1 ? ", " : "", i);
  return out;
}

std::string InsertSql(std::string_view table, Columns cols) {
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", table, Join(cols),
                     Placeholders(cols.size()));
}

std::string UpsertSql(std::string_view table, Columns cols, size_t key_cols) {
  std::string set;
  for (size_t i = key_cols; i < cols.size(); ++i) {
    set += fmt::format("{}\"{}\" = EXCLUDED.\"{}\"", i > key_cols ? ", " : "", cols[i], cols[i]);
  }
  return fmt::format("{} ON CONFLICT ({}) DO UPDATE SET {}", InsertSql(table, cols),
                     Join(cols.first(key_cols)), set);
}

std::string DeleteSql(std::string_view table, Columns cols) {
  return fmt::format("DELETE FROM {} WHERE \"{}\" = $1", table, cols[0]);
}

std::string SelectSql(std::string_view table, Columns cols, std::string_view tail) {
  return fmt::format("SELECT {} FROM {} {}", Join(cols), table, tail);
}

std::string AppendSql(std::string_view table, Columns cols) {
  std::string values =
      fmt::format("COALESCE($1::bigint, (SELECT COALESCE(MAX(seq), 0) + 1 FROM {}))", table);
  for (size_t i = 2; i <= cols.size(); ++i) values += fmt::format(", ${}", i);
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", table, Join(cols), values);
}

int64_t ClampLimit(size_t limit) {
  return static_cast<int64_t>(
      std::min<uint64_t>(limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

// ---- Rows to records. ------------------------------------------------------------------------

TenantRecord ReadTenant(Row& r) {
  TenantRecord t;
  t.name = r.Text();
  t.spec_json = r.Text();
  t.created_at_ms = r.Int();
  return t;
}

QueueRecord ReadQueue(Row& r) {
  QueueRecord q;
  q.name = r.Text();
  q.tenant = r.Text();
  q.parent = r.Text();
  q.spec_json = r.Text();
  return q;
}

UserRecord ReadUser(Row& r) {
  UserRecord u;
  u.name = r.Text();
  u.tenant = r.Text();
  u.role = r.Text();
  u.created_at_ms = r.Int();
  return u;
}

TokenRecord ReadToken(Row& r) {
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
}

PriorityClassRecord ReadPriorityClass(Row& r) {
  PriorityClassRecord p;
  p.name = r.Text();
  p.spec_json = r.Text();
  return p;
}

GpuModelRecord ReadGpuModel(Row& r) {
  GpuModelRecord g;
  g.name = r.Text();
  g.spec_json = r.Text();
  return g;
}

NodeRecord ReadNode(Row& r) {
  NodeRecord n;
  n.name = r.Text();
  n.spec_json = r.Text();
  n.state = r.Text();
  n.updated_at_ms = r.Int();
  return n;
}

JobRecord ReadJob(Row& r) {
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
}

KvRecord ReadKv(Row& r) {
  KvRecord kv;
  kv.key = r.Text();
  kv.value = r.Bytes();  // the BYTEA's bytes
  return kv;
}

JobEventRecord ReadEvent(Row& r) {
  JobEventRecord e;
  e.seq = r.Uint();
  e.job_id = r.Uint();
  e.at_ms = r.Int();
  e.from_state = r.Text();
  e.to_state = r.Text();
  e.reason = r.Text();
  e.detail_json = r.Text();
  return e;
}

UsageRecord ReadUsage(Row& r) {
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
}

AuditRecord ReadAudit(Row& r) {
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
}

ClusterSampleRecord ReadClusterSample(Row& r) {
  ClusterSampleRecord c;
  c.at_ms = r.Int();
  c.interval_ms = r.Int();
  c.data_json = r.Text();
  return c;
}

GpuSampleRecord ReadGpuSample(Row& r) {
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
}

ServiceRecord ReadService(Row& r) {
  ServiceRecord s;
  s.name = r.Text();
  s.tenant = r.Text();
  s.spec_json = r.Text();
  s.secret_env_json = r.Text();
  s.updated_at_ms = r.Int();
  return s;
}

ServingStatRecord ReadServingStat(Row& r) {
  ServingStatRecord s;
  s.minute_ms = r.Int();
  s.service = r.Text();
  s.revision = r.Int();
  s.data_json = r.Text();
  return s;
}

WebhookRecord ReadWebhook(Row& r) {
  WebhookRecord w;
  w.id = r.Text();
  w.tenant = r.Text();
  w.user = r.Text();
  w.spec_json = r.Text();
  w.secret = r.Text();
  w.created_at_ms = r.Int();
  return w;
}

WebhookDeliveryRecord ReadWebhookDelivery(Row& r) {
  WebhookDeliveryRecord d;
  d.id = r.Text();
  d.webhook_id = r.Text();
  d.state = r.Text();
  d.created_at_ms = r.Int();
  d.updated_at_ms = r.Int();
  d.data_json = r.Text();
  return d;
}

}  // namespace arbiter::store::postgres

#include <fmt/format.h>

#include <iterator>

#include "store/records.h"

namespace arbiter::store {
namespace {

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace

std::string_view WriteOpName(const WriteOp& op) {
  return std::visit(Overloaded{
                        [](const TenantRecord&) { return "PutTenant"; },
                        [](const op::DeleteTenant&) { return "DeleteTenant"; },
                        [](const QueueRecord&) { return "PutQueue"; },
                        [](const op::DeleteQueue&) { return "DeleteQueue"; },
                        [](const UserRecord&) { return "PutUser"; },
                        [](const op::DeleteUser&) { return "DeleteUser"; },
                        [](const TokenRecord&) { return "PutToken"; },
                        [](const op::DeleteToken&) { return "DeleteToken"; },
                        [](const PriorityClassRecord&) { return "PutPriorityClass"; },
                        [](const op::DeletePriorityClass&) { return "DeletePriorityClass"; },
                        [](const GpuModelRecord&) { return "PutGpuModel"; },
                        [](const op::DeleteGpuModel&) { return "DeleteGpuModel"; },
                        [](const NodeRecord&) { return "PutNode"; },
                        [](const op::DeleteNode&) { return "DeleteNode"; },
                        [](const JobRecord&) { return "PutJob"; },
                        [](const op::DeleteJob&) { return "DeleteJob"; },
                        [](const KvRecord&) { return "PutKv"; },
                        [](const op::DeleteKv&) { return "DeleteKv"; },
                        [](const JobEventRecord&) { return "AppendJobEvent"; },
                        [](const UsageRecord&) { return "AppendUsage"; },
                        [](const AuditRecord&) { return "AppendAudit"; },
                        [](const ClusterSampleRecord&) { return "PutClusterSample"; },
                        [](const GpuSampleRecord&) { return "PutGpuSample"; },
                        [](const op::CompactSamples&) { return "CompactSamples"; },
                        [](const ServiceRecord&) { return "PutService"; },
                        [](const op::DeleteService&) { return "DeleteService"; },
                        [](const ServingStatRecord&) { return "PutServingStat"; },
                        [](const WebhookRecord&) { return "PutWebhook"; },
                        [](const op::DeleteWebhook&) { return "DeleteWebhook"; },
                        [](const WebhookDeliveryRecord&) { return "PutWebhookDelivery"; },
                        [](const op::PruneWebhookDeliveries&) { return "PruneWebhookDeliveries"; },
                        [](const JobFactRecord&) { return "AppendJobFact"; },
                        [](const op::PruneHistory&) { return "PruneHistory"; },
                    },
                    op);
}

std::string DescribeWriteOp(const WriteOp& op) {
  std::string key = std::visit(
      Overloaded{
          [](const TenantRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeleteTenant& r) { return fmt::format("name={}", r.name); },
          [](const QueueRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeleteQueue& r) { return fmt::format("name={}", r.name); },
          [](const UserRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeleteUser& r) { return fmt::format("name={}", r.name); },
          [](const TokenRecord& r) { return fmt::format("id={}", r.id); },
          [](const op::DeleteToken& r) { return fmt::format("id={}", r.id); },
          [](const PriorityClassRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeletePriorityClass& r) { return fmt::format("name={}", r.name); },
          [](const GpuModelRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeleteGpuModel& r) { return fmt::format("name={}", r.name); },
          [](const NodeRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeleteNode& r) { return fmt::format("name={}", r.name); },
          [](const JobRecord& r) { return fmt::format("id={}", r.id); },
          [](const op::DeleteJob& r) { return fmt::format("id={}", r.id); },
          [](const KvRecord& r) { return fmt::format("key={}", r.key); },
          [](const op::DeleteKv& r) { return fmt::format("key={}", r.key); },
          [](const JobEventRecord& r) { return fmt::format("job_id={}, seq={}", r.job_id, r.seq); },
          [](const UsageRecord& r) {
            return fmt::format("job_id={}, task={}, seq={}", r.job_id, r.task, r.seq);
          },
          [](const AuditRecord& r) { return fmt::format("action={}, seq={}", r.action, r.seq); },
          [](const ClusterSampleRecord& r) { return fmt::format("at_ms={}", r.at_ms); },
          [](const GpuSampleRecord& r) {
            return fmt::format("node={}, gpu={}, at_ms={}", r.node, r.gpu, r.at_ms);
          },
          [](const op::CompactSamples& r) {
            return fmt::format("gpu_rollup_before_ms={}", r.gpu_rollup_before_ms);
          },
          [](const ServiceRecord& r) { return fmt::format("name={}", r.name); },
          [](const op::DeleteService& r) { return fmt::format("name={}", r.name); },
          [](const ServingStatRecord& r) {
            return fmt::format("service={}, revision={}, minute_ms={}", r.service, r.revision,
                               r.minute_ms);
          },
          [](const WebhookRecord& r) { return fmt::format("id={}", r.id); },
          [](const op::DeleteWebhook& r) { return fmt::format("id={}", r.id); },
          [](const WebhookDeliveryRecord& r) {
            return fmt::format("id={}, webhook_id={}", r.id, r.webhook_id);
          },
          [](const op::PruneWebhookDeliveries& r) {
            return fmt::format("finished_before_ms={}", r.finished_before_ms);
          },
          [](const JobFactRecord& r) {
            return fmt::format("job_id={}, kind={}, at_ms={}", r.job_id, r.kind, r.at_ms);
          },
          [](const op::PruneHistory& r) { return fmt::format("before_ms={}", r.before_ms); },
      },
      op);
  return fmt::format("{}({})", WriteOpName(op), key);
}

void WriteBatch::Append(WriteBatch other) {
  if (ops_.empty()) {
    ops_ = std::move(other.ops_);
    return;
  }
  ops_.insert(ops_.end(), std::make_move_iterator(other.ops_.begin()),
              std::make_move_iterator(other.ops_.end()));
}

}  // namespace arbiter::store

#include "store/job_waits.h"

namespace arbiter::store {

uint32_t JobWaitsBuilder::Names::Id(std::string_view name) {
  if (last_id_ != UINT32_MAX && name == last_) return last_id_;
  auto it = ids_.find(name);
  if (it == ids_.end()) {
    it = ids_.emplace(std::string(name), static_cast<uint32_t>(ids_.size())).first;
  }
  last_.assign(name);
  last_id_ = it->second;
  return last_id_;
}

uint32_t JobWaitsBuilder::Attribution(std::string_view tenant, std::string_view queue,
                                      std::string_view user, std::string_view job_type,
                                      std::string_view gpu_model) {
  const std::array<uint32_t, 5> key = {columns_[0].Id(tenant), columns_[1].Id(queue),
                                       columns_[2].Id(user), columns_[3].Id(job_type),
                                       columns_[4].Id(gpu_model)};
  const auto [it, added] = index_.try_emplace(key, static_cast<uint32_t>(out_.attributions.size()));
  if (added) {
    out_.attributions.push_back({std::string(tenant), std::string(queue), std::string(user),
                                 std::string(job_type), std::string(gpu_model)});
  }
  return it->second;
}

void JobWaitsBuilder::AddFact(const JobFactRecord& f) {
  const bool admitted = f.kind == "admitted";
  if (!admitted && f.kind != "unqueued") return;
  Add({.at_ms = f.at_ms,
       .since_ms = f.since_ms,
       .gpu_milli = f.gpu_milli,
       .attribution = Attribution(f.tenant, f.queue, f.user, f.job_type, f.gpu_model),
       .admitted = admitted});
}

std::string JobWaitsSql(uint32_t columns, std::string_view from, std::string_view to) {
  auto column = [&](uint32_t bit, std::string_view name) {
    return (columns & bit) != 0 ? std::string(name) : "''";
  };
  return "SELECT at_ms, since_ms, gpu_milli, kind, tenant, " + column(kAttributionQueue, "queue") +
         ", " + column(kAttributionUser, "\"user\"") + ", " +
         column(kAttributionJobType, "job_type") + ", " +
         column(kAttributionGpuModel, "gpu_model") +
         " FROM job_facts WHERE kind IN ('admitted', 'unqueued') AND at_ms >= " +
         std::string(from) + " AND since_ms < " + std::string(to) + " ORDER BY at_ms, seq";
}

std::string RollupSumSql(uint32_t columns, int ranges, std::string (*param)(int),
                         std::string_view int_cast) {
  std::string select = "SELECT tenant";
  std::string group = "tenant";
  for (const auto& [bit, name] : {std::pair<uint32_t, const char*>{kAttributionQueue, "queue"},
                                  {kAttributionUser, "\"user\""},
                                  {kAttributionJobType, "job_type"},
                                  {kAttributionGpuModel, "gpu_model"}}) {
    if ((columns & bit) != 0) {
      select += std::string(", ") + name;
      group += std::string(", ") + name;
    } else {
      select += ", ''";
    }
  }
  std::string where;
  for (int i = 0; i < ranges; ++i) {
    where += (i > 0 ? " OR " : "") + std::string("(span_ms = ") + param(3 * i + 1) +
             " AND at_ms >= " + param(3 * i + 2) + " AND at_ms < " + param(3 * i + 3) + ")";
  }
  return select + ", sum(gpu_milli_ms)" + std::string(int_cast) +
         ", sum(cost_micro) FROM usage_rollups WHERE " + where + " GROUP BY " + group;
}

JobWaits WaitsOfFacts(const std::vector<JobFactRecord>& facts) {
  JobWaitsBuilder b;
  for (const JobFactRecord& f : facts) b.AddFact(f);
  return std::move(b).Finish();
}

JobWaits WaitsOfTenant(const JobWaits& in, std::string_view tenant) {
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> renumber(in.attributions.size(), kNone);
  JobWaits out;
  for (size_t i = 0; i < in.attributions.size(); ++i) {
    if (in.attributions[i].tenant != tenant) continue;
    renumber[i] = static_cast<uint32_t>(out.attributions.size());
    out.attributions.push_back(in.attributions[i]);
  }
  for (const JobWait& w : in.waits) {
    const uint32_t to = renumber[w.attribution];
    if (to == kNone) continue;
    JobWait copy = w;
    copy.attribution = to;
    out.waits.push_back(copy);
  }
  return out;
}

}  // namespace arbiter::store

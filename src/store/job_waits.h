// Building a JobWaits (records.h) row by row: each distinct attribution is kept once, found by a
// hash of its five names without copying them (a store reads them as views into its row).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/records.h"

namespace arbiter::store {

class JobWaitsBuilder {
 public:
  // The index of the attribution (tenant, queue, user, job_type, gpu_model), added if new.
  uint32_t Attribution(std::string_view tenant, std::string_view queue, std::string_view user,
                       std::string_view job_type, std::string_view gpu_model);
  void Add(const JobWait& w) { out_.waits.push_back(w); }
  // A fact of kind "admitted" or "unqueued" (others are left out).
  void AddFact(const JobFactRecord& f);
  // The waits added, or (when given) `waits` instead, with the attributions.
  JobWaits Finish() && { return std::move(out_); }
  JobWaits Finish(std::vector<JobWait> waits) && {
    out_.waits = std::move(waits);
    return std::move(out_);
  }

 private:
  // The distinct values of one column, numbered; the last one found is checked first (rows of
  // one type or model come in runs).
  class Names {
   public:
    uint32_t Id(std::string_view name);

   private:
    struct Hash {
      using is_transparent = void;
      size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
    };
    std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
    std::string last_;
    uint32_t last_id_ = UINT32_MAX;
  };
  struct TupleHash {
    size_t operator()(const std::array<uint32_t, 5>& t) const {
      uint64_t h = 0xcbf29ce484222325ULL;
      for (uint32_t v : t) h = (h ^ v) * 0x100000001b3ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::array<Names, 5> columns_;
  std::unordered_map<std::array<uint32_t, 5>, uint32_t, TupleHash> index_;
  JobWaits out_;
};

// Store::WaitFacts's statement, for both dialects: the columns ReadJobWait reads (those left
// out of `columns`, AttributionColumns, as empty strings), the condition of the covering index
// job_facts_waits (migration 0012) that the query repeats for the planner to use it, bounds as
// `from` and `to` (the dialect's first and second parameters: "?1", "$1").
std::string JobWaitsSql(uint32_t columns, std::string_view from, std::string_view to);

// The sum of the usage rollups of up to `ranges` ranges (span_ms, from, to: parameters 1-3,
// 4-6, ... in the dialect's form: `param(n)` gives "?n" or "$n"), per tenant and the kept
// `columns` (the others as empty strings), in the columns ReadRollupSum reads; `int_cast`
// follows the GPU time's sum (PostgreSQL: "::bigint", its sum of bigints being numeric).
std::string RollupSumSql(uint32_t columns, int ranges, std::string (*param)(int),
                         std::string_view int_cast = "");

// One row of JobWaitsSql's (a store's Row type, as row_readers.h), its names interned in `b`.
template <typename Row>
JobWait ReadJobWait(Row& r, JobWaitsBuilder& b) {
  JobWait w;
  w.at_ms = r.Int();
  w.since_ms = r.Int();
  w.gpu_milli = r.Int();
  w.admitted = r.TextView() == "admitted";
  const std::string_view tenant = r.TextView();
  const std::string_view queue = r.TextView();
  const std::string_view user = r.TextView();
  const std::string_view job_type = r.TextView();
  const std::string_view gpu_model = r.TextView();
  w.attribution = b.Attribution(tenant, queue, user, job_type, gpu_model);
  return w;
}

// The waits among `facts` (kinds "admitted" and "unqueued"), in their order.
JobWaits WaitsOfFacts(const std::vector<JobFactRecord>& facts);

// The waits of `in` attributed to `tenant`, attributions renumbered.
JobWaits WaitsOfTenant(const JobWaits& in, std::string_view tenant);

}  // namespace arbiter::store

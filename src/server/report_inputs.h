// Reads from the store what a report needs, the aggregated way (docs/reports.md, "How the reports
// read the records"): the usage rollups of each window's whole hours, the usage records of the
// partial hours only, and the job facts of the period. What the reports cost then grows with the
// number of windows and groups, not with the length of the history.
//
// Thread safety: as the store's reads (any thread).
#pragma once

#include <string_view>

#include "common/status.h"
#include "server/reports.h"
#include "store/store.h"

namespace arbiter::server::reports {

// Sets in.aggregated and fills in.usage_rollups, in.usage and in.facts for report `name` over
// `q` (its steps included). Requires in.now_ms and in.budgets set (the budgets' periods are read
// up to now); in.open_usage and in.pending are the caller's (what memory holds now). Reports that
// read neither usage nor job facts (cluster, fragmentation, idle-while-queued) read nothing here;
// serving reads the raw usage records of its period.
Status ReadReportRecords(store::Store& store, std::string_view name, const Query& q, Inputs& in);

}  // namespace arbiter::server::reports

// The retention of the raw history (--retention-days, docs/store.md "Retention"): job events and
// usage records older than N whole UTC days are archived to DIR/YYYY-MM-DD.jsonl.gz (one file per
// day of the row's time, JSON lines, gzip) and then deleted from the store. The report aggregates
// (usage rollups, job facts) stay, so reports over archived periods still read the same figures.
//
// Each page of rows (at most kPageRows) is appended to its days' files as one gzip member and
// synced (the file and the folder) before PruneHistory deletes exactly those rows (up to the
// page's highest seq), in one store transaction. A crash between the two leaves the rows in the
// store and in the archive; the next run appends them again (a line's seq tells the copies apart).
//
// The log metadata of a job (its runs: attempt and nodes, `arbiter logs`) is the detail of its
// admission events, archived and deleted with them.
//
// Thread safety: RunOnce from one thread at a time (the sampler's, on the leader).
#pragma once

#include <cstdint>
#include <string>

#include "common/archive.h"  // ArchiveDay: the files are named by it
#include "common/result.h"
#include "store/store.h"

namespace arbiter::server {

struct HistoryRetentionResult {
  uint64_t events = 0;  // archived and deleted
  uint64_t usage = 0;
  int64_t before_ms = 0;  // the bound used: midnight UTC, `days` days before today's
};

// Archives and deletes the events with at_ms and the usage records with end_ms before
// midnight UTC of (today - days), today being now_ms's day. days > 0.
Result<HistoryRetentionResult> ApplyHistoryRetention(store::Store& store,
                                                     const std::string& archive_dir, int days,
                                                     int64_t now_ms);

}  // namespace arbiter::server

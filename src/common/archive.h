// Archives of JSON lines, one gzip file per UTC day: what the retentions write (the server's raw
// history, docs/store.md; a node's task output, docs/security.md). A file is a concatenation of
// gzip members, each one append; `zcat FILE` reads them all as one text.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace arbiter {

// "2026-11-10" for a time (ms since the epoch) in that UTC day.
std::string ArchiveDay(int64_t ms);

// Appends each day's lines (day -> text of whole lines) to DIR/<prefix><day>.jsonl.gz as one gzip
// member, then syncs each file and DIR, creating DIR when missing. kUnavailable, the message
// beginning with `what` and naming the path, when any step fails: what was appended before may
// be there, so a caller that retries may write lines twice.
Status AppendArchiveDays(const std::string& dir, std::string_view prefix,
                         const std::map<std::string, std::string>& days, std::string_view what);

}  // namespace arbiter

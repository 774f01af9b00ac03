// Copies every record of one store into another (`arbiter admin migrate-store`,
// docs/operations.md): the state tables, every webhook delivery, and the whole history (job events,
// usage and audit records with their sequence numbers; cluster, GPU and serving samples), so that
// an installation moves from SQLite to PostgreSQL without losing anything. Offline: no server may
// write to either store meanwhile. The lease and the servers table are not copied (they describe
// running servers).
//
// A target that already holds records is refused unless `force`: then records with the same keys
// are replaced and only history newer than the target's is appended, so an interrupted copy can be
// run again. After the copy both stores are read again and compared table by table.
//
// Thread safety: a plain function; the stores are used from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace arbiter::store {

struct TableCount {
  std::string table;
  uint64_t source = 0;  // rows read from the source
  uint64_t target = 0;  // rows in the target after the copy
};

struct MigrateOptions {
  bool force = false;
  // Rows per write batch (>= 1).
  size_t batch_rows = 2000;
  // Told about each table as it is copied ("jobs: 120000").
  std::function<void(const std::string&)> progress{};
};

// Copies `from` into `to` and verifies the copy; the counts per table. kFailedPrecondition when
// the target holds records and !force; kInternal when the verification finds a difference.
Result<std::vector<TableCount>> MigrateStore(Store& from, Store& to, const MigrateOptions& options);

}  // namespace arbiter::store

// The embedded Store: one SQLite file in WAL mode (the server passes DATA_DIR/arbiter.db).
//
// Opening applies the numbered migrations (migrations/NNNN_*.sql, embedded at build time) that the
// file does not have yet, each in its own transaction, and records them in `schema_version`. A file
// written by a newer Arbiter (a version this binary does not know) is refused; reopening is
// idempotent.
//
// One writer thread owns the write connection and does group commit: it takes every batch queued
// so far (at most `max_batches_per_commit`), applies each inside its own SAVEPOINT of ONE
// transaction, commits and syncs once, then resolves all their futures. A batch whose statement
// fails is rolled back to its savepoint and fails alone; if the whole transaction is lost (I/O
// error, commit failure), the batches are retried one by one so each gets its own status. Reads use
// a second connection and see only committed data. See docs/store.md.
//
// One server owns a file (its DATA_DIR). Several servers of one machine may share a file under
// the leadership lease (Store::AcquireLease, SetFence; docs/operations.md): the lease and the
// servers table use a third connection, and the store's clock is this machine's.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/result.h"
#include "store/store.h"

namespace arbiter::store {

struct SqliteOptions {
  // PRAGMA synchronous=FULL: the WAL is synced at every commit, so an acknowledged batch survives a
  // power loss. false: synchronous=NORMAL, which survives a crash of the process (kill -9) but may
  // lose the last commits on power loss.
  bool synchronous_full = true;
  // Most batches one transaction commits (>= 1).
  size_t max_batches_per_commit = 4096;
  // How long a statement waits for a lock held by another connection to the same file.
  int busy_timeout_ms = 10000;
};

// Opens (creating if needed) the store at `path` and starts its writer thread. `path` must be a
// file path: ":memory:" and empty paths are refused (the writer and the readers use two
// connections, which must share one database).
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteOptions options = {});

}  // namespace arbiter::store

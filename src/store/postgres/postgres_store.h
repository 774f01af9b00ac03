// The Store on PostgreSQL, through libpq: a company's installation, and several servers over one
// database (docs/store.md, docs/operations.md). Same contract as the SQLite store (store.h).
//
// Opening connects, takes an advisory lock and applies the numbered migrations the database does
// not have yet (migrations/NNNN_*.sql, embedded at build time, the same versions as SQLite's). A
// database written by a newer Arbiter is refused.
//
// One writer thread owns the write connection and does group commit: it takes every batch queued
// so far (at most `max_batches_per_commit`), and sends BEGIN, the fence, every op of every batch
// and COMMIT as one pipeline (libpq pipeline mode: one round trip for the lot), with
// synchronous_commit on, so a resolved future means the commit is flushed to PostgreSQL's WAL.
// When a statement fails, the transaction is rolled back and redone with each batch inside its
// own SAVEPOINT, so the failing batch fails alone. Reads use a second connection (Load in one
// REPEATABLE READ transaction); the lease and the servers table a third. A lost connection fails
// the call in progress with kUnavailable and is made again on the next call.
//
// Leadership: the lease row is judged by PostgreSQL's clock (clock_timestamp()); AcquireLease runs
// in one transaction that holds the row FOR UPDATE. With a fence set, every write transaction
// first takes the row FOR SHARE and checks its term (arbiter_check_fence, migration 9): a takeover
// waits for a fenced transaction in flight, which then cannot commit under the old term.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "common/result.h"
#include "store/store.h"

namespace arbiter::store {

struct PostgresOptions {
  // Most batches one transaction commits (>= 1).
  size_t max_batches_per_commit = 4096;
  // Seconds libpq waits for a connection (connect_timeout), unless the URI sets it.
  int connect_timeout_s = 10;
};

// Opens the store at `uri` (a libpq connection URI: postgres://USER@HOST[:PORT]/DB?...), migrating
// its schema as needed, and starts its writer thread. Messages never contain the password.
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& uri,
                                                 PostgresOptions options = {});

}  // namespace arbiter::store

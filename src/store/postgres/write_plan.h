// A group commit's ops as PostgreSQL statements (internal to src/store/postgres): each op as the
// prepared statement(s) that write it, and the plan of a whole group, in which the ops of the
// tables every submission writes (jobs, job_events, usage, audit) are coalesced into one
// multi-row statement per table (docs/store.md, "Group commit" under PostgreSQL).
//
// Thread safety: plain functions; a plan is built and used by the writer thread.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/postgres/connection.h"
#include "store/records.h"

namespace arbiter::store::postgres {

// One statement of a group commit.
struct Call {
  const char* stmt = "";  // a prepared statement's name (WriteStatements)
  Params params;
  size_t batch = 0;             // the batch of its (first) op: an index into the group
  const WriteOp* op = nullptr;  // the op it writes; null for a multi-row statement
  size_t rows = 1;              // how many ops it writes
};

// Every statement a Call may name, as (name, SQL): prepared once per connection.
std::vector<std::pair<const char*, std::string>> WriteStatements();

// The statements of one op (one, or several for an op that changes several tables), appended to
// `out` with `batch`.
void EncodeOp(const WriteOp& op, size_t batch, std::vector<Call>& out);

// Every op of every batch, one op at a time, in order (`batch` the index in `batches`): the
// statements of the savepoint path, where a failing op must be named.
std::vector<Call> EncodeOps(std::span<const WriteBatch* const> batches);

// The statements of a whole group, with the same effect as EncodeOps' run in order:
//  - job puts, and appends of job events, usage and audit records without a seq (the store
//    assigns it), are gathered per table into one multi-row statement (arrays of every column in
//    PostgreSQL's binary format, unnested in order; an append's rows take max(seq) + 1, + 2, ...
//    in op order, as one statement per op would give them);
//  - a put of a job id already gathered ends the gathered run first (one statement may not
//    update a row twice, and the later put must win), and so does any other op on the same
//    table (a job delete, an append with its own seq): the table's statements keep the ops'
//    order;
//  - every other op is its own statement where it stands: it writes other tables, whose
//    statements' order against the gathered ones does not change the result;
//  - a run of one op is that op's own statement.
std::vector<Call> PlanGroup(std::span<const WriteBatch* const> batches);

}  // namespace arbiter::store::postgres

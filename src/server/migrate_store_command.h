// `arbiter admin migrate-store --from sqlite:DIR --to postgres://...`: copies a stopped server's
// whole store into another (store/migrate_store.h), prints the rows per table and verifies them
// (docs/operations.md).
#pragma once

#include <string>

namespace arbiter::server {

struct MigrateStoreOptions {
  std::string from;     // a store URL (store/open_store.h)
  std::string to;       // a store URL
  std::string to_file;  // or a file holding the target's URL (one with a password)
  bool force = false;   // copy into a target that already holds records
};

// Runs the command; its exit code (0: copied and verified).
int RunMigrateStore(const MigrateStoreOptions& o);

}  // namespace arbiter::server

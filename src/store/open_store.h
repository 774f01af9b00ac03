// Which store a server uses, named by a URL (`arbiter server --store`, docs/store.md):
//
//   sqlite:DIR                     the embedded store, DIR/arbiter.db (the default: the data dir)
//   postgres://USER@HOST[:PORT]/DB PostgreSQL through libpq (a libpq connection URI; also
//   postgresql://...               with ?sslmode=... and the other libpq parameters)
//
// Thread safety: plain functions.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "store/store.h"

namespace arbiter::store {

struct StoreUrl {
  enum class Kind { kSqlite, kPostgres };
  Kind kind = Kind::kSqlite;
  std::string sqlite_dir{};    // kSqlite: the folder of arbiter.db
  std::string postgres_uri{};  // kPostgres: the libpq connection URI, as given
};

// Parses a store URL; errors are InvalidArgument naming `field` (the flag that gave the URL).
Result<StoreUrl> ParseStoreUrl(std::string_view url, std::string_view field = "--store");

// The URL with any password replaced by "***", for logs and status pages.
std::string RedactStoreUrl(std::string_view url);

// Opens the store (creating or migrating its schema as needed).
Result<std::unique_ptr<Store>> OpenStore(const StoreUrl& url);

}  // namespace arbiter::store

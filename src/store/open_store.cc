#include "store/open_store.h"

#include <fmt/format.h>

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace arbiter::store {

Result<StoreUrl> ParseStoreUrl(std::string_view url, std::string_view field) {
  StoreUrl out;
  if (url.starts_with("postgres://") || url.starts_with("postgresql://")) {
    const size_t rest = url.find("://") + 3;
    if (url.size() == rest) {
      return InvalidArgument(std::string(field),
                             "a PostgreSQL URL needs at least a host or a database: "
                             "postgres://USER@HOST/DB");
    }
    out.kind = StoreUrl::Kind::kPostgres;
    out.postgres_uri = std::string(url);
    return out;
  }
  if (url.starts_with("sqlite:")) {
    std::string_view dir = url.substr(7);
    if (dir.starts_with("//")) dir.remove_prefix(2);  // sqlite:///var/lib/arbiter
    if (dir.empty()) {
      return InvalidArgument(std::string(field), "sqlite: needs a folder: sqlite:/var/lib/arbiter");
    }
    out.sqlite_dir = std::string(dir);
    return out;
  }
  if (url.find("://") != std::string_view::npos) {
    return InvalidArgument(std::string(field),
                           fmt::format("unknown store '{}': expected sqlite:DIR or "
                                       "postgres://USER@HOST/DB",
                                       RedactStoreUrl(url)));
  }
  if (url.empty()) return InvalidArgument(std::string(field), "must not be empty");
  out.sqlite_dir = std::string(url);  // a bare folder
  return out;
}

std::string RedactStoreUrl(std::string_view url) {
  std::string s(url);
  const size_t scheme = s.find("://");
  if (scheme == std::string::npos) return s;
  const size_t start = scheme + 3;
  const size_t at = s.find('@', start);
  const size_t slash = s.find('/', start);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    const size_t colon = s.find(':', start);
    if (colon != std::string::npos && colon < at) s.replace(colon + 1, at - colon - 1, "***");
  }
  // password=... among the query parameters
  for (size_t p = s.find("password=", start); p != std::string::npos;
       p = s.find("password=", p + 1)) {
    const size_t value = p + 9;
    const size_t end = s.find('&', value);
    s.replace(value, (end == std::string::npos ? s.size() : end) - value, "***");
  }
  return s;
}

Result<std::unique_ptr<Store>> OpenStore(const StoreUrl& url) {
  switch (url.kind) {
    case StoreUrl::Kind::kSqlite:
      return OpenSqliteStore(url.sqlite_dir + "/arbiter.db");
    case StoreUrl::Kind::kPostgres:
      return OpenPostgresStore(url.postgres_uri);
  }
  return Internal("store: unknown kind");
}

}  // namespace arbiter::store

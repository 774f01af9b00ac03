#include "server/migrate_store_command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "store/migrate_store.h"
#include "store/open_store.h"

namespace arbiter::server {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "arbiter admin migrate-store: %s\n", message.c_str());
  return 1;
}

}  // namespace

int RunMigrateStore(const MigrateStoreOptions& o) {
  std::string to = o.to;
  if (!o.to_file.empty()) {
    std::ifstream in(o.to_file);
    if (!in || !std::getline(in, to)) return Fail("--to-file: cannot read a URL from " + o.to_file);
    while (!to.empty() && (to.back() == '\r' || to.back() == ' ')) to.pop_back();
  }
  auto from_url = store::ParseStoreUrl(o.from, "--from");
  if (!from_url.ok()) return Fail(from_url.status().ToString());
  auto to_url = store::ParseStoreUrl(to, o.to_file.empty() ? "--to" : "--to-file");
  if (!to_url.ok()) return Fail(to_url.status().ToString());
  // Opening a SQLite store creates it: a source that is not there is an error, not an empty copy.
  if (from_url->kind == store::StoreUrl::Kind::kSqlite &&
      ::access((from_url->sqlite_dir + "/arbiter.db").c_str(), R_OK) != 0) {
    return Fail(fmt::format("--from: {}/arbiter.db does not exist", from_url->sqlite_dir));
  }
  if (store::RedactStoreUrl(o.from) == store::RedactStoreUrl(to)) {
    return Fail("--from and --to name the same store");
  }
  auto from = store::OpenStore(*from_url);
  if (!from.ok()) return Fail("--from: " + from.status().ToString());
  auto target = store::OpenStore(*to_url);
  if (!target.ok()) return Fail("--to: " + target.status().ToString());
  std::printf("copying %s to %s\n", store::RedactStoreUrl(o.from).c_str(),
              store::RedactStoreUrl(to).c_str());
  store::MigrateOptions options;
  options.force = o.force;
  options.progress = [](const std::string& what) {
    std::printf("  %s\n", what.c_str());
    std::fflush(stdout);
  };
  auto counts = store::MigrateStore(**from, **target, options);
  (*from)->Close();
  (*target)->Close();
  if (!counts.ok()) {
    std::fprintf(stderr, "arbiter admin %s\n", counts.status().message().c_str());
    return 1;
  }
  std::printf("%-20s %12s %12s\n", "TABLE", "SOURCE", "TARGET");
  uint64_t total = 0;
  for (const store::TableCount& c : *counts) {
    std::printf("%-20s %12llu %12llu\n", c.table.c_str(), static_cast<unsigned long long>(c.source),
                static_cast<unsigned long long>(c.target));
    total += c.source;
  }
  std::printf("copied and verified %llu rows\n", static_cast<unsigned long long>(total));
  return 0;
}

}  // namespace arbiter::server

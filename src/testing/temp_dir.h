// TempDir: a fresh folder under $TMPDIR (or /tmp), made with mkdtemp and removed with everything in
// it when the TempDir goes out of scope. For tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "common/check.h"

namespace arbiter::testing {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "arbiter") {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" +
                          std::string(prefix) + ".XXXXXX";
    ARBITER_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp failed for " + pattern);
    path_ = pattern;
    // Tasks run as their own users: they must be able to pass through to their folders.
    std::filesystem::permissions(path_, std::filesystem::perms(0711), ignored_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
  std::error_code ignored_;
};

}  // namespace arbiter::testing

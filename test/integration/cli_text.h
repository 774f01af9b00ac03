// Text helpers of the client's integration tests.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace arbiter::testing {

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline nlohmann::json ParseOrNull(const std::string& s) {
  return nlohmann::json::parse(s, nullptr, false);
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace arbiter::testing

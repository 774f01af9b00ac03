#include "sim/text.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace arbiter::sim {

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open the file", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Internal(fmt::format("{}: read error", path));
  return ss.str();
}

Status WriteTextFile(const std::string& path, std::string_view text, std::string_view what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out << text;
  out.close();
  if (!out) return Internal(fmt::format("{}: cannot write the {}", path, what));
  return Status::Ok();
}

std::vector<std::string_view> SplitFields(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

}  // namespace arbiter::sim

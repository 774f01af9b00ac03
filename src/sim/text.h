// Text input of the simulator's files (traces, node and pod lists): reading a file whole and
// splitting a line into its fields.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::sim {

// The whole file, bytes as they are. NotFound when it cannot be opened.
Result<std::string> ReadTextFile(const std::string& path);

// Writes `text` to `path` (replacing it). The error says "PATH: cannot write the WHAT".
Status WriteTextFile(const std::string& path, std::string_view text, std::string_view what);

// `s` cut at every `sep`: n separators give n + 1 fields, empty ones included.
std::vector<std::string_view> SplitFields(std::string_view s, char sep);

}  // namespace arbiter::sim

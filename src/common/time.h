// Times as the API writes them: milliseconds since the epoch from RFC 3339 text.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace arbiter {

// RFC 3339 ("2026-11-10T08:00:00Z", "2026-11-10T09:00:00.5+01:00", a space for the T allowed) or
// a date ("2026-11-10", midnight UTC), in milliseconds since the epoch; nullopt when it is not one.
std::optional<int64_t> ParseRfc3339Ms(std::string_view text);

}  // namespace arbiter

#include "net/http_params.h"

#include <fmt/format.h>
#include <httplib.h>

namespace arbiter::net {

Result<bool> QueryBool(const httplib::Request& req, const std::string& name) {
  const auto [first, last] = req.params.equal_range(name);
  if (first == last) return false;
  if (std::next(first) != last) {
    return InvalidArgument(name, "is given more than once; give it once, true or false");
  }
  const std::string& v = first->second;
  if (v == "true") return true;
  if (v == "false") return false;
  const std::string shown = v.size() > 40 ? v.substr(0, 40) + "..." : v;
  return InvalidArgument(name, fmt::format("must be true or false, got '{}'", shown));
}

}  // namespace arbiter::net

// The web console's files (console/: the page, its script and style), built by esbuild and
// embedded into the binary at build time (console/build.mjs writes console_assets_embedded.cc),
// so the server needs neither the source tree nor the network to serve them.
#pragma once

#include <cstddef>
#include <string_view>

namespace arbiter::server {

struct ConsoleAsset {
  std::string_view path;  // "/index.html", "/assets/console.js", ...
  std::string_view content_type;
  std::string_view body;
  std::string_view etag;  // a hash of the body, quoted
};

// The asset served at `path`; nullptr when there is none.
const ConsoleAsset* FindConsoleAsset(std::string_view path);

}  // namespace arbiter::server

#!/bin/sh
# The package rule (docs/architecture.md, "Packages"): which folders of src/ may include which.
# Fails naming every include that breaks it. Tests (*_test.cc) may also use test helpers from
# other packages (testing/, bench/'s generators, fixtures), so they are not checked here.
# Run by the test suite (ctest: IncludeRule) and by hand: scripts/check-includes.sh [SRC_DIR].
set -u
src="${1:-$(dirname "$0")/../src}"
status=0

# allowed PACKAGE "PACKAGES IT MAY INCLUDE" (besides itself)
check() {
  pkg="$1"
  allowed="$2"
  [ -d "$src/$pkg" ] || return 0
  for f in $(find "$src/$pkg" \( -name '*.cc' -o -name '*.h' \) ! -name '*_test.cc' | sort); do
    grep -n '^#include "[a-z_]*/' "$f" | while IFS= read -r line; do
      inc=$(printf '%s\n' "$line" | sed 's/^[0-9]*:#include "\([a-z_]*\)\/.*/\1/')
      [ "$inc" = "$pkg" ] && continue
      ok=0
      for a in $allowed; do [ "$inc" = "$a" ] && ok=1; done
      if [ "$ok" = 0 ]; then
        echo "${f#"$src"/}:${line%%:*}: $pkg/ may not include $inc/ (allowed: $allowed)"
        echo x >> "$tmp"
      fi
    done
  done
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
check common ""
check model "common"
check core "common model"
check api "common model"
check store "common model"
check testing "common model core"
check sim "common model core api"
# Capacity planning: forecasts, what-if replays of recorded history and expected starts, on the
# simulator's replay (plan may include sim).
check plan "common model core sim"
check bench "common model core store"
check exec "common model"
check net "common model"
check node "common model exec net"
# The agent and the server never include each other; both use node/ and net/.
check agent "common model api exec node net"
check server "common model core api store exec node net gateway plan"
# The gateway of online services talks to the server only over HTTP, as the client does. (The
# server includes gateway/gateway.h, to run the built-in gateway, and gateway/latency_buckets.h,
# the buckets of the stats gateways post.)
check gateway "common"
# The client talks to the server only over HTTP: its codecs, never the server's code.
check cli "common model api"
if [ -s "$tmp" ]; then
  echo "include rule broken: $(wc -l < "$tmp") include(s)" >&2
  status=1
fi
exit $status

#!/usr/bin/env bash
# Installs exactly the Debian 12 packages that Arbiter's build and tests need.
# Idempotent and non-interactive; prints nothing when everything is already present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  clang-format clang-tidy
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  libsqlite3-dev libssl-dev libcpp-httplib-dev zlib1g-dev libbrotli-dev
  prometheus-cpp-dev  # GET /metrics: registry, metric families, text serializer
  libgoogle-perftools-dev  # tcmalloc (minimal), the server binary's allocator
  prometheus  # promtool and a real Prometheus, for the metrics integration tests
  libgtest-dev libgmock-dev libbenchmark-dev
  chromium  # headless, for the test that loads the simulator's HTML report
)

# `install-deps.sh --fuzz` adds what `make fuzz` needs: clang and its libFuzzer/sanitizer runtimes.
if [ "${1:-}" = "--fuzz" ]; then
  PACKAGES+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

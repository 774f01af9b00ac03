#!/usr/bin/env bash
# Installs exactly the Debian 12 packages that Arbiter's build and tests need.
# Idempotent and non-interactive; prints nothing when everything is already present.
set -euo pipefail

# What building and running the server and the agent needs (`make run`: install-deps.sh --run).
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  libsqlite3-dev libssl-dev libcpp-httplib-dev zlib1g-dev libbrotli-dev
  linux-libc-dev  # <linux/bpf.h>: the device filter of a task's cgroup
  prometheus-cpp-dev  # GET /metrics: registry, metric families, text serializer
  libgoogle-perftools-dev  # tcmalloc (minimal), the server binary's allocator
  libboost-dev  # Boost.Asio and Boost.Beast (header-only): the gateway, arbiter-echo-server
  libldap-dev  # OpenLDAP's client library: signing in with a directory (arbiter login --ldap)
  libpq-dev  # PostgreSQL's client library: the PostgreSQL store (--store postgres://...)
  podman runc skopeo  # jobs in OCI containers (docs/containers.md): runs, pulls, layer counts
)
# What the tests, benchmarks and checks add (`make test`, the default).
TEST_PACKAGES=(
  clang-format clang-tidy
  prometheus  # promtool and a real Prometheus, for the metrics integration tests
  libgtest-dev libgmock-dev libbenchmark-dev
  chromium  # headless, for the test that loads the simulator's HTML report
  procps util-linux  # pgrep, prlimit, setpriv in the confinement tests
  nginx  # the reverse proxy `arbiter bench gateway` compares the gateway with
  slapd ldap-utils  # a throw-away OpenLDAP server (and ldapsearch) for the directory sign-in tests
  postgresql  # a throw-away PostgreSQL 15 server (initdb, pg_ctl) for the PostgreSQL store's tests
  docker-registry busybox-static  # a loopback image registry and a static busybox image (containers)
)

case "${1:-}" in
  --run) ;;
  # `install-deps.sh --fuzz` adds what `make fuzz` needs: clang and its libFuzzer/sanitizer
  # runtimes.
  --fuzz) PACKAGES+=("${TEST_PACKAGES[@]}" clang libclang-rt-14-dev) ;;
  *) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm build the web console (console/, embedded into the binary): Debian's nodejs and
# npm, unless a node and npm are already there (another distribution's nodejs package brings its
# own npm and conflicts with Debian's).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

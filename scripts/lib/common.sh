# Shared by scripts/run and scripts/test: package installation and building.
# Sourced, not run.

TERN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# ccache hits across clones in different folders (CI builds a fresh clone).
export CCACHE_BASEDIR="$TERN_ROOT"
export CCACHE_NOHASHDIR=1
# Precompiled headers (TERN_PCH) are cached only with these.
export CCACHE_SLOPPINESS=pch_defines,time_macros

# Each line says how long the script has run (bash's SECONDS).
log() { printf '\033[1m==> [%dm%02ds] %s\033[0m\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_packages PKG...: installs the Debian packages that are missing.
# Quick (one dpkg-query) when everything is present.
ensure_packages() {
  local missing=()
  local pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

# What building libtern and the tern executable needs (liburing: the io_uring
# backend; c-ares: upstreams by name; libssl-dev: HTTPS, and openssl to make the demo's self-signed
# certificate; the users app: SQLite, MariaDB Connector/C, libsodium,
# nlohmann-json; libsystemd-dev: sd_notify for the systemd unit; wrk for the training run of the profile-guided release build).
BUILD_PACKAGES=(build-essential cmake ninja-build ccache pkg-config python3 liburing-dev libc-ares-dev
  libssl-dev openssl libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev
  libsqlite3-dev libmariadb-dev libsodium-dev libcrypt-dev nlohmann-json3-dev libpcre2-dev zlib1g-dev
  libbrotli-dev libsystemd-dev wrk)
# What scripts/run adds: php-fpm for the demo's PHP page (www/info.php).
RUN_PACKAGES=(php8.2-fpm)

# What the tests, fuzzers and benchmarks need on top (php8.2-fpm and
# mariadb-server: the tests start a php-fpm and a MariaDB of their own;
# nginx-light, h2o and lighttpd (with its TLS module): the peers of
# bench/compare; testssl.sh scans tern's HTTPS; python3-aiohttp: the
# application the reverse proxy tests put behind tern; libnghttp2-dev: the
# reference HTTP/2 codec the unit tests check tern's own against; nghttp2-client:
# nghttp and h2load, HTTP/2 clients; golang-go: to build h2spec; systemd:
# systemd-analyze checks the unit in dist/systemd; logrotate and groff-base
# check the logrotate snippet and the man page the packages install;
# prometheus scrapes tern's metrics in the tests; pebble: the ACME CA the
# acme tests obtain certificates from; Boost.Asio, libuv and libevent: the
# peers of bench/library; doxygen: the library's API reference).
TEST_PACKAGES=(libgtest-dev libgmock-dev libnghttp2-dev libbenchmark-dev clang libclang-rt-14-dev
  curl apache2-utils python3-pip python3-brotli python3-aiohttp chromium fonts-liberation wrk nginx-light php8.2-fpm
  mariadb-server h2o lighttpd lighttpd-mod-openssl testssl.sh nghttp2-client golang-go systemd
  logrotate groff-base prometheus qemu-system-x86 busybox-static cpio kmod haproxy dnsmasq pebble
  libboost-dev libuv1-dev libevent-dev doxygen gdb)

# ensure_pytest: pytest, brotli (to decode responses) and aiohttp (the
# proxied application) for the python3 on PATH, from PyPI if it lacks them
# (Debian's python3 has them from TEST_PACKAGES).
ensure_pytest() {
  local module
  for module in pytest brotli aiohttp; do
    python3 -c "import $module" >/dev/null 2>&1 && continue
    log "installing $module for $(command -v python3)"
    python3 -m pip install --quiet "$module" 2>/dev/null ||
      python3 -m pip install --quiet --break-system-packages "$module"
  done
}

# ensure_h2spec: build/tools/h2spec, the HTTP/2 conformance suite, built
# with Debian's Go (1.19) from the Go module proxy once. h2spec v2.2.1 has
# no go.mod, so its dependencies are pinned here to the last releases that
# build with Go 1.19. Prints the binary's path.
H2SPEC_MODULES=(github.com/summerwind/h2spec@v2.2.1+incompatible golang.org/x/net@v0.17.0
  golang.org/x/sys@v0.13.0 golang.org/x/text@v0.13.0 github.com/spf13/cobra@v1.7.0
  github.com/spf13/pflag@v1.0.5 github.com/fatih/color@v1.15.0 github.com/mattn/go-colorable@v0.1.13
  github.com/mattn/go-isatty@v0.0.17)
ensure_h2spec() {
  local tools="$TERN_ROOT/build/tools"
  local bin="$tools/h2spec"
  if [ ! -x "$bin" ]; then
    log "building h2spec into build/tools"
    local module
    module=$(mktemp -d)
    mkdir -p "$tools"
    (
      cd "$module" &&
        export GOPATH="$tools/go" GOFLAGS=-modcacherw GOTOOLCHAIN=local &&
        go mod init tern-h2spec >/dev/null 2>&1 &&
        go get "${H2SPEC_MODULES[@]}" >/dev/null 2>&1 &&
        go build -o "$bin" github.com/summerwind/h2spec/cmd/h2spec
    ) || { rm -rf "$module"; log "h2spec could not be built"; return 1; }
    rm -rf "$module"
  fi
  echo "$bin"
}

# go_tool NAME MODULE BUILT TOOLCHAIN: build/tools/NAME, `go install`ed
# from the Go module proxy once (BUILT: the name go install gives the
# binary; TOOLCHAIN: GOTOOLCHAIN, "local" for Debian's Go). Prints its path.
go_tool() {
  local name=$1 module=$2 built=$3 toolchain=$4
  local tools="$TERN_ROOT/build/tools"
  local bin="$tools/$name"
  if [ ! -x "$bin" ]; then
    log "building $name into build/tools"
    mkdir -p "$tools"
    (
      export GOPATH="$tools/go" GOFLAGS=-modcacherw GOTOOLCHAIN="$toolchain" GOBIN="$tools/go/bin" &&
        go install "$module" >/dev/null 2>&1 &&
        mv "$tools/go/bin/$built" "$bin"
    ) || { log "$name could not be built"; return 1; }
  fi
  echo "$bin"
}

# ensure_toxiproxy: build/tools/toxiproxy-server, the fault-injecting TCP
# proxy the fault tests put between tern and its backends, built with
# Debian's Go (v2.5.0: the last release whose go.mod builds with Go 1.19).
ensure_toxiproxy() {
  go_tool toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 server local
}

# ensure_pebble: build/tools/pebble, the ACME CA the ACME tests order from,
# in a release newer than Debian's (2.4): one with renewal information
# (RFC 9773) that a test can move. Debian's pebble-challtestsrv stays its DNS.
ensure_pebble() {
  go_tool pebble github.com/letsencrypt/pebble/v2/cmd/pebble@v2.10.3 pebble local
}

# ensure_oauth2_proxy: build/tools/oauth2-proxy, a real forward-auth service
# for test_forward_auth.py (its modules are about 850 MB: scripts/test
# builds it only when TERN_WITH_OAUTH2_PROXY=1). Needs a Go that fetches
# newer toolchains itself (1.21 or later).
ensure_oauth2_proxy() {
  go_tool oauth2-proxy github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6 oauth2-proxy auto
}

# ensure_vm: build/tools/vm, the machine test_ktls.py boots in QEMU to
# test kernel TLS on a kernel that has it (Debian's linux-image-amd64,
# fetched by apt once; tests/vm/build). Prints its directory.
ensure_vm() {
  "$TERN_ROOT/tests/vm/build" "$TERN_ROOT/build/tools/vm" ||
    { log "the test machine (tests/vm/build) could not be built"; return 1; }
}

# build_preset NAME [cmake -D args...]: configures (once) and builds a preset.
build_preset() {
  local preset=$1
  shift
  local werror=OFF
  [ -n "${CI:-}" ] && werror=ON
  (cd "$TERN_ROOT" && cmake --preset "$preset" -DTERN_WERROR="$werror" "$@" >/dev/null)
  (cd "$TERN_ROOT" && cmake --build --preset "$preset")
}

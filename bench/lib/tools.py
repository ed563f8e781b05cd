"""What the harness needs around the measurements: the tools, the builds, the
file-descriptor limit, and the facts about the machine and versions."""
import os
import platform
import resource
import shutil
import subprocess

# tool -> Debian package that provides it
TOOLS = {"wrk": "wrk", "ab": "apache2-utils", "nginx": "nginx-light (or nginx)",
         "h2o": "h2o", "lighttpd": "lighttpd", "openssl": "openssl",
         "taskset": "util-linux", "gcc": "gcc", "cmake": "cmake", "flock": "util-linux"}
BUILD_LOCK = "/tmp/tern-build.lock"  # shared with everyone who builds in this checkout
FASTCGI_PARAMS = "/etc/nginx/fastcgi_params"  # included by nginx's PHP location


def find_php_fpm():
    """php-fpm for the PHP rows: $TERN_PHP_FPM (as the tests), else Debian's
    php-fpm8.2; None if there is none."""
    for path in (os.environ.get("TERN_PHP_FPM"), "/usr/sbin/php-fpm8.2",
                 shutil.which("php-fpm8.2")):
        if path and os.access(path, os.X_OK):
            return path
    return None


def check_tools(need_build, need_php=False, servers=("nginx", "h2o", "lighttpd")):
    """What the chosen work needs: the builders only when building, each peer
    only when a chosen scenario runs it."""
    missing = []
    for tool, package in TOOLS.items():
        if tool in ("cmake", "gcc", "flock") and not need_build:
            continue
        if tool in ("nginx", "h2o", "lighttpd") and tool not in servers:
            continue
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            missing.append(f"{tool} (apt-get install {package})")
    if need_php and not find_php_fpm():
        missing.append("php-fpm8.2 (apt-get install php8.2-fpm, or set TERN_PHP_FPM)")
    if need_php and not os.path.exists(FASTCGI_PARAMS):
        missing.append(f"{FASTCGI_PARAMS} (comes with nginx-common)")
    if missing:
        raise SystemExit("bench: missing tools: " + ", ".join(missing))
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("bench: needs 2 CPUs (server on CPU 0, load generator on CPU 1)")


def _run(cmd, timeout, cwd):
    print("bench: $ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True, timeout=timeout)


def build(repo, floor_src):
    """The release build as scripts/run makes it (profile-guided, see
    scripts/build-release), with the examples (hello_http), and the floor
    server. The lock serialises with other builds of this checkout."""
    lock = ["flock", BUILD_LOCK]
    # Examples on explicitly: scripts/run configures this build without them.
    _run(lock + [os.path.join(repo, "scripts", "build-release"), "-DTERN_BUILD_TESTS=OFF",
                 "-DTERN_BUILD_EXAMPLES=ON"], 3600, repo)
    os.makedirs(os.path.join(repo, "build", "bench"), exist_ok=True)
    _run(["gcc", "-O2", "-o", "build/bench/floor_server", floor_src], 300, repo)
    _run(["gcc", "-O2", "-o", "build/bench/upgrade_echo_server", "bench/upgrade_echo_server.c"], 300, repo)


def binaries(repo, needed=("tern", "hello", "floor")):
    """Paths of the built binaries; those `needed` must be there."""
    bins = {"tern": os.path.join(repo, "build/release/tern"),
            "hello": os.path.join(repo, "build/release/examples/hello_http"),
            "floor": os.path.join(repo, "build/bench/floor_server"),
            "echo": os.path.join(repo, "build/bench/upgrade_echo_server")}
    for name in needed:
        if not os.access(bins[name], os.X_OK):
            raise SystemExit(f"bench: {bins[name]} is missing; run without --no-build")
    return bins


def raise_nofile(want=65536):
    """10,000 idle connections need more descriptors than the usual 1,024, in
    this process (the client) and in the servers (which inherit the limit).
    root may raise the hard limit; anyone may raise the soft one to the hard."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _first_line(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"? ({e})"
    return ((p.stdout + p.stderr).strip().splitlines() or ["?"])[0].strip()


def versions(bins, built=True):
    """The versions line of a report; `built`: tern is the profile-guided
    release this run built (else the binary found, as --no-build takes it)."""
    wrk = _first_line(["wrk", "-v"]).split(" Copyright")[0]
    ab = _first_line(["ab", "-V"]).replace("This is ApacheBench, ", "ab ")
    nginx = _first_line(["nginx", "-v"]).replace("nginx version: ", "")
    for peer, cmd in (("h2o", ["h2o", "--version"]), ("lighttpd", ["lighttpd", "-v"])):
        if shutil.which(peer) or os.path.exists(f"/usr/sbin/{peer}"):
            nginx += ", " + _first_line(cmd).split(" - ")[0].replace(" version ", " ")
    php = ""
    if "php-fpm" in bins:
        php = ", " + _first_line([bins["php-fpm"], "-n", "-v"]).split(" (built")[0]
    how = "scripts/build-release" if built else f"--no-build: {os.path.relpath(bins['tern'])}"
    return (f"{_first_line([bins['tern'], '--version'])} ({how}), {nginx}{php}, "
            f"{wrk}, {ab}, floor_server built with {_first_line(['gcc', '--version'])} -O2")


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    # The congestion control shapes large responses on loopback: BBR paces
    # by itself where no fq qdisc does it (loopback has none), and a
    # response sent as one burst is paced by timer.
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            congestion = f.read().strip()
    except OSError:
        congestion = "?"
    return f"{os.cpu_count()} CPUs (nproc), {model}, Linux {platform.release()}, TCP congestion control {congestion}"

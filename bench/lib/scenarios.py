"""The scenarios of bench/compare and how one sample of one is taken.

A sample is one measured run of one scenario against one server: warm-up,
then the measured run with the server's CPU time read on either side.
"""
import os
import time
from dataclasses import dataclass, field

from . import loadgen, procstat, servers

# tern on both I/O backends: "tern" waits with epoll, "tern-uring" with io_uring.
TERNS = ("tern", "tern" + servers.URING)
SERVERS = (*TERNS, *servers.PEERS, "floor")
# Where the floor cannot take part (it never closes, and its canned
# response is at most 128 KiB).
WITHOUT_FLOOR = (*TERNS, *servers.PEERS)
BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE_LUA = os.path.join(BENCH_DIR, "pipeline.lua")
FILES_LUA = os.path.join(BENCH_DIR, "files.lua")
IDLE_CONNECTIONS = 10_000
# sparse-10k: 10,000 keep-alive connections of which 1% are busy.
SPARSE_IDLE = 9_900


@dataclass
class Scenario:
    name: str
    kind: str                 # wrk | ab | h2load | handshakes | s_time | ws | idle
    unit: str                 # of the main figure
    path: str = "/" + servers.SMALL_FILE
    conns: int = 100
    target: str = "file"      # a key of TARGETS: which server process each server name is
    servers: tuple = SERVERS
    pipeline: int = 0         # requests per write (wrk Lua script)
    streams: int = 0          # h2load: requests in flight per connection
    files: int = 0            # requests for random files of the many-files set (files.lua)
    idle: int = 0             # idle keep-alive connections held open during the run
    higher_is_better: bool = True
    expect_cache_hit: bool = False  # after warm-up the response must say X-Cache: HIT
    # (scenario, label): this row's median over that row's, same server, same
    # run; selecting this scenario selects those too.
    compare_to: tuple = ()
    # wrk's limit per response, in seconds, where its default (2 s) is too
    # short for one response (a 64 MiB file takes up to 1.5 s here).
    timeout: int = 0
    handshake: str = "full"   # handshakes: "full" or "resumed" (bench/tls_handshakes.py)
    headers: tuple = ()       # wrk: fields every request carries ("Name: value")
    note: str = ""

    @property
    def php(self):
        return self.target.startswith("php")


# target -> {server name: kind of the process that serves it (servers.start)}
_U = servers.URING
TARGETS = {
    "file": {"tern": "tern", "tern" + _U: "tern" + _U, "nginx": "nginx", "h2o": "h2o",
             "lighttpd": "lighttpd", "floor": "floor"},
    "hello": {"tern": "hello", "tern" + _U: "hello" + _U, "nginx": "nginx",
              "floor": "floor-hello"},
    "php": {"tern": "tern-php", "tern" + _U: "tern-php" + _U, "nginx": "nginx-php"},
    "php-cache": {"tern": "tern-php-cache", "tern" + _U: "tern-php-cache" + _U,
                  "nginx": "nginx-php-cache"},
    "proxy": {"tern": "tern-proxy", "tern" + _U: "tern-proxy" + _U, "nginx": "nginx-proxy"},
    "proxy-cache": {"tern": "tern-proxy-cache", "tern" + _U: "tern-proxy-cache" + _U,
                    "nginx": "nginx-proxy-cache"},
    "proxy-cache-100k": {"tern": "tern-proxy-cache-100k", "tern" + _U: "tern-proxy-cache-100k" + _U,
                         "nginx": "nginx-proxy-cache-100k", "floor": "floor-file-100k"},
    "ws": {"tern": "tern-ws", "tern" + _U: "tern-ws" + _U, "nginx": "nginx-ws"},
    # HTTPS: every server with the same self-signed ECDSA P-256 certificate.
    "tls": {"tern": "tern" + servers.TLS, "tern" + _U: "tern" + servers.TLS + _U,
            "nginx": "nginx" + servers.TLS, "h2o": "h2o" + servers.TLS,
            "lighttpd": "lighttpd" + servers.TLS},
    # keepalive-100 with a [[server]] that has a /metrics location (on) or the
    # same location answering 204 (off).
    "metrics": {"tern": "tern-metrics", "tern" + _U: "tern-metrics" + _U},
    "sites": {"tern": "tern-sites", "tern" + _U: "tern-sites" + _U},
    # The same site behind basic auth (nginx: auth_basic).
    "auth": {"tern": "tern-auth", "tern" + _U: "tern-auth" + _U, "nginx": "nginx-auth"},
    # The same site with a [[limit]] that never refuses (nginx: limit_req).
    "limit": {"tern": "tern-limit", "tern" + _U: "tern-limit" + _U, "nginx": "nginx-limit"},
    # Plain HTTP/2 with prior knowledge (h2c).
    "h2c": {"tern": "tern" + servers.H2C, "tern" + _U: "tern" + servers.H2C + _U,
            "nginx": "nginx" + servers.H2C, "h2o": "h2o" + servers.H2C,
            "lighttpd": "lighttpd" + servers.H2C},
}
H2_NOTE = ("h2load (nghttp2-client), one thread; every server at its HTTP/2 defaults (tern: "
           "[http2] defaults, 128 streams, 256 KiB stream window; nginx: http2 on the listen; "
           "h2o and lighttpd: on by default); floor n/a (no HTTP/2)")
TLS_NOTE = ("HTTPS with one self-signed ECDSA P-256 certificate for every server, TLS 1.2 and "
            "1.3 offered, each server's default ciphers (wrk, on OpenSSL 3, settles on TLS 1.3 "
            "where offered); floor n/a (no TLS)")
PHP_NOTE = (f"through a php-fpm of its own per server ({servers.PHP_POOL} static children, "
            "unix socket, OPcache, pinned to CPU 0 with the server); per CPU-s counts the "
            "server's CPU only (php-fpm's is in each run's detail); floor n/a (no PHP)")


PROXY_NOTE = ("a reverse proxy in front of a floor server of its own (1 KiB, pinned to CPU 0 with "
              f"the proxy), HTTP/1.1 and keep-alive to it (tern: an [[upstream]] with connections = "
              f"{servers.PROXY_CONNECTIONS}; nginx: upstream keepalive {servers.PROXY_CONNECTIONS}, "
              "proxy_http_version 1.1), both adding Host, X-Real-IP, X-Forwarded-For, -Proto, "
              "-Host, Forwarded and Via; per CPU-s counts the proxy's CPU only (the upstream's is "
              "in each run's detail); h2o, lighttpd and floor n/a")


SCENARIOS = [
    Scenario("keepalive-100", "wrk", "req/s", conns=100),
    Scenario("keepalive-1000", "wrk", "req/s", conns=1000),
    Scenario("sparse-10k", "wrk", "req/s", conns=100, idle=SPARSE_IDLE,
             note=f"10,000 keep-alive connections, 1% busy: {SPARSE_IDLE:,} idle ones (each "
                  "sent one request and stays silent) held open by the harness through the "
                  "warm-up and the run, while wrk drives 100"),
    # The floor never closes a connection, and ab without -k waits for the close.
    Scenario("conn-per-request", "ab", "req/s", servers=WITHOUT_FLOOR,
             note="HTTP/1.0, a new connection per request; floor n/a (never closes)"),
    Scenario("files", "wrk", "req/s", path="/", files=servers.FILES_COUNT, servers=WITHOUT_FLOOR,
             note=f"a site's many files: {servers.FILES_COUNT:,} files of "
                  f"{servers.FILES_MIN}-{servers.FILES_MAX // 1024} KiB, each request for one "
                  "at random (bench/files.lua, fixed seed), 100 keep-alive connections; every "
                  "server at its defaults for caching (nginx: open_file_cache max=1000); floor "
                  "n/a (one canned size)"),
    Scenario("pipelined-16", "wrk", "req/s", pipeline=16,
             note="16 requests per write; wrk times the whole batch of 16 (p99 is per batch), "
                  "and sometimes prints no latency distribution at all when pipelining"),
    # The floor's canned response is at most 128 KiB: it cannot serve this file.
    Scenario("file-64m", "wrk", "MiB/s", path="/" + servers.BIG_FILE, conns=4, timeout=10,
             servers=WITHOUT_FLOOR, note="floor n/a (cannot send 64 MiB)"),
    Scenario("sites-keepalive-100", "wrk", "req/s", conns=100, target="sites", servers=TERNS,
             note="keepalive-100 on a [[server]] with locations / and = /metrics (a 204): "
                  "metrics-keepalive-100 without the metrics"),
    Scenario("metrics-keepalive-100", "wrk", "req/s", conns=100, target="metrics", servers=TERNS,
             compare_to=(("sites-keepalive-100", "metrics on / off"),),
             note="as sites-keepalive-100 with = /metrics answering Prometheus text: every "
                  "request counted by site, location, status class and duration"),
    Scenario("limit-keepalive-100", "wrk", "req/s", conns=100, target="limit", servers=(*TERNS, "nginx"),
             compare_to=(("sites-keepalive-100", "rate limit on / off"),),
             note=f"as sites-keepalive-100 with a [[limit]] of {servers.LIMIT_RATE}, burst "
                  f"{servers.LIMIT_BURST} nodelay on / (nginx: limit_req_zone by $binary_remote_addr, "
                  "limit_req on /): every request counted in its client's bucket, none held"),
    Scenario("auth-keepalive-100", "wrk", "req/s", conns=100, target="auth", servers=(*TERNS, "nginx"),
             headers=(servers.AUTH_FIELD,), compare_to=(("sites-keepalive-100", "basic auth on / off"),),
             timeout=10,  # nginx hashes every request: its queue of 100 waits past 2 s at first
             note="as sites-keepalive-100 behind basic auth, every request with the right password "
                  "(bcrypt, cost 5): tern checks it once and remembers the success; nginx's "
                  "auth_basic checks it with crypt(3) on every request"),
    Scenario("idle-memory", "idle", "KiB/conn", higher_is_better=False,
             note=f"RSS growth holding {IDLE_CONNECTIONS:,} idle keep-alive connections; "
                  "a freshly started server each time. nginx allocates all its connection "
                  "slots (worker_connections 20000) at start, about 0.4 KiB each, so that "
                  "part of its cost is in its 'before' (worker RSS at start: 4.6 MB with "
                  "1,024 slots, 12.5 MB with 20,000)"),
    Scenario("tls-keepalive-100", "wrk", "req/s", conns=100, target="tls", servers=WITHOUT_FLOOR,
             note="keepalive-100 over HTTPS: " + TLS_NOTE),
    Scenario("tls-handshake-full", "handshakes", "req/s", target="tls", servers=WITHOUT_FLOOR,
             note="a new HTTPS connection per request, each a full handshake (bench/"
                  "tls_handshakes.py: one connection at a time, HTTP/1.0 GET, read to the "
                  "close; every one checked not resumed): " + TLS_NOTE),
    Scenario("tls-handshake-resumed", "handshakes", "req/s", target="tls", servers=WITHOUT_FLOOR,
             handshake="resumed", compare_to=(("tls-handshake-full", "resumed / full"),),
             note="as tls-handshake-full, each connection offering the newest session ticket "
                  "and each ticket offered once, as browsers do (RFC 8446 C.4). A server that "
                  "gives no fresh ticket with a resumption (h2o, lighttpd) makes the next "
                  "connection a full handshake: the row counts every connection. " + TLS_NOTE),
    Scenario("tls-ticket-reused", "s_time", "req/s", target="tls", servers=WITHOUT_FLOOR,
             compare_to=(("tls-handshake-full", "reused / full"),),
             note="every connection resuming with the same ticket (openssl s_time -reuse; every "
                  "one checked resumed), as OpenSSL-based clients may: no target. tern and nginx "
                  "give a fresh ticket with each resumption (the work single-use clients need), "
                  "h2o and lighttpd none: " + TLS_NOTE),
    Scenario("tls-idle-memory", "idle", "KiB/conn", target="tls", servers=WITHOUT_FLOOR,
             higher_is_better=False,
             note=f"idle-memory over HTTPS: RSS growth holding {IDLE_CONNECTIONS:,} idle "
                  "keep-alive TLS connections (each a full handshake, one GET, then silent); "
                  "a freshly started server each time: " + TLS_NOTE),
    Scenario("tls-file-64m", "wrk", "MiB/s", path="/" + servers.BIG_FILE, conns=4, timeout=10,
             target="tls", servers=WITHOUT_FLOOR, note="file-64m over HTTPS: " + TLS_NOTE),
    Scenario("h2-100x10", "h2load", "req/s", conns=100, streams=10, target="tls", servers=WITHOUT_FLOOR,
             note="1 KiB over HTTP/2 on TLS (ALPN h2), 100 connections x 10 streams: " + H2_NOTE
                  + "; " + TLS_NOTE),
    Scenario("h2c-100x10", "h2load", "req/s", conns=100, streams=10, target="h2c",
             servers=WITHOUT_FLOOR, note="1 KiB over HTTP/2 with prior knowledge (h2c), 100 "
                                         "connections x 10 streams: " + H2_NOTE),
    Scenario("h2-file-64m", "h2load", "MiB/s", path="/" + servers.BIG_FILE, conns=4, streams=1,
             target="tls", servers=WITHOUT_FLOOR,
             note="the 64 MiB file over HTTP/2 on TLS, 4 connections x 1 stream: " + H2_NOTE),
    Scenario("hello-router", "wrk", "req/s", path="/hello", target="hello",
             servers=(*TERNS, "nginx", "floor"),
             note='"Hello, world!\\n" from memory: tern = examples/hello_http, '
                  "nginx = return 200, floor = 14-byte body; h2o and lighttpd n/a (they "
                  "answer from memory only through a script: mruby, Lua)"),
    # php-fpm bounds these rows, not the server: 50 connections are plenty.
    Scenario("php-hello", "wrk", "req/s", path="/hello.php", conns=50, target="php",
             servers=(*TERNS, "nginx"),
             note="bench/php/hello.php " + PHP_NOTE + f". tern: [[fastcgi]] pool = "
                  f"{servers.PHP_POOL}, kept-alive connections, requests queue in tern; "
                  f"nginx: upstream keepalive {servers.PHP_POOL} but fastcgi_keep_conn off, a "
                  "connection per request (with it on, nginx's requests beyond the pool wait "
                  "in php-fpm's backlog behind idle kept-alive connections and time out: "
                  "bench/compare --nginx-keep-conn)"),
    Scenario("php-uncached", "wrk", "req/s", path="/slow_hello.php", target="php",
             servers=(*TERNS, "nginx"),
             note="bench/php/slow_hello.php (usleep 20 ms, Cache-Control max-age=3600), no "
                  f"cache: at most {servers.PHP_POOL} x 50 req/s; same connections as "
                  "php-cached; servers as in php-hello"),
    # wrk as in keepalive-100, so that cached / static compares like with like.
    Scenario("proxy-100", "wrk", "req/s", conns=100, target="proxy", servers=(*TERNS, "nginx"),
             note=PROXY_NOTE),
    Scenario("proxy-1000", "wrk", "req/s", conns=1000, target="proxy", servers=(*TERNS, "nginx"),
             note="proxy-100 with 1,000 client connections: " + PROXY_NOTE),
    Scenario("proxy-cached-1k", "wrk", "req/s", conns=100, target="proxy-cache",
             servers=(*TERNS, "nginx"), expect_cache_hit=True,
             compare_to=(("proxy-100", "cached / uncached"),),
             note="proxy-100 with a response cache: every measured request a hit on one 1 KiB "
                  "entry (checked after warm-up: tern's Cache-Status, nginx's X-Cache; upstream "
                  'CPU about 0). tern: a [[cache]] zone, proxy cache = { zone, valid = { 200 = '
                  '"10m" } }; nginx: proxy_cache with proxy_cache_path levels=1:2 on the same '
                  "disk, proxy_cache_valid 200 10m, key $scheme$host$request_uri as tern's; both "
                  "send a hit's head on its own (nginx tcp_nopush off, tern tcp_nopush = false)"),
    Scenario("proxy-cached-100k", "wrk", "req/s", path="/100k", conns=100, target="proxy-cache-100k",
             servers=(*TERNS, "nginx", "floor"), expect_cache_hit=True,
             note="proxy-cached-1k with a 100 KiB entry (kept on disk by both: tern sends it "
                  "from the entry's file with sendfile, nginx likewise); the floor sends the "
                  "same 100 KiB from a file as they do, its head by a write and its body by "
                  "sendfile (floor_server --file), with no cache, proxy or parsing"),
    Scenario("websocket-echo", "ws", "msg/s", path="/ws", target="ws", servers=(*TERNS, "nginx"),
             note="WebSocket through the proxy: 100 connections (bench/ws_echo.py, one asyncio "
                  "thread), each sending a 64-byte frame and waiting for its echo; the upstream "
                  "(bench/upgrade_echo_server.c, pinned to CPU 0 with the proxy) answers the "
                  "handshake with a canned 101 and echoes bytes. tern: location proxy; nginx: "
                  "proxy_http_version 1.1 with Upgrade and Connection relayed; per CPU-s "
                  "counts the proxy's CPU only"),
    Scenario("php-cached", "wrk", "req/s", path="/slow_hello.php", target="php-cache",
             servers=(*TERNS, "nginx"), expect_cache_hit=True,
             compare_to=(("keepalive-100", "cached / static 1 KiB"),
                         ("php-uncached", "cached / uncached")),
             note="the same page from the response cache: every measured request a hit "
                  "(checked after warm-up: tern's Cache-Status, nginx's X-Cache; php-fpm CPU "
                  'about 0). tern: a [[cache]] zone, [[fastcgi]] cache = "php"; nginx: '
                  "fastcgi_cache (keyed on method, host and URI); both files on the same "
                  "disk, both honouring max-age; each with a php-fpm as in "
                  "php-hello; wrk as in keepalive-100"),
]


@dataclass
class Sample:
    scenario: str
    server: str
    round: int
    value: float = None       # in the scenario's unit
    per_cpu: float = None     # requests (MiB for file-64m) per server CPU-second
    p99_ms: float = None
    lat_avg_ms: float = None
    cpu_s: float = None
    # Work per second of CPU of the whole machine (server, load generator and
    # the kernel between them): over loopback, a server that leaves the copy
    # to its reader looks cheap per server CPU-s and is not.
    per_machine_cpu: float = None
    machine_cpu_s: float = None
    backend_cpu_s: float = None  # php-fpm's or the upstream's CPU seconds in the measured run
    errors: list = field(default_factory=list)
    command: str = ""
    detail: str = ""

    @property
    def failed(self):
        return bool(self.errors)


def _load_command(sc, server, seconds, ab_requests):
    url = server.url(sc.path.lstrip("/"))
    if sc.kind == "handshakes":
        return loadgen.handshakes_cmd(server.port, sc.path, seconds, sc.handshake)
    if sc.kind == "s_time":
        return loadgen.s_time_cmd(server.port, sc.path, seconds)
    if sc.kind == "ws":
        return loadgen.ws_cmd(server.port, sc.path, seconds, sc.conns)
    if sc.kind == "ab":
        return loadgen.ab_cmd(url, ab_requests, sc.conns)
    if sc.kind == "h2load":
        return loadgen.h2load_cmd(url, sc.conns, sc.streams, seconds)
    if sc.pipeline:
        return loadgen.wrk_cmd(url, sc.conns, seconds, PIPELINE_LUA, [str(sc.pipeline)])
    if sc.files:
        return loadgen.wrk_cmd(url, sc.conns, seconds, FILES_LUA, [str(sc.files)])
    return loadgen.wrk_cmd(url, sc.conns, seconds, timeout=sc.timeout, headers=sc.headers)


def _warm_up(sc, server, seconds):
    if seconds <= 0:
        return
    if sc.kind == "ab":
        cmd = loadgen.ab_warmup_cmd(server.url(sc.path.lstrip("/")), seconds, sc.conns)
    else:
        cmd = _load_command(sc, server, seconds, 0)
    loadgen.run(cmd, timeout=seconds + 60)


def _check_cache_hit(server, path, sample):
    """After warm-up, a cached page must come from the cache."""
    try:
        status, headers, _ = servers.http_get_headers(server.port, path)
    except OSError as e:
        sample.errors.append(f"cache check: {type(e).__name__}: {e}")
        return
    if status != 200 or not servers.served_from_cache(headers):
        sample.errors.append(f"not served from the cache after warm-up: status {status}, "
                             f"Cache-Status: {headers.get('cache-status', '(none)')}, "
                             f"X-Cache: {headers.get('x-cache', '(none)')}")


def run_load(sc, server, rnd, opts):
    """One wrk or ab sample against a running server. For a PHP server, the
    CPU time of its php-fpm is read around the measured run too; with
    sc.idle, that many idle connections are open through it."""
    if not sc.idle:
        return _run_load(sc, server, rnd, opts)
    try:
        with loadgen.IdleConnections(server.port, sc.idle, sc.path) as idle:
            sample = _run_load(sc, server, rnd, opts)
            alive = idle.still_open()
    except (OSError, RuntimeError, ValueError) as e:
        sample = Sample(sc.name, None, rnd)
        sample.errors.append(f"idle connections: {type(e).__name__}: {e}")
        return sample
    if alive < sc.idle:
        sample.errors.append(f"server closed {sc.idle - alive} of {sc.idle} idle connections")
    sample.detail = (sample.detail + "; " if sample.detail else "") + f"{sc.idle:,} idle open"
    return sample


def _run_load(sc, server, rnd, opts):
    _warm_up(sc, server, opts.warmup)
    cmd = _load_command(sc, server, opts.duration, opts.ab_requests)
    sample = Sample(sc.name, None, rnd, command=" ".join(loadgen.pinned(cmd)))
    if sc.expect_cache_hit and not server.label.startswith("floor"):
        _check_cache_hit(server, sc.path, sample)
    backend = server.backend
    cpu0, backend_cpu0 = server.cpu_seconds(), backend and backend.cpu_seconds()
    machine0, wall0 = procstat.machine_busy_seconds(), time.monotonic()
    status, out, err = loadgen.run(cmd, timeout=opts.duration + 120)
    wall_s = time.monotonic() - wall0
    sample.machine_cpu_s = procstat.machine_busy_seconds() - machine0
    sample.cpu_s = server.cpu_seconds() - cpu0
    if backend is not None:
        sample.backend_cpu_s = backend.cpu_seconds() - backend_cpu0
        sample.detail = f"{'php-fpm' if sc.php else 'upstream'} CPU {sample.backend_cpu_s:.2f} s"
    if sc.kind == "handshakes":
        parsed = loadgen.parse_handshakes(out, sc.handshake, servers.SMALL_SIZE)
    elif sc.kind == "s_time":
        parsed = loadgen.parse_s_time(out, wall_s, servers.SMALL_SIZE)
    elif sc.kind == "ab":
        parsed = loadgen.parse_ab(out)
    elif sc.kind == "ws":
        parsed = loadgen.parse_ws(out)
    elif sc.kind == "h2load":
        parsed = loadgen.parse_h2load(out)
    else:
        parsed = loadgen.parse_wrk(out)
    sample.errors += parsed["errors"]  # after the cache check's, if any
    if status != 0:
        tail = (err or out).strip().splitlines()[-1:] or [""]
        sample.errors.insert(0, f"{cmd[0]} exit status {status}: {tail[0]}")
    sample.p99_ms, sample.lat_avg_ms = parsed["p99_ms"], parsed["lat_avg_ms"]
    if sc.unit == "MiB/s":
        sample.value = parsed["bytes_per_s"] and parsed["bytes_per_s"] / (1 << 20)
        work = parsed.get("bytes") and parsed["bytes"] / (1 << 20)
    else:
        sample.value = parsed["rps"]
        work = parsed.get("requests")
    if work and sample.cpu_s > 0:
        sample.per_cpu = work / sample.cpu_s
    if work and sample.machine_cpu_s > 0:
        sample.per_machine_cpu = work / sample.machine_cpu_s
    return sample


def run_idle(sc, name, rnd, ws, bins):
    """RSS growth per idle connection, measured on a freshly started server:
    a server that already served 1,000 connections keeps that memory in its
    allocator, and the growth would be hidden."""
    server = servers.start(TARGETS[sc.target][name], ws, bins)
    sample = Sample(sc.name, None, rnd,
                    command=f"{IDLE_CONNECTIONS} x (connect, GET {sc.path}, read, stay open)")
    try:
        # Lazy start-up work (and over TLS the first handshake's) happens before 'before'.
        servers.http_get(server.port, sc.path, tls=server.tls)
        time.sleep(0.3)
        before = server.rss_kib()
        with loadgen.IdleConnections(server.port, IDLE_CONNECTIONS, sc.path,
                                     tls=server.tls) as idle:
            time.sleep(0.5)
            after = server.rss_kib()
            alive = idle.still_open()
        if alive < IDLE_CONNECTIONS:
            sample.errors.append(f"server closed {IDLE_CONNECTIONS - alive} idle connections")
        sample.value = (after - before) / IDLE_CONNECTIONS
        sample.detail = f"RSS {before:,} -> {after:,} KiB"
    except (OSError, RuntimeError, ValueError) as e:
        sample.errors.append(f"{type(e).__name__}: {e}")
    finally:
        server.stop()
    return sample

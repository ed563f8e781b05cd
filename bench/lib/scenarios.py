"""The scenarios of BENCHMARKING.md and how one sample of one is taken.

A sample is one measured run of one scenario against one server: warm-up,
then the measured run with the server's CPU time read on either side.
"""
import os
import time
from dataclasses import dataclass, field

from . import loadgen, servers

SERVERS = ("tern", "nginx", "floor")
BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE_LUA = os.path.join(BENCH_DIR, "pipeline.lua")
IDLE_CONNECTIONS = 10_000


@dataclass
class Scenario:
    name: str
    kind: str                 # wrk | ab | idle
    unit: str                 # of the main figure
    path: str = "/" + servers.SMALL_FILE
    conns: int = 100
    target: str = "file"      # file: tern/nginx/floor; hello: hello_http/nginx/floor-hello
    servers: tuple = SERVERS
    pipeline: int = 0         # requests per write (wrk Lua script)
    higher_is_better: bool = True
    note: str = ""


SCENARIOS = [
    Scenario("keepalive-100", "wrk", "req/s", conns=100),
    Scenario("keepalive-1000", "wrk", "req/s", conns=1000),
    # The floor never closes a connection, and ab without -k waits for the close.
    Scenario("conn-per-request", "ab", "req/s", servers=("tern", "nginx"),
             note="HTTP/1.0, a new connection per request; floor n/a (never closes)"),
    Scenario("pipelined-16", "wrk", "req/s", pipeline=16,
             note="16 requests per write; wrk times the whole batch of 16 (p99 is per batch), "
                  "and sometimes prints no latency distribution at all when pipelining"),
    # The floor's canned response is at most 128 KiB: it cannot serve this file.
    Scenario("file-64m", "wrk", "MiB/s", path="/" + servers.BIG_FILE, conns=4,
             servers=("tern", "nginx"), note="floor n/a (cannot send 64 MiB)"),
    Scenario("idle-memory", "idle", "KiB/conn", higher_is_better=False,
             note=f"RSS growth holding {IDLE_CONNECTIONS:,} idle keep-alive connections; "
                  "a freshly started server each time. nginx allocates all its connection "
                  "slots (worker_connections 20000) at start, about 0.4 KiB each, so that "
                  "part of its cost is in its 'before' (worker RSS at start: 4.6 MB with "
                  "1,024 slots, 12.5 MB with 20,000)"),
    Scenario("hello-router", "wrk", "req/s", path="/hello", target="hello",
             note='"Hello, world!\\n" from memory: tern = examples/hello_http, '
                  "nginx = return 200, floor = 14-byte body"),
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
    errors: list = field(default_factory=list)
    command: str = ""
    detail: str = ""

    @property
    def failed(self):
        return bool(self.errors)


def _load_command(sc, url, seconds, ab_requests):
    if sc.kind == "ab":
        return loadgen.ab_cmd(url, ab_requests, sc.conns)
    if sc.pipeline:
        return loadgen.wrk_cmd(url, sc.conns, seconds, PIPELINE_LUA, [str(sc.pipeline)])
    return loadgen.wrk_cmd(url, sc.conns, seconds)


def _warm_up(sc, url, seconds):
    if seconds <= 0:
        return
    if sc.kind == "ab":
        cmd = loadgen.ab_warmup_cmd(url, seconds, sc.conns)
    else:
        cmd = _load_command(sc, url, seconds, 0)
    loadgen.run(cmd, timeout=seconds + 60)


def run_load(sc, server, rnd, opts):
    """One wrk or ab sample against a running server."""
    url = server.url(sc.path.lstrip("/"))
    _warm_up(sc, url, opts.warmup)
    cmd = _load_command(sc, url, opts.duration, opts.ab_requests)
    sample = Sample(sc.name, None, rnd, command=" ".join(loadgen.pinned(cmd)))
    cpu0 = server.cpu_seconds()
    status, out, err = loadgen.run(cmd, timeout=opts.duration + 120)
    sample.cpu_s = server.cpu_seconds() - cpu0
    parsed = loadgen.parse_ab(out) if sc.kind == "ab" else loadgen.parse_wrk(out)
    sample.errors = parsed["errors"]
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
    return sample


def run_idle(sc, kind, rnd, ws, bins):
    """RSS growth per idle connection, measured on a freshly started server:
    a server that already served 1,000 connections keeps that memory in its
    allocator, and the growth would be hidden."""
    server = servers.start(kind, ws, bins)
    sample = Sample(sc.name, None, rnd,
                    command=f"{IDLE_CONNECTIONS} x (connect, GET {sc.path}, read, stay open)")
    try:
        servers.http_get(server.port, sc.path)  # lazy start-up work happens before 'before'
        time.sleep(0.3)
        before = server.rss_kib()
        with loadgen.IdleConnections(server.port, IDLE_CONNECTIONS, sc.path) as idle:
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

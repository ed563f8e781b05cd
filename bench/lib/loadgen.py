"""The load generators: wrk, ab, bench/tls_handshakes.py and openssl s_time
command lines, their output parsed, and the idle-connection client of the
memory scenarios.

Every command runs pinned to CPU 1 (the servers are on CPU 0) and under a
timeout, so that a server that stops answering cannot hang the harness.
"""
import os
import re
import socket
import sys
import ssl
import subprocess
import time

from .servers import HOST, read_response

LOADGEN_CPU = "1"

# wrk prints durations with these units and sizes in powers of 1024.
_TIME_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_SIZE = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def pinned(cmd):
    return ["taskset", "-c", LOADGEN_CPU, *cmd]


def wrk_cmd(url, conns, seconds, script=None, script_args=(), timeout=None, headers=()):
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency"]
    for header in headers:
        cmd += ["-H", header]
    if timeout:
        cmd.append(f"--timeout={timeout}s")
    if script:
        cmd += ["-s", script]
    cmd.append(url)
    if script_args:
        cmd += ["--", *script_args]
    return cmd


def ab_cmd(url, requests, conns):
    return ["ab", "-n", str(requests), "-c", str(conns), url]


def ab_warmup_cmd(url, seconds, conns):
    # -t caps -n at 50,000 unless -n comes after it: run for the time, not a count.
    return ["ab", "-t", str(seconds), "-n", "100000000", "-c", str(conns), url]


HANDSHAKES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "tls_handshakes.py")


WS_ECHO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ws_echo.py")


def handshakes_cmd(port, path, seconds, mode):
    """bench/tls_handshakes.py: a new HTTPS connection per request, one after
    another, full handshakes or resumed ones (mode "full" or "resumed")."""
    return [sys.executable, HANDSHAKES, str(port), path, str(seconds), mode]


def ws_cmd(port, path, seconds, conns, size=64):
    """bench/ws_echo.py: `conns` WebSocket connections, each sending a frame
    of `size` bytes and waiting for its echo before the next."""
    return [sys.executable, WS_ECHO, str(port), path, str(seconds), str(conns), str(size)]


def parse_ws(text):
    """The figures of one ws_echo.py run (messages as requests)."""
    r = {"errors": [], "p99_ms": None, "lat_avg_ms": None, "bytes_per_s": None,
         "requests": None, "rps": None}
    m = re.search(r"^messages (\d+) connections (\d+) errors (\d+) seconds ([\d.]+)$", text, re.M)
    if not m:
        r["errors"].append("no figures in ws_echo.py's output")
        return r
    count, errors, seconds = int(m[1]), int(m[3]), float(m[4])
    r["requests"], r["rps"] = count, count / seconds if seconds > 0 else None
    if errors:
        first = re.search(r"^error: (.*)$", text, re.M)
        r["errors"].append(f"{errors} connections failed" + (f" ({first[1]})" if first else ""))
    if count == 0:
        r["errors"].append("no message came back")
    return r


def h2load_cmd(url, conns, streams, seconds):
    """h2load (nghttp2-client): HTTP/2 on `conns` connections with `streams`
    requests in flight on each, for `seconds`; h2 by ALPN for https URLs,
    h2c with prior knowledge for http ones."""
    return ["h2load", "-t1", f"-c{conns}", f"-m{streams}", "-D", str(seconds), url]


def parse_h2load(text):
    """The figures of one h2load run, with the same 'errors' convention: a
    run where a request failed, errored or timed out, where a response was
    not 2xx, or that did not speak h2 is no result."""
    r = {"errors": [], "p99_ms": None}
    m = re.search(r"^finished in ([\d.]+)s, ([\d.]+) req/s", text, re.M)
    r["seconds"] = float(m.group(1)) if m else None
    r["rps"] = float(m.group(2)) if m else None
    m = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", text, re.M)
    r["requests"] = int(m.group(4)) if m else None
    if m and any(int(x) for x in m.groups()[4:]):
        r["errors"].append(f"{m.group(5)} failed, {m.group(6)} errored, {m.group(7)} timed out")
    m = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    if m and any(int(x) for x in m.groups()[1:]):
        r["errors"].append(f"non-2xx responses: {m.group(2)} 3xx, {m.group(3)} 4xx, {m.group(4)} 5xx")
    # The body bytes: "traffic: 1.2GB (1288490188) total, ..., 1.0GB (1073741824) data".
    m = re.search(r"^traffic: .*?([\d.]+\w*B) \((\d+)\) data", text, re.M)
    r["bytes"] = int(m.group(2)) if m else None
    r["bytes_per_s"] = r["bytes"] / r["seconds"] if r["bytes"] is not None and r["seconds"] else None
    m = re.search(r"^time for request:\s+\S+\s+\S+\s+(\S+)", text, re.M)
    r["lat_avg_ms"] = _ms(m.group(1)) if m else None
    if "Application protocol: h2" not in text and "Application protocol: h2c" not in text:
        r["errors"].append("h2load did not speak HTTP/2")
    if r["rps"] is None or r["requests"] is None:
        r["errors"].append("no req/s in h2load's output")
    return r


def s_time_cmd(port, path, seconds):
    """openssl s_time -reuse: one connection after another for `seconds`,
    each resuming the session the connection before had (the same ticket
    again where no fresh one came), one HTTP/1.0 GET of `path`, read to the
    close."""
    return ["openssl", "s_time", "-connect", f"{HOST}:{port}", "-www", path, "-reuse",
            "-time", str(seconds)]


def run(cmd, timeout):
    """Run a load generator; returns (exit status, stdout, stderr)."""
    try:
        p = subprocess.run(pinned(cmd), capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, f"timed out after {timeout} s"


def _ms(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    return float(m.group(1)) * _TIME_MS[m.group(2)] if m else None


def _bytes(text):
    m = re.fullmatch(r"([\d.]+)(B|KB|MB|GB|TB)", text)
    return float(m.group(1)) * _SIZE[m.group(2)] if m else None


def parse_wrk(text):
    """The figures of one wrk run. 'errors' is a list of reasons the run is not
    a result (socket errors, non-2xx/3xx responses, missing output)."""
    r = {"errors": []}
    m = re.search(r"^\s*(\d+) requests in ([\d.]+\w+), ([\d.]+\w+) read", text, re.M)
    if m:
        r["requests"] = int(m.group(1))
        r["seconds"] = _ms(m.group(2)) / 1e3
        r["bytes"] = _bytes(m.group(3))
    m = re.search(r"^Requests/sec:\s+([\d.]+)", text, re.M)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"^Transfer/sec:\s+(\S+)", text, re.M)
    r["bytes_per_s"] = _bytes(m.group(1)) if m else None
    m = re.search(r"^\s+Latency\s+(\S+)", text, re.M)
    r["lat_avg_ms"] = _ms(m.group(1)) if m else None
    m = re.search(r"^\s+99%\s+(\S+)", text, re.M)
    r["p99_ms"] = _ms(m.group(1)) if m else None
    # wrk sometimes prints a distribution of zeros, mostly when pipelining
    # (wg/wrk issues 236 and 354): that is no figure, not a latency of 0.
    r["p99_ms"] = r["p99_ms"] or None
    r["lat_avg_ms"] = r["lat_avg_ms"] or None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m and any(int(x) for x in m.groups()):
        r["errors"].append("socket errors: connect %s, read %s, write %s, timeout %s" % m.groups())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if m and int(m.group(1)):
        r["errors"].append(f"{m.group(1)} non-2xx/3xx responses")
    if r["rps"] is None or "requests" not in r:
        r["errors"].append("no Requests/sec in wrk's output")
    return r


def parse_ab(text):
    """The figures of one ab run, with the same 'errors' convention."""
    r = {"errors": []}
    m = re.search(r"^Complete requests:\s+(\d+)", text, re.M)
    r["requests"] = int(m.group(1)) if m else None
    m = re.search(r"^Time taken for tests:\s+([\d.]+) seconds", text, re.M)
    r["seconds"] = float(m.group(1)) if m else None
    m = re.search(r"^Requests per second:\s+([\d.]+)", text, re.M)
    r["rps"] = float(m.group(1)) if m else None
    m = re.search(r"^Transfer rate:\s+([\d.]+) \[Kbytes/sec\]", text, re.M)
    r["bytes_per_s"] = float(m.group(1)) * 1024 if m else None
    m = re.search(r"^Time per request:\s+([\d.]+) \[ms\] \(mean\)$", text, re.M)
    r["lat_avg_ms"] = float(m.group(1)) if m else None
    m = re.search(r"^\s+99%\s+(\d+)", text, re.M)
    r["p99_ms"] = float(m.group(1)) if m else None
    m = re.search(r"^Failed requests:\s+(\d+)(.*\n\s+\(.*\))?", text, re.M)
    if m and int(m.group(1)):
        detail = (m.group(2) or "").strip()
        r["errors"].append(f"{m.group(1)} failed requests {detail}".strip())
    m = re.search(r"^Non-2xx responses:\s+(\d+)", text, re.M)
    if m and int(m.group(1)):
        r["errors"].append(f"{m.group(1)} non-2xx responses")
    if r["rps"] is None or r["requests"] is None:
        r["errors"].append("no Requests per second in ab's output")
    return r


def parse_handshakes(text, mode, min_bytes):
    """The figures of one tls_handshakes.py run. A full run must resume
    nothing; a resumed run must resume at least one connection in three (a
    server without fresh tickets resumes every other one)."""
    r = {"errors": [], "p99_ms": None, "lat_avg_ms": None, "bytes_per_s": None,
         "requests": None, "rps": None}
    m = re.search(r"^connections (\d+) resumed (\d+) bytes (\d+) seconds ([\d.]+)$", text, re.M)
    if not m:
        r["errors"].append("no figures in tls_handshakes.py's output")
        return r
    count, resumed, total, seconds = int(m[1]), int(m[2]), int(m[3]), float(m[4])
    r["requests"], r["rps"] = count, count / seconds if seconds > 0 else None
    r["lat_avg_ms"] = seconds * 1e3 / count if count else None
    if count == 0 or total < count * min_bytes:
        r["errors"].append(f"{total} bytes for {count} connections, expected {min_bytes} or more each")
    if mode == "full" and resumed:
        r["errors"].append(f"{resumed} of {count} connections resumed, expected none")
    if mode == "resumed" and resumed * 3 < count:
        r["errors"].append(f"only {resumed} of {count} connections resumed")
    return r


def parse_s_time(text, seconds, min_bytes):
    """The figures of one s_time run of `seconds` of wall time (s_time's own
    is whole seconds), with the same 'errors' convention. s_time prints a
    character per connection: 'r' where the session was resumed; every
    connection must have been resumed, and must have read a response
    of at least `min_bytes`."""
    r = {"errors": [], "p99_ms": None, "lat_avg_ms": None, "bytes_per_s": None}
    m = re.search(r"^(\d+) connections in \d+ real seconds, (\d+) bytes read per connection",
                  text, re.M)
    r["requests"] = int(m.group(1)) if m else None
    r["rps"] = r["requests"] / seconds if r["requests"] and seconds > 0 else None
    if r["requests"] is None:
        r["errors"].append("no connection count in s_time's output")
    elif int(m.group(2)) < min_bytes:
        r["errors"].append(f"{m.group(2)} bytes read per connection, expected {min_bytes} or more")
    if r["requests"]:  # one connection at a time: the mean time of one
        r["lat_avg_ms"] = seconds * 1e3 / r["requests"]
    marks = "".join(re.findall(r"^[rt3*]+$", text, re.M))
    resumed = marks.count("r")
    if resumed < len(marks):
        r["errors"].append(f"{len(marks) - resumed} of {len(marks)} connections not resumed")
    return r


class IdleConnections:
    """N keep-alive connections, each having sent one request and read its
    response, then left open and idle (over TLS, each after a full handshake
    and with its session tickets read). A context manager: closes them all."""

    def __init__(self, port, count, path, deadline_s=180.0, tls=False):
        self.socks = []
        request = f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
        deadline = time.monotonic() + deadline_s
        context = None
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            for i in range(count):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {i} of {count} connections in {deadline_s} s")
                s = socket.create_connection((HOST, port), timeout=10)
                if context:
                    s = context.wrap_socket(s)
                self.socks.append(s)
                s.sendall(request)
                status, _ = read_response(s)
                if status != 200:
                    raise ConnectionError(f"connection {i}: status {status}")
        except BaseException:
            self.close()
            raise

    def still_open(self):
        """How many connections the server has not closed (a closed one reads EOF)."""
        alive = 0
        for s in self.socks:
            s.setblocking(False)
            try:
                alive += s.recv(1) != b""
            except (BlockingIOError, ssl.SSLWantReadError):
                alive += 1
            except OSError:
                pass
        return alive

    def close(self):
        for s in self.socks:
            s.close()
        self.socks = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

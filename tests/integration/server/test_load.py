"""Load and slow clients: a slow reader of a big file (memory stays flat),
many concurrent connections, and ab with and without keep-alive."""

import hashlib
import os
import re
import resource
import selectors
import shutil
import socket
import subprocess
import threading
import time

import pytest

from http_client import HttpConn, parse_responses
from tern_server import SCALE, link_into, scaled, sha256

MIB = 1024 * 1024


class RssSampler(threading.Thread):
    """Samples one /proc/PID/status field every 20 ms; keeps the peak."""

    def __init__(self, server, field):
        super().__init__(daemon=True)
        self.server, self.field = server, field
        self.baseline = server.rss_kib(field)
        self.peak = self.baseline
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.02):
            try:
                self.peak = max(self.peak, self.server.rss_kib(self.field))
            except (OSError, AssertionError):
                return

    def growth_mib(self):
        self.done.set()
        self.join(timeout=5)
        return (self.peak - self.baseline) / 1024


def read_body_slowly(conn, length, slow_seconds, deadline):
    """Reads length bytes: 16 KiB every 10 ms for slow_seconds, then as fast
    as it can. Returns the sha256 of what it read."""
    digest = hashlib.sha256()
    got = len(conn.buf)
    digest.update(bytes(conn.buf))
    conn.buf.clear()
    slow_until = time.monotonic() + slow_seconds
    while got < length:
        assert time.monotonic() < deadline, f"body read took too long: {got}/{length} bytes"
        slow = time.monotonic() < slow_until
        chunk = conn.sock.recv(min(16384 if slow else 1 << 20, length - got))
        assert chunk, f"connection closed after {got}/{length} body bytes"
        digest.update(chunk)
        got += len(chunk)
        if slow:
            time.sleep(0.01)
    return digest.hexdigest()


@pytest.mark.parametrize("mode,field,trigger", [
    ("sendfile", "VmRSS", "level"),
    ("mmap", "RssAnon", "level"),
    ("auto", "RssAnon", "level"),  # a local client: written from a mapping
    ("sendfile", "VmRSS", "edge"),
])
def test_slow_reader_of_big_file_gets_it_intact_without_memory_growth(tern_factory, big_file, mode, field, trigger):
    # With sendfile the bytes stream from the page cache, so even the
    # resident set must stay flat; an mmap'd file may count as resident
    # (file pages) but must not be copied into anonymous memory.
    path, digest = big_file
    srv = tern_factory({"trigger": trigger, "static": {"zero_copy": mode}})
    link_into(srv, path, "big.bin")
    size = path.stat().st_size
    assert srv.get("/index-warmup-404").status == 404  # allocate lazily-built state first
    sampler = RssSampler(srv, field)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", srv.port))
    with HttpConn(sock) as conn:
        sampler.start()
        deadline = time.monotonic() + 120
        conn.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        head = conn.read_head()
        assert head.status == 200
        assert head.header("Content-Length") == str(size)
        got = read_body_slowly(conn, size, slow_seconds=2.0, deadline=deadline)
        growth = sampler.growth_mib()
        assert got == digest
        # TSan shadows every byte the process touches (4x, anonymous memory),
        # so an mmap'd file read under TSan says nothing about our buffers.
        if not (mode in ("mmap", "auto") and srv.runs_under("libtsan")):
            assert growth < 40, f"{field} grew by {growth:.1f} MiB while serving a {size // MIB} MiB file"
        # The connection is still good for another request.
        assert conn.get("/index-warmup-404").status == 404


def raise_fd_limit(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


SERVER_SHAPES = {
    "2-dispatch-level": {"workers": 2},
    "2-least-loaded": {"workers": 2, "dispatch_policy": "least-loaded"},
    "2-reuseport-edge": {"workers": 2, "accept_mode": "reuseport", "trigger": "edge"},
    "1-edge": {"workers": 1, "trigger": "edge"},
}


@pytest.mark.parametrize("config", list(SERVER_SHAPES.values()), ids=list(SERVER_SHAPES))
def test_many_concurrent_connections_each_get_their_file_intact(tern_factory, config):
    count = scaled(1000, 50)
    assert raise_fd_limit(count + 256) >= count + 64, "cannot raise RLIMIT_NOFILE for the clients"
    srv = tern_factory(config)
    sizes = [1, 100, 4096, 65536 + 7, 300_000, MIB]
    files = {}
    for size in sizes:
        data = os.urandom(size)
        srv.write_file(f"f{size}.bin", data)
        files[f"f{size}.bin"] = sha256(data)
    names = list(files)

    sel = selectors.DefaultSelector()
    state = {}
    for i in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", srv.port))
        name = names[i % len(names)]
        request = f"GET /{name} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        state[sock] = {"name": name, "out": request, "in": bytearray()}
        sel.register(sock, selectors.EVENT_WRITE)
    done = {}
    deadline = time.monotonic() + 90
    try:
        while len(done) < count:
            assert time.monotonic() < deadline, f"only {len(done)}/{count} responses in time"
            for key, events in sel.select(timeout=1.0):
                sock, st = key.fileobj, state[key.fileobj]
                if events & selectors.EVENT_WRITE:
                    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    assert err == 0, f"connect failed: {os.strerror(err)}"
                    sent = sock.send(st["out"])
                    st["out"] = st["out"][sent:]
                    if not st["out"]:
                        sel.modify(sock, selectors.EVENT_READ)
                    continue
                chunk = sock.recv(1 << 20)
                if chunk:
                    st["in"] += chunk
                    continue
                sel.unregister(sock)
                sock.close()
                done[sock] = st
    finally:
        for sock in state:
            sock.close()
        sel.close()
    for st in done.values():
        responses = parse_responses(bytes(st["in"]))
        assert len(responses) == 1
        assert responses[0].status == 200, st["name"]
        assert sha256(responses[0].body) == files[st["name"]], st["name"]


def test_memory_a_burst_of_connections_took_is_given_back(tern_factory):
    """2,000 connections, each with most of a request head waiting in its
    input buffer, then all closed: once they are gone tern's RSS goes back
    near where it was (its buffer pool and the heaps are trimmed), as
    nginx's does, rather than staying at the burst's peak."""
    if SCALE < 1:
        pytest.skip("a sanitizer's allocator gives memory back on its own terms, not glibc's")
    count = 2000
    assert raise_fd_limit(count + 256) >= count + 64, "cannot raise RLIMIT_NOFILE for the clients"
    srv = tern_factory({"workers": 1})
    srv.write_file("f.txt", b"x" * 1024)
    assert srv.get("/f.txt").status == 200
    time.sleep(0.7)  # the warm-up's connection gone, and its memory
    baseline = srv.rss_kib()
    head = b"GET /f.txt HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 6000
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", srv.port))
            sock.sendall(head)  # the head's end never comes
            socks.append(sock)
        time.sleep(0.5)  # tern has read what they sent
        growth = (srv.rss_kib() - baseline) / 1024
        assert growth >= 8, f"the burst took only {growth:.1f} MiB: nothing to give back"
    finally:
        for sock in socks:
            sock.close()
    kept_allowed = max(3.0, growth / 5)
    deadline = time.monotonic() + 4
    while True:
        after = (srv.rss_kib() - baseline) / 1024
        if after <= kept_allowed or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print(f"RSS +{growth:.1f} MiB at the peak, +{after:.1f} MiB once the connections were gone")
    assert after <= kept_allowed, f"RSS stayed {after:.1f} MiB above its baseline (+{growth:.1f} at the peak)"


def run_ab(url, n, keep_alive):
    c = min(1000, n)
    cmd = ["ab", "-q", "-n", str(n), "-c", str(c), "-s", "60"] + (["-k"] if keep_alive else []) + [url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("keep_alive", [False, True], ids=["close", "keep-alive"])
def test_ab_reports_no_failed_or_non_2xx_requests(tern_factory, keep_alive):
    if shutil.which("ab") is None:
        pytest.skip("ab (apache2-utils) is not installed; scripts/test installs it")
    n = scaled(100_000, 2000)
    assert raise_fd_limit(min(1000, n) + 256) > min(1000, n)
    srv = tern_factory({"workers": 2})
    srv.write_file("small.html", b"<p>" + b"x" * 500 + b"</p>\n")
    rc, out = run_ab(srv.url("/small.html"), n, keep_alive)
    assert rc == 0, out
    assert re.search(rf"^Complete requests:\s+{n}$", out, re.M), out
    assert re.search(r"^Failed requests:\s+0$", out, re.M), out
    assert "Non-2xx responses" not in out, out
    if keep_alive:
        assert re.search(rf"^Keep-Alive requests:\s+{n}$", out, re.M), out
    assert re.search(r"^Document Length:\s+508 bytes$", out, re.M), out


def raise_hard_fd_limit(needed):
    """As root, the hard limit too (tern raises its soft limit to the hard
    one at start); the soft limit this process and its children get."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
        except (ValueError, OSError):
            pass
    return raise_fd_limit(needed)


def run_wrk(url, connections, seconds):
    cmd = ["wrk", "-t1", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "30s", url]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("clients", [1000, 10000])
def test_a_proxy_with_the_default_pool_answers_every_request_of_many_keepalive_clients(tern_factory, clients):
    """An [[upstream]] with its defaults keeps idle connections as nginx's
    keepalive does and opens more as the load needs: a thousand or ten
    thousand keep-alive clients through a proxy location get no 503 (queue
    full) and no other error, with one worker."""
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed; scripts/test installs it")
    clients = scaled(clients, 200)
    # tern holds the clients' connections and up to as many to the upstream;
    # max_connections counts both (as nginx's worker_connections). Where
    # the hard limit is lower (20,000 here), what fits.
    limit = raise_hard_fd_limit(2 * clients + 1024)
    assert limit >= clients + 1024, "cannot raise RLIMIT_NOFILE"
    # The upstream also counts the proxy's connections beyond the idle ones
    # it keeps, closed after their request, until it has read their close:
    # on a busy machine that lags, and a cap of clients + 100 turned new
    # connections away (a 502 for "connection closed before a response").
    upstream = tern_factory({"workers": 1, "max_connections": min(2 * clients + 100, limit - 200)},
                            name="upstream")
    upstream.write_file("small.html", b"<p>" + b"x" * 500 + b"</p>\n")
    srv = tern_factory({"workers": 1, "max_connections": min(2 * clients + 100, limit - 200),
                        "upstream": [{"name": "app", "servers": [{"address": f"127.0.0.1:{upstream.port}"}]}],
                        "server": [{"location": [{"prefix": "/", "proxy": {"pass": "http://app"}}]}]},
                       name="proxy")
    assert srv.get("/small.html").status == 200
    rc, out = run_wrk(srv.url("/small.html"), clients, scaled(6, 4))
    assert rc == 0, out
    requests = re.search(r"(\d+) requests in", out)
    assert requests and int(requests.group(1)) > 0, out
    assert "Non-2xx or 3xx responses" not in out, out
    assert "Socket errors" not in out, out
    assert "too many requests waiting" not in srv.stderr()

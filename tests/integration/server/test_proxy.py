"""The reverse proxy over real sockets: tern in front of real aiohttp
applications (upstream_app.py, each in its own process) and of tern
itself: balancing, header rewriting, bodies both ways, failures, retries,
passive health, consistent hashing, upstreams that misbehave, and
upstreams that send everything and close at once, on both I/O backends."""

import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from http_client import ConnectionClosed, HttpConn
from tern_server import free_port, scaled, sha256, wait_until
from test_hardening import LOW_QUARANTINE  # ASan's quarantine would count as RSS

HERE = Path(__file__).resolve().parent
PATTERN = bytes(range(256)) * 256


def pattern_bytes(n):
    whole, rest = divmod(n, len(PATTERN))
    return PATTERN * whole + PATTERN[:rest]


class App:
    """One upstream_app.py process, on `host` (another loopback address
    makes a second host on the same port)."""

    def __init__(self, name, port, log, tls=(), host="127.0.0.1"):
        self.name = name
        self.port = port
        self.address = f"{host}:{port}"
        self.proc = subprocess.Popen([sys.executable, str(HERE / "upstream_app.py"), name, str(port), *tls],
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, UPSTREAM_APP_HOST=host))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, f"upstream {name} exited"
                time.sleep(0.05)
        raise AssertionError(f"upstream {name} did not start")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def post(self, path):
        with HttpConn.open(self.port) as conn:
            return conn.request(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n".encode())

    def get(self, path):
        with HttpConn.open(self.port) as conn:
            return conn.get(path)


def slow_begun(app):
    """How many /slow requests the application has begun."""
    return int(app.get("/slowcount").body)


def wait_for_slow(app, count):
    """Waits until the application has begun `count` /slow requests."""
    assert wait_until(lambda: slow_begun(app) >= count, 10), f"{app.name} began {slow_begun(app)} /slow requests"


def free_ports(n):
    ports = []
    while len(ports) < n:
        if (port := free_port()) not in ports:
            ports.append(port)
    return ports


@pytest.fixture
def apps(tmp_path):
    """start(*names, tls=(cert, key)) -> the Apps, listening (over HTTPS
    with a certificate); all killed at the end."""
    started = []
    log = open(tmp_path / "upstreams.log", "ab")

    def start(*names, tls=()):
        made = [App(name, port, log, tls) for name, port in zip(names, free_ports(len(names)))]
        started.extend(made)
        return made

    yield start
    for app in started:
        app.kill()
    log.close()


def site(location, upstreams=(), **extra):
    """A config with one site whose locations are `location` (a dict or a list)."""
    locations = location if isinstance(location, list) else [location]
    config = {"server": [{"location": locations}], **extra}
    if upstreams:
        config["upstream"] = list(upstreams)
    return config


def group(name, apps, **options):
    servers = []
    for app in apps:
        if isinstance(app, tuple):
            servers.append({"address": app[0].address, **app[1]})
        else:
            servers.append({"address": app.address})
    return {"name": name, "servers": servers, **options}


def names_of(conn, n, path="/name", headers=()):
    return Counter(conn.get(path, headers).body.decode() for _ in range(n))


# ---- Balancing ----

def test_requests_spread_by_weight(tern_factory, apps):
    a, b, c = apps("a", "b", "c")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [(a, {"weight": 5}), (b, {"weight": 3}), (c, {"weight": 2})])]))
    n = scaled(10000, 2000)
    with srv.connect() as conn:
        counts = names_of(conn, n)
    for app, weight in ((a, 5), (b, 3), (c, 2)):
        share = counts[app.name] / n
        assert abs(share - weight / 10) <= 0.05, counts


def test_least_connections_prefers_the_idle_server(tern_factory, apps):
    a, b = apps("a", "b")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [a, b], method="least_conn")]))
    # A slow request holds a; while it runs every other request goes to b.
    slow = srv.connect()
    slow.send(b"GET /slow?delay=2 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert wait_until(lambda: slow_begun(a) + slow_begun(b) == 1, 10)
    with srv.connect() as conn:
        counts = names_of(conn, 20)
    first = slow.read_response()
    slow.close()
    assert first.status == 200
    busy = first.body.decode().split()[0]
    assert counts == Counter({({"a", "b"} - {busy}).pop(): 20}), counts


def test_consistent_hashing_keeps_each_key_on_its_server(tern_factory, apps):
    a, b, c = apps("a", "b", "c")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [a, b, c], method="hash", hash="$http_x_key")]))
    keys = [f"user-{i}" for i in range(300)]
    with srv.connect() as conn:
        before = {k: conn.get("/name", [("X-Key", k)]).body.decode() for k in keys}
        again = {k: conn.get("/name", [("X-Key", k)]).body.decode() for k in keys}
    assert before == again
    assert set(before.values()) == {"a", "b", "c"}
    # One server leaves: only its keys move.
    c.kill()
    with srv.connect() as conn:
        after = {k: conn.get("/name", [("X-Key", k)]) for k in keys}
    assert all(r.status == 200 for r in after.values())
    moved = [k for k in keys if after[k].body.decode() != before[k]]
    assert moved and all(before[k] == "c" for k in moved), moved
    assert len(moved) == sum(1 for v in before.values() if v == "c")


# ---- What goes to the upstream and what comes back ----

def test_headers_are_rewritten_both_ways(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{a.address}"}}))
    resp = srv.get("/echo/x?y=1", [
        ("Host", "shop.test"), ("X-Forwarded-For", "203.0.113.9"), ("X-Real-IP", "10.9.9.9"),
        ("X-Forwarded-Proto", "https"), ("Forwarded", "for=203.0.113.9"), ("Via", "1.1 cdn"),
        ("Connection", "keep-alive, X-Secret"), ("X-Secret", "1"), ("TE", "trailers"),
        ("Keep-Alive", "timeout=5"), ("Proxy-Connection", "keep-alive"), ("Cookie", "a=b"),
        ("Accept", "text/plain"),
    ])
    assert resp.status == 200
    seen = json.loads(resp.body)
    headers = {}
    for name, value in seen["headers"]:
        headers.setdefault(name.lower(), []).append(value)
    expected = {
        "host": ["shop.test"],
        "x-forwarded-for": ["203.0.113.9, 127.0.0.1"],
        "x-real-ip": ["127.0.0.1"],
        "x-forwarded-proto": ["http"],
        "x-forwarded-host": ["shop.test"],
        "forwarded": ['for=203.0.113.9, for=127.0.0.1;proto=http;host="shop.test"'],
        "via": ["1.1 cdn, 1.1 tern"],
        "cookie": ["a=b"],
        "accept": ["text/plain"],
    }
    for name, values in expected.items():
        assert headers.get(name) == values, (name, headers)
    for gone in ("x-secret", "te", "keep-alive", "proxy-connection", "connection", "upgrade"):
        assert gone not in headers, (gone, headers)
    assert seen["path"] == "/echo/x?y=1"
    # Back: tern's Server and Date, once each; aiohttp's are not relayed.
    assert resp.header_all("Server") == ["tern"]
    assert len(resp.header_all("Date")) == 1
    assert resp.header("Content-Type").startswith("application/json")


def test_a_location_edits_the_fields_going_up_and_coming_back(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "headers_remove": ["Content-Type"],
                             "proxy": {"pass": f"http://{a.address}",
                                       "set_headers": {"X-Forwarded-Proto": "https", "X-Tenant": "blue"},
                                       "remove_headers": ["Cookie"]}}))
    resp = srv.get("/echo", [("Cookie", "session=1"), ("X-Tenant", "red")])
    assert resp.status == 200
    seen = {}
    for name, value in json.loads(resp.body)["headers"]:
        seen.setdefault(name.lower(), []).append(value)
    assert seen["x-forwarded-proto"] == ["https"], seen
    assert seen["x-tenant"] == ["blue"], seen
    assert "cookie" not in seen, seen
    # The upstream's Content-Type is taken out of its answer.
    assert resp.header("Content-Type") is None, resp.head if hasattr(resp, "head") else resp


def test_next_upstream_on_chosen_statuses_and_never_a_post_unless_asked(tern_factory, apps):
    a, b = apps("a", "b")
    upstream = group("app", [(a, {"max_fails": 0}), (b, {"max_fails": 0})])  # a stays in the rotation
    srv = tern_factory(site([
        {"prefix": "/503/", "proxy": {"pass": "http://app/", "next_upstream": ["error", "timeout", "503"]}},
        {"prefix": "/any/", "proxy": {"pass": "http://app/", "next_upstream": ["503", "non_idempotent"]}},
        {"prefix": "/plain/", "proxy": {"pass": "http://app/"}},
    ], [upstream]))
    with srv.connect() as conn:
        for _ in range(6):
            resp = conn.get("/503/failon?name=a&code=503")
            assert (resp.status, resp.body) == (200, b"b"), resp.body
        posts = [conn.request(b"POST /503/failon?name=a&code=503 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
                 for _ in range(4)]
        assert {p.status for p in posts} == {200, 503}, [p.status for p in posts]  # a POST is not sent twice
        posts = [conn.request(b"POST /any/failon?name=a&code=503 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
                 for _ in range(4)]
        assert {p.status for p in posts} == {200}
        plain = [conn.get("/plain/failon?name=a&code=503").status for _ in range(4)]
        assert set(plain) == {200, 503}, plain  # the statuses are relayed unless named
    assert "answered 503, trying the next server" in srv.stderr()


def test_an_x_accel_redirect_from_the_application_serves_the_sites_file(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site([
        {"prefix": "/protected/", "internal": True},
        {"prefix": "/", "proxy": {"pass": f"http://{a.address}"}},
    ]))
    srv.write_file("protected/report.txt", b"the report\n")
    resp = srv.get("/accel?to=/protected/report.txt")
    assert (resp.status, resp.body) == (200, b"the report\n")
    assert resp.header("Content-Disposition") == "attachment; filename=x.txt"
    assert resp.header("X-Accel-Redirect") is None
    assert srv.get("/protected/report.txt").status == 404  # internal: not for clients
    assert srv.get("/accel?to=/protected/missing.txt").status == 404


def test_a_path_in_pass_replaces_the_prefix_and_redirects_come_back(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site([{"prefix": "/api/", "proxy": {"pass": "http://app/"}},
                             {"prefix": "/raw/", "proxy": {"pass": "http://app"}}],
                            [group("app", [a])]))
    seen = json.loads(srv.get("/api/echo/a%20b/c?q=1").body)
    assert seen["raw_path"] == "/echo/a%20b/c?q=1"
    # Without a path the target goes as the client sent it.
    resp = srv.get("/raw/x?q=1")
    assert resp.status == 404  # aiohttp has no /raw/x: it got the whole target
    # A redirect to the group's URL comes back under the location.
    resp = srv.get("/api/redirect")
    assert resp.status == 302
    assert resp.header("Location") == "/api/v1/there"


def test_an_absolute_form_target_goes_upstream_in_origin_form(tern_factory, apps):
    """A pass without a URI forwards the target as the client sent it, in
    origin form, and the target's authority as Host (RFC 9112 3.2.2)."""
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}}, [group("app", [a])]))
    with srv.connect() as conn:
        resp = conn.request(b"GET http://api.example/echo/a%20b?q=1 HTTP/1.1\r\nHost: public.example\r\n\r\n")
    assert resp.status == 200, resp
    seen = json.loads(resp.body)
    assert seen["raw_path"] == "/echo/a%20b?q=1"
    headers = [(name.lower(), value) for name, value in seen["headers"]]
    assert [v for n, v in headers if n == "host"] == ["api.example"]
    assert [v for n, v in headers if n == "x-forwarded-host"] == ["api.example"]


def test_a_proxy_prefix_named_without_its_slash_is_redirected_to_it(tern_factory, apps):
    """`/p` where a proxy location is `prefix = "/p/"` is 301 to `/p/`, its
    query kept, as nginx's auto-redirect; `/p/` goes upstream."""
    (a,) = apps("a")
    srv = tern_factory(site([{"prefix": "/"}, {"prefix": "/p/", "proxy": {"pass": "http://app/"}}],
                            [group("app", [a])]))
    resp = srv.get("/p?x=1")
    assert resp.status == 301 and resp.header("Location") == "/p/?x=1"
    resp = srv.get("/p")
    assert resp.status == 301 and resp.header("Location") == "/p/"
    assert json.loads(srv.get("/p/echo?x=1").body)["raw_path"] == "/echo?x=1"
    assert srv.get("/px").status == 404  # another name, left to the static files


@pytest.mark.parametrize("buffering", [True, False], ids=["buffered", "streamed"])
def test_bodies_keep_their_bytes_both_ways(tern_factory, apps, buffering):
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "body_bytes": "64MiB",
                             "proxy": {"pass": f"http://{a.address}", "request_buffering": buffering,
                                       "response_buffering": buffering}}))
    with srv.connect() as conn:
        for size in (1, 65537, 8 << 20):
            body = pattern_bytes(size)
            resp = conn.request(b"POST /sha256 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % size + body)
            assert resp.status == 200, resp
            assert json.loads(resp.body) == {"sha256": sha256(body), "length": size, "name": "a"}
        # A chunked upload is gathered, then sent with its length.
        body = pattern_bytes(300000)
        chunks = b"".join(b"%x\r\n" % len(body[i:i + 70000]) + body[i:i + 70000] + b"\r\n"
                          for i in range(0, len(body), 70000))
        resp = conn.request(b"POST /sha256 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                            chunks + b"0\r\n\r\n")
        assert json.loads(resp.body)["sha256"] == sha256(body)
        for size in (0, 1, 1 << 20):
            resp = conn.get(f"/bytes?n={size}")
            assert resp.status == 200 and resp.body == pattern_bytes(size)
        resp = conn.get("/stream?n=5&size=1000")
        assert resp.header("Transfer-Encoding") == "chunked"
        assert resp.body == b"".join(str(i).encode() * 1000 for i in range(5))
    out = subprocess.run(["curl", "-s", srv.url("/bytes?n=67108864")], capture_output=True, timeout=120)
    assert len(out.stdout) == 64 << 20 and out.stdout == pattern_bytes(64 << 20)



@pytest.mark.parametrize("buffering", [True, False])
def test_an_upload_that_waited_for_100_continue_keeps_its_connection(tern_factory, apps, buffering):
    """Regression: a POST with Expect: 100-continue was answered with
    Connection: close, the keep-alive decided before the 100 was sent.
    Once asked for its body and sent it whole, the client keeps the
    connection, as with nginx."""
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{a.address}",
                                                      "request_buffering": buffering}}))
    body = pattern_bytes(100000)
    with srv.connect() as conn:
        for _ in range(3):
            conn.send(b"POST /sha256 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body))
            resp = conn.read_response("POST", skip_interim=False)
            assert resp.status == 100, resp
            conn.send(body)
            resp = conn.read_response("POST")
            assert resp.status == 200 and json.loads(resp.body)["sha256"] == sha256(body), resp
            assert "close" not in resp.connection_tokens(), resp.headers

def test_a_streamed_response_arrives_as_it_is_made(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{a.address}"}}))
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    started = time.monotonic()
    sock.sendall(b"GET /stream?n=3&size=5&delay=0.7 HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    while b"00000" not in got:
        piece = sock.recv(1000)
        assert piece, got
        got += piece
    first_at = time.monotonic() - started
    assert b"11111" not in got
    while not got.endswith(b"0\r\n\r\n"):
        got += sock.recv(1000)
    sock.close()
    assert time.monotonic() - started >= 1.4
    assert first_at < 0.6, first_at  # the whole response takes 2.1 s


def rss_bound_kib(srv, kib):
    """A bound on RSS growth, four times as much under TSan (its shadow memory)."""
    return kib * (4 if srv.runs_under("libtsan") else 1)


def test_a_slow_client_does_not_make_tern_hold_the_response(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site([{"prefix": "/buffered/", "proxy": {"pass": "http://app/"}},
                             {"prefix": "/streamed/", "proxy": {"pass": "http://app/", "response_buffering": False}}],
                            [group("app", [a])]), env=LOW_QUARANTINE)
    for path in ("/streamed/bytes?n=134217728", "/buffered/bytes?n=134217728"):
        before = srv.rss_kib()
        sock = socket.create_connection(("127.0.0.1", srv.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        time.sleep(3)  # reads nothing: 128 MiB wait upstream, in a temp file, or in no buffer at all
        grown = srv.rss_kib() - before
        # Then reads it all, intact.
        sock.settimeout(60)
        got = 0
        digest = hashlib.sha256()
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(65536)
        head, rest = head.split(b"\r\n\r\n", 1)
        digest.update(rest)
        got += len(rest)
        while got < 128 << 20:
            piece = sock.recv(1 << 20)
            assert piece, f"closed after {got} bytes"
            digest.update(piece)
            got += len(piece)
        sock.close()
        assert digest.hexdigest() == sha256(pattern_bytes(128 << 20))
        assert grown < rss_bound_kib(srv, 24 * 1024), f"{path}: RSS grew {grown} KiB while the client read nothing"


# ---- Failures, retries, passive health ----

def test_failures_are_502_503_and_504_and_tern_keeps_serving(tern_factory, apps):
    (a,) = apps("a")
    (dead,) = free_ports(1)
    srv = tern_factory(site([
        {"prefix": "/down/", "proxy": {"pass": f"http://127.0.0.1:{dead}"}},
        {"prefix": "/slow/", "proxy": {"pass": "http://app/", "read_timeout": "1s"}},
        {"prefix": "/one/", "proxy": {"pass": "http://one/"}},
    ], [group("app", [a]), group("one", [a], connections=1, queue=0)]))
    assert srv.get("/down/x").status == 502
    started = time.monotonic()
    assert srv.get("/slow/slow?delay=3").status == 504
    assert time.monotonic() - started < 2.5
    # The only connection is busy and nobody may wait: 503.
    busy = srv.connect()
    busy.send(b"GET /one/slow?delay=1.5 HTTP/1.1\r\nHost: x\r\n\r\n")
    wait_for_slow(a, 1)
    assert srv.get("/one/name").status == 503
    assert busy.read_response().status == 200
    busy.close()
    assert srv.get("/slow/name").body == b"a"
    assert srv.wait_for_log("connect failed")
    assert srv.wait_for_log("no response within 1000 ms")


def test_an_upstream_that_takes_no_request_bytes_is_504(tern_factory):
    # Accepts and never reads: the request cannot be written.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    held = []
    thread = threading.Thread(target=lambda: held.append(listener.accept()), daemon=True)
    thread.start()
    try:
        srv = tern_factory(site({"prefix": "/", "body_bytes": "64MiB",
                                 "proxy": {"pass": f"http://127.0.0.1:{listener.getsockname()[1]}",
                                           "request_buffering": False, "send_timeout": "1s",
                                           "read_timeout": "30s"}}))
        body = b"x" * (32 << 20)
        started = time.monotonic()
        with srv.connect() as conn:
            conn.send(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
            try:
                conn.sock.sendall(body)
            except OSError:
                pass  # tern answered and closed before taking it all
            resp = conn.read_response()
        assert resp.status == 504
        assert time.monotonic() - started < 10
        assert srv.wait_for_log("the request was not taken within 1000 ms")
    finally:
        listener.close()


def test_a_dead_server_costs_no_idempotent_request(tern_factory, apps):
    a, b = apps("a", "b")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [(a, {"fail_timeout": "30s"}), (b, {"fail_timeout": "30s"})])]))
    with srv.connect() as conn:
        assert names_of(conn, 10) == Counter({"a": 5, "b": 5})
        b.kill()
        counts = names_of(conn, 200)
    assert counts == Counter({"a": 200})
    # Passive health: one attempt found b down, then it was left alone.
    assert srv.stderr().count("trying the next server") == 1, srv.stderr()


def test_active_health_checks_take_a_server_out_and_back(tern_factory, apps, tmp_path):
    a, b = apps("a", "b")
    health = {"path": "/health", "interval": "200ms", "timeout": "500ms", "rise": 2, "fall": 2}
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [a, b], health=health)]))
    with srv.connect() as conn:
        assert names_of(conn, 10) == Counter({"a": 5, "b": 5})
        # b says it is unhealthy (it still answers requests): out it goes.
        b.post("/health/down")
        assert srv.wait_for_log(f"proxy app {b.address}: health check failed 2 time(s) in a row (status 503): marked down")
        assert names_of(conn, 10) == Counter({"a": 10})
        b.post("/health/up")
        assert srv.wait_for_log(f"proxy app {b.address}: health check passed 2 time(s) in a row (status 200): marked up")
        assert names_of(conn, 10) == Counter({"a": 5, "b": 5})
        # Killed, b is marked down without any request failing; back on its
        # port, it is marked up again.
        b.kill()
        assert srv.wait_for_log("marked down", count=2)
        assert names_of(conn, 20) == Counter({"a": 20})
        b2 = App("b", b.port, open(tmp_path / "b2.log", "wb"))
        try:
            assert srv.wait_for_log("marked up", count=2)
            assert names_of(conn, 10) == Counter({"a": 5, "b": 5})
        finally:
            b2.kill()


def test_a_post_that_reached_the_upstream_is_never_repeated(tern_factory, apps):
    a, b = apps("a", "b")
    # Neither is taken out by its failures: the GET below tries both.
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [(a, {"max_fails": 0}), (b, {"max_fails": 0})])]))
    resp, conn = srv.request(b"POST /hangup HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
    conn.close()
    assert resp.status == 502
    counts = [int(app.get("/count").body) for app in (a, b)]
    assert sorted(counts) == [0, 1], counts
    # A GET whose server hangs up goes on to the next one, which hangs up too.
    assert srv.get("/hangup").status == 502
    assert srv.wait_for_log("connection closed before a response, trying the next server")


def test_an_idle_connection_the_upstream_closed_is_not_an_error(tern_factory, apps):
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{a.address}"}}))
    with srv.connect() as conn:
        assert conn.get("/name").body == b"a"
        # The application restarts: the pooled connection is stale.
        a.kill()
        (a2,) = [App("a2", a.port, open(os.devnull, "wb"))]
        try:
            assert conn.get("/name").body == b"a2"
        finally:
            a2.kill()


# ---- Upstreams that misbehave ----

BAD_RESPONSES = {
    "bad-status-line": b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok",
    "not-http": b"SSH-2.0-OpenSSH_9.2\r\n",
    "two-lengths": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 40\r\n\r\nok",
    "length-and-chunked": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "header-injection": b"HTTP/1.1 200 OK\r\nX-A: a\rSet-Cookie: evil=1\r\nContent-Length: 2\r\n\r\nok",
    "bare-lf": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "folded": b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
    "endless-head": b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * 100000,
    "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nnothex\r\n",
    "unasked-101": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    "closes-silently": b"",
}


class BadUpstream:
    """Answers every request with the same bytes, then closes (a subclass
    answers in its own way: respond); appends `smuggled` after a valid
    response when asked to."""

    def __init__(self, answer=b""):
        self.answer = answer
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.served = 0  # requests read
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        break
                    data += piece
                self.served += 1
                try:
                    self.respond(conn)
                except OSError:
                    pass

    def respond(self, conn):
        conn.sendall(self.answer)

    def close(self):
        self.listener.close()


# Found wrong only after the head went to the client: the response is cut
# (the connection closes), which a client cannot take for a whole one.
AFTER_HEAD = {"bad-chunk"}


@pytest.mark.parametrize("case", sorted(BAD_RESPONSES))
def test_a_malicious_upstream_is_502_and_the_client_stays_in_step(tern_factory, case):
    bad = BadUpstream(BAD_RESPONSES[case])
    try:
        srv = tern_factory(site([{"prefix": "/bad/", "proxy": {"pass": f"http://127.0.0.1:{bad.port}",
                                                                "read_timeout": "2s"}},
                                 {"prefix": "/"}]))
        srv.write_file("good.txt", b"good\n")
        with srv.connect() as conn:
            if case in AFTER_HEAD:
                with pytest.raises(ConnectionClosed):
                    conn.get("/bad/x")
                return
            resp = conn.get("/bad/x")
            assert resp.status == 502, (case, resp)
            assert b"evil" not in resp.raw_head
            # The next request on the same connection gets its own answer.
            resp = conn.get("/good.txt")
            assert resp.status == 200 and resp.body == b"good\n"
    finally:
        bad.close()


def test_a_second_response_smuggled_after_the_first_never_reaches_a_client(tern_factory):
    bad = BadUpstream(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                      b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled")
    try:
        srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://127.0.0.1:{bad.port}"}}))
        with srv.connect() as conn:
            for _ in range(5):
                resp = conn.get("/x")
                assert resp.status == 200 and resp.body == b"ok"
    finally:
        bad.close()


def test_an_endless_body_is_bounded_and_let_go_with_its_client(tern_factory):
    """An upstream that never stops sending: tern holds at most
    max_temp_file of it for a client that does not read, and closes the
    upstream connection once the client is gone."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    sent = {"bytes": 0, "ended": None}

    def serve():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
        piece = b"e" * 65536
        started = time.monotonic()
        try:
            while time.monotonic() - started < 60:
                conn.sendall(piece)
                sent["bytes"] += len(piece)
        except OSError:
            sent["ended"] = time.monotonic()
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://127.0.0.1:{listener.getsockname()[1]}",
                                                          "max_temp_file": "8MiB"}}), env=LOW_QUARANTINE)
        before = srv.rss_kib()
        sock = socket.create_connection(("127.0.0.1", srv.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(b"GET /endless HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(2)
        # The upstream is held back: what it could send is bounded by the
        # temp file and the socket buffers, not by its will.
        held = sent["bytes"]
        assert held < 64 << 20, held
        assert srv.rss_kib() - before < rss_bound_kib(srv, 24 * 1024)
        got = 0
        while got < 4 << 20:
            got += len(sock.recv(1 << 20))
        sock.close()
        thread.join(timeout=15)
        assert sent["ended"] is not None, "tern kept reading the endless body after its client left"
    finally:
        listener.close()


# ---- tern behind tern ----

def test_tern_proxies_to_tern(tern_factory):
    backend = tern_factory(name="backend")
    data = os.urandom(3 << 20)
    backend.write_file("file.bin", data)
    front = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://127.0.0.1:{backend.port}"}}),
                         name="front")
    with front.connect() as conn:
        for _ in range(3):
            resp = conn.get("/file.bin")
            assert resp.status == 200 and sha256(resp.body) == sha256(data)
        resp = conn.get("/file.bin", [("Range", "bytes=10-19")])
        assert resp.status == 206 and resp.body == data[10:20]
        etag = resp.header("ETag")
        resp = conn.get("/file.bin", [("If-None-Match", etag)])
        assert resp.status == 304 and resp.body == b""
        resp = conn.get("/file.bin", method="HEAD")
        assert resp.status == 200 and resp.header("Content-Length") == str(len(data))
        assert conn.get("/missing").status == 404


# ---- WebSocket ----

def run_async(coro):
    import asyncio
    return asyncio.run(coro)


def test_websocket_sessions_are_relayed_both_ways(tern_factory, apps):
    import aiohttp
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{a.address}"}}))

    async def session():
        async with aiohttp.ClientSession() as client:
            async with client.ws_connect(srv.url("/ws"), max_msg_size=0) as ws:
                await ws.send_str("hello")
                assert (await ws.receive_str()) == "hello"
                big = os.urandom(1 << 20)
                await ws.send_bytes(big)
                assert (await ws.receive_bytes()) == big
                for i in range(100):
                    await ws.send_str(f"m{i}")
                for i in range(100):
                    assert (await ws.receive_str()) == f"m{i}"
    run_async(session())
    # A plain request to the same place still works after the tunnel.
    assert srv.get("/name").body == b"a"


def test_a_thousand_websocket_sessions_at_once(tern_factory, apps):
    import asyncio

    import aiohttp
    from test_load import raise_fd_limit
    sessions = scaled(1000, 200)
    raise_fd_limit(4 * sessions + 200)
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "http://app"}},
                            [group("app", [a], connections=sessions + 10)]),
                       preexec_fn=lambda: raise_fd_limit(4 * sessions + 200))

    async def all_sessions():
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as client:
            async def one(i):
                async with client.ws_connect(srv.url("/ws")) as ws:
                    for j in range(3):
                        await ws.send_str(f"{i}-{j}")
                        assert (await ws.receive_str()) == f"{i}-{j}"
                return True
            results = await asyncio.gather(*(one(i) for i in range(sessions)), return_exceptions=True)
        return results
    results = run_async(all_sessions())
    failures = [r for r in results if r is not True]
    assert not failures, failures[:3]


def test_an_idle_tunnel_closes_and_a_closing_upstream_ends_it(tern_factory, apps):
    import aiohttp
    (a,) = apps("a")
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{a.address}", "read_timeout": "1s"}}))

    async def idle():
        async with aiohttp.ClientSession() as client:
            async with client.ws_connect(srv.url("/ws"), autoping=False, heartbeat=None) as ws:
                await ws.send_str("x")
                assert (await ws.receive_str()) == "x"
                started = asyncio.get_event_loop().time()
                message = await ws.receive(timeout=5)
                return message.type, asyncio.get_event_loop().time() - started
    import asyncio
    kind, waited = run_async(idle())
    assert kind in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.ERROR), kind
    assert 0.5 < waited < 3, waited


def test_a_101_without_an_upgrade_asked_is_502(tern_factory):
    bad = BadUpstream(BAD_RESPONSES["unasked-101"])
    try:
        srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://127.0.0.1:{bad.port}"}}))
        assert srv.get("/x").status == 502
        # Asked for, the same answer is a tunnel (to a server that then closes).
        with srv.connect() as conn:
            conn.send(b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                      b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            resp = conn.read_response(skip_interim=False)
            assert conn.is_closed()  # the upstream closed its end of the tunnel
        assert resp.status == 101
        assert resp.header("Upgrade") == "websocket"
        assert resp.header("Connection").lower() == "upgrade"
    finally:
        bad.close()


# ---- An upstream that sends everything and closes at once ----

BACKENDS = ["epoll", "io_uring"]
BURST_BYTES = 5 << 20
# Each round is another chance for the end of the stream to come while
# tern is not reading.
BURST_ROUNDS = 3


def on_backend(srv, backend):
    """Skips the test when tern could not use the backend it was given (a
    kernel or sandbox without io_uring falls back to epoll, which the log
    says before its "listening on" line)."""
    assert srv.wait_for_log("listening on"), srv.stderr()
    if backend == "io_uring" and "io_uring unavailable" in srv.stderr():
        pytest.skip("io_uring is not available here")


class SlowConn(HttpConn):
    """An HttpConn that reads at most `step` bytes at a time, sleeping
    `pause` after each read."""

    def __init__(self, sock, step=32 << 10, pause=0.002):
        super().__init__(sock)
        self.step, self.pause = step, pause

    def _fill(self):
        chunk = self.sock.recv(self.step)
        if not chunk:
            raise ConnectionClosed(f"connection closed with {len(self.buf)} unparsed bytes")
        self.buf += chunk
        time.sleep(self.pause)


def slow_client(srv, request, idle=0.5):
    """Sends request, then reads nothing for `idle` seconds and slowly
    after that (a SlowConn), so that tern's output to it stays full and
    tern keeps stopping and resuming its reading of the upstream."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", srv.port))
    sock.sendall(request)
    time.sleep(idle)
    return SlowConn(sock)


def burst_response(framing, body):
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
    if framing == "content-length":
        head += b"Content-Length: %d\r\nConnection: close\r\n" % len(body)
    elif framing == "x-accel-buffering":
        head += b"X-Accel-Buffering: no\r\n"
    return head + b"\r\n" + body


@pytest.mark.parametrize("framing, buffering", [("close-delimited", False), ("content-length", False),
                                                ("x-accel-buffering", True)],
                         ids=["close-delimited", "content-length", "x-accel-buffering"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_streamed_response_keeps_its_last_bytes_when_the_upstream_closes_at_once(tern_factory, backend,
                                                                                   framing, buffering):
    """An upstream sends 5 MiB and closes at once while tern, its client
    behind, has stopped reading from it: the client gets every byte, and a
    body delimited by the close is framed whole (chunked) to it."""
    body = os.urandom(BURST_BYTES)
    upstream = BadUpstream(burst_response(framing, body))  # sends its answer, then closes
    try:
        srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://127.0.0.1:{upstream.port}",
                                                          "response_buffering": buffering}}, io=backend))
        on_backend(srv, backend)
        for round_ in range(BURST_ROUNDS):
            with slow_client(srv, b"GET /burst HTTP/1.1\r\nHost: x\r\n\r\n") as conn:
                try:
                    resp = conn.read_response()
                except ConnectionClosed as e:
                    raise AssertionError(f"round {round_}: the response was cut: {e}") from None
            assert resp.status == 200
            if framing == "content-length":
                assert resp.header("Content-Length") == str(BURST_BYTES)
            else:
                assert resp.header("Transfer-Encoding") == "chunked"
            assert len(resp.body) == BURST_BYTES, f"round {round_}: {len(resp.body)} of {BURST_BYTES} bytes"
            assert sha256(resp.body) == sha256(body), f"round {round_}: the body came changed"
    finally:
        upstream.close()


def websocket_frame(opcode, payload):
    """A server's (unmasked) WebSocket frame."""
    if len(payload) < 126:
        return bytes([0x80 | opcode, len(payload)]) + payload
    if len(payload) < 1 << 16:
        return bytes([0x80 | opcode, 126]) + len(payload).to_bytes(2, "big") + payload
    return bytes([0x80 | opcode, 127]) + len(payload).to_bytes(8, "big") + payload


def read_websocket_frame(conn):
    """(opcode, payload) of the next unmasked frame on an HttpConn."""
    first, second = conn._take(2)
    assert not second & 0x80, "a server's frame must not be masked"
    length = second & 0x7F
    if length == 126:
        length = int.from_bytes(conn._take(2), "big")
    elif length == 127:
        length = int.from_bytes(conn._take(8), "big")
    return first & 0x0F, conn._take(length)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_websocket_tunnel_keeps_the_last_frames_when_the_upstream_closes_at_once(tern_factory, backend):
    """An upstream accepts the upgrade, sends 200 frames of 64 KiB and a
    close frame, and closes at once, while tern's client is behind: the
    client gets every frame, then the close frame."""
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
    frames = [os.urandom(64 << 10) for _ in range(200)]
    close = websocket_frame(0x8, (1000).to_bytes(2, "big"))
    upstream = BadUpstream(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" +
                           b"".join(websocket_frame(0x2, f) for f in frames) + close)
    try:
        srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://127.0.0.1:{upstream.port}"}},
                                io=backend))
        on_backend(srv, backend)
        request = (f"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()
        for round_ in range(BURST_ROUNDS):
            with slow_client(srv, request) as conn:
                head = conn.read_head()
                assert head.status == 101, head
                got = []
                try:
                    while True:
                        opcode, payload = read_websocket_frame(conn)
                        if opcode == 0x8:
                            break
                        assert opcode == 0x2 and len(payload) == 64 << 10, (opcode, len(payload))
                        got.append(payload)
                except ConnectionClosed:
                    raise AssertionError(f"round {round_}: the tunnel closed after {len(got)} of {len(frames)} "
                                         "frames, without the close frame") from None
                assert len(got) == len(frames)
                assert got == frames, f"round {round_}: the frames came changed or out of order"
                assert payload == (1000).to_bytes(2, "big")
                assert conn.is_closed()
    finally:
        upstream.close()


def test_a_location_may_have_its_own_connect_timeout(tern_factory):
    """An upstream whose accept queue is full answers no SYN: a connect to
    it waits for the connect timeout, the location's where it sets one (it
    has connections of its own), the group's elsewhere, and is a 504, as
    nginx answers it."""
    with socket.socket() as stuck:
        stuck.bind(("127.0.0.1", 0))
        stuck.listen(0)
        port = stuck.getsockname()[1]
        queued = []
        for _ in range(3):  # fill the queue: later connects are not answered
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            queued.append(s)
        time.sleep(0.2)
        try:
            srv = tern_factory({
                "upstream": [{"name": "stuck", "connect_timeout": "3s",
                              "servers": [{"address": f"127.0.0.1:{port}"}]}],
                "server": [{"location": [
                    {"prefix": "/quick/", "proxy": {"pass": "http://stuck", "connect_timeout": "300ms"}},
                    {"prefix": "/", "proxy": {"pass": "http://stuck"}},
                ]}],
            })
            for path, low, high in (("/quick/x", 0.25, 2.5), ("/x", 2.9, 10.0)):
                started = time.monotonic()
                resp = srv.get(path)
                elapsed = time.monotonic() - started
                assert resp.status == 504, (path, resp)
                assert low <= elapsed <= high, (path, elapsed)
        finally:
            for s in queued:
                s.close()

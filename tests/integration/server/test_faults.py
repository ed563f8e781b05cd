"""Faults between tern and its backends, made by Toxiproxy: php-fpm over
TCP, an HTTP upstream behind the reverse proxy, and MariaDB behind the
users application. Each case turns one fault on (latency past the read
timeout, a stall, a reset, a cut before or inside the response, a narrow
link, bytes in small slices, a refused connection), checks what the client
gets (502, 504, 503, or a response cut where it cannot be trusted) and the
log line, turns it off, and checks that tern recovers and holds no more
descriptors or memory than before."""

import re
import socket
import time

import pytest

from auth_api import SECRET, auth_config, register
from php_fpm import PhpFpm
from php_site import fastcgi_block, start_fastcgi_server
from test_proxy import App, free_ports, site
from tern_server import free_port
from toxiproxy import Toxiproxy

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def toxiproxy(tmp_path_factory):
    proxy = Toxiproxy(tmp_path_factory.mktemp("toxiproxy"))
    yield proxy
    proxy.stop()


_proxies = [0]


def new_proxy(toxiproxy, upstream):
    _proxies[0] += 1
    name = f"p{_proxies[0]}"
    return name, toxiproxy.proxy(name, upstream)


def fetch(srv, path, timeout=30, request_id=None):
    """One request on a fresh connection, read to the close: (status,
    complete, body). complete: the body is whole by its framing (the
    Content-Length, or chunked to its last chunk)."""
    extra = f"X-Request-Id: {request_id}\r\n" if request_id else ""
    with socket.create_connection(("127.0.0.1", srv.port), timeout=timeout) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n".encode())
        data = b""
        try:
            while chunk := sock.recv(1 << 16):
                data += chunk
        except ConnectionResetError:
            pass
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, f"no response head: {data[:200]!r}"
    status = int(head.split(b" ", 2)[1])
    fields = {line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip()
              for line in head.split(b"\r\n")[1:] if b":" in line}
    if b"content-length" in fields:
        return status, len(body) == int(fields[b"content-length"]), body
    if fields.get(b"transfer-encoding") == b"chunked":
        decoded, complete, rest = b"", False, body
        while rest:
            size_line, crlf, rest = rest.partition(b"\r\n")
            if not crlf:
                break
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                complete = rest.startswith(b"\r\n")
                break
            if len(rest) < size + 2:
                break
            decoded, rest = decoded + rest[:size], rest[size + 2:]
        return status, complete, decoded
    return status, True, body


def big_php_body(n):
    """What big.php?bytes=n sends (php/big.php)."""
    fill = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012"
    lines = b"".join(b"%07d " % i + fill + b"\n" for i in range(n // 64 + 1))
    return lines[:n]


def descriptors(srv):
    return len(srv.open_files())


class Baseline:
    """tern's descriptors and memory once warm, to compare after a fault."""

    def __init__(self, srv, warm):
        for _ in range(20):
            warm()
        self.srv = srv
        self.fds = descriptors(srv)
        self.rss = srv.rss_kib()

    def assert_recovered(self, request, slack_fds=2):
        """`request` succeeds again within a few tries, then every time, and
        nothing leaked."""
        for _ in range(10):
            if request():
                break
            time.sleep(0.3)
        else:
            raise AssertionError("no recovery after the fault was removed")
        for _ in range(20):
            assert request(), "a request failed after the recovery"
        # Connections closed in the fault's wake are gone a moment later.
        deadline = time.monotonic() + 10
        while descriptors(self.srv) > self.fds + slack_fds and time.monotonic() < deadline:
            time.sleep(0.1)
        assert descriptors(self.srv) <= self.fds + slack_fds, (self.fds, self.srv.open_files())
        assert self.srv.rss_kib() - self.rss < 16 * 1024, (self.rss, self.srv.rss_kib())


# -- FastCGI: php-fpm over TCP -----------------------------------------------------


@pytest.fixture
def php_faulty(tern_factory, toxiproxy, tmp_path):
    fpm = PhpFpm(tmp_path / "fpm", children=8, tcp_port=free_port()).start()
    name, address = new_proxy(toxiproxy, fpm.pass_address)
    srv = start_fastcgi_server(tern_factory, [fastcgi_block(address, connect_timeout="1s", read_timeout="2s",
                                                            pool=2)])
    yield srv, name
    fpm.cleanup()


def php_ok(srv):
    return lambda: fetch(srv, "/hello.php")[:2] == (200, True)


def backend_errors(srv, backend):
    """The error log's lines about `backend` ("fastcgi", "proxy", ...)."""
    return [line for line in srv.stderr().splitlines() if re.search(rf" (error|warning) .*{backend}", line)]


def assert_logged(srv, backend, before, needle):
    """A new line about the backend, saying `needle`."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        new = backend_errors(srv, backend)[before:]
        if any(needle in line for line in new):
            return
        time.sleep(0.05)
    raise AssertionError(f"no {backend} line with {needle!r}; log:\n{srv.stderr()[-3000:]}")


@pytest.mark.parametrize("kind,attributes,status,log", [
    ("latency", {"latency": 3000}, 504, "no response within 2000 ms"),
    ("timeout", {"timeout": 0}, 504, "no response within 2000 ms"),
    ("reset_peer", {"timeout": 0}, 502, "connection closed before a response: Connection reset by peer"),
    ("limit_data", {"bytes": 20}, 502, "connection closed before a response"),
], ids=["latency", "stall", "reset", "cut-in-head"])
def test_fastcgi_fault_answers_5xx_and_recovers(php_faulty, toxiproxy, kind, attributes, status, log):
    srv, name = php_faulty
    baseline = Baseline(srv, php_ok(srv))
    before = len(backend_errors(srv, "fastcgi"))
    toxiproxy.add(name, kind, **attributes)
    started = time.monotonic()
    got, complete, _ = fetch(srv, "/hello.php", request_id=f"fault-{kind}")
    assert (got, complete) == (status, True)
    assert time.monotonic() - started < 10
    # The line names the request, by the id the client sent.
    assert_logged(srv, "fastcgi", before, f"{log} (request fault-{kind})")
    # Other requests go on meanwhile: static files do not wait on php-fpm.
    assert fetch(srv, "/static.txt")[:2] == (200, True)
    toxiproxy.remove(name, kind)
    baseline.assert_recovered(php_ok(srv))


def test_fastcgi_cut_inside_the_body_ends_the_response_unfinished(php_faulty, toxiproxy):
    srv, name = php_faulty
    baseline = Baseline(srv, php_ok(srv))
    before = len(backend_errors(srv, "fastcgi"))
    toxiproxy.add(name, "limit_data", bytes=200_000)
    status, complete, body = fetch(srv, f"/big.php?bytes={MIB}")
    # The head went out before the cut: the client must not take a short
    # body for the whole one.
    assert status == 200 and not complete and len(body) < MIB
    assert_logged(srv, "fastcgi", before, "connection closed in the middle of the response")
    toxiproxy.remove(name, "limit_data")
    baseline.assert_recovered(php_ok(srv))


@pytest.mark.parametrize("kind,attributes", [
    ("bandwidth", {"rate": 512}),
    ("slicer", {"average_size": 100, "size_variation": 50, "delay": 100}),
], ids=["narrow-link", "sliced"])
def test_fastcgi_slow_or_sliced_backend_still_answers_whole(php_faulty, toxiproxy, kind, attributes):
    srv, name = php_faulty
    baseline = Baseline(srv, php_ok(srv))
    toxiproxy.add(name, kind, **attributes)
    n = 300_000
    status, complete, body = fetch(srv, f"/big.php?bytes={n}")
    assert (status, complete) == (200, True) and body == big_php_body(n)
    toxiproxy.remove(name, kind)
    baseline.assert_recovered(php_ok(srv))


def test_fastcgi_refused_connection_is_502_until_the_backend_returns(php_faulty, toxiproxy):
    srv, name = php_faulty
    baseline = Baseline(srv, php_ok(srv))
    before = len(backend_errors(srv, "fastcgi"))
    toxiproxy.enable(name, False)
    assert fetch(srv, "/hello.php")[0] == 502
    assert_logged(srv, "fastcgi", before, "Connection refused")
    toxiproxy.enable(name, True)
    baseline.assert_recovered(php_ok(srv))


# -- the reverse proxy: an HTTP upstream -------------------------------------------


@pytest.fixture
def proxy_faulty(tern_factory, toxiproxy, tmp_path):
    log = open(tmp_path / "upstream.log", "ab")
    app = App("app", free_ports(1)[0], log)
    name, address = new_proxy(toxiproxy, app.address)
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{address}", "read_timeout": "2s"}}))
    yield srv, name
    app.kill()
    log.close()


def proxy_ok(srv):
    return lambda: fetch(srv, "/name")[:3] == (200, True, b"app")


@pytest.mark.parametrize("kind,attributes,status,log", [
    ("latency", {"latency": 3000}, 504, "no response within 2000 ms"),
    ("timeout", {"timeout": 0}, 504, "no response within 2000 ms"),
    ("reset_peer", {"timeout": 0}, 502, "connection closed before a response: Connection reset by peer"),
    ("limit_data", {"bytes": 10}, 502, "connection closed before a response"),
], ids=["latency", "stall", "reset", "cut-in-head"])
def test_upstream_fault_answers_5xx_and_recovers(proxy_faulty, toxiproxy, kind, attributes, status, log):
    srv, name = proxy_faulty
    baseline = Baseline(srv, proxy_ok(srv))
    before = len(backend_errors(srv, "proxy"))
    toxiproxy.add(name, kind, **attributes)
    started = time.monotonic()
    assert fetch(srv, "/name", request_id=f"fault-{kind}")[:2] == (status, True)
    assert time.monotonic() - started < 10
    assert_logged(srv, "proxy", before, f"{log} (request fault-{kind})")
    toxiproxy.remove(name, kind)
    baseline.assert_recovered(proxy_ok(srv))


def test_upstream_cut_inside_the_body_ends_the_response_unfinished(proxy_faulty, toxiproxy):
    srv, name = proxy_faulty
    baseline = Baseline(srv, proxy_ok(srv))
    before = len(backend_errors(srv, "proxy"))
    toxiproxy.add(name, "limit_data", bytes=300_000)
    status, complete, body = fetch(srv, f"/bytes?n={MIB}")
    assert status == 200 and not complete and len(body) < MIB
    assert_logged(srv, "proxy", before, "connection closed in the middle of the response")
    toxiproxy.remove(name, "limit_data")
    baseline.assert_recovered(proxy_ok(srv))


@pytest.mark.parametrize("kind,attributes", [
    ("bandwidth", {"rate": 512}),
    ("slicer", {"average_size": 100, "size_variation": 50, "delay": 100}),
], ids=["narrow-link", "sliced"])
def test_upstream_slow_or_sliced_still_answers_whole(proxy_faulty, toxiproxy, kind, attributes):
    srv, name = proxy_faulty
    baseline = Baseline(srv, proxy_ok(srv))
    toxiproxy.add(name, kind, **attributes)
    n = 300_000
    status, complete, body = fetch(srv, f"/bytes?n={n}")
    pattern = bytes(range(256)) * 256
    assert (status, complete) == (200, True) and body == (pattern * (n // len(pattern) + 1))[:n]
    toxiproxy.remove(name, kind)
    baseline.assert_recovered(proxy_ok(srv))


def test_upstream_refused_connection_is_502_until_it_returns(proxy_faulty, toxiproxy):
    srv, name = proxy_faulty
    baseline = Baseline(srv, proxy_ok(srv))
    before = len(backend_errors(srv, "proxy"))
    toxiproxy.enable(name, False)
    assert fetch(srv, "/name")[0] == 502
    assert_logged(srv, "proxy", before, "Connection refused")
    toxiproxy.enable(name, True)
    baseline.assert_recovered(proxy_ok(srv))


# -- the users application: MariaDB -------------------------------------------------


@pytest.mark.parametrize("kind,attributes", [
    ("timeout", {"timeout": 0}),
    ("reset_peer", {"timeout": 0}),
], ids=["stall", "reset"])
def test_database_fault_answers_503_and_recovers(tern_factory, toxiproxy, mysql_db, kind, attributes):
    server = mysql_db.server
    name, address = new_proxy(toxiproxy, f"{server.bind_address}:{server.port}")
    url = mysql_db.url_tcp.replace(f"{server.bind_address}:{server.port}", address)
    srv = tern_factory(auth_config(url, secret=SECRET))
    srv.write_file("static.txt", "static\n")
    users = [0]

    def register_ok():
        users[0] += 1
        return register(srv, f"user{users[0]}", "a long enough password").status == 201

    baseline = Baseline(srv, register_ok)
    before = len(backend_errors(srv, "mysql://"))
    toxiproxy.add(name, kind, **attributes)
    started = time.monotonic()
    resp = register(srv, "during", "a long enough password")
    assert resp.status == 503, resp
    # The database's read timeout (5 s) bounds the wait.
    assert time.monotonic() - started < 12
    assert_logged(srv, "mysql://", before, "insert user failed")
    # Static files are served meanwhile.
    assert fetch(srv, "/static.txt")[:2] == (200, True)
    toxiproxy.remove(name, kind)
    baseline.assert_recovered(register_ok, slack_fds=4)

"""tern behind a load balancer: a real HAProxy in front, sending the PROXY
protocol (versions 1 and 2, plain and under TLS, HTTP/1.1 and HTTP/2) or
X-Forwarded-For; the client it names is the one allow/deny, the access log,
`return`'s $remote_addr and the fields sent upstream see. A peer outside
real_ip.from is not believed: its X-Forwarded-For is ignored and its PROXY
header closes the connection; malformed headers, whole or a byte at a
time, close the connection and the server serves on.

Loopback has a whole /8: the clients bind 127.0.0.2 and 127.0.0.3, HAProxy
and the test's own direct connections come from 127.0.0.1, the only
trusted address."""

import json
import tomllib
import socket
import subprocess
import time

import pytest

from auth_api import SECRET, auth_config, error_of, login, register
from haproxy import HAProxy
from php_site import fastcgi_block, start_fastcgi_server
from test_access import wait_for_lines
from test_proxy import apps  # noqa: F401 (a fixture)
from http_client import HttpConn
from tern_server import REPO_ROOT, merge

TRUSTED = ["127.0.0.1/32"]
LOG_FORMAT = "$remote_addr $realip_remote_addr $proxy_protocol_addr $request_uri $status"


@pytest.fixture
def haproxy(tmp_path):
    """start(mode, server_lines, frontend_lines=(), bind_options="") -> a
    running HAProxy (haproxy.HAProxy)."""
    started = []

    def start(mode, server_lines, frontend_lines=(), bind_options=""):
        proxy = HAProxy(tmp_path / f"haproxy{len(started)}", mode, server_lines, frontend_lines, bind_options)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.stop()


def site(real_ip, locations=(), **extra):
    return {
        "access_log": "access.log",
        "access_log_format": LOG_FORMAT,
        "server": [{
            "real_ip": real_ip,
            "location": [
                {"prefix": "/lan/", "allow": ["127.0.0.2/32"], "return": {"status": 200, "body": "inside"}},
                {"prefix": "/ip", "return": {"status": 200, "body": "$remote_addr"}},
                *locations,
            ],
        }],
        **extra,
    }


def ask(port, path, source, headers=()):
    """One request from `source` to 127.0.0.1:port on a fresh connection."""
    with HttpConn.open(port, source=source) as conn:
        return conn.get(path, headers)


def closed_without_answer(sock, timeout=10.0):
    """Whether the server closed `sock` (an end or a reset) without a byte."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("send", ["send-proxy", "send-proxy-v2"])
def test_haproxy_sending_the_proxy_protocol_names_the_client(tern_factory, haproxy, send):
    srv = tern_factory(site({"from": TRUSTED, "header": "proxy_protocol"}), listen_flags="proxy_protocol")
    lb = haproxy("tcp", [f"server tern 127.0.0.1:{srv.port} {send}"])
    assert ask(lb.port, "/ip", "127.0.0.2").body == b"127.0.0.2"
    resp = ask(lb.port, "/lan/x", "127.0.0.2")
    assert (resp.status, resp.body) == (200, b"inside")
    assert ask(lb.port, "/lan/x", "127.0.0.3").status == 403
    # Keep-alive: every request of the connection is the client's.
    with HttpConn.open(lb.port, source="127.0.0.3") as conn:
        for _ in range(3):
            assert conn.get("/ip").body == b"127.0.0.3"
    lines = wait_for_lines(srv.workdir / "access.log", 6)
    assert lines[0] == "127.0.0.2 127.0.0.1 127.0.0.2 /ip 200", lines
    assert lines[2] == "127.0.0.3 127.0.0.1 127.0.0.3 /lan/x 403", lines


def test_the_proxy_protocol_comes_before_tls_and_serves_http2(tern_factory, haproxy, pki):
    cert, key = pki.issue("a.test")
    srv = tern_factory(site({"from": TRUSTED, "header": "proxy_protocol"}, tls={"cert": cert, "key": key}),
                       tls=True, listen_flags="proxy_protocol")
    lb = haproxy("tcp", [f"server tern 127.0.0.1:{srv.port} send-proxy-v2"])
    for version in ("--http1.1", "--http2"):
        proc = subprocess.run(["curl", "-sS", "--max-time", "30", "--cacert", str(pki.ca), "--resolve",
                               f"a.test:{lb.port}:127.0.0.1", "--interface", "127.0.0.2", version,
                               "-w", " %{http_version}", f"https://a.test:{lb.port}/ip"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout in ("127.0.0.2 1.1", "127.0.0.2 2"), (version, proc.stdout)
    lines = wait_for_lines(srv.workdir / "access.log", 2)
    assert all(line.startswith("127.0.0.2 127.0.0.1 127.0.0.2 /ip 200") for line in lines), lines


def test_x_forwarded_for_from_haproxy_names_the_client_and_goes_upstream(tern_factory, haproxy, apps):
    (app,) = apps("app")
    srv = tern_factory(site({"from": TRUSTED},
                            [{"prefix": "/echo", "proxy": {"pass": f"http://{app.address}"}}]))
    lb = haproxy("http", [f"server tern 127.0.0.1:{srv.port}"], ["option forwardfor"])
    # The client's own claim comes before the address HAProxy saw.
    resp = ask(lb.port, "/echo", "127.0.0.2", [("X-Forwarded-For", "198.51.100.66")])
    assert resp.status == 200
    seen = {}
    for name, value in json.loads(resp.body)["headers"]:
        seen.setdefault(name.lower(), []).append(value)
    assert seen["x-real-ip"] == ["127.0.0.2"], seen
    assert seen["x-forwarded-for"] == ["198.51.100.66, 127.0.0.2, 127.0.0.1"], seen
    assert ask(lb.port, "/lan/x", "127.0.0.2").status == 200
    assert ask(lb.port, "/lan/x", "127.0.0.3").status == 403
    lines = wait_for_lines(srv.workdir / "access.log", 3)
    assert lines[0] == "127.0.0.2 127.0.0.1 - /echo 200", lines


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_an_upstream_behind_haproxy_accept_proxy_sees_each_client(tern_factory, haproxy, apps, version):
    (app,) = apps("app")
    # HAProxy reads the header tern sends (accept-proxy) and tells the app
    # the client it named.
    lb = haproxy("http", [f"server app {app.address}"], ["http-request set-header X-Haproxy-Src %[src]"],
                 bind_options="accept-proxy")
    health = {"path": "/health", "interval": "200ms", "timeout": "500ms", "rise": 1, "fall": 1}
    srv = tern_factory(site({"from": TRUSTED}, [{"prefix": "/echo", "proxy": {"pass": "http://lb"}}],
                            upstream=[{"name": "lb", "proxy_protocol": version, "health": health,
                                       "servers": [{"address": f"127.0.0.1:{lb.port}"}]}]))
    time.sleep(1.0)  # health checks through HAProxy, each with a LOCAL header
    # Connections to the upstream are per client: each request's is its own.
    for source in ("127.0.0.2", "127.0.0.3", "127.0.0.2"):
        with HttpConn.open(srv.port, source=source) as conn:
            for _ in range(2):
                resp = conn.get("/echo")
                assert resp.status == 200, resp.body
                fields = {name.lower(): value for name, value in json.loads(resp.body)["headers"]}
                assert fields["x-haproxy-src"] == source, fields
    assert "marked down" not in srv.stderr(), srv.stderr()


def test_the_proxy_protocol_goes_ahead_of_tls_to_an_https_upstream(tern_factory, haproxy, apps, pki, tmp_path):
    (app,) = apps("app")
    cert, key = pki.issue("lb.test")
    combined = tmp_path / "lb.pem"
    combined.write_text(open(cert).read() + open(key).read())
    # HAProxy reads the header, then terminates TLS (accept-proxy ssl).
    lb = haproxy("http", [f"server app {app.address}"], ["http-request set-header X-Haproxy-Src %[src]"],
                 bind_options=f"accept-proxy ssl crt {combined}")
    srv = tern_factory(site({"from": TRUSTED}, [{"prefix": "/echo", "proxy": {
        "pass": "https://lb", "tls": {"ca": str(pki.ca), "name": "lb.test"}}}],
        upstream=[{"name": "lb", "proxy_protocol": "v2", "servers": [{"address": f"127.0.0.1:{lb.port}"}]}]))
    for source in ("127.0.0.2", "127.0.0.3", "127.0.0.2"):
        with HttpConn.open(srv.port, source=source) as conn:
            for _ in range(2):
                resp = conn.get("/echo")
                assert resp.status == 200, (resp.body, srv.stderr()[-2000:])
                fields = {name.lower(): value for name, value in json.loads(resp.body)["headers"]}
                assert fields["x-haproxy-src"] == source, fields


class Front:
    """Where a test's clients connect: HAProxy's port, with tern's connect()."""

    def __init__(self, port):
        self.port = port

    def connect(self, source=None):
        return HttpConn.open(self.port, source=source)


def test_the_login_throttle_counts_each_client_behind_the_proxy(tern_factory, haproxy, tmp_path):
    (tmp_path / "db").mkdir()
    srv = tern_factory(merge(auth_config(f"sqlite:{tmp_path / 'db' / 'users.db'}", secret=SECRET, login_attempts=3),
                             {"real_ip": {"from": TRUSTED}}))
    lb = Front(haproxy("http", [f"server tern 127.0.0.1:{srv.port}"], ["option forwardfor"]).port)
    assert register(lb, "mallory", "mallory password", source="127.0.0.3").status == 201
    for i in range(3):
        error_of(login(lb, "mallory", f"guess {i}", source="127.0.0.2"), 401)
    error_of(login(lb, "mallory", "mallory password", source="127.0.0.2"), 429)
    # Every request reaches tern from HAProxy's address; the other client
    # behind it is not throttled for the first one's guesses.
    assert login(lb, "mallory", "mallory password", source="127.0.0.3").status == 200


def test_php_sees_the_client_behind_the_proxy_in_remote_addr(tern_factory, haproxy, fpm):
    srv = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address)], {"real_ip": {"from": TRUSTED}})
    lb = haproxy("http", [f"server tern 127.0.0.1:{srv.port}"], ["option forwardfor"])
    resp = ask(lb.port, "/echo.php", "127.0.0.2")
    assert resp.status == 200, resp.body[:2000]
    env = json.loads(resp.body)["server"]
    assert env["REMOTE_ADDR"] == "127.0.0.2", env
    # What the client sent comes to PHP as it was.
    assert env["HTTP_X_FORWARDED_FOR"] == "127.0.0.2", env
    # Straight from an untrusted client, its own claim is not believed.
    resp = ask(srv.port, "/echo.php", "127.0.0.3", [("X-Forwarded-For", "127.0.0.2")])
    assert json.loads(resp.body)["server"]["REMOTE_ADDR"] == "127.0.0.3"


def test_an_untrusted_peers_forwarded_fields_are_ignored(tern_factory):
    srv = tern_factory(site({"from": TRUSTED}))
    spoof = [("X-Forwarded-For", "127.0.0.2"), ("X-Real-IP", "127.0.0.2")]
    assert ask(srv.port, "/ip", "127.0.0.3", spoof).body == b"127.0.0.3"
    assert ask(srv.port, "/lan/x", "127.0.0.3", spoof).status == 403
    # From the trusted address the same field is believed.
    assert ask(srv.port, "/ip", "127.0.0.1", spoof).body == b"127.0.0.2"
    x_real_ip = tern_factory(site({"from": TRUSTED, "header": "X-Real-IP"}))
    assert ask(x_real_ip.port, "/ip", "127.0.0.1", spoof).body == b"127.0.0.2"
    assert ask(x_real_ip.port, "/ip", "127.0.0.3", spoof).body == b"127.0.0.3"


def test_a_proxy_header_from_outside_real_ip_from_closes_the_connection(tern_factory):
    srv = tern_factory(site({"from": TRUSTED, "header": "proxy_protocol"}), listen_flags="proxy_protocol")
    with socket.create_connection(("127.0.0.1", srv.port), source_address=("127.0.0.3", 0), timeout=10) as sock:
        sock.sendall(b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 80\r\nGET /ip HTTP/1.1\r\nHost: a\r\n\r\n")
        assert closed_without_answer(sock)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 80\r\nGET /ip HTTP/1.1\r\nHost: a\r\n\r\n")
        assert sock.recv(65536).endswith(b"127.0.0.2")


def test_a_blocked_client_named_by_a_proxy_header_is_closed_and_the_server_serves_on(tern_factory):
    """Regression: the close of a connection its PROXY header's client
    refused was announced to the HTTP server, which never had it (an abort)."""
    srv = tern_factory(site({"from": TRUSTED, "header": "proxy_protocol"}, blocked=["192.0.2.0/24"]),
                       listen_flags="proxy_protocol")
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(b"PROXY TCP4 192.0.2.7 127.0.0.1 5000 80\r\nGET /ip HTTP/1.1\r\nHost: a\r\n\r\n")
            assert closed_without_answer(sock)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 80\r\nGET /ip HTTP/1.1\r\nHost: a\r\n\r\n")
        assert sock.recv(65536).endswith(b"127.0.0.2")


V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
MALFORMED = [
    b"GET /ip HTTP/1.1\r\nHost: a\r\n\r\n",                     # no header at all
    b"PROXY TCP4 127.0.0.2 127.0.0.1 5000\r\n",                  # a word short
    b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 99999\r\n",            # a port out of range
    b"PROXY TCP6 127.0.0.2 127.0.0.1 5000 80\r\n",               # the wrong family
    b"PROXY UNKNOWN " + b"x" * 200,                              # no end within 107 bytes
    V2_SIGNATURE + b"\x22\x11\x00\x0c" + bytes(12),              # command 2
    V2_SIGNATURE + b"\x21\x11\x00\x08" + bytes(8),               # shorter than its addresses
    V2_SIGNATURE + b"\x21\x11\xff\xff" + bytes(64),              # longer than 4096 bytes
]


@pytest.mark.parametrize("piecewise", [False, True], ids=["whole", "byte-by-byte"])
def test_malformed_proxy_headers_close_the_connection_and_the_server_serves_on(tern_factory, piecewise):
    srv = tern_factory(site({"from": TRUSTED, "header": "proxy_protocol"}), listen_flags="proxy_protocol")
    for bad in MALFORMED:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                if piecewise:
                    for i in range(len(bad)):
                        sock.sendall(bad[i:i + 1])
                        time.sleep(0.001)
                else:
                    sock.sendall(bad)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused before the last byte
            assert closed_without_answer(sock), bad
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 80\r\nGET /ip HTTP/1.1\r\nHost: a\r\n\r\n")
        assert sock.recv(65536).endswith(b"127.0.0.2")
    assert "PROXY protocol:" in srv.stderr()


def readme_example(after, lang):
    """The first ```lang block of README.md after the text `after`."""
    readme = (REPO_ROOT / "README.md").read_text()
    rest = readme[readme.index(after):]
    start = rest.index(f"```{lang}\n") + len(lang) + 4
    return rest[start:rest.index("```\n", start)]


def test_the_readme_haproxy_example_runs_as_written(tern_factory, haproxy, pki):
    """README's worked example, its addresses moved to loopback: HAProxy's
    backend lines and tern's settings as they are written there."""
    haproxy_cfg = readme_example("A worked example: HAProxy in front", "")
    tern_toml = tomllib.loads(readme_example("# haproxy.cfg", "toml"))
    (listen,) = tern_toml.pop("listen")
    address, *flags = listen.split()
    assert address == "0.0.0.0:443" and flags == ["tls", "proxy_protocol"], listen
    assert tern_toml["real_ip"]["from"] == ["10.0.0.2/32"], tern_toml
    tern_toml["real_ip"]["from"] = TRUSTED  # HAProxy's host, here
    cert, key = pki.issue("a.test")
    srv = tern_factory({**tern_toml, "access_log": "access.log", "tls": {"cert": cert, "key": key},
                        "server": [{"location": [{"prefix": "/ip", "return": {"status": 200, "body": "$remote_addr"}}]}]},
                       tls=True, listen_flags=" ".join(flags[1:]))
    backend = haproxy_cfg[haproxy_cfg.index("backend tern"):].splitlines()[1:]
    mode = [line.split()[1] for line in backend if line.split()[0] == "mode"]
    servers = [line.strip().split() for line in backend if line.split()[0] == "server"]
    assert mode == ["tcp"] and servers, haproxy_cfg
    lb = haproxy(mode[0], [" ".join(["server", servers[0][1], f"127.0.0.1:{srv.port}", *servers[0][3:]])])
    proc = subprocess.run(["curl", "-sS", "--max-time", "30", "--cacert", str(pki.ca), "--resolve",
                           f"a.test:{lb.port}:127.0.0.1", "--interface", "127.0.0.2", f"https://a.test:{lb.port}/ip"],
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "127.0.0.2"), proc.stderr
    lines = wait_for_lines(srv.workdir / "access.log", 1)
    assert lines[0].startswith('127.0.0.2 via 127.0.0.1 "GET /ip HTTP/'), lines


def test_a_listener_for_the_proxy_protocol_needs_networks_to_trust(tmp_path):
    from tern_server import TERN_BIN
    config = tmp_path / "tern.toml"
    config.write_text('listen = ["127.0.0.1:1 proxy_protocol"]\n')
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(config)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{config}:1: listen: 127.0.0.1:1 proxy_protocol: no network may send the header" in proc.stderr, \
        proc.stderr


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from test_tls import Pki
    return Pki(tmp_path_factory.mktemp("pki"))

"""HTTP/2 end to end: h2c by prior knowledge on an address marked "h2c",
h2 by ALPN on a TLS address, with real clients (curl, nghttp, h2load,
headless Chromium) for files, ranges, 304, compression, PHP, the users app
and the reverse proxy; the config's flags and mistakes; a graceful stop;
and h2spec, the conformance suite. The attacks are in test_http2_attacks.py."""

import gzip
import json
import os
import re
import socket
import shutil
import signal
import subprocess
import time

import pytest

import h2_frames as h2
from auth_api import auth_config
from php_site import fastcgi_block, start_fastcgi_server
from tern_server import TERN_BIN, link_into, sha256


pytestmark = pytest.mark.skipif(shutil.which("nghttp") is None or shutil.which("h2load") is None,
                                reason="nghttp2-client is not installed")


def curl(url, *args, check=True):
    """(http version, status, headers, body) of one curl request;
    curl's own arguments (--http2-prior-knowledge, --cacert) come in args."""
    proc = subprocess.run(["curl", "-sS", "--max-time", "60", "-D", "/dev/stderr", "-o", "-",
                           "-w", "", *args, url], capture_output=True, timeout=90)
    if check:
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    head = proc.stderr.decode("latin-1")
    blocks = [b for b in head.split("\r\n\r\n") if b.startswith("HTTP/")]
    if not blocks:
        return None, None, {}, proc.stdout
    lines = blocks[-1].split("\r\n")
    version, status = lines[0].split(" ")[:2]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return version, int(status), headers, proc.stdout


def h2c(server, path, *args):
    return curl(server.url(path), "--http2-prior-knowledge", *args)


@pytest.fixture
def h2c_server(tern_factory):
    return tern_factory(listen_flags="h2c")


@pytest.mark.parametrize("size", [1, 1000, 100 * 1024, 3 * 1024 * 1024 + 5])
def test_files_arrive_whole_over_h2c(h2c_server, size):
    data = os.urandom(size)
    h2c_server.write_file("f.bin", data)
    version, status, headers, body = h2c(h2c_server, "/f.bin")
    assert (version, status) == ("HTTP/2", 200)
    assert headers["content-length"] == str(size)
    assert sha256(body) == sha256(data)


def test_a_64_mib_file_and_a_range_of_it_over_h2c(h2c_server, big_file):
    path, digest = big_file
    link_into(h2c_server, path, "big.bin")
    version, status, _, body = h2c(h2c_server, "/big.bin")
    assert (version, status) == ("HTTP/2", 200) and sha256(body) == digest
    with open(path, "rb") as f:
        f.seek(10_000_000)
        expected = f.read(1_000_001)
    version, status, headers, body = h2c(h2c_server, "/big.bin", "-r", "10000000-11000000")
    assert (version, status) == ("HTTP/2", 206)
    assert headers["content-range"] == f"bytes 10000000-11000000/{64 << 20}"
    assert body == expected


def test_304_and_compression_over_h2c(h2c_server):
    text = b"The quick brown fox jumps over the lazy dog.\n" * 200
    h2c_server.write_file("fox.txt", text)
    h2c_server.write_file("fox.txt.gz", gzip.compress(text))
    _, status, headers, _ = h2c(h2c_server, "/fox.txt")
    assert status == 200
    _, status, _, body = h2c(h2c_server, "/fox.txt", "-H", f"If-None-Match: {headers['etag']}")
    assert status == 304 and body == b""
    _, status, headers, body = h2c(h2c_server, "/fox.txt", "--compressed")
    assert status == 200 and headers["content-encoding"] == "gzip" and body == text


def test_http1_goes_on_beside_h2c_and_other_addresses_do_not_speak_it(h2c_server, tern_factory):
    h2c_server.write_file("a.txt", b"alpha\n")
    version, status, _, body = curl(h2c_server.url("/a.txt"))
    assert (version, status, body) == ("HTTP/1.1", 200, b"alpha\n")
    assert f"http2: 127.0.0.1:{h2c_server.port} takes HTTP/2 with prior knowledge (h2c)" in h2c_server.stderr()
    plain = tern_factory()
    plain.write_file("a.txt", b"alpha\n")
    with plain.connect() as conn:
        conn.send(h2.PREFACE + h2.frame(h2.SETTINGS, 0, 0))
        resp = conn.read_response()
        assert resp.status in (400, 505), resp.status


def test_100_concurrent_streams_on_one_connection(h2c_server):
    h2c_server.write_file("f.txt", os.urandom(1024))
    out = subprocess.run(["h2load", "-c", "1", "-m", "100", "-n", "100", h2c_server.url("/f.txt")],
                         capture_output=True, timeout=60).stdout.decode()
    assert "100 succeeded, 0 failed, 0 errored" in out, out
    assert re.search(r"status codes: 100 2xx", out), out
    # nghttp: 100 requests at once, every one answered on the one connection.
    paths = [h2c_server.url(f"/f.txt?{i}") for i in range(100)]
    out = subprocess.run(["nghttp", "-n", "-s", "-m", "1", *paths], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode().count("/f.txt?") == 100


def test_the_access_log_says_http2(tern_factory):
    server = tern_factory({"access_log": "access.log"}, listen_flags="h2c")
    server.write_file("a.txt", b"alpha\n")
    h2c(server, "/a.txt")
    curl(server.url("/a.txt"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = server.access_log_path.read_text().splitlines() if server.access_log_path.exists() else []
        if len(lines) >= 2:
            break
        time.sleep(0.1)
    assert '"GET /a.txt HTTP/2.0" 200 6' in lines[0], lines
    assert '"GET /a.txt HTTP/1.1" 200 6' in lines[1], lines


def test_php_over_h2c_with_a_streamed_upload(fpm, tern_factory, tmp_path):
    server = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address)], listen_flags="h2c")
    version, status, _, body = h2c(server, "/echo.php")
    assert (version, status) == ("HTTP/2", 200), body
    assert json.loads(body)["server"]["SERVER_PROTOCOL"] == "HTTP/2.0"
    # A HEAD's stream ends with its head (see test_the_reverse_proxy_over_h2c).
    for script in ("/hello.php", "/big.php"):
        version, status, _, out = h2c(server, script, "-I")
        assert (version, status) == ("HTTP/2", 200) and out.endswith(b"\r\n\r\n")
    assert h2c(server, "/hello.php")[1] == 200
    upload = tmp_path / "upload.bin"
    data = os.urandom(5 * 1024 * 1024 + 3)
    upload.write_bytes(data)
    # Without a length (as a browser's stream): announced as chunked to the handler.
    _, status, _, body = h2c(server, "/upload.php", "-H", "Transfer-Encoding:", "--data-binary", f"@{upload}")
    assert status == 200, body
    seen = json.loads(body)
    assert seen["length"] == len(data) and seen["sha256"] == sha256(data)


def test_the_users_app_over_h2c(tern_factory, tmp_path):
    server = tern_factory(auth_config(f"sqlite:{tmp_path}/users.db"), listen_flags="h2c")
    creds = json.dumps({"username": "alice", "password": "correct horse battery"})
    json_type = ["-H", "Content-Type: application/json"]
    _, status, _, body = h2c(server, "/api/register", *json_type, "--data-binary", creds)
    assert status == 201, body
    _, status, headers, body = h2c(server, "/api/login", *json_type, "--data-binary", creds)
    assert status == 200, body
    cookie = headers["set-cookie"].split(";")[0]
    _, status, _, body = h2c(server, "/api/me", "-H", f"Cookie: {cookie}")
    assert status == 200 and json.loads(body)["username"] == "alice"


def test_the_reverse_proxy_over_h2c(tern_factory, tmp_path):
    from test_proxy import App, free_ports, pattern_bytes, site
    (port,) = free_ports(1)
    log = open(tmp_path / "upstream.log", "ab")
    app = App("a", port, log, ())
    try:
        server = tern_factory({**site({"prefix": "/", "body_bytes": "64MiB",
                                       "proxy": {"pass": f"http://{app.address}"}}), "access_log": "access.log"},
                              listen_flags="h2c")
        upload = tmp_path / "up.bin"
        body = pattern_bytes(3 << 20)
        upload.write_bytes(body)
        version, status, _, out = h2c(server, "/sha256", "--data-binary", f"@{upload}")
        assert (version, status) == ("HTTP/2", 200), out
        assert json.loads(out) == {"sha256": sha256(body), "length": len(body), "name": "a"}
        version, status, _, out = h2c(server, f"/bytes?n={5 << 20}")
        assert (version, status) == ("HTTP/2", 200) and out == pattern_bytes(5 << 20)
        # A HEAD's stream ends with its head while the upstream still sends
        # the body (once a crash: the relay wrote to the ended exchange).
        for n in (5, 5 << 20):
            version, status, headers, out = h2c(server, f"/bytes?n={n}", "-I")
            # (-I: curl writes the head where the body would go; no body follows)
            assert (version, status) == ("HTTP/2", 200) and out.endswith(b"\r\n\r\n")
            assert headers["content-length"] == str(n)
        version, status, _, out = h2c(server, "/bytes?n=10")
        assert (version, status) == ("HTTP/2", 200) and out == pattern_bytes(10)
        # ... and each HEAD is logged as answered.
        deadline = time.monotonic() + 10
        while True:
            log_text = server.access_log_path.read_text() if server.access_log_path.exists() else ""
            if log_text.count('"HEAD /bytes?n=') == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert f'"HEAD /bytes?n={5 << 20} HTTP/2.0" 200 0' in log_text, log_text
        assert '"HEAD /bytes?n=5 HTTP/2.0" 200 0' in log_text, log_text
    finally:
        app.kill()
        log.close()


def test_a_head_over_h2c_to_a_cached_location_fills_the_entry(tern_factory, tmp_path):
    from test_proxy import App, free_ports, pattern_bytes, site
    (port,) = free_ports(1)
    log = open(tmp_path / "upstream.log", "ab")
    app = App("a", port, log, ())
    try:
        cache = [{"name": "pages", "path": str(tmp_path / "cache")}]
        server = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{app.address}", "cache": {
            "zone": "pages", "valid": {"200": "10m"}}}}, cache=cache), listen_flags="h2c")
        for n in (5, 1 << 20):
            version, status, headers, out = h2c(server, f"/bytes?n={n}", "-I")
            # (-I: curl writes the head where the body would go; no body follows)
            assert (version, status) == ("HTTP/2", 200) and out.endswith(b"\r\n\r\n")
            assert headers["content-length"] == str(n) and headers["cache-status"] == "tern; fwd=uri-miss"
            # The HEAD asked the application for a GET, and its stream ended
            # with the head: the call read the body on for the entry, so the
            # GET after it is answered from the entry with the whole body (a
            # hit, or collapsed onto the fill if it is still under way).
            for _ in range(2):
                version, status, headers, out = h2c(server, f"/bytes?n={n}")
                assert status == 200 and out == pattern_bytes(n)
                assert headers["cache-status"].startswith(("tern; hit", "tern; fwd=uri-miss; collapsed")), headers
        # A range on a miss: its stream ends with the range, and the call
        # reads the rest on for the entry.
        n = 3 << 20
        version, status, headers, out = h2c(server, f"/bytes?n={n}", "-r", "1000-1999")
        assert (version, status) == ("HTTP/2", 206) and out == pattern_bytes(n)[1000:2000]
        assert headers["content-range"] == f"bytes 1000-1999/{n}" and headers["cache-status"] == "tern; fwd=uri-miss"
        version, status, headers, out = h2c(server, f"/bytes?n={n}")
        assert status == 200 and out == pattern_bytes(n)
        assert headers["cache-status"].startswith(("tern; hit", "tern; fwd=uri-miss; collapsed")), headers
    finally:
        app.kill()
        log.close()


def test_a_stopping_server_says_goaway_and_finishes_its_streams(tern_factory):
    server = tern_factory(listen_flags="h2c")
    server.write_file("big.bin", os.urandom(4 << 20))
    # Windows wide open; the client reads nothing until the server is told to stop.
    with h2.H2Socket(server.port, initial_settings=h2.settings(initial_window_size=2**31 - 1)) as conn:
        conn.send(h2.frame(h2.WINDOW_UPDATE, 0, 0, (2**31 - 1 - 65535).to_bytes(4, "big")))
        conn.send(h2.headers(1, h2.request_block("/big.bin")))
        time.sleep(0.3)
        server.signal(signal.SIGTERM)
        frames = conn.frames_until_close(timeout=20)
    goaways = [payload for kind, _, _, payload in frames if kind == h2.GOAWAY]
    assert goaways and int.from_bytes(goaways[0][4:8], "big") == h2.NO_ERROR, goaways
    assert int.from_bytes(goaways[0][:4], "big") == 1  # stream 1 is taken and will finish
    data = sum(len(payload) for kind, _, stream_id, payload in frames if kind == h2.DATA and stream_id == 1)
    assert data == 4 << 20
    assert server.wait_exit() == 0


# ---- over TLS (ALPN) ----

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from test_tls import Pki
    return Pki(tmp_path_factory.mktemp("pki"))


def https_curl(server, pki, path, *args):
    return curl(f"https://a.test:{server.port}{path}", "--cacert", str(pki.ca), "--resolve",
                f"a.test:{server.port}:127.0.0.1", *args)


def test_tls_offers_h2_by_alpn_and_http1_still_works(tern_factory, pki, big_file):
    cert, key = pki.issue("a.test")
    server = tern_factory({"tls": {"cert": cert, "key": key}}, tls=True)
    data = os.urandom(300_000)
    server.write_file("f.bin", data)
    version, status, _, body = https_curl(server, pki, "/f.bin", "--http2")
    assert (version, status) == ("HTTP/2", 200) and body == data
    version, status, _, body = https_curl(server, pki, "/f.bin", "--http1.1")
    assert (version, status) == ("HTTP/1.1", 200) and body == data
    path, digest = big_file
    link_into(server, path, "big.bin")
    version, _, _, body = https_curl(server, pki, "/big.bin", "--http2")
    assert version == "HTTP/2" and sha256(body) == digest
    assert "ALPN h2, http/1.1" in server.stderr()


def test_no_h2_and_http2_off_keep_tls_on_http1(tern_factory, pki):
    cert, key = pki.issue("a.test")
    for flags, extra in (("no-h2", {}), ("", {"http2": {"enabled": False}})):
        server = tern_factory({"tls": {"cert": cert, "key": key}, **extra}, tls=True, listen_flags=flags)
        server.write_file("a.txt", b"alpha\n")
        version, status, _, _ = https_curl(server, pki, "/a.txt", "--http2")
        assert (version, status) == ("HTTP/1.1", 200), (flags, extra)
        assert "ALPN http/1.1," in server.stderr()


def test_chromium_loads_the_demo_over_h2(tern_factory, pki, tmp_path):
    from cdp import Browser, find_chromium
    from test_tls import Pki
    from tern_server import REPO_ROOT
    if find_chromium() is None:
        pytest.skip("chromium is not installed")
    cert, key = pki.issue("a.test")
    spki = Pki.spki(cert)
    site = tmp_path / "site"
    shutil.copytree(REPO_ROOT / "www", site, ignore=shutil.ignore_patterns("tone.wav", "*.gz"))
    server = tern_factory({"static": {"root": str(site)}, "tls": {"cert": cert, "key": key}}, tls=True)
    args = [f"--ignore-certificate-errors-spki-list={spki}", "--host-resolver-rules=MAP a.test 127.0.0.1"]
    with Browser(extra_args=args) as browser:
        page = browser.new_page()
        page.call("Network.enable")
        page.goto(f"https://a.test:{server.port}/gallery.html")
        # (The PNG is made by ./scripts/run, so a clean checkout has none.)
        page.wait_for("[...document.images].filter(i => i.src.endsWith('.svg'))"
                      ".every(i => i.complete && i.naturalWidth > 0)")
        protocols = {}
        for _, method, params in browser.events:
            if method == "Network.responseReceived":
                response = params["response"]
                protocols[response["url"].split(str(server.port), 1)[-1]] = (response["protocol"],
                                                                            response["status"])
    assert protocols.get("/gallery.html") == ("h2", 200), protocols
    assert protocols.get("/style.css") == ("h2", 200), protocols
    images = [path for path in protocols if path.endswith(".svg")]
    assert len(images) >= 3 and all(protocols[p] == ("h2", 200) for p in images), protocols


def test_listen_flag_mistakes_are_one_line_and_exit_2(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    cases = {
        '"127.0.0.1:8080 h2c tls"': "h2c is HTTP/2 without TLS",
        '"127.0.0.1:8080 no-h2"': "no-h2 goes with tls",
        '"127.0.0.1:8080 http3"': 'unknown flag "http3"',
    }
    for listen, needle in cases.items():
        conf = tmp_path / "h2.toml"
        conf.write_text(f'listen = [{listen}]\n[static]\nroot = "{www}"\n')
        out = subprocess.run([str(TERN_BIN), "-t", "-c", str(conf)], capture_output=True, timeout=30)
        lines = out.stderr.decode().strip().splitlines()
        assert out.returncode == 2, (listen, out.stderr.decode())
        assert len(lines) == 1 and needle in lines[0] and "h2.toml:1" in lines[0] and "listen" in lines[0], lines
    conf.write_text(f'listen = ["127.0.0.1:8080"]\n[static]\nroot = "{www}"\n[http2]\nstream_window = "4GiB"\n')
    out = subprocess.run([str(TERN_BIN), "-t", "-c", str(conf)], capture_output=True, timeout=30)
    assert out.returncode == 2 and "http2.stream_window" in out.stderr.decode(), out.stderr.decode()


# ---- h2spec: the conformance suite ----

def h2spec_binary():
    path = os.environ.get("TERN_H2SPEC")
    if path:
        assert os.access(path, os.X_OK), f"TERN_H2SPEC={path} is not an executable"
        return path
    path = shutil.which("h2spec")
    if path is None:
        pytest.skip("h2spec is not built (./scripts/test builds it into build/tools)")
    return path


def run_h2spec(server, *args):
    """h2spec's failures (its report's lines after "Failures:"), and its last line."""
    out = subprocess.run([h2spec_binary(), "-h", "127.0.0.1", "-p", str(server.port), "-o", "3", *args],
                         capture_output=True, timeout=600).stdout.decode(errors="replace")
    summary = out.strip().splitlines()[-1]
    failures = out.split("Failures:", 1)[1] if "Failures:" in out else ""
    return [line.strip() for line in failures.splitlines() if "×" in line], summary


@pytest.fixture
def once_per_build():
    if os.environ.get("TERN_IO") == "io_uring":
        # The frames are the same over either backend: h2spec runs on the
        # epoll pass of each build (the tests above run on both).
        pytest.skip("h2spec runs on the epoll pass of each build")


def test_h2spec_over_tls_every_case_passes(once_per_build, tern_factory, pki):
    cert, key = pki.issue("a.test")
    server = tern_factory({"tls": {"cert": cert, "key": key}}, tls=True)
    server.write_file("index.html", b"hello\n")
    failures, summary = run_h2spec(server, "-t", "-k")
    assert failures == [], summary + "\n" + "\n".join(failures)
    assert re.search(r"(\d+) tests, \1 passed, 0 skipped, 0 failed", summary), summary


def test_h2spec_over_h2c_every_case_passes(once_per_build, h2c_server):
    h2c_server.write_file("index.html", b"hello\n")
    failures, summary = run_h2spec(h2c_server)
    assert failures == [], summary + "\n" + "\n".join(failures)
    assert re.search(r"(\d+) tests, \1 passed, 0 skipped, 0 failed", summary), summary


def test_h2c_address_closes_on_a_first_line_neither_http1_nor_the_preface(h2c_server):
    # Regression: it answered HTTP/1's 400, which an HTTP/2 client reads as
    # frames (h2spec 3.5/2); a malformed HTTP/1 request still gets its 400.
    with socket.create_connection(("127.0.0.1", h2c_server.port), timeout=10) as s:
        s.sendall(b"INVALID CONNECTION PREFACE\r\n\r\n")
        assert s.recv(4096) == b""
    with socket.create_connection(("127.0.0.1", h2c_server.port), timeout=10) as s:
        s.sendall(b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400 ")

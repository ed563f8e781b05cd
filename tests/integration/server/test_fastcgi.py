"""FastCGI to a real php-fpm: CGI params, query strings and forms, uploads
with Content-Length and chunked, headers and status from PHP, missing
scripts, big streamed responses to a slow reader in bounded memory, many
concurrent clients, php-fpm going away and coming back, timeouts, the
connection pool's queue, php's STDERR in the error log, the response cache,
keep-alive and pipelining.

Each test gets its own php-fpm (php_fpm.PhpFpm: one static pool on a unix
socket in the test's folder) and its own tern with a [[fastcgi]] block that
passes \\.php$ to it; the scripts under php/ are copied into tern's root."""

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from http_client import ConnectionClosed, HttpConn, build_request
from php_fpm import PhpFpm
from php_site import MIB, SCRIPTS, RssSampler, fastcgi_block, start_fastcgi_server
from tern_server import SCALE, TERN_BIN, free_port, scaled, sha256

# big.php's pattern: 64-byte lines "%07d " + FILL + "\n".
FILL = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012"
# Sanitizer builds (TERN_TEST_SCALE < 1) answer more slowly: wider upper
# bounds on timings, never narrower lower ones.
SLACK = 1.0 if SCALE >= 1 else 2.0


def pattern(size):
    """The first size bytes of big.php's (and die.php's) body."""
    lines = (size + 63) // 64
    return b"".join(b"%07d " % i + FILL + b"\n" for i in range(lines))[:size]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def tern_version():
    out = subprocess.run([str(TERN_BIN), "-v"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"(\d+\.\d+\.\d+\S*)", out)
    assert match, f"no version in `tern -v`: {out!r}"
    return match.group(1)


def get_json(resp):
    assert resp.status == 200, f"{resp!r}: {resp.body[:2000]!r}"
    return json.loads(resp.body)


def upload_request(path, body, chunked, chunk_sizes=(65536,)):
    head = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/octet-stream"]
    if not chunked:
        return ("\r\n".join(head + [f"Content-Length: {len(body)}"]) + "\r\n\r\n").encode() + body
    out = [("\r\n".join(head + ["Transfer-Encoding: chunked"]) + "\r\n\r\n").encode()]
    offset, i = 0, 0
    while offset < len(body):
        size = chunk_sizes[i % len(chunk_sizes)]
        piece = body[offset:offset + size]
        out.append(b"%x\r\n" % len(piece) + piece + b"\r\n")
        offset += len(piece)
        i += 1
    out.append(b"0\r\n\r\n")
    return b"".join(out)


def wait_until(predicate, timeout, interval=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def status_of(srv, path):
    """The status of one GET on a fresh connection; 0 if the connection
    failed or closed without a response."""
    try:
        return srv.get(path).status
    except (OSError, ConnectionClosed):
        return 0


# -- CGI params, query strings, forms --------------------------------------------


def test_get_with_query_string_passes_the_cgi_params(php):
    query = "a=1&b=two%20words&arr%5B%5D=x&arr%5B%5D=y&empty="
    with php.connect() as conn:
        client_port = conn.sock.getsockname()[1]
        resp = conn.get(f"/echo.php?{query}", [("Host", "example.test"), ("User-Agent", "tern-test/1"),
                                                 ("X-Custom-Header", "yes, it is"), ("Accept", "*/*"),
                                                 ("x-lower-case", "v"), ("Cookie", "a=1; b=two")])
    data = get_json(resp)
    assert resp.header("Content-Type").startswith("application/json")
    env = data["server"]
    root = str(php.root)
    roots = {root, os.path.realpath(root)}
    assert env["QUERY_STRING"] == query
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == "/echo.php"
    assert env["SCRIPT_FILENAME"] in {r + "/echo.php" for r in roots}
    assert env["REQUEST_URI"] == f"/echo.php?{query}"
    assert env["DOCUMENT_URI"] == "/echo.php"
    assert env["DOCUMENT_ROOT"].rstrip("/") in roots
    assert env.get("PATH_INFO", "") == ""
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["GATEWAY_INTERFACE"] == "CGI/1.1"
    assert env["REDIRECT_STATUS"] == "200"
    assert env["SERVER_SOFTWARE"] == f"tern/{tern_version()}"
    assert env["SERVER_ADDR"] == "127.0.0.1"
    assert env["SERVER_PORT"] == str(php.port)
    assert "SERVER_NAME" in env  # the Host name or a configured one; nginx sends "" by default
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["REMOTE_PORT"] == str(client_port)
    assert env.get("CONTENT_LENGTH", "") in ("", "0")
    assert env["HTTP_HOST"] == "example.test"
    assert env["HTTP_USER_AGENT"] == "tern-test/1"
    assert env["HTTP_X_CUSTOM_HEADER"] == "yes, it is"
    assert env["HTTP_ACCEPT"] == "*/*"
    assert env["HTTP_X_LOWER_CASE"] == "v"
    assert env["HTTP_COOKIE"] == "a=1; b=two"
    assert data["cookie"] == {"a": "1", "b": "two"}
    assert data["get"] == {"a": "1", "b": "two words", "arr": ["x", "y"], "empty": ""}
    assert data["headers"]["X-Custom-Header"] == "yes, it is"


def test_an_absolute_form_target_reaches_php_in_origin_form(php):
    """REQUEST_URI is the target in origin form and HTTP_HOST its authority
    (RFC 9112 3.2.2), whatever the Host field says."""
    with php.connect() as conn:
        resp = conn.request(b"GET http://php.example/echo.php?a=1 HTTP/1.1\r\nHost: other.example\r\n\r\n")
    data = get_json(resp)
    env = data["server"]
    assert env["REQUEST_URI"] == "/echo.php?a=1"
    assert env["HTTP_HOST"] == "php.example"
    assert env["SCRIPT_NAME"] == "/echo.php" and env["QUERY_STRING"] == "a=1"
    assert data["headers"]["Host"] == "php.example"


def test_a_script_path_ending_in_a_slash_runs_the_script_with_path_info_slash(php):
    data = get_json(php.get("/echo.php/"))
    env = data["server"]
    assert env["SCRIPT_NAME"] == "/echo.php"
    assert env["PATH_INFO"] == "/"
    assert env["REQUEST_URI"] == "/echo.php/"
    data = get_json(php.get("/echo.php/a/b/?x=1"))
    assert data["server"]["PATH_INFO"] == "/a/b/" and data["get"] == {"x": "1"}


def test_post_form_is_parsed_by_php(php):
    form = "name=tern&greeting=hello+world&list%5B%5D=a&list%5B%5D=b&empty="
    with php.connect() as conn:
        raw = build_request("POST", "/echo.php?from=query", [("Content-Type", "application/x-www-form-urlencoded"),
                                                            ("Content-Length", str(len(form)))])
        resp = conn.request(raw + form.encode())
    data = get_json(resp)
    env = data["server"]
    assert env["REQUEST_METHOD"] == "POST"
    assert env["CONTENT_TYPE"] == "application/x-www-form-urlencoded"
    assert env["CONTENT_LENGTH"] == str(len(form))
    assert data["post"] == {"name": "tern", "greeting": "hello world", "list": ["a", "b"], "empty": ""}
    assert data["get"] == {"from": "query"}
    assert data["body"] == form


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_5mib_upload_reaches_php_intact(php, chunked):
    body = os.urandom(5 * MIB)
    # Odd chunk sizes, so chunk boundaries never line up with FastCGI records.
    raw = upload_request("/upload.php", body, chunked, chunk_sizes=(100_003, 1, 65_536, 7_777))
    with php.connect() as conn:
        conn.send(raw)
        data = get_json(conn.read_response())
        assert data["length"] == len(body)
        assert data["sha256"] == sha256(body)
        assert data["method"] == "POST"
        assert data["content_type"] == "application/octet-stream"
        # php reads at most CONTENT_LENGTH bytes of STDIN: a chunked body
        # needs one too, so the server must know the length before php does.
        assert data["content_length"] == str(len(body))
        # The connection is good for another request.
        assert conn.get("/hello.php").body == b"hello\n"


def test_empty_post_has_content_length_zero(php):
    with php.connect() as conn:
        resp = conn.request(build_request("POST", "/upload.php", [("Content-Length", "0")]))
    data = get_json(resp)
    assert data["length"] == 0
    assert data["content_length"] in ("0", "", None)


def test_decoded_path_is_matched_and_php_source_is_never_served(php):
    resp = php.get("/hello.php")
    assert resp.status == 200 and resp.body == b"hello\n"
    # %2E is ".": the decoded path ends in .php and goes to php, not to the
    # static handler that would send the source.
    resp = php.get("/hello%2Ephp")
    assert resp.status == 200 and resp.body == b"hello\n"
    assert b"<?php" not in php.get("/hello%2ephp?x=1").body


def test_traversal_never_runs_a_script_outside_the_root(php):
    (php.workdir / "outside.php").write_text("<?php echo 'OUTSIDE';\n")
    for path in ("/../outside.php", "/%2e%2e/outside.php", "/a/../../outside.php", "/%2E%2E%2Foutside.php"):
        try:
            resp = php.get(path)
        except ConnectionClosed:
            continue
        assert resp.status != 200 and b"OUTSIDE" not in resp.body, path


# -- headers and status from PHP -------------------------------------------------


def test_php_headers_and_response_code_reach_the_client(php):
    resp = php.get("/headers.php?custom=abc")
    assert resp.status == 201
    assert resp.header("X-Custom") == "abc"
    multi = [v.strip() for value in resp.header_all("X-Multi") for v in value.split(",")]
    assert multi == ["one", "two"]
    assert resp.header("Content-Type") == "text/plain; charset=utf-8"
    assert resp.header("Status") is None, "the CGI Status field must become the status line"
    assert resp.body == b"headers set\n"


@pytest.mark.parametrize("query,status", [("location=/elsewhere", 302),
                                          ("location=/moved&code=301", 301),
                                          ("location=http://example.test/x&code=307", 307)])
def test_location_from_php_redirects(php, query, status):
    resp = php.get(f"/headers.php?{query}")
    assert resp.status == status
    expected = re.search(r"location=([^&]+)", query).group(1)
    assert resp.header("Location") == expected


@pytest.mark.parametrize("code", [404, 500, 503])
def test_error_status_from_php_keeps_php_body(php, code):
    with php.connect() as conn:
        resp = conn.get(f"/headers.php?code={code}")
        assert resp.status == code
        assert resp.body == b"headers set\n"
        assert resp.header("X-Custom") == "from-php"
        if "close" not in resp.connection_tokens():
            assert conn.get("/hello.php").body == b"hello\n"


def test_set_cookie_reaches_the_client(php):
    resp = php.get("/headers.php?cookie=abc123&code=200")
    assert resp.status == 200
    assert any(v.startswith("tern_test=abc123") for v in resp.header_all("Set-Cookie"))


def test_php_content_length_is_kept(php):
    resp = php.get("/big.php?bytes=100000&cl=1")
    assert resp.status == 200
    assert resp.header("Content-Length") == "100000"
    assert resp.header("Transfer-Encoding") is None
    assert resp.body == pattern(100000)


def test_response_without_content_length_is_chunked(php):
    with php.connect() as conn:
        resp = conn.get("/big.php?bytes=1000000")
        assert resp.status == 200
        assert resp.header("Content-Length") is None
        assert resp.header("Transfer-Encoding") == "chunked"
        assert resp.body == pattern(1000000)
        assert conn.get("/hello.php").body == b"hello\n"  # the framing ended where it should


def test_http10_client_gets_body_delimited_by_close(php):
    with php.connect() as conn:
        resp = conn.get("/big.php?bytes=50000", version="HTTP/1.0")
        assert resp.status == 200
        assert resp.header("Transfer-Encoding") is None, "no chunked coding for an HTTP/1.0 client"
        assert resp.body == pattern(50000)


def test_head_gets_no_body_and_the_connection_stays_usable(php):
    with php.connect() as conn:
        resp = conn.get("/hello.php", method="HEAD")
        assert resp.status == 200
        assert resp.header("Content-Type").startswith("text/plain")
        resp = conn.get("/hello.php")
        assert resp.status == 200 and resp.body == b"hello\n"


# -- missing scripts, directory index, root ------------------------------------------


def test_missing_script_is_404(php):
    with php.connect() as conn:
        assert conn.get("/no-such-script.php").status == 404
        assert conn.get("/sub/dir/missing.php?x=1").status == 404
        assert conn.get("/hello.php").body == b"hello\n"


def test_directory_runs_its_index_php(php_factory):
    srv = php_factory({"index": "index.php"})
    (srv.root / "app").mkdir()
    shutil.copyfile(SCRIPTS / "echo.php", srv.root / "app" / "index.php")
    data = get_json(srv.get("/app/?q=1"))
    env = data["server"]
    assert env["SCRIPT_NAME"] == "/app/index.php"
    assert env["SCRIPT_FILENAME"].endswith("/app/index.php")
    assert env["REQUEST_URI"] == "/app/?q=1"
    assert data["get"] == {"q": "1"}


def test_fastcgi_root_can_differ_from_the_static_root(fpm, tern_factory, tmp_path):
    scripts = tmp_path / "php-root"
    scripts.mkdir()
    shutil.copyfile(SCRIPTS / "echo.php", scripts / "elsewhere.php")
    srv = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address, root=str(scripts))])
    data = get_json(srv.get("/elsewhere.php"))
    roots = {str(scripts), os.path.realpath(scripts)}
    assert data["server"]["SCRIPT_FILENAME"] in {r + "/elsewhere.php" for r in roots}
    assert data["server"]["DOCUMENT_ROOT"].rstrip("/") in roots
    # hello.php is only in the static root: not a script under this block's root.
    assert srv.get("/hello.php").status == 404
    assert srv.get("/static.txt").body == b"static file\n"


# -- big responses, slow readers, upstream failures mid-response -------------------


class SlowReader:
    """Reads a socket at most `step` bytes per recv, sleeping `pause`
    seconds after each, with the chunked framing checked by hand."""

    def __init__(self, sock, buf, step, pause, deadline):
        self.sock, self.buf = sock, bytearray(buf)
        self.step, self.pause, self.deadline = step, pause, deadline

    def _fill(self):
        assert time.monotonic() < self.deadline, "the response took too long"
        chunk = self.sock.recv(self.step)
        assert chunk, "connection closed in the middle of the chunked body"
        self.buf += chunk
        time.sleep(self.pause)

    def take(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            assert len(self.buf) < 4096, f"chunk-size line too long: {bytes(self.buf[:100])!r}"
            self._fill()
        return self.take(self.buf.index(b"\r\n") + 2)[:-2]


def test_20mib_response_to_a_slow_reader_is_intact_in_bounded_memory(php):
    size = 20 * MIB
    expected = pattern(size)
    assert php.get("/hello.php").body == b"hello\n"  # warm up: the pool, buffers, the log
    sampler = RssSampler(php)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", php.port))
    with HttpConn(sock) as conn:
        sampler.start()
        conn.send(b"GET /big.php?mib=20 HTTP/1.1\r\nHost: x\r\n\r\n")
        head = conn.read_head()
        assert head.status == 200
        assert head.header("Content-Length") is None
        assert head.header("Transfer-Encoding") == "chunked"
        reader = SlowReader(sock, conn.buf, step=64 * 1024, pause=0.01, deadline=time.monotonic() + 180)
        conn.buf.clear()
        got = 0
        chunks = 0
        while True:
            size_line = reader.line()
            chunk_size = int(size_line.split(b";")[0], 16)
            if chunk_size == 0:
                while reader.line() != b"":  # trailers
                    pass
                break
            data = reader.take(chunk_size)
            want = expected[got:got + chunk_size]
            if data != want:
                bad = got + first_difference(data, want)
                raise AssertionError(f"body differs at byte {bad} of {size} (chunk {chunks}, {chunk_size} bytes)")
            assert reader.take(2) == b"\r\n", f"chunk {chunks} not followed by CRLF"
            got += chunk_size
            chunks += 1
        growth = sampler.growth_mib()
        assert got == size, f"{got} of {size} bytes"
        # ASan keeps freed memory in quarantine (256 MiB by default), so a
        # server that frees each buffer after sending it still grows there.
        if not php.runs_under("libasan"):
            assert growth < 16, f"tern's RSS grew by {growth:.1f} MiB while streaming a 20 MiB response"
        # The connection is still good for another request.
        conn.buf = reader.buf
        assert conn.get("/hello.php").body == b"hello\n"


@pytest.mark.parametrize("query", ["bytes=1048576", "bytes=1048576&cl=1"], ids=["chunked", "content-length"])
def test_upstream_dying_mid_response_closes_the_client_connection(php, query):
    with php.connect() as conn:
        conn.send(f"GET /die.php?{query} HTTP/1.1\r\nHost: x\r\n\r\n")
        head = conn.read_head()
        if head.status == 502:
            pass  # the server had not committed to a response yet: also fine
        else:
            assert head.status == 200
            try:
                if head.header("Content-Length") is not None:
                    body = conn._take(int(head.header("Content-Length")))
                else:
                    body = conn._read_chunked()
                raise AssertionError(f"a complete {len(body)}-byte body came from a script that died mid-response")
            except (ConnectionClosed, ConnectionResetError):
                pass
    # php-fpm replaces the child; the server carries on.
    assert wait_until(lambda: status_of(php, "/hello.php") == 200, timeout=10)
    assert php.get("/hello.php").body == b"hello\n"


class ClosingResponder:
    """A FastCGI responder that answers each request with a head and
    `body` on STDOUT, FCGI_END_REQUEST, and closes the connection at once."""

    def __init__(self, body):
        self.body = body
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.serve, daemon=True).start()

    @staticmethod
    def record(rtype, request_id, content=b""):
        return struct.pack(">BBHHBB", 1, rtype, request_id, len(content), 0, 0) + content

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(30)
                try:
                    request_id = self.read_request(conn)
                    out = [self.record(6, request_id, b"Content-Type: application/octet-stream\r\n\r\n")]
                    for i in range(0, len(self.body), 65535):
                        out.append(self.record(6, request_id, self.body[i:i + 65535]))
                    out += [self.record(6, request_id), self.record(3, request_id, bytes(8))]
                    conn.sendall(b"".join(out))
                except OSError:
                    pass

    @staticmethod
    def read_request(conn):
        """Reads records up to the empty FCGI_STDIN; returns the request id."""
        data = b""
        while True:
            while len(data) < 8 or len(data) < 8 + struct.unpack(">H", data[4:6])[0] + data[6]:
                piece = conn.recv(65536)
                if not piece:
                    raise OSError("closed before the request's end")
                data += piece
            _, rtype, request_id, length, padding, _ = struct.unpack(">BBHHBB", data[:8])
            data = data[8 + length + padding:]
            if rtype == 5 and length == 0:  # the empty FCGI_STDIN: the request is whole
                return request_id

    def close(self):
        self.listener.close()


@pytest.mark.parametrize("backend", ["epoll", "io_uring"])
def test_an_unbuffered_response_keeps_its_last_bytes_when_the_responder_closes_at_once(tern_factory, backend):
    """A responder sends 5 MiB, its end of request, and closes at once while
    tern, its client behind, has stopped reading from it: the client gets
    every byte and the chunked body's end."""
    from test_proxy import BURST_ROUNDS, on_backend, slow_client
    body = os.urandom(5 * MIB)
    responder = ClosingResponder(body)
    try:
        srv = start_fastcgi_server(tern_factory, [fastcgi_block(responder.address, response_buffering=False)],
                                   {"io": backend})
        on_backend(srv, backend)
        for round_ in range(BURST_ROUNDS):
            with slow_client(srv, b"GET /hello.php HTTP/1.1\r\nHost: x\r\n\r\n") as conn:
                try:
                    resp = conn.read_response()
                except ConnectionClosed as e:
                    raise AssertionError(f"round {round_}: the response was cut: {e}") from None
            assert resp.status == 200 and resp.header("Transfer-Encoding") == "chunked"
            assert len(resp.body) == len(body), f"round {round_}: {len(resp.body)} of {len(body)} bytes"
            assert sha256(resp.body) == sha256(body), f"round {round_}: the body came changed"
    finally:
        responder.close()


# -- concurrency -------------------------------------------------------------------


def test_200_concurrent_clients_get_correct_answers(fpm, tern_factory):
    clients = scaled(200, 20)
    rounds = 5
    srv = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address, pool=4, queue=256,
                                                            queue_timeout="30s")],
                               {"workers": 2})
    barrier = threading.Barrier(clients, timeout=60)

    def client(i):
        with srv.connect(timeout=60) as conn:
            barrier.wait()
            for r in range(rounds):
                if r % 2:
                    resp = conn.get("/hello.php")
                    assert resp.status == 200 and resp.body == b"hello\n", resp
                else:
                    data = get_json(conn.get(f"/echo.php?client={i}&round={r}", [("X-Client", str(i))]))
                    assert data["get"] == {"client": str(i), "round": str(r)}
                    assert data["server"]["HTTP_X_CLIENT"] == str(i)
        return i

    with ThreadPoolExecutor(max_workers=clients) as pool:
        futures = [pool.submit(client, i) for i in range(clients)]
        done = [f.result(timeout=120) for f in futures]
    assert sorted(done) == list(range(clients))


def test_pool_limits_concurrent_php_requests_per_worker(tern_factory, tmp_path):
    # 8 children, but tern may hold only 2 connections to them: 8 requests
    # of 0.5 s each then take 4 rounds, at least 2 s (all at once: 0.5 s).
    with PhpFpm(tmp_path / "fpm8", children=8) as fpm:
        srv = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address, pool=2, queue=64,
                                                                queue_timeout="30s")], {"workers": 1})
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as pool:
            statuses = list(pool.map(lambda i: srv.get(f"/sleep.php?s=0.5&i={i}").status, range(8)))
        elapsed = time.monotonic() - start
        assert statuses == [200] * 8
        assert elapsed >= 1.9, f"8 requests of 0.5 s over a pool of 2 took only {elapsed:.2f}s"
        assert srv.stop() == 0, srv.stderr()[-3000:]


def test_queue_timeout_and_full_queue_give_503(fpm, tern_factory):
    srv = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address, pool=1, queue=1,
                                                            queue_timeout="1s")], {"workers": 1})
    results = {}

    def slow():
        results["slow"] = srv.get("/sleep.php?s=3").status

    holder = threading.Thread(target=slow)
    holder.start()
    time.sleep(0.5)  # the only pooled connection is now busy for ~2.5 s more
    try:
        # One request may wait: it waits its queue_timeout, then 503.
        waiter_result = {}

        def waiter():
            start = time.monotonic()
            waiter_result["status"] = srv.get("/hello.php").status
            waiter_result["elapsed"] = time.monotonic() - start

        waiting = threading.Thread(target=waiter)
        waiting.start()
        time.sleep(0.2)
        # The queue (1) is full: the next one is refused at once.
        start = time.monotonic()
        status = srv.get("/hello.php").status
        refused_after = time.monotonic() - start
        assert status == 503
        assert refused_after < 0.9 * SLACK, f"a request beyond a full queue took {refused_after:.2f}s to refuse"
        waiting.join(timeout=30)
        assert waiter_result["status"] == 503
        assert 0.8 <= waiter_result["elapsed"] <= 2.5 * SLACK, waiter_result
    finally:
        holder.join(timeout=30)
    assert results["slow"] == 200
    assert srv.get("/hello.php").status == 200


def test_keepalive_serves_many_php_requests_on_one_connection(php):
    with php.connect() as conn:
        for i in range(20):
            if i % 3 == 0:
                resp = conn.get("/static.txt")
                assert resp.status == 200 and resp.body == b"static file\n"
            elif i % 3 == 1:
                resp = conn.get("/hello.php")
                assert resp.status == 200 and resp.body == b"hello\n"
            else:
                resp = conn.get(f"/echo.php?i={i}")
                assert get_json(resp)["get"] == {"i": str(i)}
            assert "close" not in resp.connection_tokens()
        assert not conn.is_closed(timeout=0.3)


def test_pipelined_static_and_php_requests_are_answered_in_order(php):
    paths = ["/static.txt", "/hello.php", "/static.txt", "/echo.php?n=2", "/big.php?bytes=100000",
             "/static.txt", "/no-such.php", "/hello.php"]
    with php.connect() as conn:
        conn.send(b"".join(build_request("GET", p) for p in paths))
        responses = [conn.read_response() for _ in paths]
    assert [r.status for r in responses] == [200, 200, 200, 200, 200, 200, 404, 200]
    assert responses[0].body == responses[2].body == responses[5].body == b"static file\n"
    assert responses[1].body == responses[7].body == b"hello\n"
    assert json.loads(responses[3].body)["get"] == {"n": "2"}
    assert responses[4].body == pattern(100000)


def test_pipelined_posts_to_php(php):
    bodies = [os.urandom(n) for n in (10, 70_000, 0, 300_000)]
    raw = b"".join(build_request("POST", "/upload.php", [("Content-Length", str(len(b))),
                                                        ("Content-Type", "application/octet-stream")]) + b
                   for b in bodies)
    with php.connect() as conn:
        conn.send(raw)
        for body in bodies:
            data = get_json(conn.read_response())
            assert data["length"] == len(body) and data["sha256"] == sha256(body)


# -- php-fpm down, slow, unreachable -------------------------------------------------


def test_php_fpm_killed_gives_502_then_recovers_without_restarting_tern(php, fpm):
    with php.connect() as conn:  # pooled connections to php-fpm now exist
        for _ in range(3):
            assert conn.get("/hello.php").body == b"hello\n"
    pid = php.proc.pid
    fpm.kill()
    for _ in range(3):
        assert php.get("/hello.php").status == 502
    assert php.get("/static.txt").body == b"static file\n"
    fpm.restart()
    assert wait_until(lambda: status_of(php, "/hello.php") == 200, timeout=5), \
        f"no 200 within 5 s of php-fpm coming back; tern stderr:\n{php.stderr()[-3000:]}"
    with php.connect() as conn:
        for i in range(5):
            assert conn.get("/hello.php").body == b"hello\n"
            assert get_json(conn.get(f"/echo.php?i={i}"))["get"] == {"i": str(i)}
    assert php.proc.pid == pid and php.proc.poll() is None


def test_read_timeout_gives_504(php_factory):
    srv = php_factory({"read_timeout": "1s"})
    start = time.monotonic()
    resp = srv.get("/sleep.php?s=5")
    elapsed = time.monotonic() - start
    assert resp.status == 504
    assert 0.9 <= elapsed <= 3.0 * SLACK, f"504 after {elapsed:.2f}s with read_timeout 1s"
    # Other children still answer.
    assert srv.get("/hello.php").body == b"hello\n"


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_unreachable_upstream_is_502_and_static_files_still_served(tern_factory, tmp_path, kind):
    address = f"unix:{tmp_path}/no-such-dir/php.sock" if kind == "unix" else f"127.0.0.1:{free_port()}"
    srv = start_fastcgi_server(tern_factory, [fastcgi_block(address)])
    for _ in range(3):
        start = time.monotonic()
        assert srv.get("/hello.php").status == 502
        assert time.monotonic() - start < 2.0 * SLACK
    with srv.connect() as conn:
        assert conn.get("/static.txt").body == b"static file\n"
    assert srv.get("/no-such.php").status == 404
    assert srv.proc.poll() is None


# -- STDERR --------------------------------------------------------------------------


def test_php_stderr_goes_to_the_error_log(php):
    marker = f"tern-stderr-{uuid.uuid4().hex}"
    resp = php.get(f"/stderr.php?msg={marker}", {"X-Request-Id": "stderr-req-42"})
    assert resp.status == 200 and resp.body == b"logged\n"
    assert php.wait_for_log(marker), f"{marker} not in tern's error log:\n{php.stderr()[-3000:]}"
    # The line names the request it came from, as in the access log.
    line = next(l for l in php.stderr().splitlines() if marker in l)
    assert line.endswith(" (request stderr-req-42)"), line


# -- cache ----------------------------------------------------------------------------


@pytest.fixture
def cached_factory(php_factory, tmp_path):
    """A tern whose PHP responses go through a [[cache]] zone in tmp_path;
    cache holds extra keys for the block's cache table."""

    def start(cache=None, **kwargs):
        zone = {"name": "php", "path": str(tmp_path / "cache")}
        return php_factory({"cache": {"zone": "php", **(cache or {})}}, config={"cache": [zone]}, **kwargs)

    return start


@pytest.fixture
def cached(cached_factory):
    return cached_factory()


def token(resp):
    return get_json(resp)["token"]


def cache_hit(resp):
    return (resp.header("Cache-Status") or "").startswith("tern; hit")


def cache_forwarded(resp):
    return "fwd=" in (resp.header("Cache-Status") or "")


def test_cache_miss_then_hit_with_the_same_body(cached):
    first = cached.get("/cached.php?k=1")
    assert first.header("Cache-Status") == "tern; fwd=uri-miss"
    with cached.connect() as conn:
        second = conn.get("/cached.php?k=1")
        third = conn.get("/cached.php?k=1")
    assert cache_hit(second) and cache_hit(third), second.header("Cache-Status")
    assert second.body == first.body == third.body
    assert second.header("Content-Type") == "application/json"
    assert "max-age=60" in second.header("Cache-Control")
    ttl = int(second.header("Cache-Status").split("ttl=")[1])
    assert 55 <= ttl <= 60
    assert int(second.header("Age")) <= 5
    # The query string is part of the key.
    other = cached.get("/cached.php?k=2")
    assert cache_forwarded(other) and token(other) != token(first)


def test_cache_never_stores_responses_with_set_cookie(cached):
    first = cached.get("/cached.php?cookie=1")
    second = cached.get("/cached.php?cookie=1")
    assert cache_forwarded(first) and cache_forwarded(second)
    assert token(first) != token(second)
    assert first.header_all("Set-Cookie") and second.header_all("Set-Cookie")


def test_cache_stores_a_response_with_set_cookie_without_it_when_told(cached_factory):
    srv = cached_factory({"store_set_cookie": True})
    first = srv.get("/cached.php?cookie=1")
    second = srv.get("/cached.php?cookie=1")
    assert first.header_all("Set-Cookie") and cache_hit(second)
    assert token(first) == token(second)
    assert not second.header_all("Set-Cookie")  # one client's cookie is never given to another


def test_cache_serves_head_from_a_cached_get(cached):
    body = cached.get("/cached.php?k=head").body
    with cached.connect() as conn:
        resp = conn.get("/cached.php?k=head", method="HEAD")
        assert resp.status == 200 and cache_hit(resp)
        assert resp.body == b""
        if resp.header("Content-Length") is not None:
            assert resp.header("Content-Length") == str(len(body))
        # The connection is in sync: the next answer is the cached body.
        assert conn.get("/cached.php?k=head").body == body


def test_cache_fills_from_a_head_by_asking_php_for_a_get(cached):
    # As nginx's proxy_cache_convert_head: php runs a GET (to a HEAD it
    # would send no body), the entry keeps its body, the HEAD gets the head
    # alone, and a GET afterwards is answered from the entry.
    with cached.connect() as conn:
        head = conn.get("/cached.php?k=head-first", method="HEAD")
        assert head.status == 200 and head.body == b"" and cache_forwarded(head)
        got = conn.get("/cached.php?k=head-first")  # the connection is in sync after the HEAD
    assert cache_hit(got)
    data = get_json(got)
    assert data["token"] and data["method"] == "GET"
    assert token(cached.get("/cached.php?k=head-first")) == data["token"]


def test_cache_without_a_lifetime_stores_nothing(cached):
    a = cached.get("/cached.php?nocc=1")
    b = cached.get("/cached.php?nocc=1")
    assert token(a) != token(b)
    assert cache_forwarded(b)


def test_cache_valid_gives_a_lifetime_to_responses_without_one(cached_factory):
    srv = cached_factory({"valid": {"200": "60s"}})
    a = srv.get("/cached.php?nocc=1")
    b = srv.get("/cached.php?nocc=1")
    assert cache_forwarded(a) and cache_hit(b)
    assert token(a) == token(b)


def test_cache_entry_expires_after_max_age(cached):
    a = cached.get("/cached.php?max_age=2")
    b = cached.get("/cached.php?max_age=2")
    assert cache_hit(b) and token(a) == token(b)
    time.sleep(3.1)
    c = cached.get("/cached.php?max_age=2")
    assert c.header("Cache-Status") == "tern; fwd=stale" and token(c) != token(a)
    assert cache_hit(cached.get("/cached.php?max_age=2"))


def test_cache_revalidates_a_stale_entry_with_php(cached):
    a = cached.get("/cached.php?max_age=2&etag=e1")
    time.sleep(3.1)
    # php sees If-None-Match (HTTP_IF_NONE_MATCH) and says 304: the entry answers.
    b = cached.get("/cached.php?max_age=2&etag=e1")
    assert b.status == 200 and token(b) == token(a), b.header("Cache-Status")
    assert b.header("Cache-Status") == "tern; fwd=stale; fwd-status=304; ttl=2"
    assert cache_hit(cached.get("/cached.php?max_age=2&etag=e1"))


def test_cache_refreshes_a_stale_php_entry_in_the_background(cached_factory):
    srv = cached_factory({"use_stale": ["updating"]})
    target = "/cached.php?max_age=1&k=background"
    a = srv.get(target)
    time.sleep(2.1)
    # The request that finds it stale has it at once; php is asked by a
    # request of tern's own, with the client's PARAMS.
    b = srv.get(target)
    assert b.status == 200 and token(b) == token(a)
    assert b.header("Cache-Status").startswith("tern; hit; ttl=-") and b.header("Cache-Status").endswith(
        "; detail=updating")
    deadline = time.monotonic() + 5
    while token(c := srv.get(target)) == token(a):
        assert time.monotonic() < deadline, c.header("Cache-Status")
        time.sleep(0.05)
    assert cache_hit(c) and get_json(c)["uri"] == target


def test_cache_never_answers_post(cached):
    cached.get("/cached.php?k=post")
    with cached.connect() as conn:
        raw = build_request("POST", "/cached.php?k=post", [("Content-Length", "3"),
                                                          ("Content-Type", "application/x-www-form-urlencoded")])
        a = conn.request(raw + b"x=1")
        b = conn.request(raw + b"x=1")
    assert a.status == 200 and b.status == 200
    assert token(a) != token(b)
    assert a.header("Cache-Status") == b.header("Cache-Status") == "tern; fwd=method"


def test_cache_purge_works_on_a_php_location_whose_methods_leave_it_out(cached_factory):
    """The block's methods (by default GET, HEAD, POST, PUT, PATCH, DELETE,
    OPTIONS) name what the application takes; a PURGE the cache allows is
    the cache's, and one it does not allow still gets the 405."""
    srv = cached_factory({"purge": ["127.0.0.0/8"]})
    first = srv.get("/cached.php?k=purge")
    assert cache_hit(srv.get("/cached.php?k=purge"))
    gone = srv.get("/cached.php?k=purge", method="PURGE")
    assert gone.status == 200 and gone.body.startswith(b"purged"), (gone.status, gone.body)
    again = srv.get("/cached.php?k=purge")
    assert again.header("Cache-Status") == "tern; fwd=uri-miss" and token(again) != token(first)
    assert srv.get("/cached.php?k=never-stored", method="PURGE").status == 404
    closed = cached_factory()  # no purge networks: PURGE is no method of this location
    refused = closed.get("/cached.php?k=purge", method="PURGE")
    assert refused.status == 405 and "PURGE" not in (refused.header("Allow") or "")


def test_no_cache_status_when_the_cache_is_off(php):
    a = php.get("/cached.php?k=1")
    b = php.get("/cached.php?k=1")
    assert a.header("Cache-Status") is None and b.header("Cache-Status") is None
    assert token(a) != token(b)


# -- curl ----------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_upload_with_expect_100_continue(php, tmp_path):
    body = os.urandom(3 * MIB)
    path = tmp_path / "upload.bin"
    path.write_bytes(body)
    proc = subprocess.run(["curl", "-sS", "--max-time", "30", "-H", "Expect: 100-continue",
                           "-H", "Content-Type: application/octet-stream",
                           "--data-binary", f"@{path}", php.url("/upload.php")],
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    data = json.loads(proc.stdout)
    assert data["length"] == len(body) and data["sha256"] == sha256(body)


def test_a_fastcgi_block_may_pass_to_a_group_of_php_fpm_pools(fpm, tern_factory, tmp_path):
    """pass names an [[upstream]]: requests spread over both pools, and
    when one pool dies the next request goes to the other."""
    from php_fpm import PhpFpm
    from php_site import fastcgi_block, start_fastcgi_server
    second = PhpFpm(tmp_path / "fpm2", children=4).start()
    try:
        group = {"name": "php", "servers": [{"address": fpm.pass_address}, {"address": second.pass_address}]}
        srv = start_fastcgi_server(tern_factory, [fastcgi_block("php")], config={"upstream": [group]})
        pools = {fpm.pid: set(PhpFpm._group_members(fpm.pid)), second.pid: set(PhpFpm._group_members(second.pid))}
        served = set()
        with srv.connect() as conn:
            for _ in range(20):
                resp = conn.get("/pid.php")
                assert resp.status == 200
                pid = int(resp.body)
                served |= {master for master, members in pools.items() if pid in members}
        assert served == set(pools), (served, pools)
        second.kill()
        with srv.connect() as conn:
            for _ in range(10):
                resp = conn.get("/pid.php")
                assert resp.status == 200 and int(resp.body) in pools[fpm.pid]
    finally:
        second.cleanup()

"""Connection management and methods: keep-alive, pipelining, HTTP/1.0,
HEAD, methods a static file does not allow, timeouts."""

import socket
import time

import pytest

from http_client import build_request

FILES = {
    "a.txt": b"alpha\n",
    "b.txt": b"bravo bravo\n",
    "c.html": b"<p>charlie</p>\n",
    "index.html": b"<h1>home</h1>\n",
}


@pytest.fixture
def site(server):
    for name, data in FILES.items():
        server.write_file(name, data)
    return server


def test_http11_keeps_connection_open_across_requests(site):
    with site.connect() as conn:
        for _ in range(3):
            for name, data in FILES.items():
                resp = conn.get("/" + name)
                assert resp.status == 200
                assert resp.body == data
                assert "close" not in resp.connection_tokens()
        assert not conn.is_closed(timeout=0.5)


def test_http11_connection_close_request_gets_close_and_eof(site):
    with site.connect() as conn:
        resp = conn.get("/a.txt", {"Connection": "close"})
        assert resp.status == 200 and resp.body == FILES["a.txt"]
        assert "close" in resp.connection_tokens()
        assert conn.is_closed()


def test_http10_request_closes_connection_by_default(site):
    with site.connect() as conn:
        resp = conn.get("/a.txt", version="HTTP/1.0")
        assert resp.status == 200 and resp.body == FILES["a.txt"]
        assert "keep-alive" not in resp.connection_tokens()
        assert conn.is_closed()


def _segments_received(sock):
    """tcpi_segs_in of struct tcp_info (Linux >= 4.2): segments this socket got."""
    import struct
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return struct.unpack_from("I", info, 140)[0]


def _fetch_closing(server, target):
    """HTTP/1.0 GET read to EOF; returns (response bytes, segments received)."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(f"GET {target} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data, _segments_received(sock)


def test_last_response_and_fin_leave_in_one_segment(site):
    # SYN-ACK, the ACK of the request, then the response with the FIN on
    # it: a separate FIN would be a fourth segment and a second wake-up for
    # the client (nginx sends them together too). The file is in memory from
    # its second request on (the first, a cache miss, goes by sendfile).
    _fetch_closing(site, "/a.txt")
    for _ in range(5):
        data, segments = _fetch_closing(site, "/a.txt")
        assert data.endswith(b"\r\n\r\n" + FILES["a.txt"])
        assert segments == 3


def test_head_and_sendfile_body_leave_in_one_segment(site):
    # Above the in-memory size the body goes by sendfile: the head waits for
    # it (MSG_MORE) rather than leaving alone; the FIN follows on its own.
    body = bytes(range(256)) * 80  # 20 KiB
    site.write_file("medium.bin", body)
    for _ in range(5):
        data, segments = _fetch_closing(site, "/medium.bin")
        assert data.endswith(b"\r\n\r\n" + body)
        assert segments == 4


def test_http10_keep_alive_request_is_kept_alive_and_says_so(site):
    with site.connect() as conn:
        for name in ("a.txt", "b.txt", "c.html"):
            resp = conn.get("/" + name, {"Connection": "keep-alive"}, version="HTTP/1.0")
            assert resp.status == 200 and resp.body == FILES[name]
            assert "keep-alive" in resp.connection_tokens()
            assert resp.header("Content-Length") == str(len(FILES[name]))
        # Without the token the last request ends the connection.
        resp = conn.get("/a.txt", version="HTTP/1.0")
        assert resp.body == FILES["a.txt"]
        assert conn.is_closed()


def test_http10_request_without_host_is_served(site):
    with site.connect() as conn:
        conn.send(b"GET /b.txt HTTP/1.0\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == 200 and resp.body == FILES["b.txt"]


def test_pipelined_requests_are_answered_in_order(site):
    names = list(FILES) * 10
    methods = ["HEAD" if i % 7 == 3 else "GET" for i in range(len(names))]
    raw = b"".join(build_request(m, "/" + n) for m, n in zip(methods, names))
    raw += build_request("GET", "/missing.txt") + build_request("GET", "/a.txt", {"Connection": "close"})
    with site.connect() as conn:
        conn.send(raw)
        for method, name in zip(methods, names):
            resp = conn.read_response(method)
            assert resp.status == 200
            assert resp.header("Content-Length") == str(len(FILES[name]))
            assert resp.body == (b"" if method == "HEAD" else FILES[name])
        assert conn.read_response().status == 404
        last = conn.read_response()
        assert last.status == 200 and last.body == FILES["a.txt"]
        assert conn.is_closed()


def test_request_sent_one_byte_at_a_time_is_answered(site):
    raw = build_request("GET", "/c.html", {"User-Agent": "slowpoke"})
    with site.connect() as conn:
        conn.sock.setsockopt(6, 1, 1)  # TCP_NODELAY: one segment per byte
        for i in range(len(raw)):
            conn.send(raw[i:i + 1])
        resp = conn.read_response()
        assert resp.status == 200 and resp.body == FILES["c.html"]


def test_pipelined_requests_split_mid_head_are_answered(site):
    raw = b"".join(build_request("GET", "/" + n) for n in FILES)
    with site.connect() as conn:
        conn.send(raw[:37])
        time.sleep(0.05)
        conn.send(raw[37:])
        for data in FILES.values():
            assert conn.read_response().body == data


def test_head_has_the_headers_of_get_and_no_body(site):
    with site.connect() as conn:
        # HEAD then GET on one connection: if the HEAD response carried a
        # body, the GET response would not parse right after it.
        head = conn.get("/c.html", method="HEAD")
        get = conn.get("/c.html")
        assert head.status == get.status == 200
        assert get.body == FILES["c.html"]
        for name in ("Content-Length", "Content-Type", "ETag", "Last-Modified", "Accept-Ranges"):
            assert head.header(name) == get.header(name), name
        assert head.header("Content-Length") == str(len(FILES["c.html"]))
        # And nothing stray follows.
        assert not conn.is_closed(timeout=0.3)


def test_head_of_missing_file_is_404_without_body(site):
    with site.connect() as conn:
        head = conn.get("/nope.txt", method="HEAD")
        assert head.status == 404
        get = conn.get("/a.txt")
        assert get.status == 200 and get.body == FILES["a.txt"]


@pytest.mark.parametrize("method", ["OPTIONS", "POST", "PUT", "DELETE", "PATCH"])
def test_method_other_than_get_or_head_on_static_file_is_405_with_allow(site, method):
    with site.connect() as conn:
        body = b"" if method in ("OPTIONS", "DELETE") else b"x=1&y=2"
        headers = {"Content-Length": str(len(body))} if body else {}
        resp = conn.request(build_request(method, "/a.txt", headers) + body)
        assert resp.status == 405
        allowed = {m.strip() for m in resp.header("Allow").split(",")}
        assert allowed == {"GET", "HEAD"}
        # The request body was consumed, not parsed as the next request.
        if "close" not in resp.connection_tokens():
            nxt = conn.get("/b.txt")
            assert nxt.status == 200 and nxt.body == FILES["b.txt"]


def test_post_with_chunked_body_gets_405_and_connection_stays_usable(site):
    body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    with site.connect() as conn:
        resp = conn.request(build_request("POST", "/a.txt", {"Transfer-Encoding": "chunked"}) + body)
        assert resp.status == 405
        nxt = conn.get("/b.txt")
        assert nxt.status == 200 and nxt.body == FILES["b.txt"]


def test_unknown_method_is_501_and_connection_closes(site):
    # nginx turns keep-alive off for 501 (ngx_http_special_response_handler),
    # as it does for 400, 413 and 414.
    with site.connect() as conn:
        conn.send(b"BREW /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == 501
        assert "close" in resp.connection_tokens()
        assert conn.is_closed()


def test_absolute_form_target_is_served(site):
    with site.connect() as conn:
        resp = conn.request(b"GET http://test/b.txt HTTP/1.1\r\nHost: test\r\n\r\n")
        assert resp.status == 200 and resp.body == FILES["b.txt"]


def test_responses_carry_date_and_server_headers(site):
    resp = site.get("/a.txt")
    assert resp.header("Date").endswith(" GMT")
    assert resp.header("Server")


def test_idle_keep_alive_connection_is_closed_after_keepalive_timeout(tern_factory):
    srv = tern_factory({"timeouts": {"keepalive": "1s"}})
    srv.write_file("a.txt", b"x")
    with srv.connect() as conn:
        assert conn.get("/a.txt").status == 200
        started = time.monotonic()
        assert conn.is_closed(timeout=10)
        assert time.monotonic() - started >= 0.5


def test_incomplete_request_head_gets_408_after_header_timeout(tern_factory):
    srv = tern_factory({"timeouts": {"header": "1s"}})
    with srv.connect() as conn:
        conn.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n")
        resp = conn.read_response()
        assert resp.status == 408
        assert "close" in resp.connection_tokens()
        assert conn.is_closed()


def test_head_trickling_in_gets_408_at_header_timeout_from_its_first_byte(tern_factory):
    # The header timer starts once per request: bytes that keep coming do
    # not push it back (slowloris), while the keep-alive timeout is long.
    srv = tern_factory({"timeouts": {"header": "1s", "keepalive": "30s"}})
    with srv.connect() as conn:
        start = time.monotonic()
        conn.send(b"GET /a.txt HTTP/1.1\r\n")
        for piece in (b"Host: x\r\n", b"X-A: 1\r\n", b"X-B: 2\r\n", b"X-C: 3\r\n"):
            time.sleep(0.3)
            try:
                conn.send(piece)
            except OSError:
                break
        resp = conn.read_response()
        assert resp.status == 408
        assert time.monotonic() - start < 2.5


def test_partial_pipelined_request_gets_408_after_header_timeout(tern_factory):
    # A whole request and the start of a second in one write: the first is
    # answered, the second's head has header_timeout, not the keep-alive one.
    srv = tern_factory({"timeouts": {"header": "1s", "keepalive": "30s"}})
    srv.write_file("a.txt", b"alpha\n")
    with srv.connect() as conn:
        start = time.monotonic()
        conn.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHo")
        first = conn.read_response()
        assert first.status == 200 and first.body == b"alpha\n"
        second = conn.read_response()
        assert second.status == 408
        assert time.monotonic() - start < 5
        assert conn.is_closed()


def test_stalled_request_body_gets_408_after_body_timeout(tern_factory):
    # A target that reads its body (the users API): the body timeout is 408.
    srv = tern_factory({"timeouts": {"body": "1s"}, "auth": {"store": "sqlite:users.db"}})
    with srv.connect() as conn:
        conn.send(b"POST /api/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"user")
        resp = conn.read_response()
        assert resp.status == 408
        assert conn.is_closed()


def test_stalled_body_to_a_static_file_is_answered_then_closed_at_body_timeout(tern_factory):
    # A static file takes no body: 405 from the head, then the body is
    # dropped as it comes, and one that stops coming ends the connection.
    srv = tern_factory({"timeouts": {"body": "1s"}})
    srv.write_file("a.txt", b"alpha\n")
    with srv.connect() as conn:
        started = time.monotonic()
        conn.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        resp = conn.read_response()
        assert resp.status == 405
        assert time.monotonic() - started < 0.9, "answered only after waiting for the body"
        assert conn.is_closed(timeout=10)


def test_expect_100_continue_to_a_static_file_is_405_without_continue(site):
    # The body is never wanted: no 100 (Continue), and since the client may
    # then never send it, the connection closes after the answer.
    with site.connect() as conn:
        conn.send(build_request("POST", "/a.txt", {"Content-Length": "4", "Expect": "100-continue"}))
        resp = conn.read_response(skip_interim=False)
        assert resp.status == 405
        assert "close" in resp.connection_tokens()
        assert conn.is_closed()


def test_many_small_pipelined_requests_beyond_header_limit_are_all_answered(tern_factory):
    # 64 KiB of pipelined requests, each far below [limits].header_bytes:
    # the limit is per request head, not per read buffer.
    srv = tern_factory({"limits": {"header_bytes": "1KiB"}})
    srv.write_file("a.txt", b"alpha\n")
    raw = build_request("GET", "/a.txt")
    count = 65536 // len(raw) + 1
    with srv.connect() as conn:
        conn.send(raw * count)
        for i in range(count):
            resp = conn.read_response()
            assert resp.status == 200, f"response {i} of {count}"
            assert resp.body == b"alpha\n"


def test_pipelined_big_responses_flow_when_client_reads_late(tern_factory):
    srv = tern_factory()
    data = bytes(range(256)) * 4096  # 1 MiB
    srv.write_file("big.bin", data)
    with srv.connect() as conn:
        conn.send(build_request("GET", "/big.bin") * 20)
        time.sleep(0.3)  # let the server hit a full socket buffer
        for _ in range(20):
            resp = conn.read_response()
            assert resp.status == 200 and resp.body == data


def test_chunked_request_body_with_extensions_and_trailers_is_consumed(site):
    body = b"5;name=value\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"
    with site.connect() as conn:
        resp = conn.request(build_request("POST", "/a.txt", {"Transfer-Encoding": "chunked"}) + body)
        assert resp.status == 405
        assert conn.get("/b.txt").body == FILES["b.txt"]


def test_request_followed_by_client_half_close_is_answered(site):
    with site.connect() as conn:
        conn.send(build_request("GET", "/c.html"))
        conn.sock.shutdown(socket.SHUT_WR)
        resp = conn.read_response()
        assert resp.status == 200 and resp.body == FILES["c.html"]


def test_header_count_at_the_limit_is_accepted(tern_factory):
    srv = tern_factory({"limits": {"headers": 10}})
    srv.write_file("a.txt", b"alpha\n")
    fields = [(f"X-F{i}", str(i)) for i in range(9)]  # plus Host: 10
    assert srv.get("/a.txt", fields).status == 200
    with srv.connect() as conn:
        resp = conn.get("/a.txt", fields + [("X-F9", "9")])
        assert resp.status == 431
        assert conn.is_closed()


def test_get_with_a_body_has_the_body_skipped(site):
    with site.connect() as conn:
        conn.send(build_request("GET", "/a.txt", {"Content-Length": "28"}) + b"GET /c.html HTTP/1.1\r\nX: y\r\n"
                  + build_request("GET", "/b.txt"))
        assert conn.read_response().body == FILES["a.txt"]
        assert conn.read_response().body == FILES["b.txt"]


@pytest.mark.parametrize("trigger", ["level", "edge"])
def test_pipelining_and_keep_alive_work_in_both_trigger_modes(tern_factory, trigger):
    srv = tern_factory({"trigger": trigger})
    for name, data in FILES.items():
        srv.write_file(name, data)
    with srv.connect() as conn:
        conn.send(b"".join(build_request("GET", "/" + n) for n in FILES))
        for data in FILES.values():
            assert conn.read_response().body == data
        assert conn.get("/a.txt").body == FILES["a.txt"]

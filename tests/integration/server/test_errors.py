"""Malformed and hostile requests: each gets one error response with
Connection: close, then the connection closes; traversal and symlinks never
leak files outside the root; request smuggling never gets a second answer."""

import os

import pytest

from http_client import parse_responses

SECRET = b"TOP-SECRET-CONTENT"
OUTSIDE = b"OUTSIDE-THE-ROOT"


@pytest.fixture
def site(server):
    server.write_file("index.html", b"<h1>home</h1>\n")
    server.write_file("a.txt", b"alpha\n")
    server.write_file("secret.txt", SECRET)
    outside = server.workdir / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(OUTSIDE)
    return server


H = "Host: x\r\n"

MALFORMED = [
    # (id, raw request, expected status)
    ("content-length-and-chunked", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("content-length-not-a-number", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: abc\r\n\r\n", 400),
    ("content-length-negative", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: -1\r\n\r\n", 400),
    ("content-length-plus-sign", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: +5\r\n\r\nhello", 400),
    ("content-length-huge", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: 99999999999999999999999\r\n\r\n", 400),
    ("content-lengths-differ", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
    ("content-length-list-differs", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: 5, 6\r\n\r\nhello!", 400),
    ("unknown-transfer-coding", f"POST /a.txt HTTP/1.1\r\n{H}Transfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n", 501),
    ("last-coding-not-chunked", f"POST /a.txt HTTP/1.1\r\n{H}Transfer-Encoding: chunked, gzip\r\n\r\n", 400),
    ("chunked-twice", f"POST /a.txt HTTP/1.1\r\n{H}Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400),
    ("transfer-encoding-in-http10", "POST /a.txt HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("space-before-colon", f"GET /a.txt HTTP/1.1\r\n{H}X-Thing : 1\r\n\r\n", 400),
    ("nul-in-field-name", f"GET /a.txt HTTP/1.1\r\n{H}X-A\0B: 1\r\n\r\n", 400),
    ("nul-in-field-value", f"GET /a.txt HTTP/1.1\r\n{H}X-A: 1\0 2\r\n\r\n", 400),
    ("obs-fold", f"GET /a.txt HTTP/1.1\r\n{H}X-A: one\r\n  two\r\n\r\n", 400),
    ("bare-lf-line-ends", "GET /a.txt HTTP/1.1\nHost: x\n\n", 400),
    ("bare-lf-in-header", f"GET /a.txt HTTP/1.1\r\nHost: x\nX-A: 1\r\n\r\n", 400),
    ("bare-cr", f"GET /a.txt HTTP/1.1\r\n{H}X-A: 1\r2\r\n\r\n", 400),
    ("missing-host-in-http11", "GET /a.txt HTTP/1.1\r\n\r\n", 400),
    ("duplicate-host", f"GET /a.txt HTTP/1.1\r\n{H}Host: y\r\n\r\n", 400),
    ("empty-field-name", f"GET /a.txt HTTP/1.1\r\n{H}: value\r\n\r\n", 400),
    ("bad-byte-in-method", f"G(T /a.txt HTTP/1.1\r\n{H}\r\n", 400),
    ("control-byte-in-target", f"GET /a\x01.txt HTTP/1.1\r\n{H}\r\n", 400),
    ("malformed-version", f"GET /a.txt HTTP/x.y\r\n{H}\r\n", 400),
    ("lowercase-version", f"GET /a.txt http/1.1\r\n{H}\r\n", 400),
    ("http-2.0", f"GET /a.txt HTTP/2.0\r\n{H}\r\n", 505),
    ("empty-host", "GET /a.txt HTTP/1.1\r\nHost:\r\n\r\n", 400),
    ("uri-too-long", f"GET /{'a' * 9000} HTTP/1.1\r\n{H}\r\n", 414),
    ("header-too-large", f"GET /a.txt HTTP/1.1\r\n{H}X-Big: {'b' * 20000}\r\n\r\n", 431),
    ("too-many-headers", f"GET /a.txt HTTP/1.1\r\n{H}" + "".join(f"X{i}:{i}\r\n" for i in range(1001)) + "\r\n", 431),
    ("body-too-large", f"POST /a.txt HTTP/1.1\r\n{H}Content-Length: {2 * 1024 * 1024}\r\n\r\n", 413),
    ("nul-in-path", f"GET /a.txt%00 HTTP/1.1\r\n{H}\r\n", 400),
    ("bad-percent-escape", f"GET /a%zz.txt HTTP/1.1\r\n{H}\r\n", 400),
    ("truncated-percent-escape", f"GET /a.txt% HTTP/1.1\r\n{H}\r\n", 400),
]


@pytest.mark.parametrize("raw,status", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_request_gets_error_with_close_then_eof(site, raw, status):
    with site.connect() as conn:
        # A valid request follows: it must never be answered.
        conn.send(raw.encode("latin-1") + b"GET /secret.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == status, resp.raw_head
        assert "close" in resp.connection_tokens()
        assert conn.is_closed()


def test_chunked_body_over_the_limit_to_a_static_file_is_405_then_closed(tern_factory):
    # Answered from the head; the body is dropped as it comes, and past the
    # body limit the connection closes (nothing after it is served).
    srv = tern_factory({"limits": {"body_bytes": "64KiB"}})
    srv.write_file("a.txt", b"alpha\n")
    chunk = b"4000\r\n" + b"z" * 0x4000 + b"\r\n"
    with srv.connect() as conn:
        conn.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == 405
        try:
            for _ in range(6):  # 96 KiB
                conn.send(chunk)
            conn.send(b"0\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert conn.is_closed()


def test_bad_chunk_size_behind_an_early_answer_closes_without_serving_the_rest(tern_factory):
    srv = tern_factory()
    srv.write_file("a.txt", b"alpha\n")
    srv.write_file("secret.txt", b"secret\n")
    with srv.connect() as conn:
        conn.send(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"zz\r\nGET /secret.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = conn.read_response()
        assert resp.status == 405
        assert conn.is_closed()


def test_body_at_the_limit_is_accepted(tern_factory):
    srv = tern_factory({"limits": {"body_bytes": "1KiB"}})
    srv.write_file("a.txt", b"alpha\n")
    with srv.connect() as conn:
        resp = conn.request(b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n" + b"q" * 1024)
        assert resp.status == 405  # over the body checks, to the handler
        assert conn.get("/a.txt").body == b"alpha\n"


def test_uri_at_the_limit_is_not_414(tern_factory):
    srv = tern_factory({"limits": {"uri_bytes": "1KiB"}})
    target = "/" + "n" * 1023
    assert srv.get(target).status == 404
    assert srv.get(target + "n").status == 414


# -- traversal -----------------------------------------------------------------

TRAVERSALS = [
    "/../../etc/passwd",
    "/../../../../../../../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd",
    "/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
    "/..%2f..%2f..%2f..%2fetc/passwd",
    "/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/a/b/../../../../../etc/passwd",
    "/./.././../etc/passwd",
    "/..%5c..%5c..%5cetc/passwd",
    "/%252e%252e/%252e%252e/etc/passwd",
    "/etc/passwd%00.html",
    "/..%00/..%00/etc/passwd",
    "/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
    "/../outside/secret.txt",
    "/%2e%2e/outside/secret.txt",
    "/.%2e/outside/secret.txt",
    "/..%2foutside%2fsecret.txt",
    "/../www/../outside/secret.txt",
    "../outside/secret.txt",
    "http://x/../outside/secret.txt",
]


@pytest.mark.parametrize("target", TRAVERSALS)
def test_traversal_never_reads_outside_the_root(site, target):
    with site.connect() as conn:
        resp = conn.request(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n")
        assert resp.status in (400, 403, 404), resp.raw_head
        assert b"root:x:0:0" not in resp.body
        assert OUTSIDE not in resp.body


def test_dot_segments_inside_the_root_resolve(site):
    resp = site.get("/x/../a.txt")
    assert resp.status == 200 and resp.body == b"alpha\n"


# -- symlinks ------------------------------------------------------------------


def make_links(srv):
    outside = srv.workdir / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_bytes(OUTSIDE)
    (outside / "index.html").write_bytes(OUTSIDE)
    srv.write_file("inside.txt", b"inside\n")
    os.symlink(outside / "secret.txt", srv.root / "escape.txt")
    os.symlink(outside, srv.root / "escape_dir")
    os.symlink("../outside/secret.txt", srv.root / "relative_escape.txt")
    os.symlink("inside.txt", srv.root / "alias.txt")


def test_symlink_leaving_the_root_is_403_by_default(server):
    make_links(server)
    for target in ("/escape.txt", "/escape_dir/secret.txt", "/escape_dir/", "/relative_escape.txt"):
        resp = server.get(target)
        assert resp.status == 403, target
        assert OUTSIDE not in resp.body


def test_symlink_inside_the_root_is_followed(server):
    make_links(server)
    resp = server.get("/alias.txt")
    assert resp.status == 200 and resp.body == b"inside\n"


def test_symlink_leaving_the_root_is_served_when_allowed(tern_factory):
    srv = tern_factory({"static": {"allow_symlinks_outside_root": True}})
    make_links(srv)
    for target in ("/escape.txt", "/escape_dir/secret.txt", "/relative_escape.txt"):
        resp = srv.get(target)
        assert resp.status == 200, target
        assert resp.body == OUTSIDE


# -- request smuggling -----------------------------------------------------------

SMUGGLED = b"GET /secret.txt HTTP/1.1\r\nHost: x\r\n\r\n"


def smuggle(head_fields, body):
    return (b"POST /a.txt HTTP/1.1\r\nHost: x\r\n" + head_fields + b"\r\n" + body)


SMUGGLING = {
    # CL says the smuggled request is body; TE says the body ends at "0".
    "cl-te": smuggle(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % (5 + len(SMUGGLED)),
                     b"0\r\n\r\n" + SMUGGLED),
    # TE first: a front end honouring CL would stop after "5c\r\n".
    "te-cl": smuggle(b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n",
                     b"%x\r\n" % len(SMUGGLED) + SMUGGLED + b"\r\n0\r\n\r\n"),
    "cl-cl": smuggle(b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(SMUGGLED), SMUGGLED),
    "te-tab-cl": smuggle(b"Transfer-Encoding:\tchunked\r\nContent-Length: %d\r\n" % (5 + len(SMUGGLED)),
                         b"0\r\n\r\n" + SMUGGLED),
    "te-space-before-colon": smuggle(b"Transfer-Encoding : chunked\r\nContent-Length: %d\r\n" % (5 + len(SMUGGLED)),
                                     b"0\r\n\r\n" + SMUGGLED),
    "te-obfuscated-value": smuggle(b"Transfer-Encoding: xchunked\r\nContent-Length: %d\r\n" % (5 + len(SMUGGLED)),
                                   b"0\r\n\r\n" + SMUGGLED),
    "te-twice": smuggle(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                        b"0\r\n\r\n" + SMUGGLED),
    "te-obs-fold": smuggle(b"Transfer-Encoding:\r\n chunked\r\nContent-Length: %d\r\n" % (5 + len(SMUGGLED)),
                           b"0\r\n\r\n" + SMUGGLED),
}


@pytest.mark.parametrize("raw", list(SMUGGLING.values()), ids=list(SMUGGLING))
def test_smuggled_request_is_never_answered(site, raw):
    with site.connect() as conn:
        conn.send(raw)
        everything = conn.read_until_close()  # bounded by the socket timeout
    responses = parse_responses(everything)
    assert [r.status for r in responses] in ([400], [501]), everything[:300]
    assert "close" in responses[0].connection_tokens()
    assert SECRET not in everything

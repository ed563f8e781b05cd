"""Compression on the fly (gzip and brotli) as an output filter: what is
compressed, what is not, and that what arrives decodes to the original."""

import gzip

import brotli
import pytest

from http_client import HttpConn, build_request


def decode(resp):
    coding = resp.header("Content-Encoding")
    if coding == "gzip":
        return gzip.decompress(resp.body)
    if coding == "br":
        return brotli.decompress(resp.body)
    assert coding is None, coding
    return resp.body


HTML = ("<!DOCTYPE html><p>" + "tern compresses text on the fly. " * 200 + "</p>\n").encode()
CSS = ("body { margin: 0; padding: 0; } " * 100).encode()
BIG_JS = ("console.log('a line of a large bundle');\n" * 30000).encode()  # ~1.2 MB: above max_file


@pytest.fixture
def site(tern_factory, fpm):
    srv = tern_factory({
        "compression": {"enabled": True, "min_size": "256"},
        "server": [{"location": [
            {"prefix": "/"},
            {"prefix": "/raw/", "compress": False},
            {"exact": "/hello", "return": {"status": 200, "body": "hello " * 100, "type": "text/plain"}},
            {"regex": r"\.php$", "fastcgi": {"pass": fpm.pass_address, "pool": 2}},
        ]}],
    }, name="z")
    srv.write_file("page.html", HTML)
    srv.write_file("style.css", CSS)
    srv.write_file("tiny.html", b"<p>tiny</p>")
    srv.write_file("logo.png", b"\x89PNG" + b"\0" * 5000)
    srv.write_file("bundle.js", BIG_JS)
    srv.write_file("raw/page.html", HTML)
    srv.write_file("pre.css", CSS)
    srv.write_file("pre.css.gz", gzip.compress(CSS))
    srv.write_file("pre.css.br", brotli.compress(CSS))
    srv.write_file("stream.php", """<?php
header('Content-Type: text/plain; charset=utf-8');
for ($i = 0; $i < 50; $i++) { echo str_repeat("line $i of a streamed answer\\n", 20); flush(); }
""")
    return srv


@pytest.mark.parametrize("accept, coding", [("gzip", "gzip"), ("br", "br"), ("gzip, br", "br"),
                                            ("br;q=0, gzip", "gzip"), ("identity", None)])
def test_static_text_is_compressed_by_accept_encoding(site, accept, coding):
    resp = site.get("/page.html", headers=[("Accept-Encoding", accept)])
    assert resp.status == 200
    assert resp.header("Content-Encoding") == coding
    assert resp.header("Vary") == "Accept-Encoding"
    assert decode(resp) == HTML
    if coding:
        assert len(resp.body) < len(HTML) / 5
        assert resp.header("ETag").startswith('W/"')  # another representation
        assert int(resp.header("Content-Length")) == len(resp.body)


def test_what_is_never_compressed(site):
    gz = [("Accept-Encoding", "gzip, br")]
    assert site.get("/tiny.html", headers=gz).header("Content-Encoding") is None   # below min_size
    png = site.get("/logo.png", headers=gz)
    assert png.header("Content-Encoding") is None and png.header("Vary") is None   # not a text type
    assert site.get("/raw/page.html", headers=gz).header("Content-Encoding") is None  # compress = false
    big = site.get("/bundle.js", headers=gz)
    assert big.header("Content-Encoding") is None and big.body == BIG_JS           # above max_file
    ranged = site.get("/page.html", headers=gz + [("Range", "bytes=0-99")])
    assert ranged.status == 206 and ranged.header("Content-Encoding") is None
    assert ranged.body == HTML[:100]
    etag = site.get("/page.html").header("ETag")
    not_modified = site.get("/page.html", headers=gz + [("If-None-Match", etag)])
    assert not_modified.status == 304 and not_modified.header("Content-Encoding") is None
    assert not_modified.header("Vary") == "Accept-Encoding"  # as the 200 it stands for
    head = site.get("/page.html", headers=gz, method="HEAD")
    assert head.status == 200 and head.body == b""


def test_precompressed_siblings_win(site):
    resp = site.get("/pre.css", headers=[("Accept-Encoding", "gzip, br")])
    assert resp.header("Content-Encoding") == "br" and brotli.decompress(resp.body) == CSS
    assert resp.header("ETag").startswith('"')  # the sibling's own, strong
    assert resp.header("Vary") == "Accept-Encoding"
    resp = site.get("/pre.css", headers=[("Accept-Encoding", "gzip")])
    assert resp.header("Content-Encoding") == "gzip" and gzip.decompress(resp.body) == CSS
    resp = site.get("/pre.css")
    assert resp.header("Content-Encoding") is None and resp.body == CSS


def test_small_files_are_compressed_once_and_stay_correct(site):
    for _ in range(3):
        resp = site.get("/style.css", headers=[("Accept-Encoding", "gzip")])
        assert decode(resp) == CSS
        resp = site.get("/style.css", headers=[("Accept-Encoding", "br")])
        assert decode(resp) == CSS


def test_a_return_body_is_compressed(site):
    resp = site.get("/hello", headers=[("Accept-Encoding", "gzip")])
    assert resp.header("Content-Encoding") == "gzip" and decode(resp) == b"hello " * 100


def test_chunked_php_output_is_compressed_as_it_streams(site):
    expected = b"".join(f"line {i} of a streamed answer\n".encode() * 20 for i in range(50))
    for accept in ("gzip", "br"):
        resp = site.get("/stream.php", headers=[("Accept-Encoding", accept)])
        assert resp.status == 200 and resp.header("Content-Encoding") == accept
        assert resp.header("Transfer-Encoding") == "chunked"
        assert decode(resp) == expected
    plain = site.get("/stream.php")
    assert plain.header("Content-Encoding") is None and plain.body == expected


def test_http10_gets_a_compressed_body_ended_by_the_close(site):
    with HttpConn.open(site.port) as conn:
        resp = conn.request(build_request("GET", "/stream.php", [("Accept-Encoding", "gzip")], "HTTP/1.0"))
        assert resp.header("Content-Encoding") == "gzip"
        assert b"line 49 of a streamed answer" in gzip.decompress(resp.body)

"""Static files: index, redirects, conditional and range requests, gzip
siblings, zero-copy modes."""

import email.utils
import gzip
import os
import socket
import struct
import time

import pytest

from tern_server import sha256

BODY = bytes(range(256)) * 40  # 10240 bytes, every byte value
SIZE = len(BODY)


@pytest.fixture
def site(server):
    server.write_file("index.html", b"<h1>home</h1>\n")
    server.write_file("data.bin", BODY)
    server.write_file("style.css", b"body{}\n")
    server.write_file("notes.txt", b"plain text\n")
    server.write_file("hello world.txt", b"spaced\n")
    server.write_file("sub/index.html", b"<p>sub</p>\n")
    (server.root / "empty_dir").mkdir()
    server.write_file("zero.txt", b"")
    return server


# -- files, directories, types ------------------------------------------------


def test_root_serves_index_html(site):
    resp = site.get("/")
    assert resp.status == 200
    assert resp.body == b"<h1>home</h1>\n"
    assert resp.header("Content-Type").startswith("text/html")


def test_directory_without_slash_redirects_to_slash(site):
    resp = site.get("/sub")
    assert resp.status == 301
    assert resp.header("Location").endswith("/sub/")
    follow = site.get("/sub/")
    assert follow.status == 200 and follow.body == b"<p>sub</p>\n"


def test_directory_without_index_is_403(site):
    assert site.get("/empty_dir/").status == 403


def test_missing_file_is_404_and_connection_stays_usable(site):
    with site.connect() as conn:
        assert conn.get("/no/such/file.txt").status == 404
        assert conn.get("/notes.txt").body == b"plain text\n"


@pytest.mark.parametrize("name,mime", [("style.css", "text/css"), ("notes.txt", "text/plain"),
                                       ("index.html", "text/html")])
def test_content_type_follows_extension(site, name, mime):
    assert site.get("/" + name).header("Content-Type").split(";")[0] == mime


def test_percent_encoded_path_is_decoded(site):
    resp = site.get("/hello%20world.txt")
    assert resp.status == 200 and resp.body == b"spaced\n"


def test_query_string_is_ignored_for_file_lookup(site):
    resp = site.get("/notes.txt?v=3&x=y")
    assert resp.status == 200 and resp.body == b"plain text\n"


def test_empty_file_has_content_length_zero(site):
    with site.connect() as conn:
        resp = conn.get("/zero.txt")
        assert resp.status == 200
        assert resp.header("Content-Length") == "0" and resp.body == b""
        assert conn.get("/notes.txt").body == b"plain text\n"


def test_file_changed_on_disk_is_served_fresh_after_cache_validity(tern_factory):
    srv = tern_factory({"static": {"cache_valid": "100ms"}})
    srv.write_file("v.txt", b"version one\n")
    assert srv.get("/v.txt").body == b"version one\n"
    path = srv.root / "v.txt"
    path.write_bytes(b"version two, longer\n")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    time.sleep(0.5)
    resp = srv.get("/v.txt")
    assert resp.body == b"version two, longer\n"
    assert resp.header("Content-Length") == str(len(b"version two, longer\n"))


# -- conditional requests ---------------------------------------------------


def test_if_none_match_with_current_etag_is_304_without_body(site):
    with site.connect() as conn:
        first = conn.get("/data.bin")
        etag = first.header("ETag")
        assert etag
        cond = conn.get("/data.bin", {"If-None-Match": etag})
        assert cond.status == 304
        assert cond.header("ETag") == etag
        # No body followed the 304: the next response parses.
        assert conn.get("/notes.txt").body == b"plain text\n"


def test_if_none_match_in_a_list_and_star_are_304(site):
    etag = site.get("/data.bin").header("ETag")
    assert site.get("/data.bin", {"If-None-Match": f'"nope", {etag}'}).status == 304
    assert site.get("/data.bin", {"If-None-Match": "*"}).status == 304


def test_if_none_match_with_other_etag_is_200(site):
    resp = site.get("/data.bin", {"If-None-Match": '"not-the-etag"'})
    assert resp.status == 200 and resp.body == BODY


def test_if_modified_since_last_modified_is_304(site):
    last_modified = site.get("/data.bin").header("Last-Modified")
    assert last_modified.endswith(" GMT")
    with site.connect() as conn:
        resp = conn.get("/data.bin", {"If-Modified-Since": last_modified})
        assert resp.status == 304
        assert conn.get("/notes.txt").body == b"plain text\n"


def test_if_modified_since_older_date_is_200(site):
    last_modified = email.utils.parsedate_to_datetime(site.get("/data.bin").header("Last-Modified"))
    older = email.utils.format_datetime(last_modified.replace(year=last_modified.year - 1), usegmt=True)
    resp = site.get("/data.bin", {"If-Modified-Since": older})
    assert resp.status == 200 and resp.body == BODY


def test_if_none_match_takes_precedence_over_if_modified_since(site):
    last_modified = site.get("/data.bin").header("Last-Modified")
    resp = site.get("/data.bin", {"If-None-Match": '"other"', "If-Modified-Since": last_modified})
    assert resp.status == 200 and resp.body == BODY


def test_a_failed_if_match_or_if_unmodified_since_is_412_as_in_nginx(site):
    first = site.get("/data.bin")
    etag, last_modified = first.header("ETag"), first.header("Last-Modified")
    older = "Mon, 01 Jan 2001 00:00:00 GMT"
    with site.connect() as conn:
        assert conn.get("/data.bin", {"If-Match": etag}).status == 200
        assert conn.get("/data.bin", {"If-Match": "*"}).status == 200
        failed = conn.get("/data.bin", {"If-Match": '"other"', "If-None-Match": etag})
        assert failed.status == 412 and b"412" in failed.body
        assert conn.get("/data.bin", {"If-Match": "W/" + etag}).status == 412  # compared strongly
        assert conn.get("/data.bin", {"If-Unmodified-Since": last_modified}).status == 200
        assert conn.get("/data.bin", {"If-Unmodified-Since": older}).status == 412
        assert conn.get("/notes.txt").body == b"plain text\n"  # the connection is in step


# -- ranges -------------------------------------------------------------------


@pytest.mark.parametrize("spec,first,last", [
    ("bytes=0-9", 0, 9),
    ("bytes=100-355", 100, 355),
    ("bytes=-10", SIZE - 10, SIZE - 1),           # suffix
    ("bytes=10000-", 10000, SIZE - 1),           # open-ended
    ("bytes=10000-99999", 10000, SIZE - 1),      # last byte past the end
    ("bytes=-99999", 0, SIZE - 1),               # suffix longer than the file
])
def test_single_range_is_206_with_content_range(site, spec, first, last):
    with site.connect() as conn:
        resp = conn.get("/data.bin", {"Range": spec})
        assert resp.status == 206
        assert resp.header("Content-Range") == f"bytes {first}-{last}/{SIZE}"
        assert resp.header("Content-Length") == str(last - first + 1)
        assert resp.body == BODY[first:last + 1]
        assert conn.get("/notes.txt").body == b"plain text\n"


@pytest.mark.parametrize("spec", [f"bytes={SIZE}-", f"bytes={SIZE + 5}-{SIZE + 10}", "bytes=-0"])
def test_unsatisfiable_range_is_416_with_size(site, spec):
    resp = site.get("/data.bin", {"Range": spec})
    assert resp.status == 416
    assert resp.header("Content-Range") == f"bytes */{SIZE}"


def test_several_ranges_get_the_whole_file(site):
    resp = site.get("/data.bin", {"Range": "bytes=0-1,5-6"})
    assert resp.status == 200
    assert resp.body == BODY


def test_malformed_range_is_ignored(site):
    resp = site.get("/data.bin", {"Range": "bytes=abc"})
    assert resp.status == 200 and resp.body == BODY


def test_head_with_range_has_no_body(site):
    # RFC 9110 14.2 defines ranges for GET only, so 200 (ignored) and 206
    # (nginx) are both fine; the length must match whichever it is.
    with site.connect() as conn:
        resp = conn.get("/data.bin", {"Range": "bytes=0-99"}, method="HEAD")
        assert resp.status in (200, 206)
        assert resp.header("Content-Length") == ("100" if resp.status == 206 else str(SIZE))
        assert conn.get("/notes.txt").body == b"plain text\n"


def test_if_range_with_current_etag_serves_the_range(site):
    etag = site.get("/data.bin").header("ETag")
    resp = site.get("/data.bin", {"Range": "bytes=5-9", "If-Range": etag})
    assert resp.status == 206 and resp.body == BODY[5:10]


def test_if_range_with_current_date_serves_the_range(site):
    last_modified = site.get("/data.bin").header("Last-Modified")
    resp = site.get("/data.bin", {"Range": "bytes=5-9", "If-Range": last_modified})
    assert resp.status == 206 and resp.body == BODY[5:10]


@pytest.mark.parametrize("validator", ['"stale-etag"', "Mon, 01 Jan 2001 00:00:00 GMT"])
def test_if_range_not_matching_serves_the_whole_file(site, validator):
    resp = site.get("/data.bin", {"Range": "bytes=5-9", "If-Range": validator})
    assert resp.status == 200
    assert resp.body == BODY


# -- gzip siblings ----------------------------------------------------------------


@pytest.fixture
def gz_site(server):
    plain = b"compress me please " * 200
    server.write_file("page.txt", plain)
    server.write_file("page.txt.gz", gzip.compress(plain))
    return server, plain


def test_gz_sibling_is_served_to_clients_accepting_gzip(gz_site):
    srv, plain = gz_site
    resp = srv.get("/page.txt", {"Accept-Encoding": "gzip, deflate"})
    assert resp.status == 200
    assert resp.header("Content-Encoding") == "gzip"
    assert "accept-encoding" in resp.header("Vary").lower()
    assert resp.header("Content-Type").startswith("text/plain")
    assert resp.body == (srv.root / "page.txt.gz").read_bytes()
    assert gzip.decompress(resp.body) == plain


@pytest.mark.parametrize("accept", [None, "identity", "br", "gzip;q=0"])
def test_plain_file_is_served_to_clients_not_accepting_gzip(gz_site, accept):
    srv, plain = gz_site
    resp = srv.get("/page.txt", {"Accept-Encoding": accept} if accept else {})
    assert resp.status == 200
    assert resp.header("Content-Encoding") is None
    assert resp.body == plain
    # Once the sibling is known (a client that takes gzip asked), caches
    # learn that the answer depends on Accept-Encoding.
    assert srv.get("/page.txt", {"Accept-Encoding": "gzip"}).header("Content-Encoding") == "gzip"
    resp = srv.get("/page.txt", {"Accept-Encoding": accept} if accept else {})
    assert resp.body == plain
    assert "accept-encoding" in (resp.header("Vary") or "").lower()


def test_gz_sibling_etag_differs_from_plain_etag(gz_site):
    srv, _ = gz_site
    plain = srv.get("/page.txt")
    packed = srv.get("/page.txt", {"Accept-Encoding": "gzip"})
    assert plain.header("ETag") != packed.header("ETag")


def test_gzip_static_off_serves_plain_file(tern_factory):
    srv = tern_factory({"static": {"gzip_static": False}})
    srv.write_file("page.txt", b"plain")
    srv.write_file("page.txt.gz", gzip.compress(b"plain"))
    resp = srv.get("/page.txt", {"Accept-Encoding": "gzip"})
    assert resp.header("Content-Encoding") is None and resp.body == b"plain"


# -- zero-copy modes -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "sendfile", "mmap"])
def test_zero_copy_mode_serves_file_and_ranges_intact(tern_factory, mode):
    srv = tern_factory({"static": {"zero_copy": mode}})
    data = os.urandom(3 * 1024 * 1024 + 17)
    srv.write_file("blob.bin", data)
    with srv.connect() as conn:
        resp = conn.get("/blob.bin")
        assert resp.status == 200 and sha256(resp.body) == sha256(data)
        part = conn.get("/blob.bin", {"Range": "bytes=1048570-2097160"})
        assert part.status == 206 and part.body == data[1048570:2097161]


@pytest.mark.parametrize("nopush, segments", [(True, 1), (False, 2)])
def test_tcp_nopush_decides_whether_a_head_leaves_with_its_file(tern_factory, nopush, segments):
    # A keep-alive response (a close would hold the head for the FIN anyway)
    # of a file sent by sendfile (above the 16 KiB kept in memory) that fits
    # one loopback segment with its head: held, the head and the file reach
    # the client in one segment; with tcp_nopush = false, in two.
    srv = tern_factory({"tcp_nopush": nopush})
    data = os.urandom(24 * 1024)
    srv.write_file("f.bin", data)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"GET /f.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while b"\r\n\r\n" not in got:
            got += sock.recv(65536)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" not in head
        while len(body) < len(data):
            chunk = sock.recv(65536)
            assert chunk, "closed before the whole file came"
            body += chunk
        assert body == data
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    if len(info) < 156:
        pytest.skip("no tcpi_data_segs_in in this kernel")
    (data_segs_in,) = struct.unpack_from("I", info, 152)  # include/uapi/linux/tcp.h
    assert data_segs_in == segments


# -- validators and redirects, finer points ---------------------------------------


def test_weak_etag_in_if_none_match_matches(site):
    etag = site.get("/data.bin").header("ETag")
    assert site.get("/data.bin", {"If-None-Match": "W/" + etag}).status == 304


def test_weak_etag_in_if_range_does_not_match(site):
    # If-Range needs a strong match (RFC 9110 13.1.5): send the whole file.
    etag = site.get("/data.bin").header("ETag")
    resp = site.get("/data.bin", {"Range": "bytes=0-3", "If-Range": "W/" + etag})
    assert resp.status == 200 and resp.body == BODY


def test_unparseable_if_modified_since_is_ignored(site):
    resp = site.get("/data.bin", {"If-Modified-Since": "yesterday-ish"})
    assert resp.status == 200 and resp.body == BODY


def test_directory_redirect_keeps_the_query_string(site):
    resp = site.get("/sub?page=2")
    assert resp.status == 301
    assert resp.header("Location").endswith("/sub/?page=2")


def test_directory_redirect_keeps_percent_encoding(site):
    site.write_file("my dir/index.html", b"spaced dir\n")
    resp = site.get("/my%20dir")
    assert resp.status == 301
    location = resp.header("Location")
    assert location.endswith("/my%20dir/"), location
    assert site.get("/my%20dir/").body == b"spaced dir\n"

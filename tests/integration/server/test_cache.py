"""[[cache]]: responses of a proxied application kept on disk and served
again, as nginx's proxy_cache (the FastCGI side is in test_fastcgi.py).
The application is upstream_app.py's /cached, which says in its body how
many requests reached it, so a test tells a stored response from a new one
and counts what went to the origin."""

import json
import os
import signal
import socket
import struct
import subprocess
import time
import tomllib
import urllib.parse
from collections import Counter
from pathlib import Path

import pytest

from http_client import ConnectionClosed, HttpConn
from tern_server import scaled
from test_proxy import BadUpstream, apps, site  # noqa: F401 (apps is a fixture)


def cached_site(app, cache_dir, cache=None, zone=None, location=None):
    """One site passing / to `app` through the zone "pages" in cache_dir."""
    loc = {"prefix": "/", "proxy": {"pass": f"http://{app.address}", "cache": {"zone": "pages", **(cache or {})}},
           **(location or {})}
    return site(loc, cache=[{"name": "pages", "path": str(cache_dir), **(zone or {})}])


def url(path="/cached/page", *fields, **query):
    """A /cached target whose response carries `fields` ("Name: value")."""
    params = [("h", f) for f in fields] + list(query.items())
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def origin_count(app):
    return int(app.get("/cachedcount").body)


def status(resp):
    return resp.header("Cache-Status") or ""


def is_hit(resp):
    return status(resp).startswith("tern; hit")


def entry_files(cache_dir):
    return [p for p in Path(cache_dir).rglob("*") if p.is_file()]


@pytest.fixture
def origin(apps):
    return apps("origin")[0]


def test_a_stored_response_is_served_again_without_the_origin(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/a", "Cache-Control: max-age=60", "X-App: kept")
    with srv.connect() as conn:
        first = conn.get(target)
        second = conn.get(target)
        third = conn.get(target)
    assert first.status == 200 and status(first) == "tern; fwd=uri-miss"
    assert is_hit(second) and is_hit(third), status(second)
    assert second.body == third.body == first.body == b"origin #1 /cached/a\n"
    assert second.header("X-App") == "kept" and second.header("Cache-Control") == "max-age=60"
    assert second.header("Content-Type") == first.header("Content-Type")
    assert 55 <= int(status(second).split("ttl=")[1]) <= 60
    assert 0 <= int(second.header("Age")) <= 5
    assert origin_count(origin) == 1
    # The whole target is the key: another query is another entry.
    other = srv.get(url("/cached/a", "Cache-Control: max-age=60", x="1"))
    assert status(other) == "tern; fwd=uri-miss" and origin_count(origin) == 2
    assert len(entry_files(tmp_path / "cache")) == 2


@pytest.mark.parametrize("fields", [
    ["Cache-Control: no-store, max-age=60"],
    ["Cache-Control: private, max-age=60"],
    ["Cache-Control: max-age=60", "Set-Cookie: session=1"],
    ["Cache-Control: max-age=60", "Vary: *"],
    [],  # no lifetime, and none configured
    ["Cache-Control: no-cache, max-age=60"],  # every use revalidated, with nothing to revalidate by
    ["Cache-Control: max-age=0"],
], ids=["no-store", "private", "set-cookie", "vary-star", "no-lifetime", "no-cache", "max-age-0"])
def test_what_may_not_be_stored_always_goes_to_the_origin(tern_factory, origin, tmp_path, fields):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/no", *fields)
    bodies = [srv.get(target).body for _ in range(3)]
    assert bodies == [b"origin #1 /cached/no\n", b"origin #2 /cached/no\n", b"origin #3 /cached/no\n"]
    assert entry_files(tmp_path / "cache") == []


def test_a_lifetime_runs_out_and_the_next_request_refills(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache", cache={"valid": {"404": "2s"}}))
    target = url("/cached/short", "Cache-Control: max-age=2")
    assert srv.get(target).body.startswith(b"origin #1")
    assert is_hit(srv.get(target))
    # valid gives a lifetime to a status that brings none.
    missing = url("/cached/gone", status="404")
    assert srv.get(missing).status == 404
    again = srv.get(missing)
    assert again.status == 404 and is_hit(again) and again.body.startswith(b"origin #2")
    time.sleep(3.1)
    stale = srv.get(target)
    assert status(stale) == "tern; fwd=stale" and stale.body.startswith(b"origin #3")
    assert is_hit(srv.get(target))
    assert status(srv.get(missing)) == "tern; fwd=stale"


def test_s_maxage_beats_max_age_and_expires_counts_from_date(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    shared = url("/cached/s", "Cache-Control: max-age=0, s-maxage=60")
    srv.get(shared)
    assert is_hit(srv.get(shared))
    now = time.time()
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now - 3600))
    expires = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now - 3600 + 120))
    dated = url("/cached/e", f"Date: {date}", f"Expires: {expires}")
    srv.get(dated)
    hit = srv.get(dated)
    assert is_hit(hit) and 110 <= int(status(hit).split("ttl=")[1]) <= 120


def test_vary_keeps_one_response_per_variant(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/v", "Cache-Control: max-age=60", "Vary: Accept-Language")
    de = [("Accept-Language", "de")]
    fr = [("Accept-Language", "fr")]
    assert srv.get(target, de).body.startswith(b"origin #1")
    assert status(srv.get(target, fr)) == "tern; fwd=vary-miss"
    got_de, got_fr = srv.get(target, de), srv.get(target, fr)
    assert is_hit(got_de) and got_de.body.startswith(b"origin #1")
    assert is_hit(got_fr) and got_fr.body.startswith(b"origin #2")
    assert status(srv.get(target)) == "tern; fwd=vary-miss"  # no Accept-Language is a variant too
    assert is_hit(srv.get(target)) and origin_count(origin) == 3


def test_vary_compares_every_line_of_a_field_and_tells_empty_from_absent(tern_factory, origin, tmp_path):
    """RFC 9111 4.1: a field sent on several lines is compared whole (its
    lines joined), so a request that shares only the first line is another
    variant; a field sent empty is not the same as one not sent."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/vl", "Cache-Control: max-age=60", "Vary: X-Lang")
    en_fr = [("X-Lang", "en"), ("X-Lang", "fr")]
    assert srv.get(target, en_fr).body.startswith(b"origin #1")
    other = srv.get(target, [("X-Lang", "en"), ("X-Lang", "de")])
    assert status(other) == "tern; fwd=vary-miss" and other.body.startswith(b"origin #2")
    # The same list on one line is the same value.
    joined = srv.get(target, [("X-Lang", "en, fr")])
    assert is_hit(joined) and joined.body.startswith(b"origin #1")
    assert status(srv.get(target)) == "tern; fwd=vary-miss"  # not sent
    empty = srv.get(target, [("X-Lang", "")])
    assert status(empty) == "tern; fwd=vary-miss" and empty.body.startswith(b"origin #4")
    assert is_hit(srv.get(target)) and is_hit(srv.get(target, [("X-Lang", "")]))
    assert origin_count(origin) == 4


def test_a_request_with_authorization_is_answered_only_from_a_public_response(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    auth = [("Authorization", "Bearer secret")]
    private = url("/cached/p", "Cache-Control: max-age=60")
    srv.get(private)
    assert is_hit(srv.get(private))
    asked = srv.get(private, auth)
    assert status(asked) == "tern; fwd=request" and asked.body.startswith(b"origin #2")
    public = url("/cached/q", "Cache-Control: public, max-age=60")
    srv.get(public, auth)
    assert is_hit(srv.get(public, auth)) and is_hit(srv.get(public))


def test_conditional_and_range_requests_are_answered_from_the_entry(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    modified = "Tue, 01 Dec 2026 10:00:00 GMT"
    for size in (100, 300_000):  # a body kept in memory, and one sent from its file
        target = url(f"/cached/c{size}", "Cache-Control: max-age=60", 'ETag: "v1"', f"Last-Modified: {modified}",
                     n=str(size))
        whole = srv.get(target).body
        assert len(whole) == size
        with srv.connect() as conn:
            same = conn.get(target, [("If-None-Match", '"v0", "v1"')])
            assert same.status == 304 and same.body == b"" and same.header("ETag") == '"v1"' and is_hit(same)
            since = conn.get(target, [("If-Modified-Since", modified)])
            assert since.status == 304
            changed = conn.get(target, [("If-None-Match", '"v2"')])
            assert changed.status == 200 and changed.body == whole
            part = conn.get(target, [("Range", "bytes=10-49")])
            assert part.status == 206 and part.body == whole[10:50]
            assert part.header("Content-Range") == f"bytes 10-49/{size}"
            tail = conn.get(target, [("Range", f"bytes=-{size // 2}")])
            assert tail.status == 206 and tail.body == whole[-(size // 2):]
            outside = conn.get(target, [("Range", f"bytes={size}-")])
            assert outside.status == 416 and outside.header("Content-Range") == f"bytes */{size}"
            stale_validator = conn.get(target, [("Range", "bytes=0-9"), ("If-Range", '"v0"')])
            assert stale_validator.status == 200 and stale_validator.body == whole
            # The preconditions come first (RFC 9110 13.2.2): If-Match
            # compares strongly, If-Unmodified-Since with Last-Modified.
            assert conn.get(target, [("If-Match", '"v1"')]).status == 200
            assert conn.get(target, [("If-Match", '"v2"'), ("If-None-Match", '"v1"')]).status == 412
            failed = conn.get(target, [("If-Match", 'W/"v1"')])
            assert failed.status == 412 and is_hit(failed), status(failed)  # answered by the entry, and says so
            assert conn.get(target, [("If-Unmodified-Since", modified)]).status == 200
            assert conn.get(target, [("If-Unmodified-Since", "Mon, 30 Nov 2026 10:00:00 GMT")]).status == 412
            head = conn.get(target, method="HEAD")
            assert head.status == 200 and head.body == b"" and is_hit(head)
            assert conn.get(target).body == whole  # the connection is in step
    assert origin_count(origin) == 2
    # "*" matches any stored representation, with or without an ETag (RFC 9110 13.1.2).
    bare = url("/cached/bare", "Cache-Control: max-age=60")
    srv.get(bare)
    assert srv.get(bare, [("If-None-Match", "*")]).status == 304


@pytest.mark.parametrize("size", [100, 300_000], ids=["memory", "file"])
def test_a_miss_answers_the_clients_conditions_and_range_from_the_response(tern_factory, origin, tmp_path, size):
    """The fill asks the origin for the whole response; the client's
    preconditions, conditional fields and Range are then answered from it
    as they would be from the entry (nginx answers a cacheable response's
    the same way), and the entry is stored whole all the same."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    modified = "Tue, 01 Dec 2026 10:00:00 GMT"

    def target(name, *fields):
        return url(f"/cached/{name}", "Cache-Control: max-age=60", 'ETag: "m1"', f"Last-Modified: {modified}",
                   *fields, n=str(size))

    cases = [
        ("inm", [("If-None-Match", '"m0", "m1"')], 304),
        ("ims", [("If-Modified-Since", modified)], 304),
        ("inm-other", [("If-None-Match", '"m2"')], 200),
        ("if-match", [("If-Match", '"m2"')], 412),
        ("ius", [("If-Unmodified-Since", "Mon, 30 Nov 2026 10:00:00 GMT")], 412),
        ("range", [("Range", "bytes=10-49")], 206),
        ("suffix", [("Range", f"bytes=-{size // 2}")], 206),
        ("outside", [("Range", f"bytes={size}-")], 416),
        ("if-range-other", [("Range", "bytes=0-9"), ("If-Range", '"m0"')], 200),
        ("if-range", [("Range", "bytes=0-9"), ("If-Range", '"m1"')], 206),
    ]
    with srv.connect() as conn:
        for name, fields, code in cases:
            got = conn.get(target(name, "X-Kept: yes"), fields)
            assert got.status == code, (name, got.status)
            assert status(got) == "tern; fwd=uri-miss", name
            assert json.loads(origin.get("/cachedlast").body)["if_none_match"] is None
            # The connection is in step, and the entry whole: a hit, or
            # collapsed onto the fill when the call still reads on for it.
            hit = conn.get(target(name, "X-Kept: yes"))
            assert is_hit(hit) or status(hit) == "tern; fwd=uri-miss; collapsed", (name, status(hit))
            assert len(hit.body) == size, name
            whole = hit.body
            assert whole.startswith(b"origin #") and f"/cached/{name}".encode() in whole
            if code == 304:
                assert got.body == b"" and got.header("ETag") == '"m1"' and got.header("X-Kept") == "yes"
                assert got.header("Last-Modified") == modified and got.header("Cache-Control") == "max-age=60"
                assert got.header("Content-Type") is None
            if code == 206:
                first, last = (10, 49) if name == "range" else (size - size // 2, size - 1) \
                    if name == "suffix" else (0, 9)
                assert got.body == whole[first:last + 1], name
                assert got.header("Content-Range") == f"bytes {first}-{last}/{size}"
                assert got.header("Content-Length") == str(last - first + 1)
            if code == 416:
                assert got.header("Content-Range") == f"bytes */{size}" and got.body == b""
            if code == 200:
                assert got.body == whole
    assert origin_count(origin) == len(cases)
    # A HEAD is answered the head of a 200, Range or not.
    head = srv.get(target("head"), [("Range", "bytes=0-9")], method="HEAD")
    assert head.status == 200 and head.header("Content-Length") == str(size) and head.body == b""
    # A response the entry does not take is relayed as it came (as nginx
    # does), and its connection to the origin kept.
    no_store = url("/cached/ns", "Cache-Control: no-store", 'ETag: "n1"', n=str(size))
    with srv.connect() as conn:
        whole = conn.get(no_store, [("Range", "bytes=5-14")])
        assert whole.status == 200 and len(whole.body) == size
        assert conn.get(no_store, [("If-None-Match", '"n1"')]).status == 200
    assert origin_count(origin) == len(cases) + 3
    assert srv.get(url("/cached/alive")).status == 200


def test_a_range_on_a_miss_is_answered_before_the_origin_has_sent_the_rest(tern_factory, origin, tmp_path):
    """The client's range goes out as soon as it has come; the call reads
    on for the entry without the client, which may send its next request
    on the same connection meanwhile."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    slow = url("/cached/slow", "Cache-Control: max-age=60", n="200000", body_delay="2")
    with srv.connect() as conn:
        began = time.monotonic()
        part = conn.get(slow, [("Range", "bytes=0-99")])
        assert part.status == 206 and part.body.startswith(b"origin #1 /cached/slow") and len(part.body) == 100
        assert time.monotonic() - began < 1.5
        other = conn.get(url("/cached/other", "Cache-Control: max-age=60"))
        assert other.status == 200 and time.monotonic() - began < 1.5
        # From the entry the call filled for the range's request (at once,
        # or once the origin's rest has come).
        hit = conn.get(slow)
        assert is_hit(hit) or status(hit) == "tern; fwd=uri-miss; collapsed", status(hit)
        assert len(hit.body) == 200_000 and hit.body[:100] == part.body
    assert origin_count(origin) == 2


@pytest.mark.parametrize("size", [100, 300_000], ids=["memory", "file"])
def test_a_head_that_misses_fills_the_entry_with_a_get(tern_factory, origin, tmp_path, size):
    # nginx's proxy_cache_convert_head (on by default): the application is
    # asked GET, the entry keeps the body, the HEAD gets the head alone with
    # the body's length, and GETs are answered from the entry afterwards.
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/head", "Cache-Control: max-age=60", n=str(size))
    with srv.connect() as conn:
        head = conn.get(target, method="HEAD")
        assert head.status == 200 and head.body == b"" and status(head) == "tern; fwd=uri-miss"
        assert head.header("Content-Length") == str(size)
        assert json.loads(origin.get("/cachedlast").body)["method"] == "GET"
        got = conn.get(target)  # the connection is in step after the HEAD
        assert is_hit(got) and len(got.body) == size and got.body.startswith(b"origin #1 /cached/head")
        assert is_hit(conn.get(target, method="HEAD"))
    assert origin_count(origin) == 1
    # Where nothing may be stored, the HEAD stays a HEAD.
    no_store = tern_factory(cached_site(origin, tmp_path / "cache2", {"no_store": ["$http_x_private"]}))
    assert no_store.get(target, [("X-Private", "1")], method="HEAD").status == 200
    assert json.loads(origin.get("/cachedlast").body)["method"] == "HEAD"


def test_a_restart_keeps_the_cache(tern_factory, origin, tmp_path):
    cache_dir = tmp_path / "cache"
    srv = tern_factory(cached_site(origin, cache_dir))
    small = url("/cached/r1", "Cache-Control: max-age=600")
    large = url("/cached/r2", "Cache-Control: max-age=600", n="200000")
    varied = url("/cached/r3", "Cache-Control: max-age=600", "Vary: X-Lang")
    first_small, first_large = srv.get(small).body, srv.get(large).body
    first_varied = srv.get(varied, [("X-Lang", "en")]).body
    assert srv.stop() == 0
    srv.start()
    assert srv.wait_for_log("cache pages: 4 entries")  # the variant and its marker
    a, b = srv.get(small), srv.get(large)
    assert is_hit(a) and a.body == first_small
    assert is_hit(b) and b.body == first_large
    c = srv.get(varied, [("X-Lang", "en")])
    assert is_hit(c) and c.body == first_varied
    assert origin_count(origin) == 3


def test_kill_9_during_a_fill_leaves_no_entry_to_serve(tern_factory, origin, tmp_path):
    cache_dir = tmp_path / "cache"
    # /stream sends 50 pieces of 1 MiB, 40 ms apart: about 2 s of filling.
    srv = tern_factory(cached_site(origin, cache_dir, cache={"valid": {"200": "1h"}}))
    kept = url("/cached/k", "Cache-Control: max-age=600")
    assert srv.get(kept).status == 200
    conn = HttpConn.open(srv.port)
    conn.sock.sendall(b"GET /stream?n=50&size=1048576&delay=0.04 HTTP/1.1\r\nHost: x\r\n\r\n")
    deadline = time.monotonic() + 10
    while not any(".tmp." in p.name for p in entry_files(cache_dir)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert any(".tmp." in p.name for p in entry_files(cache_dir)), "the fill never began"
    time.sleep(0.3)
    srv.proc.send_signal(signal.SIGKILL)
    srv.proc.wait()
    conn.close()
    srv.start()
    assert srv.wait_for_log("cache pages: 1 entries")
    assert not any(".tmp." in p.name for p in entry_files(cache_dir))
    assert is_hit(srv.get(kept))
    again = srv.get("/stream?n=50&size=1048576&delay=0.04")
    assert status(again) == "tern; fwd=uri-miss" and len(again.body) == 50 * 1048576


class CloseDelimitedOrigin(BadUpstream):
    """An origin whose responses end at the close (no length, not chunked),
    each cacheable: the first is reset part way through its body, the
    others end cleanly."""

    def respond(self, conn):
        conn.sendall(b"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nConnection: close\r\n\r\n")
        if self.served == 1:
            conn.sendall(b"cut" * 1000)
            time.sleep(0.3)  # the head is the client's by now
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            conn.sendall(b"whole #%d " % self.served + b"w" * 5000)


def test_a_body_that_ends_at_the_close_is_stored_only_if_the_connection_ended_cleanly(tern_factory, tmp_path):
    """A reset in the middle of a close-delimited body cuts the response:
    the client is not told it is whole, and nothing is stored; the next
    request goes to the origin, whose clean end is stored."""
    origin = CloseDelimitedOrigin()
    try:
        srv = tern_factory(cached_site(origin, tmp_path / "cache"))
        with srv.connect() as conn:
            with pytest.raises(ConnectionClosed):
                conn.get("/page")
        whole = srv.get("/page")
        assert whole.status == 200 and status(whole) == "tern; fwd=uri-miss", status(whole)
        assert whole.body == b"whole #2 " + b"w" * 5000
        again = srv.get("/page")
        assert is_hit(again) and again.body == whole.body
        assert origin.served == 2
        assert srv.wait_for_log("connection closed in the middle of the response: Connection reset by peer")
    finally:
        origin.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
def test_a_full_disk_loses_entries_not_responses(tern_factory, origin, tmp_path):
    cache_dir = tmp_path / "small"
    cache_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(cache_dir)], check=True)
    try:
        srv = tern_factory(cached_site(origin, cache_dir))
        bodies = {}
        for i in range(6):  # 6 x 300 KB into 1 MiB
            target = url(f"/cached/f{i}", "Cache-Control: max-age=600", n="300000")
            resp = srv.get(target)
            assert resp.status == 200 and len(resp.body) == 300_000
            bodies[target] = resp.body
        assert srv.wait_for_log("was not stored")
        for target, body in bodies.items():
            resp = srv.get(target)
            assert resp.status == 200 and len(resp.body) == 300_000 and resp.body.startswith(b"origin #")
            if is_hit(resp):
                assert resp.body == body
        assert not any(".tmp." in p.name for p in entry_files(cache_dir))
        assert srv.stop() == 0
    finally:
        subprocess.run(["umount", "-l", str(cache_dir)], check=False)


def test_a_location_without_the_cache_is_not_touched(tern_factory, origin, tmp_path):
    config = cached_site(origin, tmp_path / "cache")
    config["server"][0]["location"].insert(0, {"prefix": "/plain/", "proxy": {"pass": f"http://{origin.address}"}})
    srv = tern_factory(config)
    plain = srv.get("/plain/")
    assert plain.header("Cache-Status") is None
    assert srv.get("/cached/x").header("Cache-Status") == "tern; fwd=uri-miss"


def test_readme_example_serves_a_slow_application_from_its_cache(tern_factory, origin, tmp_path):
    """README's "Caching", as written, in front of an application that takes
    half a second a page."""
    from test_config import readme_toml

    text = readme_toml("### Caching")
    text = text.replace("/var/cache/tern/pages", str(tmp_path / "pages"))
    text = text.replace("http://127.0.0.1:3000", f"http://{origin.address}")
    srv = tern_factory(tomllib.loads(text))
    host = [("Host", "shop.example.com")]
    began = time.monotonic()
    first = srv.get("/cached/catalog?delay=0.5", host)
    slow = time.monotonic() - began
    began = time.monotonic()
    with srv.connect() as conn:
        hits = [conn.get("/cached/catalog?delay=0.5", host) for _ in range(5)]
    fast = time.monotonic() - began
    assert first.status == 200 and slow >= 0.5
    assert all(is_hit(h) and h.body == first.body for h in hits)
    assert fast < 0.5 and origin_count(origin) == 1
    # A 404 is kept a minute, as valid says.
    assert srv.get("/cached/missing?status=404", host).status == 404
    assert is_hit(srv.get("/cached/missing?status=404", host))


def test_two_workers_fill_hit_and_evict_one_zone_together(tern_factory, origin, tmp_path):
    """Clients on both workers ask for more pages than the zone holds: every
    answer is its page, whole, and the zone stays within max_size."""
    import threading

    cache_dir = tmp_path / "cache"
    srv = tern_factory({**cached_site(origin, cache_dir, zone={"max_size": "1MiB"}), "workers": 2})
    failures = []

    def client(k):
        try:
            with srv.connect() as conn:
                for i in range(40):
                    page = (i * 7 + k) % 30
                    size = 20_000 + page * 1000
                    resp = conn.get(url(f"/cached/w{page}", "Cache-Control: max-age=600", n=str(size)))
                    if resp.status != 200 or len(resp.body) != size or f" /cached/w{page}\n".encode() not in resp.body:
                        failures.append((page, resp.status, len(resp.body)))
        except Exception as e:  # noqa: BLE001: reported below
            failures.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert sum(p.stat().st_size for p in entry_files(cache_dir)) <= 1 << 20
    assert not any(".tmp." in p.name for p in entry_files(cache_dir))


def many_at_once(port, target, n, fields=lambda i: ""):
    """n requests for target on n connections, all sent before any answer is
    read: (status, Cache-Status, body) of each. fields(i): the head lines
    ("Name: value\r\n") the i-th request adds."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))
    socks = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n{fields(i)}Connection: close\r\n\r\n".encode())
        socks.append(s)
    answers = []
    for s in socks:
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = dict(line.split(": ", 1) for line in lines[1:])
        answers.append((int(lines[0].split()[1]), fields.get("Cache-Status", ""), body))
    return answers


def test_a_cold_key_asked_by_many_at_once_reaches_the_origin_once(tern_factory, origin, tmp_path):
    srv = tern_factory({**cached_site(origin, tmp_path / "cache"), "workers": 2})
    n = scaled(1000, 200)
    answers = many_at_once(srv.port, url("/cached/cold", "Cache-Control: max-age=60", delay="1"), n)
    assert origin_count(origin) == 1
    assert {a[0] for a in answers} == {200}
    assert {a[2] for a in answers} == {b"origin #1 /cached/cold\n"}
    statuses = Counter(a[1] for a in answers)
    assert statuses["tern; fwd=uri-miss"] == 1, statuses
    assert statuses["tern; fwd=uri-miss; collapsed"] + statuses.get(
        next((k for k in statuses if k.startswith("tern; hit")), ""), 0) == n - 1, statuses


def test_waiters_go_to_the_origin_when_the_fill_stores_nothing_or_takes_too_long(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache", cache={"lock_timeout": "500ms"}))
    # Not storable: the waiters are let go when its head arrives.
    answers = many_at_once(srv.port, url("/cached/private", "Cache-Control: private", delay="0.5"), 10)
    assert origin_count(origin) == 10 and {a[0] for a in answers} == {200}
    # A fill slower than lock_timeout: the waiters stop waiting for it.
    origin.post("/cachedcount")
    began = time.monotonic()
    answers = many_at_once(srv.port, url("/cached/slow", "Cache-Control: max-age=60", delay="2"), 5)
    assert origin_count(origin) == 5
    assert time.monotonic() - began < 4.5
    assert sorted(a[1] for a in answers).count("tern; fwd=uri-miss") == 5
    # Without the lock, every miss is a fill of its own.
    srv2 = tern_factory(cached_site(origin, tmp_path / "cache2", cache={"lock": False}))
    origin.post("/cachedcount")
    many_at_once(srv2.port, url("/cached/nolock", "Cache-Control: max-age=60", delay="0.5"), 5)
    assert origin_count(origin) == 5


def test_when_a_fill_fails_one_waiter_fills_in_its_place_and_the_others_wait_on(tern_factory, origin, tmp_path):
    """nginx's proxy_cache_lock: a fill that gets no response to keep (here a
    server error) hands the fill to one of those waiting, and the
    rest are answered from what it stores, rather than all going to an
    origin that just failed. A response that may not be kept lets them all
    go at once, not one after another."""
    config = {**cached_site(origin, tmp_path / "cache"), "workers": 2}
    config["server"][0]["location"].append({"prefix": "/metrics", "metrics": "prometheus"})
    srv = tern_factory(config)
    n = 10
    target = url("/cached/flaky", "Cache-Control: max-age=60", delay="0.5", fail_first="1")
    answers = many_at_once(srv.port, target, n)
    assert origin_count(origin) == 2, answers
    assert sorted(a[0] for a in answers) == [200] * (n - 1) + [503], answers
    bodies = Counter(a[2] for a in answers if a[0] == 200)
    assert bodies == {b"origin #2 /cached/flaky\n": n - 1}, bodies
    statuses = Counter(a[1] for a in answers)
    assert statuses["tern; fwd=uri-miss"] == 2, statuses  # the failed fill and the one in its place
    assert statuses["tern; fwd=uri-miss; collapsed"] == n - 2, statuses
    assert is_hit(srv.get(target, [("Host", "x")]))
    # Misses are the requests that went to the origin; those answered from
    # what the second fill stored are hits.
    assert metric(srv, "tern_response_cache_misses_total") == 2
    assert metric(srv, "tern_response_cache_hits_total") == n - 2 + 1
    # Not one to keep (private): all go at once, well inside n x 0.5 s.
    origin.post("/cachedcount")
    began = time.monotonic()
    answers = many_at_once(srv.port, url("/cached/flaky-private", "Cache-Control: private", delay="0.5"), n)
    assert origin_count(origin) == n and {a[0] for a in answers} == {200}
    assert time.monotonic() - began < 0.5 * n / 2


def test_those_waiting_for_a_fill_are_answered_from_it_though_it_is_already_stale(tern_factory, origin, tmp_path):
    """The entry a fill stores answers those that waited for it even when it
    is stale by the time they wake (here stale on arrival: Age beyond
    max-age, kept for its ETag): the response came after their requests did.
    Before, each went to the origin on its own, the stampede the lock is
    there to stop."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    n = 10
    target = url("/cached/aged", "Cache-Control: max-age=1", "Age: 5", 'ETag: "v1"', delay="1")
    answers = many_at_once(srv.port, target, n)
    assert origin_count(origin) == 1, answers
    assert {(a[0], a[2]) for a in answers} == {(200, b"origin #1 /cached/aged\n")}, answers
    statuses = Counter(a[1] for a in answers)
    assert statuses == {"tern; fwd=uri-miss": 1, "tern; fwd=uri-miss; collapsed": n - 1}, statuses
    # A later request finds the entry stale and revalidates it.
    again = srv.get(target, [("Host", "x")])
    assert again.status == 200 and status(again).startswith("tern; fwd=stale"), status(again)
    assert origin_count(origin) == 2
    # must-revalidate forbids serving it stale, even to those waiting: each
    # revalidates it.
    origin.post("/cachedcount")
    answers = many_at_once(srv.port, url("/cached/aged-strict", "Cache-Control: max-age=1, must-revalidate",
                                         "Age: 5", 'ETag: "v1"', delay="1"), n)
    assert {a[0] for a in answers} == {200} and origin_count(origin) == n, answers


def test_those_waiting_for_a_stale_entrys_refresh_are_answered_from_it(tern_factory, origin, tmp_path):
    """The lock holds the refresh of a stale entry as it does a fill: one
    request revalidates it, and those that found it stale meanwhile are
    answered from the refreshed entry, "fwd=stale; collapsed"."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    # Stale as it comes (Age beyond max-age, kept for its ETag), refreshed slowly.
    target = url("/cached/refresh-wait", "Cache-Control: max-age=1", "Age: 5", 'ETag: "r1"', delay="1")
    assert srv.get(target, [("Host", "x")]).body.startswith(b"origin #1")
    n = 5
    answers = many_at_once(srv.port, target, n)
    assert origin_count(origin) == 2, answers
    assert {(a[0], a[2]) for a in answers} == {(200, b"origin #1 /cached/refresh-wait\n")}, answers
    statuses = Counter(a[1] for a in answers)
    assert statuses["tern; fwd=stale; collapsed"] == n - 1, statuses
    assert json.loads(origin.get("/cachedlast").body)["if_none_match"] == '"r1"'


def test_each_variant_of_a_cold_key_is_filled_once_while_the_others_wait(tern_factory, origin, tmp_path):
    """The lock holds each variant of a key with Vary on its own, as nginx's
    proxy_cache_lock does: of many requests at once for a cold key in two
    languages, one fills the key (its response names Vary), and those of
    the other language wait for one of them to fill their variant. Before,
    they all went to the origin when the first fill ended, and none of
    their responses was stored."""
    srv = tern_factory({**cached_site(origin, tmp_path / "cache"), "workers": 2})
    n = 20
    target = url("/cached/vary-cold", "Cache-Control: max-age=60", "Vary: Accept-Language", delay="1")
    language = ["de", "fr"]
    answers = many_at_once(srv.port, target, n, lambda i: f"Accept-Language: {language[i % 2]}\r\n")
    assert origin_count(origin) == 2, answers
    assert {a[0] for a in answers} == {200}
    bodies = [{a[2] for a in answers[lang::2]} for lang in range(2)]
    assert all(len(b) == 1 for b in bodies) and bodies[0] != bodies[1], bodies
    statuses = Counter(a[1] for a in answers)
    assert statuses["tern; fwd=uri-miss"] == 1 and statuses["tern; fwd=vary-miss"] == 1, statuses
    hits = sum(count for name, count in statuses.items() if name.startswith("tern; hit"))
    waited = statuses["tern; fwd=uri-miss; collapsed"] + statuses["tern; fwd=vary-miss; collapsed"]
    assert waited + hits == n - 2, statuses
    for lang in language:
        hit = srv.get(target, [("Host", "x"), ("Accept-Language", lang)])
        assert is_hit(hit) and hit.body in bodies[language.index(lang)], status(hit)
    # A warm key: new variants asked at once each fill on their own.
    origin.post("/cachedcount")
    more = ["en", "it"]
    answers = many_at_once(srv.port, target, n, lambda i: f"Accept-Language: {more[i % 2]}\r\n")
    assert origin_count(origin) == 2, answers
    statuses = Counter(a[1] for a in answers)
    assert statuses["tern; fwd=vary-miss"] == 2, statuses
    hits = sum(count for name, count in statuses.items() if name.startswith("tern; hit"))
    assert statuses["tern; fwd=vary-miss; collapsed"] + hits == n - 2, statuses
    assert origin_count(origin) == 2


def test_a_fill_under_way_for_lock_age_is_taken_over_by_the_next_miss(tern_factory, origin, tmp_path):
    """nginx's proxy_cache_lock_age: a fill that has not ended after
    lock_age (its origin request stuck) no longer holds every later miss
    for lock_timeout; the next one fills the entry too, and those waiting
    are answered from the entry it stores while the first is still stuck."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache", cache={"lock_age": "1s", "lock_timeout": "10s"}))
    target = url("/cached/stuck", "Cache-Control: max-age=60", delay_first="6")

    def ask():
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return s

    def answer(s):
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        s.close()
        return data

    stuck = ask()
    time.sleep(0.5)
    waiting = ask()  # the fill is young: it waits
    time.sleep(1.5)
    taker = ask()  # the fill is 2 s old: it fills in its place
    taken = answer(taker)  # not collapsed onto the stuck fill's answer
    assert b"Cache-Status: tern; fwd=uri-miss\r\n" in taken and taken.endswith(b"origin #2 /cached/stuck\n"), taken
    waited = answer(waiting)
    assert b"Cache-Status: tern; fwd=uri-miss; collapsed" in waited, waited
    assert waited.endswith(b"origin #2 /cached/stuck\n"), waited
    assert answer(stuck).startswith(b"HTTP/1.1 200")  # in the end
    assert origin_count(origin) == 2


def test_a_fill_asks_for_the_whole_response_and_counts_the_origins_age(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/whole", "Cache-Control: max-age=600", 'ETag: "w"', "Age: 100", n="1000")
    # A client's preconditions and Range do not go up with a fill: the
    # origin sends the whole response, which is kept, and the client's
    # If-None-Match is answered from it.
    first = srv.get(target, [("If-None-Match", '"w"'), ("Range", "bytes=0-9")])
    assert first.status == 304 and first.body == b"" and first.header("ETag") == '"w"'
    assert json.loads(origin.get("/cachedlast").body)["if_none_match"] is None
    # (The call may still read on for the entry: then this one waits for it.)
    waited = srv.get(target)
    assert is_hit(waited) or status(waited) == "tern; fwd=uri-miss; collapsed", status(waited)
    hit = srv.get(target)
    assert is_hit(hit) and len(hit.body) == 1000 and hit.body.startswith(b"origin #1")
    assert hit.header_all("Age") == [hit.header("Age")] and 100 <= int(hit.header("Age")) <= 110
    assert 490 <= int(status(hit).split("ttl=")[1]) <= 500


def test_x_accel_expires_is_kept_with_the_entry_and_judges_its_revalidation(tern_factory, origin, tmp_path):
    """X-Accel-Expires outranks Cache-Control as nginx reads it, also when a
    304 revalidates the entry: it is kept with the entry (never relayed),
    so a 304 that says nothing of the lifetime leaves the entry stored for
    X-Accel-Expires more, not dropped for the stored no-store. Before, it
    was not kept, and the 304 made the entry go."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    # Stale as it comes (Age beyond its lifetime, kept for its ETag).
    target = url("/cached/accel", "X-Accel-Expires: 60", "Cache-Control: no-store", "Age: 100", 'ETag: "a1"',
                 h304='ETag: "a1"')
    first = srv.get(target)
    assert first.status == 200 and first.body.startswith(b"origin #1") and first.header("X-Accel-Expires") is None
    refreshed = srv.get(target)
    assert refreshed.body == first.body
    assert status(refreshed).startswith("tern; fwd=stale; fwd-status=304; ttl="), status(refreshed)
    assert 55 <= int(status(refreshed).split("ttl=")[1]) <= 60
    hit = srv.get(target)
    assert is_hit(hit) and hit.body == first.body, status(hit)
    assert hit.header("X-Accel-Expires") is None and refreshed.header("X-Accel-Expires") is None
    assert hit.header("Cache-Control") == "no-store"  # relayed as the origin sent it
    assert origin_count(origin) == 2
    # A 304 with an X-Accel-Expires of its own: that one counts.
    again = url("/cached/accel2", "X-Accel-Expires: 60", "Age: 100", 'ETag: "a2"', h304="X-Accel-Expires: 0")
    srv.get(again)
    gone = srv.get(again)
    assert gone.status == 200 and status(gone) == "tern; fwd=stale; fwd-status=304", status(gone)
    assert status(srv.get(again)) == "tern; fwd=uri-miss"


@pytest.mark.parametrize("size", [100, 300_000], ids=["memory", "file"])
def test_a_304_that_names_another_etag_updates_nothing_and_the_entry_goes(tern_factory, origin, tmp_path, size):
    """RFC 9111 4.3.4: a 304 whose strong ETag is not the entry's is about
    another representation. The entry is not given its fields (the old body
    would go out under the new ETag): this client has the entry as it was
    stored, and the next request fills the key anew."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    # Stale as it comes (Age beyond max-age, kept for its ETag): each request revalidates.
    target = url("/cached/mm", "Cache-Control: max-age=1", "Age: 5", 'ETag: "v1"', h304='ETag: "v2"', n=str(size))
    first = srv.get(target).body
    assert first.startswith(b"origin #1") and len(first) == size
    old = srv.get(target)
    assert old.status == 200 and old.body == first and old.header("ETag") == '"v1"'
    assert status(old) == "tern; fwd=stale; fwd-status=304; detail=mismatch", status(old)
    assert srv.wait_for_log("answered a revalidation with a 304 of another ETag")
    again = srv.get(target)
    assert status(again) == "tern; fwd=uri-miss" and again.body.startswith(b"origin #3")
    assert json.loads(origin.get("/cachedlast").body)["if_none_match"] is None
    # A 304 with the entry's ETag refreshes it as before, also when only
    # one of them is weak (an origin's gzip weakens its 200's alone).
    for path, stored, answered in (("/cached/mm-same", '"s"', '"s"'), ("/cached/mm-weak", 'W/"s"', '"s"')):
        same = url(path, "Cache-Control: max-age=1", "Age: 5", f"ETag: {stored}", h304=f"ETag: {answered}")
        srv.get(same)
        refreshed = srv.get(same)
        assert status(refreshed).startswith("tern; fwd=stale; fwd-status=304; ttl="), path
        # The entry keeps the ETag of the body it stores.
        assert refreshed.header("ETag") == stored, path


def test_a_success_to_an_unsafe_method_ends_the_entry_of_its_target(tern_factory, origin, tmp_path):
    """RFC 9111 4.4: after a POST, PUT or DELETE that succeeded, the next GET
    goes to the application; a failed one, OPTIONS, and other targets leave
    their entries."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/u", "Cache-Control: max-age=60")
    other = url("/cached/u2", "Cache-Control: max-age=60")
    srv.get(target), srv.get(other)
    assert is_hit(srv.get(target)) and origin_count(origin) == 2
    for method in ("POST", "PUT", "DELETE"):
        changed = srv.get(target, method=method)
        assert changed.status == 200 and status(changed) == "tern; fwd=method"
        refilled = srv.get(target)
        assert status(refilled) == "tern; fwd=uri-miss", (method, status(refilled))
        assert is_hit(srv.get(target))
    assert is_hit(srv.get(other)) and origin_count(origin) == 8
    # A failure leaves the entry; so does OPTIONS, a safe method.
    origin.post("/cachedfail?status=500")
    assert srv.get(target, method="POST").status == 500
    origin.post("/cachedfail")
    assert srv.get(target, method="OPTIONS").status == 200
    assert is_hit(srv.get(target))
    # The variants of a key with Vary go with it.
    varied = url("/cached/uv", "Cache-Control: max-age=60", "Vary: X-Lang")
    for lang in ("en", "de"):
        srv.get(varied, [("X-Lang", lang)])
        assert is_hit(srv.get(varied, [("X-Lang", lang)]))
    srv.get(varied, method="POST")
    for lang in ("en", "de"):
        assert not is_hit(srv.get(varied, [("X-Lang", lang)])), lang
        assert is_hit(srv.get(varied, [("X-Lang", lang)])), lang  # kept again


def test_a_key_whose_vary_changes_is_kept_under_the_new_fields(tern_factory, origin, tmp_path):
    """The application's Vary for a key changes: the entries made after it
    are found (the key's marker names the new fields)."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache", {"key": "$uri"}))
    before = url("/cached/vc", "Cache-Control: max-age=60", "Vary: X-Lang")
    after = url("/cached/vc", "Cache-Control: max-age=60", "Vary: X-Other")
    srv.get(before, [("X-Lang", "en")])
    assert is_hit(srv.get(before, [("X-Lang", "en")]))
    changed = srv.get(after, [("X-Lang", "de"), ("X-Other", "1")])
    assert status(changed) == "tern; fwd=vary-miss" and changed.body.startswith(b"origin #2")
    again = srv.get(after, [("X-Lang", "fr"), ("X-Other", "1")])
    assert is_hit(again) and again.body.startswith(b"origin #2")
    assert origin_count(origin) == 2


def test_a_304_from_the_entry_says_what_a_compressed_200_would(tern_factory, origin, tmp_path):
    """RFC 9110 15.4.5: where the location compresses, the 200 has a weak
    ETag and Vary: Accept-Encoding, and so has the 304 to the same request."""
    srv = tern_factory({**cached_site(origin, tmp_path / "cache"),
                        "compression": {"enabled": True, "min_size": "256"}})
    target = url("/cached/z", "Cache-Control: max-age=60", 'ETag: "z1"', n="2000")
    gzip = [("Accept-Encoding", "gzip")]
    srv.get(target, gzip)
    whole = srv.get(target, gzip)
    assert is_hit(whole) and whole.header("Content-Encoding") == "gzip"
    assert whole.header("ETag") == 'W/"z1"' and whole.header("Vary") == "Accept-Encoding"
    same = srv.get(target, gzip + [("If-None-Match", whole.header("ETag"))])
    assert same.status == 304 and is_hit(same)
    assert same.header("ETag") == 'W/"z1"' and same.header("Vary") == "Accept-Encoding"
    assert same.header("Content-Encoding") is None
    # Without gzip, the strong ETag (the 200 is sent as stored), and still Vary.
    plain = srv.get(target, [("If-None-Match", '"z1"')])
    assert plain.status == 304 and plain.header("ETag") == '"z1"' and plain.header("Vary") == "Accept-Encoding"
    # And so has the 304 a miss answers from the response it fills with.
    cold = srv.get(url("/cached/z2", "Cache-Control: max-age=60", 'ETag: "z2"', n="2000"),
                   gzip + [("If-None-Match", 'W/"z2"')])
    assert cold.status == 304 and status(cold) == "tern; fwd=uri-miss"
    assert cold.header("ETag") == 'W/"z2"' and cold.header("Vary") == "Accept-Encoding"
    assert cold.header("Content-Encoding") is None


def test_of_two_age_fields_the_first_counts_for_the_lifetime_and_the_age_alike(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/ages", "Cache-Control: max-age=600", "Age: 10", "Age: 500")
    srv.get(target)
    hit = srv.get(target)
    assert is_hit(hit) and hit.header_all("Age") == [hit.header("Age")]
    age, ttl = int(hit.header("Age")), int(status(hit).split("ttl=")[1])
    assert 10 <= age <= 20 and 580 <= ttl <= 590 and age + ttl == 600, (age, ttl)


def test_a_fill_is_kept_when_its_client_leaves_after_the_origin_answered(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/left", "Cache-Control: max-age=600", n=str(4 << 20))
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert s.recv(100).startswith(b"HTTP/1.1 200")
        # The client takes no more: the entry is there once the origin's
        # 4 MiB are in (buffered), long before the client would have them.
        deadline = time.monotonic() + 10
        while not [p for p in entry_files(tmp_path / "cache") if ".tmp." not in p.name]:
            assert time.monotonic() < deadline, "the entry waited for the client"
            time.sleep(0.05)
    resp = srv.get(target, [("Host", "x")])  # the same key ($host)
    assert is_hit(resp) and len(resp.body) == 4 << 20 and origin_count(origin) == 1


def test_a_fill_goes_on_when_its_client_leaves_first_and_those_waiting_get_the_entry(tern_factory, origin, tmp_path):
    """The client of a fill gives up before the origin answers (a slow page):
    the fill reads on for the cache, as nginx does, so the requests waiting
    for it are answered from the entry rather than all sent to the origin.
    Its Vary is read from the request of the client that left."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/gone", "Cache-Control: max-age=600", "Vary: X-Variant", delay="1.5")

    def ask(s, variant):
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nX-Variant: {variant}\r\nConnection: close\r\n\r\n"
                  .encode())

    filler = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    ask(filler, "a")
    deadline = time.monotonic() + 5
    while origin_count(origin) == 0:  # the fill has reached the origin
        assert time.monotonic() < deadline
        time.sleep(0.02)
    waiters = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(5)]
    for w in waiters:
        ask(w, "a")
    time.sleep(0.2)  # all waiting for the fill
    filler.close()
    for w in waiters:
        data = b""
        while chunk := w.recv(65536):
            data += chunk
        w.close()
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"origin #1 /cached/gone\n"), data
        assert b"Cache-Status: tern; fwd=uri-miss; collapsed" in data, data
    assert origin_count(origin) == 1
    # The entry is the variant of the request that left; another variant
    # goes to the origin.
    assert is_hit(srv.get(target, [("Host", "x"), ("X-Variant", "a")]))
    other = srv.get(target, [("Host", "x"), ("X-Variant", "b")])
    assert status(other) == "tern; fwd=vary-miss" and other.body == b"origin #2 /cached/gone\n"


def test_a_fill_whose_client_left_ends_when_the_response_may_not_be_stored(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    # The client leaves before a head that says private: nothing is read on
    # for a cache that keeps nothing, so those waiting go to the origin.
    target = url("/cached/gone-private", "Cache-Control: private", delay="1")
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        time.sleep(0.3)
    time.sleep(1.2)
    resp = srv.get(target, [("Host", "x")])
    assert resp.status == 200 and status(resp) == "tern; fwd=uri-miss" and origin_count(origin) == 2
    assert not [p for p in entry_files(tmp_path / "cache") if ".tmp." not in p.name]


def leave_after_asking(srv, origin, target, asked_before=0):
    """Sends a GET for target and closes the connection once the origin has it."""
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        deadline = time.monotonic() + 5
        while origin_count(origin) == asked_before:
            assert time.monotonic() < deadline
            time.sleep(0.02)


def test_a_fill_that_reads_on_holds_its_place_under_a_limit_of_requests_in_flight(tern_factory, origin, tmp_path):
    config = cached_site(origin, tmp_path / "cache", location={"limit": ["api"]})
    config["limit"] = [{"name": "api", "connections": 1, "key": "$host"}]
    srv = tern_factory(config)
    target = url("/cached/limited", "Cache-Control: max-age=600", delay="1.5")
    leave_after_asking(srv, origin, target)
    # As nginx's limit_conn: the request is in flight until its fill ends.
    assert srv.get(url("/cached/other", "Cache-Control: max-age=600"), [("Host", "x")]).status == 503
    deadline = time.monotonic() + 5
    while not is_hit(hit := srv.get(target, [("Host", "x")])):
        assert time.monotonic() < deadline and hit.status == 503, (hit.status, status(hit))
        time.sleep(0.1)
    assert srv.get(url("/cached/other", "Cache-Control: max-age=600"), [("Host", "x")]).status == 200


def test_a_failure_after_the_client_left_keeps_the_stale_entry_that_use_stale_allows(tern_factory, origin, tmp_path):
    # A 404 would be stored (valid), but use_stale names it: with its client
    # there, the stale entry answers in its place and stays; with its client
    # gone, the entry stays all the same.
    srv = tern_factory(cached_site(origin, tmp_path / "cache", cache={"use_stale": ["404"], "valid": {"404": "1m"}}))
    target = url("/cached/kept", "Cache-Control: max-age=1")
    assert srv.get(target, [("Host", "x")]).body == b"origin #1 /cached/kept\n"
    time.sleep(1.2)
    origin.post("/cachedfail?status=404&delay=1")
    leave_after_asking(srv, origin, target, asked_before=1)
    time.sleep(1.3)
    origin.post("/cachedfail?status=404")
    resp = srv.get(target, [("Host", "x")])
    assert resp.status == 200 and resp.body == b"origin #1 /cached/kept\n", (resp.status, status(resp))
    assert status(resp).startswith("tern; fwd=stale; fwd-status=404")
    origin.post("/cachedfail")


def test_a_fill_whose_client_left_still_tries_the_next_server(tern_factory, apps, tmp_path):
    """A server that fails a fill whose client has gone (it closes without
    an answer, or answers a status of next_upstream) sends the request to
    the next server of the group, as it would with the client there, and
    the entry is stored from that one. Before, the fill ended failed and
    nothing was stored."""
    a, b = apps("a", "b")
    upstream = {"name": "app", "servers": [{"address": a.address, "max_fails": 0},
                                           {"address": b.address, "max_fails": 0}]}
    proxy = {"pass": "http://app", "next_upstream": ["error", "timeout", "502"], "cache": {"zone": "pages"}}
    srv = tern_factory(site({"prefix": "/", "proxy": proxy}, [upstream],
                            cache=[{"name": "pages", "path": str(tmp_path / "cache")}]))

    def ask_and_leave(target):
        """Whether the request went to a first."""
        before = origin_count(a), origin_count(b)
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            deadline = time.monotonic() + 5
            while (origin_count(a), origin_count(b)) == before:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        return origin_count(a) > before[0]

    for fail in ("close", "502"):
        a.post(f"/cachedfail?status={fail}&delay=1")  # after a second
        # The servers take turns: one of two requests goes to a first.
        for i in range(2):
            target = url(f"/cached/{fail}-{i}", "Cache-Control: max-age=600")
            if ask_and_leave(target):
                break
        else:
            pytest.fail("a was never asked first")
        asked_b = origin_count(b)
        deadline = time.monotonic() + scaled(10, 20)
        while origin_count(b) == asked_b:  # the fill went on to b
            assert time.monotonic() < deadline, (fail, origin_count(a), origin_count(b))
            time.sleep(0.05)
        # Stored from b, or about to be (this request waits for it).
        resp = srv.get(target, [("Host", "x")])
        assert is_hit(resp) or status(resp) == "tern; fwd=uri-miss; collapsed", status(resp)
        assert resp.body.startswith(b"b #"), resp.body
    # The error log is written on another thread: its last lines may still
    # be on their way.
    assert srv.wait_for_log("connection closed before a response, trying the next server"), srv.stderr()[-3000:]
    assert srv.wait_for_log("answered 502, trying the next server"), srv.stderr()[-3000:]


def test_a_server_stops_cleanly_while_a_fill_reads_on_for_a_client_that_left(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    # The origin takes 8 s: a stop that waited for it would take 7.
    target = url("/cached/stopping", "Cache-Control: max-age=600", delay="8")
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        deadline = time.monotonic() + 5
        while origin_count(origin) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    time.sleep(0.2)
    # The call that reads on is ended with the upstream's pools: no wait for
    # the origin, nothing left behind (a sanitizer build checks for leaks).
    began = time.monotonic()
    assert srv.stop() == 0, srv.stderr()[-4000:]
    assert time.monotonic() - began < 5
    assert not [p for p in entry_files(tmp_path / "cache") if ".tmp." not in p.name]


def test_upgrades_and_requests_with_bodies_are_not_filled_or_held(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/up", "Cache-Control: max-age=600")
    upgrade = srv.get(target, [("Connection", "Upgrade"), ("Upgrade", "websocket")])
    assert upgrade.status == 200 and status(upgrade) == "tern; fwd=uri-miss"
    assert status(srv.get(target)) == "tern; fwd=uri-miss"  # the upgrade filled nothing
    with srv.connect() as conn:
        with_body = conn.request(f"GET {url('/cached/body', 'Cache-Control: max-age=600')} HTTP/1.1\r\n"
                                 "Host: x\r\nContent-Length: 3\r\n\r\nabc".encode())
        assert with_body.status == 200


# -- stale entries: revalidation, and serving them when the origin fails --

def last_conditions(app):
    import json
    return json.loads(app.get("/cachedlast").body)


def written_by_thread(srv):
    """Bytes each of tern's threads has written (its name: wchar), files
    and sockets alike (/proc/PID/task/TID/io)."""
    written = {}
    for task in Path(f"/proc/{srv.proc.pid}/task").iterdir():
        name = (task / "comm").read_text().strip()
        for line in (task / "io").read_text().splitlines():
            if line.startswith("wchar:"):
                written[name] = written.get(name, 0) + int(line.split()[1])
    return written


@pytest.mark.parametrize("size", [100, 300_000], ids=["in-memory", "from-file"])
def test_a_stale_entry_is_revalidated_and_a_304_makes_it_fresh(tern_factory, origin, tmp_path, size):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/reval", "Cache-Control: max-age=2", 'ETag: "v1"', "X-App: kept", n=str(size))
    first = srv.get(target)
    assert first.status == 200 and len(first.body) == size and first.body.startswith(b"origin #1")
    assert last_conditions(origin)["if_none_match"] is None
    time.sleep(3.1)
    before = written_by_thread(srv)
    again = srv.get(target)
    # The origin was asked with the entry's ETag, said 304, and the entry
    # answered: its body, the origin's one request more.
    assert last_conditions(origin)["if_none_match"] == '"v1"'
    assert again.status == 200 and again.body == first.body, status(again)
    assert status(again) == "tern; fwd=stale; fwd-status=304; ttl=2"
    assert again.header("X-App") == "kept" and again.header("ETag") == '"v1"'
    assert origin_count(origin) == 2
    # The entry's new file may still be written: a request meanwhile waits
    # for it, and is answered from it.
    hit = srv.get(target)
    assert is_hit(hit) or status(hit) == "tern; fwd=uri-miss; collapsed", status(hit)
    assert hit.body == first.body and origin_count(origin) == 2
    hit = srv.get(target)
    assert is_hit(hit) and hit.body == first.body and origin_count(origin) == 2
    # One file for the entry, written anew (no temp file left behind).
    assert len(entry_files(tmp_path / "cache")) == 1
    if size > 16 * 1024:
        # A body in a file was copied by a task thread, not by the loop.
        after = written_by_thread(srv)
        copied = max(after[n] - before.get(n, 0) for n in after if n.startswith("task"))
        assert copied >= size, (before, after)
    # A client's own precondition is answered from the refreshed entry.
    time.sleep(3.1)
    mine = srv.get(target, [("If-None-Match", '"v1"')])
    assert mine.status == 304 and status(mine).startswith("tern; fwd=stale; fwd-status=304")
    assert origin_count(origin) == 3


def test_no_cache_and_max_age_0_are_stored_and_revalidated_at_each_use(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    modified = "Tue, 01 Dec 2026 10:00:00 GMT"
    for target, condition in ((url("/cached/nc", "Cache-Control: no-cache", 'ETag: "n"'), "if_none_match"),
                              (url("/cached/m0", "Cache-Control: max-age=0", f"Last-Modified: {modified}"),
                               "if_modified_since")):
        origin.post("/cachedcount")
        first = srv.get(target)
        assert status(first) == "tern; fwd=uri-miss" and first.body.startswith(b"origin #1")
        for _ in range(2):
            again = srv.get(target)
            assert again.body == first.body and status(again).startswith("tern; fwd=stale; fwd-status=304")
            assert last_conditions(origin)[condition] in ('"n"', modified)
        assert origin_count(origin) == 3


def test_a_new_response_replaces_the_stale_entry_and_revalidate_false_asks_for_it_whole(tern_factory, origin,
                                                                                       tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache", cache={"revalidate": False}))
    target = url("/cached/whole", "Cache-Control: max-age=2", 'ETag: "w"')
    srv.get(target)
    time.sleep(3.1)
    fresh = srv.get(target)
    assert last_conditions(origin)["if_none_match"] is None
    assert status(fresh) == "tern; fwd=stale" and fresh.body.startswith(b"origin #2")
    hit = srv.get(target)
    assert is_hit(hit) and hit.body.startswith(b"origin #2")


def held_files(srv, cache_dir):
    """What tern holds open under cache_dir: the files' paths, a removed
    one's ending " (deleted)"."""
    held = []
    for fd in Path(f"/proc/{srv.proc.pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith(str(cache_dir) + "/"):
            held.append(target)
    return sorted(held)


def test_hits_keep_their_file_open_and_a_new_entry_is_served_from_its_own(tern_factory, origin, tmp_path):
    """A loop keeps the file of an entry it answered from open (no open per
    hit); when a new response replaces the entry, the next hit on the same
    loop reads the new file, not the one it held."""
    cache_dir = tmp_path / "cache"
    srv = tern_factory(cached_site(origin, cache_dir, cache={"purge": ["127.0.0.0/8"]}))
    target = url("/cached/held", "Cache-Control: max-age=600", n="100000")
    with srv.connect() as conn:  # one connection: one loop
        first = conn.get(target)
        hit = conn.get(target)
        assert is_hit(hit) and hit.body == first.body and len(hit.body) == 100_000
        [entry] = entry_files(cache_dir)
        assert held_files(srv, cache_dir) == [str(entry)]
        assert conn.get(target, method="PURGE").status == 200
        fresh = conn.get(target)
        assert status(fresh) == "tern; fwd=uri-miss" and fresh.body.startswith(b"origin #2")
        # Within a second of the last hit: the descriptor held, trusted by
        # time alone, is of the file the new entry replaced.
        again = conn.get(target)
        assert is_hit(again) and again.body == fresh.body
        assert entry_files(cache_dir) == [entry]
        assert held_files(srv, cache_dir) == [str(entry)]  # the old file let go, not " (deleted)"
        assert origin_count(origin) == 2


def stale_site(app, cache_dir, use_stale=None, cache=None, **proxy):
    """Two locations on one zone: /cached/ with use_stale (or none) and
    `cache`'s settings, and /cached/strict/ without."""
    zone = {"name": "pages", "path": str(cache_dir)}
    cache = {"zone": "pages", **({"use_stale": use_stale} if use_stale is not None else {}), **(cache or {})}
    return site([{"prefix": "/cached/", "proxy": {"pass": f"http://{app.address}", "cache": cache, **proxy}},
                 {"prefix": "/cached/strict/", "proxy": {"pass": f"http://{app.address}", "cache": "pages"}}],
                cache=[zone])


def test_an_origin_that_goes_down_leaves_the_site_served_stale(tern_factory, apps, tmp_path):
    origin = apps("down")[0]
    srv = tern_factory(stale_site(origin, tmp_path / "cache", use_stale=["error", "timeout"]))
    served = url("/cached/page", "Cache-Control: max-age=1", n="300000")
    strict = url("/cached/strict/page", "Cache-Control: max-age=1")
    first = srv.get(served)
    assert srv.get(strict).status == 200
    time.sleep(2.1)
    origin.kill()
    for _ in range(3):
        stale = srv.get(served)
        assert stale.status == 200 and stale.body == first.body, stale.status
        assert status(stale).startswith("tern; fwd=stale; ttl=-") and status(stale).endswith("; detail=error")
    assert srv.get(strict).status == 502  # no use_stale there
    assert srv.get(url("/cached/never-stored")).status == 502  # nothing to serve stale
    assert srv.wait_for_log(origin.address)  # the failures are logged, naming the server


def test_use_stale_statuses_and_the_responses_stale_if_error(tern_factory, origin, tmp_path):
    srv = tern_factory(stale_site(origin, tmp_path / "cache", use_stale=["503"]))
    listed = url("/cached/listed", "Cache-Control: max-age=1")
    sie = url("/cached/strict/sie", "Cache-Control: max-age=1, stale-if-error=60")
    sie_over = url("/cached/strict/over", "Cache-Control: max-age=1, stale-if-error=1")
    never = url("/cached/never", "Cache-Control: max-age=1, must-revalidate")
    bodies = {t: srv.get(t).body for t in (listed, sie, sie_over, never)}
    time.sleep(3.1)
    origin.post("/cachedfail?status=503")
    got = srv.get(listed)
    assert got.status == 200 and got.body == bodies[listed]
    assert status(got).startswith("tern; fwd=stale; fwd-status=503; ttl=-") and status(got).endswith("detail=status")
    # stale-if-error=60 from the response: allowed for a 503 without use_stale.
    got = srv.get(sie)
    assert got.status == 200 and got.body == bodies[sie]
    # Its window has passed, must-revalidate forbids: the 503 goes through.
    assert srv.get(sie_over).status == 503
    assert srv.get(never).status == 503
    # A status neither use_stale nor RFC 5861 names.
    origin.post("/cachedfail?status=404")
    assert srv.get(listed).status == 404
    origin.post("/cachedfail")
    fresh = srv.get(listed)
    assert fresh.status == 200 and fresh.body != bodies[listed]


def test_an_entry_purged_while_the_origin_is_asked_is_neither_served_stale_nor_stored_again(
        tern_factory, origin, tmp_path):
    import threading
    cache = {"zone": "pages", "use_stale": ["503"], "purge": ["127.0.0.0/8"]}
    srv = tern_factory(site({"prefix": "/cached/", "proxy": {"pass": f"http://{origin.address}", "cache": cache}},
                            cache=[{"name": "pages", "path": str(tmp_path / "cache")}]))
    target = url("/cached/purged", "Cache-Control: max-age=1", 'ETag: "p"')

    def asked_while_purged(fail):
        """A request for the stale entry, with a PURGE of it while the
        origin takes 1.5 s to answer (`fail`: with 503, else 304)."""
        srv.get(target)
        time.sleep(2.1)
        origin.post(f"/cachedfail?delay=1.5{'&status=503' if fail else ''}")
        got = {}
        asker = threading.Thread(target=lambda: got.setdefault("r", srv.get(target)))
        asker.start()
        time.sleep(0.5)
        with srv.connect() as conn:
            assert conn.get(target, method="PURGE").status == 200
        asker.join()
        origin.post("/cachedfail")
        return got["r"]

    # The 503 goes through: the entry use_stale would have served was purged.
    assert asked_while_purged(fail=True).status == 503
    # A 304 confirms the body for the request that asked (served from the
    # purged entry's file while it is there), but the entry is not stored
    # again: the next request goes to the origin.
    assert asked_while_purged(fail=False).status in (200, 502)
    assert status(srv.get(target)) == "tern; fwd=uri-miss"


def test_a_timeout_and_updating_serve_the_stale_entry(tern_factory, origin, tmp_path):
    # The request that refreshes waits for the application here (as
    # nginx's default); the next test has it answered at once.
    srv = tern_factory(stale_site(origin, tmp_path / "cache", use_stale=["timeout", "updating"],
                                  cache={"background_update": False}, read_timeout="1s"))
    target = url("/cached/slow", "Cache-Control: max-age=2", 'ETag: "s"')
    first = srv.get(target)
    time.sleep(3.1)
    # The origin takes longer than read_timeout: the stale entry answers.
    origin.post("/cachedfail?delay=2")
    began = time.monotonic()
    late = srv.get(target)
    assert late.status == 200 and late.body == first.body and status(late).endswith("detail=timeout")
    assert time.monotonic() - began < 1.9
    # Within read_timeout but slow: one request revalidates while another
    # is answered from the stale entry at once.
    origin.post("/cachedfail?delay=0.8")
    results = {}

    def revalidate():
        results["fill"] = srv.get(target)

    import threading
    asked = origin_count(origin)
    filler = threading.Thread(target=revalidate)
    filler.start()
    deadline = time.monotonic() + 5
    while origin_count(origin) == asked:  # the filler's request is at the origin: it holds the fill
        assert time.monotonic() < deadline
        time.sleep(0.02)
    began = time.monotonic()
    updating = srv.get(target)
    assert time.monotonic() - began < 0.7  # not the 0.8 s the origin takes
    filler.join()
    assert updating.body == first.body and status(updating).startswith("tern; hit; ttl=-")
    assert status(updating).endswith("; detail=updating")
    assert status(results["fill"]).startswith("tern; fwd=stale; fwd-status=304")
    assert is_hit(srv.get(target))



def wait_for_origin(origin, past, timeout=5.0):
    """Waits until /cached has had more than `past` requests."""
    deadline = time.monotonic() + timeout
    while origin_count(origin) <= past:
        assert time.monotonic() < deadline, "the origin was never asked"
        time.sleep(0.02)


@pytest.mark.parametrize("allowed_by", ["stale-while-revalidate", "use_stale-updating"])
def test_the_request_that_finds_an_entry_stale_is_answered_at_once_and_the_refresh_goes_on_without_it(
        tern_factory, origin, tmp_path, allowed_by):
    from test_access import wait_for_lines
    # The key leaves the query out: the first response lives a second, the
    # refreshed one (asked for with the later requests' query) a minute, so
    # that it is not stale again, and refreshed once more, while it is polled.
    keyed = {"key": "$scheme$host$uri"}
    if allowed_by == "stale-while-revalidate":  # the response's own (RFC 5861)
        config = cached_site(origin, tmp_path / "cache", cache=keyed)
        first_target = url("/cached/bg", "Cache-Control: max-age=1, stale-while-revalidate=60")
        target = url("/cached/bg", "Cache-Control: max-age=60, stale-while-revalidate=60")
    else:  # the location's
        config = stale_site(origin, tmp_path / "cache", use_stale=["updating"], cache=keyed)
        first_target = url("/cached/bg", "Cache-Control: max-age=1")
        target = url("/cached/bg", "Cache-Control: max-age=60")
    srv = tern_factory({**config, "access_log": "access.log", "access_log_format": "$cache_status $status"})
    first = srv.get(first_target)
    assert status(first) == "tern; fwd=uri-miss"
    time.sleep(2.1)
    origin.post("/cachedfail?delay=1.5")
    asked = origin_count(origin)
    began = time.monotonic()
    stale = srv.get(target, headers=[("X-Probe", "the client's")])
    assert time.monotonic() - began < 1.2  # not the 1.5 s the origin takes
    assert stale.status == 200 and stale.body == first.body
    assert status(stale).startswith("tern; hit; ttl=-") and status(stale).endswith("; detail=updating")
    # The refresh asks the origin as the client would have: its fields and
    # address, and the whole response.
    wait_for_origin(origin, asked)
    last = json.loads(origin.get("/cachedlast").body)
    assert last["probe"] == "the client's" and last["forwarded_for"] == "127.0.0.1"
    # While it runs, the others are answered from the stale entry too, and
    # none of them goes to the origin.
    during = srv.get(target)
    assert during.body == first.body and status(during).endswith("; detail=updating")
    # Then the new response answers, from the entry the refresh stored.
    deadline = time.monotonic() + 5
    requests = 3
    while (fresh := srv.get(target)).body == first.body:
        requests += 1
        assert time.monotonic() < deadline, status(fresh)
        time.sleep(0.1)
    requests += 1
    assert is_hit(fresh) and not status(fresh).startswith("tern; hit; ttl=-")
    assert origin_count(origin) == asked + 1
    origin.post("/cachedfail")
    # The clients' requests are logged, the refresh is not.
    statuses = [line.split()[0] for line in wait_for_lines(srv.workdir / "access.log", requests)]
    assert statuses == ["MISS"] + ["UPDATING"] * (requests - 2) + ["HIT"], statuses


def test_a_refresh_in_the_background_that_fails_keeps_the_stale_entry_and_a_stop_ends_one_under_way(
        tern_factory, origin, tmp_path):
    srv = tern_factory(stale_site(origin, tmp_path / "cache", use_stale=["updating", "503"]))
    target = url("/cached/bgfail", "Cache-Control: max-age=1")
    first = srv.get(target)
    time.sleep(2.1)
    # The refresh gets a 503: nothing is stored, the stale entry stays, and
    # the next request refreshes again.
    origin.post("/cachedfail?status=503")
    asked = origin_count(origin)
    assert srv.get(target).body == first.body
    wait_for_origin(origin, asked)
    time.sleep(0.2)
    again = srv.get(target)
    assert again.status == 200 and again.body == first.body
    wait_for_origin(origin, asked + 1)
    # A refresh still waiting for the origin when the server stops: it ends
    # with the server, which exits cleanly (under ASan: nothing leaked).
    origin.post("/cachedfail?delay=8")  # a stop that waited for it would take 8 s
    asked = origin_count(origin)
    assert srv.get(target).body == first.body
    wait_for_origin(origin, asked)
    began = time.monotonic()
    assert srv.stop() == 0, srv.stderr()[-4000:]
    assert time.monotonic() - began < 5
    origin.post("/cachedfail")

def test_a_request_that_says_no_store_is_not_kept_but_may_be_answered_from_the_cache(tern_factory, origin,
                                                                                      tmp_path):
    """RFC 9111 5.2.1.5: a request's no-store forbids keeping the response
    to it; what is kept already may still answer it."""
    srv = tern_factory(cached_site(origin, tmp_path / "cache"))
    target = url("/cached/rns", "Cache-Control: max-age=60")
    no_store = [("Cache-Control", "no-transform, No-Store")]
    assert srv.get(target, no_store).body.startswith(b"origin #1")
    assert not entry_files(tmp_path / "cache")
    assert status(srv.get(target)) == "tern; fwd=uri-miss"  # origin #2, kept
    hit = srv.get(target, no_store)
    assert is_hit(hit) and hit.body.startswith(b"origin #2") and origin_count(origin) == 2


# -- operations: bypass, no_store, $cache_status --

def test_bypass_and_no_store_conditions_and_the_cache_status_in_the_access_log(tern_factory, origin, tmp_path):
    from test_access import wait_for_lines
    config = cached_site(origin, tmp_path / "cache",
                         cache={"bypass": ["$cookie_nocache", "$arg_fresh"], "no_store": ["$http_x_private"],
                                "use_stale": ["503"]})
    config["server"][0]["location"].append({"prefix": "/metrics", "metrics": "prometheus"})
    srv = tern_factory({**config, "access_log": "access.log", "access_log_format": "$uri $cache_status $status"})
    target = url("/cached/ops", "Cache-Control: max-age=2", 'ETag: "o"')
    srv.get(target)                                               # MISS, stored
    assert is_hit(srv.get(target))                                # HIT
    # A cookie that is set (not "0") bypasses the entry; its response fills it again.
    bypassed = srv.get(target, [("Cookie", "a=1; nocache=1")])
    assert status(bypassed) == "tern; fwd=bypass" and bypassed.body.startswith(b"origin #2")
    assert is_hit(srv.get(target, [("Cookie", "nocache=0")])) and srv.get(target).body.startswith(b"origin #2")
    # no_store: the response goes to the client, the entry stays as it was.
    private = url("/cached/private", "Cache-Control: max-age=60")
    assert status(srv.get(private, [("X-Private", "yes")])) == "tern; fwd=uri-miss"
    assert status(srv.get(private)) == "tern; fwd=uri-miss"
    assert is_hit(srv.get(private))
    # A query parameter bypasses too ($arg_fresh), whatever its place.
    assert status(srv.get(url("/cached/private", "Cache-Control: max-age=60") + "&fresh=1")) == "tern; fwd=bypass"
    time.sleep(3.1)
    srv.get(target)                                               # REVALIDATED (304)
    time.sleep(3.1)
    origin.post("/cachedfail?status=503")
    assert srv.get(target).status == 200                          # STALE
    origin.post("/cachedfail")
    srv.get(target, method="POST")                                # not the cache's: "-"
    lines = wait_for_lines(srv.workdir / "access.log", 12)
    assert [line.split()[1] for line in lines[:12]] == ["MISS", "HIT", "BYPASS", "HIT", "HIT", "MISS", "MISS",
                                                        "HIT", "BYPASS", "REVALIDATED", "STALE", "-"], lines
    # The metrics count the bypasses apart from the misses (the requests
    # that went to the origin: a MISS, an EXPIRED entry revalidated or
    # answered stale).
    assert metric(srv, "tern_response_cache_bypass_total") == 2
    assert metric(srv, "tern_response_cache_hits_total") == 4
    assert metric(srv, "tern_response_cache_misses_total") == 5
    assert metric(srv, "tern_response_cache_stale_total") == 1
    assert metric(srv, "tern_response_cache_revalidated_total") == 1


def test_the_json_access_log_says_what_the_cache_did(tern_factory, origin, tmp_path):
    import json
    from test_access import wait_for_lines
    srv = tern_factory({**cached_site(origin, tmp_path / "cache"), "access_log": "access.log",
                        "access_log_format": "json"})
    target = url("/cached/json", "Cache-Control: max-age=60")
    srv.get(target)
    assert is_hit(srv.get(target))
    records = [json.loads(line) for line in wait_for_lines(srv.workdir / "access.log", 2)]
    assert [r["cache_status"] for r in records] == ["MISS", "HIT"], records


def test_purge_removes_a_key_its_variants_or_a_prefix_from_allowed_networks(tern_factory, origin, tmp_path):
    srv = tern_factory(cached_site(origin, tmp_path / "cache", cache={"purge": ["127.0.0.0/8"]}))
    one, two = url("/cached/p/1", "Cache-Control: max-age=600"), url("/cached/p/2", "Cache-Control: max-age=600")
    varied = url("/cached/v", "Cache-Control: max-age=600", "Vary: Accept-Language")
    kept = url("/cached/kept", "Cache-Control: max-age=600")
    for target in (one, two, kept):
        srv.get(target)
    for language in ("de", "fr"):
        srv.get(varied, [("Accept-Language", language)])
    assert all(is_hit(srv.get(t)) for t in (one, two, kept))
    # A key's own entry goes at once, its file with it.
    before = len(entry_files(tmp_path / "cache"))
    assert srv.get(two, method="PURGE").status == 200
    assert len(entry_files(tmp_path / "cache")) == before - 1
    assert status(srv.get(two)) == "tern; fwd=uri-miss" and is_hit(srv.get(two))
    with srv.connect() as conn:
        gone = conn.get(one, method="PURGE")
        assert gone.status == 200 and gone.body.startswith(b"purged http")
        assert conn.get(one, method="PURGE").status == 404  # nothing left to purge
        # The key of a Vary'd response takes every variant with it.
        assert conn.get(varied, method="PURGE").status == 200
        assert status(conn.get(one)) == "tern; fwd=uri-miss" and is_hit(conn.get(one))
        assert status(conn.get(varied, [("Accept-Language", "fr")])) == "tern; fwd=uri-miss"
        # The new marker leads to the old "de" variant, purged with the rest.
        assert status(conn.get(varied, [("Accept-Language", "de")])) == "tern; fwd=vary-miss"
        # A prefix: every key that begins with the key made from the target before '*'.
        assert conn.get("/cached/p/*", method="PURGE").status == 200
        assert status(conn.get(one)) == "tern; fwd=uri-miss" and status(conn.get(two)) == "tern; fwd=uri-miss"
        assert is_hit(conn.get(kept))
    # From a network the list does not name: 403, nothing purged.
    other = tern_factory(cached_site(origin, tmp_path / "cache2", cache={"purge": ["10.0.0.0/8"]}))
    other.get(kept)
    assert other.get(kept, method="PURGE").status == 403 and is_hit(other.get(kept))
    # Files of purged entries nobody asked for again go within seconds (the manager).
    srv.get(url("/cached/p/3", "Cache-Control: max-age=600"))
    before = len(entry_files(tmp_path / "cache"))
    srv.get("/cached/p/*", method="PURGE")
    deadline = time.monotonic() + 12
    while len(entry_files(tmp_path / "cache")) >= before:
        assert time.monotonic() < deadline, "the purged entry's file stayed"
        time.sleep(0.2)


# -- bounds --

DISTINCT_KEYS_LUA = """
local prefix, n, count = "", 0, 0
function init(args) prefix = args[1]; n = tonumber(args[2]) end
function request()
  count = count + 1
  if count > n then return wrk.format(nil, "/k/last") end
  return wrk.format(nil, "/k/" .. prefix .. "-" .. count)
end
"""


def metric(srv, sample):
    for line in srv.get("/metrics").body.decode().splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {sample}")


@pytest.fixture
def removed_after(tmp_path):
    """A folder under tmp_path, removed when the test's servers have stopped
    (a fixture listed before tern_factory is torn down after it)."""
    import shutil
    folder = tmp_path / "removed"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_memory_stays_within_the_zone_under_100000_distinct_keys(removed_after, tern_factory, tmp_path):
    import shutil
    import subprocess
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed; scripts/test installs it")
    from test_hardening import LOW_QUARANTINE
    from test_proxy import rss_bound_kib
    # The origin: another tern, answering every key at once.
    origin = tern_factory(site({"prefix": "/", "return": {"status": 200, "body": "a small page\n"}}))
    srv = tern_factory(site([{"prefix": "/k/", "proxy": {"pass": f"http://127.0.0.1:{origin.port}",
                                                          "cache": {"zone": "pages", "valid": {"200": "10m"}}}},
                             {"prefix": "/metrics", "metrics": "prometheus"}],
                            # The keys spread the zone's files over most of its 65,536
                            # directories: removed at the test's end, while the kernel still
                            # holds them, they take seconds; left to pytest's removal of old
                            # temp folders, minutes of disk reads in a later suite.
                            cache=[{"name": "pages", "path": str(removed_after / "cache"), "memory": "1MiB"}]),
                       env=LOW_QUARANTINE)
    script = tmp_path / "keys.lua"
    script.write_text(DISTINCT_KEYS_LUA)
    want = 100_000
    rss = []
    for half in range(2):
        deadline = time.monotonic() + 400  # TSan's pace
        while metric(srv, "tern_response_cache_misses_total") < want * (half + 1) / 2:
            assert time.monotonic() < deadline, "too slow"
            # Each run sends new keys (its own prefix), then one key again and again.
            subprocess.run(["wrk", "-t1", "-c8", "-d3s", "-s", str(script), f"http://127.0.0.1:{srv.port}/",
                            "--", f"{half}-{time.monotonic_ns()}", str(want // 2)],
                           check=True, capture_output=True, timeout=60)
        rss.append(srv.rss_kib())
    memory = 1 << 20
    assert metric(srv, 'tern_cache_memory_bytes{zone="pages"}') <= memory
    assert metric(srv, 'tern_cache_max_memory_bytes{zone="pages"}') == memory
    entries = metric(srv, 'tern_cache_entries{zone="pages"}')
    assert 1000 < entries < want / 4, entries  # the least recently used went with their files
    assert metric(srv, 'tern_cache_disk_bytes{zone="pages"}') > 0
    # The second 50,000 keys took no more memory than the first settled on.
    assert rss[1] - rss[0] < rss_bound_kib(srv, 6 * 1024), rss

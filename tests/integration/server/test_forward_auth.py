"""auth_forward (nginx's auth_request, Caddy's forward_auth): before a
location's handler, tern asks an auth service (the forward-auth service of
upstream_app.py, in the style of Authelia) with a GET carrying the
client's fields (hop-by-hop ones left out, never the body) and where the
request was going (X-Forwarded-Method, -Uri, -Proto, -Host, -For,
X-Original-Method, X-Original-URL: the true ones, whatever the client
sent). A 2xx lets the request through, with the fields named in
copy_headers taken from the answer (a client's own of those names gone
either way) and Remote-User as the access log's $remote_user; 401, 403
and 3xx go to the client as they came; any other status, no service, a
timeout, an answer too large or a connection closed unanswered is 500,
with a line in the error log, and tern goes on. A site's auth_forward
covers its locations unless one says "off"; proxy, static files and
`return` are all guarded; checks reuse their connections; HTTP/2 and HEAD
are checked the same."""

import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.parse

import pytest

from http_client import HttpConn, build_request
from test_access import wait_for_lines
from test_http2 import curl
from test_proxy import BadUpstream, apps, free_ports, group, site  # noqa: F401 (apps: a fixture)

COPIED = ["Remote-User", "Remote-Groups"]
ALICE = [("Cookie", "session=alice")]  # 200, Remote-User: alice, Remote-Groups: admins,dev
MALLORY = [("Cookie", "session=mallory")]  # 403
BOT = [("Authorization", "Bearer good")]  # 200, Remote-User: bot and no Remote-Groups
CHALLENGE = 'Bearer realm="tern-test"'


def check(app, path="/auth", **options):
    """An auth_forward table that asks `app` at `path`."""
    return {"pass": f"http://{app.address}{path}", "copy_headers": COPIED, **options}


def to_app(app, prefix="/"):
    """A location that proxies to `app`, the request's URI as it came."""
    return {"prefix": prefix, "proxy": {"pass": f"http://{app.address}"}}


def guarded(app, locations=None, auth=None, **extra):
    """A config whose one site has auth_forward (asking `app`'s /auth
    unless `auth` says otherwise) over `locations` (default: all to app)."""
    return {"server": [{"auth_forward": auth or check(app), "location": locations or [to_app(app)]}], **extra}


def fields(pairs):
    """[[name, value], ...] -> {lowercase name: [values in order]}."""
    out = {}
    for name, value in pairs:
        out.setdefault(name.lower(), []).append(value)
    return out


def auth_log(app):
    """What the auth service saw: {"count", "connections", "last"}."""
    resp = app.get("/authlog")
    assert resp.status == 200, resp
    return json.loads(resp.body)


def last_check(app):
    """The last request the auth service saw, its fields as fields() makes them."""
    last = auth_log(app)["last"]
    assert last is not None, "the auth service was never asked"
    return last, fields(last["headers"])


def reset_log(app):
    assert app.post("/authlog/reset").status == 200


def upstream_fields(resp):
    """The fields the app's /echo saw, from its answer."""
    assert resp.status == 200, (resp.status, resp.body[:300])
    return fields(json.loads(resp.body)["headers"])


def error_lines(srv, word, timeout=5.0):
    """Lines of tern's error log that name auth_forward and hold `word`
    (polled: the log is flushed about once a second)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [line for line in srv.stderr().splitlines() if "auth_forward" in line and word in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


# ---- What the auth service is asked ----

def test_the_check_is_a_get_with_the_clients_fields_and_the_true_forwarded_ones(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app))
    body = b"0123456789"
    with srv.connect() as conn:
        resp = conn.request(
            b"POST /echo/x?q=1&r=a%20b HTTP/1.1\r\nHost: shop.test\r\nCookie: session=alice\r\n"
            b"Accept: text/plain\r\nX-Custom: 42\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n"
            b"Keep-Alive: timeout=5\r\nTE: trailers\r\nProxy-Connection: keep-alive\r\n"
            # What a client may not say for itself: replaced by the true ones.
            b"X-Forwarded-Method: PUT\r\nX-Forwarded-Uri: /elsewhere\r\nX-Original-URL: http://evil.example/\r\n"
            b"X-Original-Method: DELETE\r\nX-Forwarded-Proto: https\r\n"
            b"Content-Type: text/plain\r\nContent-Length: 10\r\n\r\n" + body)
    # Let through: the application gets the client's method and body.
    seen_up = json.loads(resp.body) if resp.status == 200 else None
    assert seen_up is not None, (resp.status, resp.body[:300])
    assert (seen_up["method"], seen_up["path"], seen_up["body_length"]) == ("POST", "/echo/x?q=1&r=a%20b", 10)

    last, seen = last_check(app)
    assert (last["method"], last["path"], last["body_length"]) == ("GET", "/auth", 0), last
    expected = {
        "cookie": ["session=alice"],
        "accept": ["text/plain"],
        "x-custom": ["42"],
        "x-forwarded-method": ["POST"],
        "x-original-method": ["POST"],
        "x-forwarded-uri": ["/echo/x?q=1&r=a%20b"],
        "x-original-url": ["http://shop.test/echo/x?q=1&r=a%20b"],
        "x-forwarded-proto": ["http"],
        "x-forwarded-host": ["shop.test"],
        "x-forwarded-for": ["127.0.0.1"],
    }
    for name, values in expected.items():
        assert seen.get(name) == values, (name, seen)
    for gone in ("x-secret", "keep-alive", "te", "proxy-connection", "transfer-encoding"):
        assert gone not in seen, (gone, seen)
    # No body goes to the auth service, so no length of the client's.
    assert seen.get("content-length") in (None, ["0"]), seen
    for value in seen.get("connection", []):
        assert "x-secret" not in value.lower(), seen


# ---- 2xx: through, with the copied fields ----

def test_a_2xx_lets_the_request_through_with_the_copied_fields_and_only_those(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app, [
        {"prefix": "/public/", "proxy": {"pass": f"http://{app.address}/"}},  # /public/echo -> /echo
        to_app(app),
    ]))
    spoofed = [("Remote-User", "mallory"), ("Remote-Groups", "root")]

    resp = srv.get("/echo/alice", ALICE + spoofed)
    seen = upstream_fields(resp)
    assert seen.get("remote-user") == ["alice"], seen
    assert seen.get("remote-groups") == ["admins,dev"], seen
    assert "x-not-copied" not in seen, seen
    assert resp.header("X-Not-Copied") is None and resp.header("Remote-User") is None, resp.headers

    # The answer has no Remote-Groups: the client's is taken out all the same.
    seen = upstream_fields(srv.get("/echo/bot", BOT + spoofed))
    assert seen.get("remote-user") == ["bot"], seen
    assert "remote-groups" not in seen, seen

    # 204 without Remote-User: none reaches the application.
    resp = srv.get("/public/echo/open", spoofed)
    seen = upstream_fields(resp)
    assert json.loads(resp.body)["path"] == "/echo/open"
    assert "remote-user" not in seen and "remote-groups" not in seen, seen
    _, checked = last_check(app)
    assert checked.get("x-forwarded-uri") == ["/public/echo/open"], checked


def test_a_request_body_reaches_the_application_whole_after_the_check(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app))
    body = bytes(range(256)) * 400  # 100 KiB: beyond the body buffer, in a file
    want = {"sha256": hashlib.sha256(body).hexdigest(), "length": len(body), "name": "app"}
    with srv.connect() as conn:
        # Half of it with the head, the rest while the check may be on its way.
        conn.send(build_request("POST", "/sha256", ALICE + [("Content-Length", str(len(body)))])
                  + body[:len(body) // 2])
        time.sleep(0.3)
        conn.send(body[len(body) // 2:])
        resp = conn.read_response("POST")
        assert resp.status == 200, (resp.status, resp.body[:300])
        assert json.loads(resp.body) == want
        # Chunked, on the same connection.
        chunks = b"".join(b"%x\r\n" % len(body[i:i + 30000]) + body[i:i + 30000] + b"\r\n"
                          for i in range(0, len(body), 30000))
        resp = conn.request(build_request("POST", "/sha256", ALICE + [("Transfer-Encoding", "chunked")])
                            + chunks + b"0\r\n\r\n")
        assert resp.status == 200, (resp.status, resp.body[:300])
        assert json.loads(resp.body) == want
    last, _ = last_check(app)
    assert (last["method"], last["body_length"]) == ("GET", 0), last



def test_expect_100_continue_is_answered_only_once_the_service_lets_the_request_through(tern_factory, apps):
    """A client that waits to be asked for its body (Expect: 100-continue)
    is refused without sending it, and asked for it once the check is 2xx."""
    (app,) = apps("app")
    srv = tern_factory(guarded(app))
    body = b"c" * 3000
    expect = [("Content-Length", str(len(body))), ("Expect", "100-continue")]
    with srv.connect() as conn:
        conn.send(build_request("POST", "/sha256", MALLORY + expect))
        resp = conn.read_response("POST", skip_interim=False)
        assert resp.status == 403, resp
    with srv.connect() as conn:
        conn.send(build_request("POST", "/sha256", ALICE + expect))
        resp = conn.read_response("POST", skip_interim=False)
        assert resp.status == 100, resp
        conn.send(body)
        resp = conn.read_response("POST")
        assert resp.status == 200 and json.loads(resp.body)["length"] == len(body), resp.body[:200]

# ---- 401, 403, 3xx: relayed ----

def test_401_403_and_302_go_to_the_client_as_the_auth_service_sent_them(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app))

    def post(headers):
        with srv.connect() as conn:
            conn.send(build_request("POST", "/count?from=a%20b",
                                    [("Host", "shop.test"), *headers, ("Content-Length", "1")]) + b"x")
            return conn.read_response("POST")

    resp = post([("Accept", "application/json")])
    assert (resp.status, resp.body) == (401, b"login required"), resp
    assert resp.header("WWW-Authenticate") == CHALLENGE, resp.headers
    assert (resp.header("Content-Type") or "").startswith("text/plain"), resp.headers

    resp = post(MALLORY)
    assert (resp.status, resp.body) == (403, b"forbidden"), resp

    resp = post([("Accept", "text/html,application/xhtml+xml")])
    assert (resp.status, resp.body) == (302, b"redirecting"), resp
    original = "http://shop.test/count?from=a%20b"
    assert resp.header("Location") == "https://auth.example/login?rd=" + urllib.parse.quote(original, safe="")
    assert resp.header("Set-Cookie") == "auth_flow=1; Path=/", resp.headers

    # The application never saw one of them.
    assert app.get("/count").body == b"0"
    assert auth_log(app)["count"] == 3


# ---- Anything else: 500 ----

# case: (what `pass` asks for at the app, None for a port nobody listens
# on; more auth_forward keys; a word of the error line)
FAILURES = {
    "status-500": ("/auth/status?code=500", {}, "answered 500"),
    "status-404": ("/auth/status?code=404", {}, "answered 404"),
    # Not relayed: it would tell the client its copy of the page is good.
    "status-304": ("/auth/status?code=304", {}, "answered 304"),
    "down": (None, {}, "no connection"),
    "slow": ("/auth/slow?delay=3", {"timeout": "1s"}, "timed out"),
    "huge": ("/auth/huge", {}, "too large"),
    "close": ("/auth/close", {}, "closed"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_any_other_answer_or_none_is_500_logged_and_tern_goes_on(tern_factory, apps, case):
    path, options, word = FAILURES[case]
    (app,) = apps("app")
    target = f"127.0.0.1:{free_ports(1)[0]}/auth" if path is None else f"{app.address}{path}"
    srv = tern_factory(site([
        {"prefix": "/ok/", "auth_forward": check(app), "return": {"status": 200, "body": "fine"}},
        {**to_app(app), "auth_forward": {"pass": f"http://{target}", "copy_headers": COPIED, **options}},
    ]))
    started = time.monotonic()
    with srv.connect() as conn:
        resp = conn.request(build_request("POST", "/count", ALICE + [("Content-Length", "1")]) + b"x")
    elapsed = time.monotonic() - started
    assert resp.status == 500, (resp.status, resp.body[:300])
    # tern's own 500, not the auth service's body.
    assert len(resp.body) < 65536 and b"auth status" not in resp.body, resp.body[:300]
    assert elapsed < 2.5, elapsed
    if case == "slow":
        assert elapsed >= 0.9, elapsed  # the timeout, not something sooner
    assert app.get("/count").body == b"0"  # the location's handler never ran
    lines = error_lines(srv, word)
    assert lines, srv.stderr()[-3000:]
    # tern goes on.
    resp = srv.get("/ok/x", ALICE)
    assert (resp.status, resp.body) == (200, b"fine"), resp


class CloseDelimitedAnswers(BadUpstream):
    """An auth service whose answers (401 unless `status` says) end at the
    close (no length, not chunked): the first is reset part way through its
    body, the others end cleanly."""

    def __init__(self, status=b"401 Unauthorized"):
        self.status = status
        super().__init__()

    def respond(self, conn):
        conn.sendall(b"HTTP/1.1 " + self.status + b"\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
        if self.served == 1:
            conn.sendall(b"cut" * 1000)
            time.sleep(0.3)  # read by tern by now
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            conn.sendall(b"whole denial " + b"d" * 3000)


def test_a_denial_that_ends_at_the_close_is_relayed_only_if_the_connection_ended_cleanly(tern_factory, apps):
    """A reset in the middle of a close-delimited denial cuts it: the
    client gets tern's 500, not the cut body as a whole 401."""
    (app,) = apps("app")
    service = CloseDelimitedAnswers()
    try:
        srv = tern_factory(guarded(app, auth={"pass": f"http://{service.address}/auth"}))
        resp = srv.get("/count", ALICE)
        assert resp.status == 500 and b"cut" not in resp.body, (resp.status, resp.body[:300])
        lines = error_lines(srv, "Connection reset by peer")
        assert lines and "in the middle of its answer" in lines[0], srv.stderr()[-3000:]
        resp = srv.get("/count", ALICE)
        assert (resp.status, resp.body) == (401, b"whole denial " + b"d" * 3000), (resp.status, resp.body[:300])
        assert service.served == 2
        assert app.get("/count").body == b"0"
    finally:
        service.close()


def test_a_grant_whose_body_is_cut_by_a_reset_still_lets_the_request_through(tern_factory, apps):
    """A 2xx's body is not used, whole or cut: its status is the answer."""
    (app,) = apps("app")
    service = CloseDelimitedAnswers(b"200 OK")
    try:
        srv = tern_factory(guarded(app, auth={"pass": f"http://{service.address}/auth"}))
        for _ in range(2):
            resp = srv.get("/count", ALICE)
            assert (resp.status, resp.body) == (200, b"0"), (resp.status, resp.body[:300])
        assert service.served == 2
    finally:
        service.close()


# ---- Where it applies ----

def test_a_sites_auth_forward_covers_every_location_but_one_that_says_off(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app, [
        {"prefix": "/open/", "auth_forward": "off", "return": {"status": 200, "body": "open"}},
        {"prefix": "/static/"},
        {"prefix": "/", "return": {"status": 200, "body": "in"}},
    ]))
    srv.write_file("static/a.txt", b"file\n")
    for path in ("/x", "/static/a.txt"):
        resp = srv.get(path)
        assert (resp.status, resp.body) == (401, b"login required"), (path, resp)
    assert srv.get("/x", ALICE).body == b"in"
    assert srv.get("/static/a.txt", ALICE).body == b"file\n"
    reset_log(app)
    for _ in range(3):
        resp = srv.get("/open/x")
        assert (resp.status, resp.body) == (200, b"open"), resp
    assert auth_log(app)["count"] == 0


def test_static_files_and_return_locations_are_guarded_too(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(site([
        {"prefix": "/files/", "auth_forward": check(app)},
        {"prefix": "/r/", "auth_forward": check(app), "return": {"status": 200, "body": "returned"}},
        {"prefix": "/"},
    ]))
    srv.write_file("files/a.txt", b"secret file\n")
    srv.write_file("free.txt", b"free\n")
    for path, body in (("/files/a.txt", b"secret file\n"), ("/r/x", b"returned")):
        resp = srv.get(path)
        assert (resp.status, resp.body) == (401, b"login required"), (path, resp)
        assert resp.header("WWW-Authenticate") == CHALLENGE
        assert srv.get(path, [("Cookie", "session=mallory")]).status == 403
        resp = srv.get(path, ALICE)
        assert (resp.status, resp.body) == (200, body), (path, resp)
    # A location without auth_forward under a site without one: not asked.
    reset_log(app)
    assert srv.get("/free.txt").body == b"free\n"
    assert auth_log(app)["count"] == 0


def test_pass_may_name_an_upstream_and_without_a_path_asks_for_the_clients_uri(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(site([
        {"prefix": "/grouped/", "auth_forward": {"pass": "http://authsvc/auth", "copy_headers": COPIED},
         "return": {"status": 200, "body": "grouped"}},
        {"prefix": "/", "auth_forward": {"pass": "http://authsvc"}, "return": {"status": 200, "body": "bare"}},
    ], [group("authsvc", [app])]))
    assert srv.get("/grouped/x").status == 401
    assert srv.get("/grouped/x", ALICE).body == b"grouped"
    last, _ = last_check(app)
    assert last["path"] == "/auth", last
    with srv.connect() as conn:
        resp = conn.request(build_request("POST", "/auth?from=client", ALICE + [("Content-Length", "1")]) + b"x")
    assert (resp.status, resp.body) == (200, b"bare"), resp
    last, _ = last_check(app)
    assert (last["method"], last["path"], last["body_length"]) == ("GET", "/auth?from=client", 0), last
    assert srv.get("/auth?from=client").status == 401


def test_a_client_cannot_claim_another_address_to_the_auth_service(tern_factory, apps):
    # Services judge the client by X-Forwarded-For's first address (a rule
    # "bypass for 10.0.0.0/8"): the check names the client alone.
    (app,) = apps("app")
    srv = tern_factory(guarded(app, [{"prefix": "/", "return": {"status": 200, "body": "in"}}]))
    resp = srv.get("/x", ALICE + [("Host", "shop.test"), ("X-Forwarded-For", "10.0.0.1"),
                                  ("Forwarded", "for=10.0.0.1"), ("X-Real-IP", "10.0.0.1"), ("Via", "1.1 fake")])
    assert resp.status == 200, resp
    _, seen = last_check(app)
    assert seen.get("x-forwarded-for") == ["127.0.0.1"], seen
    assert seen.get("forwarded") == ['for=127.0.0.1;proto=http;host="shop.test"'], seen
    assert seen.get("x-real-ip") == ["127.0.0.1"], seen
    assert seen.get("via") == ["1.1 tern"], seen


def test_an_internal_redirect_to_another_guarded_location_is_checked_there_once(tern_factory, apps):
    # The site's auth_forward in both locations: "/" checks, its try_files
    # sends the request to "/app/", which checks too, and each lets it
    # through once (not one after the other for ever).
    (app,) = apps("app")
    srv = tern_factory(guarded(app, [
        {"prefix": "/", "try_files": ["$uri", "/app/fallback"]},
        {"prefix": "/app/", "return": {"status": 200, "body": "app"}},
    ]))
    reset_log(app)
    resp = srv.get("/missing", ALICE)
    assert (resp.status, resp.body) == (200, b"app"), resp
    assert auth_log(app)["count"] == 2
    resp = srv.get("/missing")
    assert (resp.status, resp.body) == (401, b"login required"), resp


def test_a_check_that_names_no_user_keeps_the_one_auth_basic_proved(tern_factory, apps, tmp_path):
    (app,) = apps("app")
    users = tmp_path / "htpasswd"
    subprocess.run(["htpasswd", "-b", "-c", "-B", "-C", "5", str(users), "carol", "pw"], check=True,
                   capture_output=True)
    # /public/ is a 204 without Remote-User at the auth service.
    srv = tern_factory(guarded(app, [{"prefix": "/public/", "return": {"status": 200, "body": "in"},
                                      "auth_basic": {"realm": "R", "users": str(users)}}],
                               access_log="access.log"))
    resp = srv.get("/public/x", [("Authorization", "Basic Y2Fyb2w6cHc=")])  # carol:pw
    assert (resp.status, resp.body) == (200, b"in"), resp
    lines = wait_for_lines(srv.access_log_path, 1)
    assert lines[0].startswith("127.0.0.1 - carol ["), lines


# ---- The access log, connections, HTTP/2, HEAD ----

def test_the_copied_remote_user_is_the_access_logs_remote_user(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app, [{"prefix": "/", "return": {"status": 200, "body": "in"}}],
                               access_log="access.log"))
    assert srv.get("/a", ALICE).status == 200
    assert srv.get("/b", BOT).status == 200
    assert srv.get("/c").status == 401
    lines = wait_for_lines(srv.access_log_path, 3)
    assert len(lines) == 3, lines
    by_path = {line.split('"')[1].split()[1]: line for line in lines}
    assert by_path["/a"].startswith("127.0.0.1 - alice [") and '" 200 ' in by_path["/a"], lines
    assert by_path["/b"].startswith("127.0.0.1 - bot [") and '" 200 ' in by_path["/b"], lines
    assert by_path["/c"].startswith("127.0.0.1 - - [") and '" 401 ' in by_path["/c"], lines


def test_checks_reuse_their_connections_to_the_auth_service(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app, [{"prefix": "/", "return": {"status": 200, "body": "in"}}]))
    reset_log(app)
    for i in range(20):
        resp = srv.get(f"/k{i}", ALICE)
        assert (resp.status, resp.body) == (200, b"in"), (i, resp)
    log = auth_log(app)
    assert log["count"] == 20, log
    assert log["connections"] <= 3, log


def test_http2_requests_are_checked_the_same(tern_factory, apps, tmp_path):
    (app,) = apps("app")
    srv = tern_factory(guarded(app), listen_flags="h2c")
    h2 = "--http2-prior-knowledge"

    version, status, _, body = curl(srv.url("/echo/h2?x=1"), h2, "-H", "Cookie: session=alice",
                                    "-H", "Remote-User: mallory")
    assert (version, status) == ("HTTP/2", 200), body[:300]
    seen = fields(json.loads(body)["headers"])
    assert seen.get("remote-user") == ["alice"] and seen.get("remote-groups") == ["admins,dev"], seen
    last, checked = last_check(app)
    assert last["method"] == "GET", last
    authority = f"127.0.0.1:{srv.port}"
    assert checked.get("cookie") == ["session=alice"], checked
    assert checked.get("x-forwarded-method") == ["GET"], checked
    assert checked.get("x-forwarded-uri") == ["/echo/h2?x=1"], checked
    assert checked.get("x-forwarded-host") == [authority], checked
    assert checked.get("x-original-url") == [f"http://{authority}/echo/h2?x=1"], checked

    version, status, headers, body = curl(srv.url("/echo/h2"), h2)
    assert (version, status, body) == ("HTTP/2", 401, b"login required"), (version, status, body[:300])
    assert headers.get("www-authenticate") == CHALLENGE, headers

    upload = tmp_path / "up.bin"
    data = bytes(range(256)) * 400
    upload.write_bytes(data)
    version, status, _, body = curl(srv.url("/sha256"), h2, "-H", "Cookie: session=alice",
                                    "--data-binary", f"@{upload}")
    assert (version, status) == ("HTTP/2", 200), body[:300]
    assert json.loads(body) == {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data), "name": "app"}


def test_a_head_request_is_checked_with_a_get_and_a_relayed_401_has_no_body(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(guarded(app))
    with srv.connect() as conn:
        resp = conn.get("/echo/head", method="HEAD")
        assert resp.status == 401, resp
        assert resp.header("WWW-Authenticate") == CHALLENGE, resp.headers
        # No body follows the head, and the connection stays open.
        assert not conn.is_closed(0.5)
        last, checked = last_check(app)
        assert (last["method"], last["body_length"]) == ("GET", 0), last
        assert checked.get("x-forwarded-method") == ["HEAD"], checked
        assert checked.get("x-original-method") == ["HEAD"], checked
        # Let through, the application gets the HEAD.
        resp = conn.get("/echo/head", ALICE, method="HEAD")
        assert resp.status == 200, resp
        last, _ = last_check(app)
        assert last["method"] == "GET", last
        # And the connection is still framed right.
        seen = json.loads(conn.get("/echo/after", ALICE).body)
        assert (seen["method"], seen["path"]) == ("GET", "/echo/after")


# ---- A real one: oauth2-proxy ----

def oauth2_proxy_binary():
    """oauth2-proxy, where it was built: TERN_WITH_OAUTH2_PROXY=1 ./scripts/test
    builds it into build/tools (about 850 MB of Go modules, so not by
    default), or $TERN_OAUTH2_PROXY names one."""
    path = os.environ.get("TERN_OAUTH2_PROXY") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "build", "tools", "oauth2-proxy")
    return path if os.access(path, os.X_OK) else None


def test_oauth2_proxy_decides_as_it_does_behind_nginx(tern_factory, apps, tmp_path):
    binary = oauth2_proxy_binary()
    if binary is None:
        pytest.skip("oauth2-proxy not built (TERN_WITH_OAUTH2_PROXY=1 ./scripts/test builds it)")
    (app,) = apps("app")
    users = tmp_path / "users"
    subprocess.run(["htpasswd", "-b", "-c", "-B", "-C", "5", str(users), "alice", "secret"], check=True,
                   capture_output=True)
    port = free_ports(1)[0]
    # A provider that asks nothing at start; the sessions here are the
    # htpasswd file's (oauth2-proxy's basic-auth session loader).
    proc = subprocess.Popen(
        [binary, "--provider=google", "--client-id=tern", "--client-secret=tern",
         "--cookie-secret=0123456789abcdef0123456789abcdef", "--email-domain=*", "--upstream=static://202",
         f"--http-address=127.0.0.1:{port}", f"--htpasswd-file={users}", "--set-xauthrequest",
         "--reverse-proxy"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "oauth2-proxy.log", "wb"))
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "oauth2-proxy did not start"
                time.sleep(0.05)
        srv = tern_factory(guarded(app, auth={"pass": f"http://127.0.0.1:{port}/oauth2/auth",
                                              "copy_headers": ["X-Auth-Request-User"]}))
        resp = srv.get("/echo/x")
        assert resp.status == 401, (resp.status, resp.body[:300])
        assert srv.get("/echo/x", [("Authorization", "Basic YWxpY2U6d3Jvbmc=")]).status == 401  # alice:wrong
        seen = upstream_fields(srv.get("/echo/x", [("Authorization", "Basic YWxpY2U6c2VjcmV0"),  # alice:secret
                                                   ("X-Auth-Request-User", "root")]))
        assert seen.get("x-auth-request-user") == ["alice"], seen
    finally:
        proc.kill()
        proc.wait()


def test_the_readme_example_serves_as_written(tern_factory, apps):
    """README "Forward auth": its config, the auth service and the
    application moved to the test's app."""
    from test_config import readme_toml
    import tomllib
    text = readme_toml("### Forward auth")
    (app,) = apps("app")
    text = text.replace("http://127.0.0.1:9091/api/authz/forward-auth", f"http://{app.address}/auth")
    text = text.replace("http://127.0.0.1:3000", f"http://{app.address}")
    config = tomllib.loads(text)
    config["server"][0]["names"].append("127.0.0.1")
    srv = tern_factory(config)
    resp = srv.get("/health")
    assert (resp.status, resp.body) == (200, b"ok\n"), resp
    assert srv.get("/echo/x").status == 401
    seen = upstream_fields(srv.get("/echo/x", ALICE))
    assert seen.get("remote-user") == ["alice"] and seen.get("remote-groups") == ["admins,dev"], seen


# ---- Beside nginx's auth_request ----

NGINX_AUTH = """daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    server {{
        listen 127.0.0.1:{port};
        server_name shop.test;
        # As the auth services' guides write it (Authelia, oauth2-proxy).
        location / {{
            auth_request /_auth;
            auth_request_set $user $upstream_http_remote_user;
            auth_request_set $groups $upstream_http_remote_groups;
            proxy_set_header Remote-User $user;
            proxy_set_header Remote-Groups $groups;
            proxy_pass http://{app};
        }}
        location = /_auth {{
            internal;
            proxy_pass http://{app}/auth;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Forwarded-Method $request_method;
            proxy_set_header X-Forwarded-Uri $request_uri;
            proxy_set_header X-Original-URL $scheme://$http_host$request_uri;
        }}
        location /s404/ {{
            auth_request /_auth404;
            proxy_pass http://{app};
        }}
        location = /_auth404 {{
            internal;
            proxy_pass http://{app}/auth/status?code=404;
        }}
        location /s500/ {{
            auth_request /_auth500;
            proxy_pass http://{app};
        }}
        location = /_auth500 {{
            internal;
            proxy_pass http://{app}/auth/status?code=500;
        }}
    }}
}}
"""

SPOOFED = [("Remote-User", "root"), ("Remote-Groups", "admins")]
BODY = bytes(range(256)) * 40
# (method, target, fields, body): each sent to both servers.
BESIDE_NGINX = [
    ("GET", "/echo", ALICE, None),
    ("GET", "/echo", ALICE + SPOOFED, None),
    ("GET", "/echo", BOT + SPOOFED, None),
    ("GET", "/echo", MALLORY, None),
    ("GET", "/echo", [], None),
    ("GET", "/echo", SPOOFED, None),
    ("GET", "/public/echo", [], None),
    ("HEAD", "/echo", ALICE, None),
    ("POST", "/sha256", ALICE, BODY),
    ("POST", "/sha256", MALLORY, BODY),
    ("GET", "/s404/echo", ALICE, None),
    ("GET", "/s500/echo", ALICE, None),
    ("GET", "/echo", [("Accept", "text/html")], None),
]
# Where tern means to answer otherwise: a 3xx from the service goes to the
# client (a login page's redirect, as Caddy's forward_auth relays it);
# nginx's auth_request takes any status but 2xx, 401 and 403 for an error.
BESIDE_NGINX_INTENDED = {("GET", "/echo", (("Accept", "text/html"),)): (302, 500)}


def test_tern_decides_as_nginx_auth_request_does(tern_factory, apps, tmp_path):
    """The same auth service behind nginx's auth_request (configured as
    the services' guides write it) and behind tern's auth_forward: the same
    status for each request, the same challenge on a 401, and the same
    Remote-User and Remote-Groups (the service's, never the client's)
    reaching the application with the same body."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    (app,) = apps("app")
    port = free_ports(1)[0]
    conf = tmp_path / "nginx.conf"
    conf.write_text(NGINX_AUTH.format(tmp=tmp_path, port=port, app=app.address))
    proc = subprocess.Popen([nginx, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
                time.sleep(0.05)
        srv = tern_factory({"server": [{
            "names": ["shop.test"], "auth_forward": check(app),
            "location": [to_app(app),
                         {**to_app(app, "/s404/"), "auth_forward": check(app, "/auth/status?code=404")},
                         {**to_app(app, "/s500/"), "auth_forward": check(app, "/auth/status?code=500")}]}]})

        def ask(port, method, target, extra, body):
            head = extra + ([("Content-Length", str(len(body)))] if body is not None else [])
            with HttpConn.open(port) as conn:
                return conn.request(build_request(method, target, [("Host", "shop.test")] + head)
                                    + (body or b""), method)

        differences = []
        for method, target, extra, body in BESIDE_NGINX:
            got, want = (ask(p, method, target, extra, body) for p in (srv.port, port))
            row = f"{method} {target} {[name for name, _ in extra]}"
            intended = BESIDE_NGINX_INTENDED.get((method, target, tuple(extra)))
            if intended is not None:
                if (got.status, want.status) != intended:
                    differences.append(f"{row}: tern {got.status}, nginx {want.status}, intended {intended}")
                continue
            if got.status != want.status:
                differences.append(f"{row}: tern {got.status}, nginx {want.status}")
                continue
            if got.header("WWW-Authenticate") != want.header("WWW-Authenticate"):
                differences.append(f"{row}: WWW-Authenticate {got.header('WWW-Authenticate')!r}, "
                                   f"nginx {want.header('WWW-Authenticate')!r}")
            if got.status == 200 and method == "GET" and target.endswith("/echo"):
                seen = [{name: f.get(name) for name in ("remote-user", "remote-groups")}
                        for f in (upstream_fields(got), upstream_fields(want))]
                if seen[0] != seen[1]:
                    differences.append(f"{row}: the application saw {seen[0]}, behind nginx {seen[1]}")
            elif got.status == 200 and got.body != want.body:
                differences.append(f"{row}: body {got.body[:80]!r}, nginx {want.body[:80]!r}")
        assert not differences, "\n".join(differences)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

"""auth_basic: files made by htpasswd (apache2-utils) for each scheme it
writes; the right password passes (its user in the access log and, to PHP,
REMOTE_USER), a wrong one or none is 401 with the realm's challenge; a
site's auth_basic covers its locations unless one says "off"; successes are
remembered, failures per address limited (429); SIGHUP reads the file
again; and the loop answers static requests at normal latency while 50
clients guess bcrypt passwords, each check on the task threads."""

import base64
import json
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from http_client import HttpConn, build_request
from php_site import install_scripts
from test_access import wait_for_lines
from test_proxy import apps  # noqa: F401 (a fixture)

CHALLENGE = 'Basic realm="Admin \\"area\\"", charset="UTF-8"'


def htpasswd(path, user, password, *flags):
    """Adds (or changes) `user` in the file at `path`, made if absent."""
    create = [] if path.exists() else ["-c"]
    subprocess.run(["htpasswd", "-b", *create, *flags, str(path), user, password], check=True,
                   capture_output=True)


def credentials(user, password):
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return [("Authorization", f"Basic {token}")]


def guarded(users, locations=None, site_auth=True, attempts=None, **extra):
    auth = {"realm": 'Admin "area"', "users": str(users)}
    if attempts is not None:
        auth["attempts"] = attempts
    site = {"location": locations or [{"prefix": "/", "return": {"status": 200, "body": "in"}}]}
    if site_auth:
        site["auth_basic"] = auth
    return {"server": [site], "access_log": "access.log", **extra}, auth


SCHEMES = {"bcrypt": ["-B", "-C", "5"], "sha256": ["-2"], "sha512": ["-5"], "apr1": ["-m"], "sha1": ["-s"]}


def test_each_scheme_htpasswd_writes_lets_its_user_in_and_no_one_else(tern_factory, tmp_path):
    users = tmp_path / "htpasswd"
    for scheme, flags in SCHEMES.items():
        htpasswd(users, scheme, f"{scheme} pass", *flags)
    srv = tern_factory(guarded(users, attempts=100)[0])
    for scheme in SCHEMES:
        resp = srv.get("/", credentials(scheme, f"{scheme} pass"))
        assert (resp.status, resp.body) == (200, b"in"), (scheme, resp.status, resp.body[:200])
        wrong = srv.get("/", credentials(scheme, f"{scheme} pasS"))
        assert wrong.status == 401, scheme
        assert wrong.header("WWW-Authenticate") == CHALLENGE, wrong.headers
    for headers in ([], credentials("nobody", "x"), [("Authorization", "Basic !!!")],
                    [("Authorization", "Bearer abc")], [("Authorization", "Basic " + base64.b64encode(b"nocolon").decode())]):
        resp = srv.get("/", headers)
        assert resp.status == 401 and resp.header("WWW-Authenticate") == CHALLENGE, (headers, resp.status)
    # The error log is flushed about once a second.
    assert srv.wait_for_log("auth_basic: nobody from 127.0.0.1: no such user or a wrong password"), srv.stderr()
    log = srv.stderr()
    assert "apr1 (MD5) is a weak hash" in log and "{SHA} (unsalted SHA-1) is a weak hash" in log, log
    lines = wait_for_lines(srv.access_log_path, 5 * 2 + 5)
    assert any(line.startswith("127.0.0.1 - bcrypt [") and '" 200 ' in line for line in lines), lines
    assert any(line.startswith("127.0.0.1 - - [") and '" 401 ' in line for line in lines), lines


def test_a_location_may_turn_its_sites_auth_off_or_have_its_own(tern_factory, tmp_path):
    users, other = tmp_path / "htpasswd", tmp_path / "other"
    htpasswd(users, "alice", "a", "-B", "-C", "5")
    htpasswd(other, "bob", "b", "-B", "-C", "5")
    config, _ = guarded(users, [
        {"prefix": "/public/", "auth_basic": "off", "return": {"status": 200, "body": "open"}},
        {"prefix": "/bob/", "auth_basic": {"realm": "Bob", "users": str(other)}, "return": {"status": 200, "body": "bob"}},
        {"prefix": "/", "return": {"status": 200, "body": "in"}},
    ])
    srv = tern_factory(config)
    assert srv.get("/public/x").body == b"open"
    assert srv.get("/x").status == 401
    assert srv.get("/x", credentials("alice", "a")).body == b"in"
    resp = srv.get("/bob/x", credentials("alice", "a"))
    assert resp.status == 401 and resp.header("WWW-Authenticate") == 'Basic realm="Bob", charset="UTF-8"'
    assert srv.get("/bob/x", credentials("bob", "b")).body == b"bob"


def test_the_user_of_one_request_is_not_the_next_ones_on_the_same_connection(tern_factory, tmp_path, fpm):
    # A kept-alive connection reuses its request objects: the user that
    # /admin/ proved must not reach the log or PHP for the open page after.
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "5")
    config, _ = guarded(users, [
        {"regex": r"\.php$", "auth_basic": "off", "fastcgi": {"pass": fpm.pass_address}},
        {"prefix": "/", "return": {"status": 200, "body": "in"}},
    ])
    srv = tern_factory(config)
    install_scripts(srv.root)
    with HttpConn.open(srv.port) as conn:
        assert conn.get("/admin/", credentials("alice", "secret")).status == 200
        resp = conn.get("/echo.php")
        assert resp.status == 200, resp.body[:500]
        assert "REMOTE_USER" not in json.loads(resp.body)["server"]
    lines = wait_for_lines(srv.access_log_path, 2)
    assert lines[0].startswith("127.0.0.1 - alice [") and lines[1].startswith("127.0.0.1 - - ["), lines


def test_php_sees_the_user_in_remote_user(tern_factory, tmp_path, fpm):
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "5")
    config, _ = guarded(users, [{"regex": r"\.php$", "fastcgi": {"pass": fpm.pass_address}}])
    srv = tern_factory(config)
    install_scripts(srv.root)
    resp = srv.get("/echo.php", credentials("alice", "secret"))
    assert resp.status == 200, resp.body[:500]
    env = json.loads(resp.body)["server"]
    assert (env["REMOTE_USER"], env["AUTH_TYPE"]) == ("alice", "Basic"), env
    assert srv.get("/echo.php").status == 401


def test_a_success_is_remembered_and_failures_per_address_are_limited(tern_factory, tmp_path):
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "12")  # hundreds of milliseconds a check
    srv = tern_factory(guarded(users, attempts=3)[0])
    started = time.monotonic()
    assert srv.get("/", credentials("alice", "secret")).status == 200
    first = time.monotonic() - started
    again = []
    for _ in range(5):
        started = time.monotonic()
        assert srv.get("/", credentials("alice", "secret")).status == 200
        again.append(time.monotonic() - started)
    # Remembered: no bcrypt again, and nothing counted against the address.
    assert max(again) < first / 2, (first, again)
    # Three checks a minute: the first success was one.
    statuses = [srv.get("/", credentials("alice", f"guess {i}")).status for i in range(2)]
    assert statuses == [401, 401], statuses
    refused = srv.get("/", credentials("alice", "guess 4"))
    assert refused.status == 429 and 1 <= int(refused.header("Retry-After")) <= 60, refused.headers
    # Another address has its own count; a remembered success still passes.
    with srv.connect(source="127.0.0.2") as conn:
        assert conn.get("/", credentials("alice", "guess 5")).status == 401
    assert srv.get("/", credentials("alice", "secret")).status == 200


def test_sighup_reads_the_file_again(tern_factory, tmp_path):
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "old", "-B", "-C", "5")
    config, _ = guarded(users)
    srv = tern_factory(config)
    assert srv.get("/", credentials("alice", "old")).status == 200  # now remembered
    htpasswd(users, "alice", "new", "-B", "-C", "5")
    htpasswd(users, "bob", "b", "-2")
    srv.reload(config)
    assert srv.get("/", credentials("alice", "old")).status == 401
    assert srv.get("/", credentials("alice", "new")).status == 200
    assert srv.get("/", credentials("bob", "b")).status == 200
    # A file that no longer loads keeps the running one.
    users.write_text("alice:plaintext\n")
    before = srv.stderr().count("keeping the running configuration")
    srv.signal(__import__("signal").SIGHUP)
    assert srv.wait_for_log("keeping the running configuration", before + 1)
    assert srv.wait_for_log("htpasswd:1: alice: a hash tern does not take"), srv.stderr()
    assert srv.get("/", credentials("bob", "b")).status == 200


def test_a_missing_or_bad_file_fails_the_check_naming_it(tmp_path):
    from tern_server import TERN_BIN
    (tmp_path / "www").mkdir()
    for content, expected in ((None, "No such file or directory"), ("alice:secret\n", "a hash tern does not take")):
        users = tmp_path / "htpasswd"
        if content is not None:
            users.write_text(content)
        conf = tmp_path / "t.toml"
        conf.write_text(f'[static]\nroot = "{tmp_path / "www"}"\n[[server]]\nauth_basic = {{ realm = "A", users = "{users}" }}\n')
        proc = subprocess.run([TERN_BIN, "-t", "-c", str(conf)], capture_output=True, text=True)
        assert proc.returncode == 2, proc
        assert f"t.toml:4: server[0].location[0].auth_basic.users: " in proc.stderr and expected in proc.stderr, proc.stderr


def test_static_requests_keep_their_latency_while_50_clients_guess_bcrypt_passwords(tern_factory, tmp_path):
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "10")
    config, _ = guarded(users, [
        {"prefix": "/static/", "auth_basic": "off"},
        {"prefix": "/", "return": {"status": 200, "body": "in"}},
    ], attempts=1_000_000)
    srv = tern_factory(config)
    srv.write_file("static/a.txt", b"a" * 1024)

    def latencies(count):
        out = []
        with HttpConn.open(srv.port) as conn:
            for _ in range(count):
                started = time.monotonic()
                assert conn.get("/static/a.txt").status == 200
                out.append(time.monotonic() - started)
                time.sleep(0.01)
        return out

    quiet = latencies(50)
    stop = time.monotonic() + 6

    def guess(i):
        statuses = []
        with HttpConn.open(srv.port) as conn:
            while time.monotonic() < stop:
                statuses.append(conn.get("/", credentials("alice", f"guess {i}")).status)
        return statuses

    with ThreadPoolExecutor(50) as pool:
        guessing = [pool.submit(guess, i) for i in range(50)]
        time.sleep(1)
        busy = latencies(100)
        statuses = [s for g in guessing for s in g.result()]
    assert statuses and set(statuses) == {401}, set(statuses)
    # The loop never hashes: a static file is as quick as before, give or
    # take the machine's two cores shared with 50 clients and the checks.
    assert statistics.median(busy) < max(10 * statistics.median(quiet), 0.02), (quiet, busy)
    # And no request waits behind hashing: 95 of 100 within half a second
    # (the slowest few measure the loaded machine, a Python thread of 50).
    assert sorted(busy)[94] < 0.5, sorted(busy)[-10:]


def test_http2_requests_are_checked_the_same(tern_factory, tmp_path):
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "5")
    srv = tern_factory(guarded(users)[0], listen_flags="h2c")
    url = f"http://127.0.0.1:{srv.port}/"
    (name, value), = credentials("alice", "secret")

    def status(*headers):
        proc = subprocess.run(["nghttp", "-v", "-t", "20", *headers, url], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
        return [line.split()[-1] for line in proc.stdout.splitlines() if ":status:" in line]

    assert status("-H", f"{name.lower()}: {value}") == ["200"]
    assert status() == ["401"]
    assert status("-H", f"{name.lower()}: Basic {base64.b64encode(b'alice:wrong').decode()}") == ["401"]


def test_the_readme_example_serves_as_written(tern_factory, tmp_path):
    """README "Basic auth": its config, the files where it says (moved under
    the test's folder), made as its commands make them."""
    from test_config import readme_toml
    import tomllib
    text = readme_toml("### Basic auth").replace("/etc/tern/", f"{tmp_path}/")
    htpasswd(tmp_path / "htpasswd", "alice", "a", "-B", "-C", "5")
    htpasswd(tmp_path / "admins", "root", "r", "-B", "-C", "5")
    config = tomllib.loads(text)
    config["server"][0]["names"].append("127.0.0.1")
    srv = tern_factory(config)
    srv.write_file(".well-known/security.txt", b"contact\n")
    srv.write_file("admin/index.html", b"admin\n")
    srv.write_file("index.html", b"home\n")
    assert srv.get("/.well-known/security.txt").status == 200
    assert srv.get("/").status == 401
    assert srv.get("/", credentials("alice", "a")).body == b"home\n"
    resp = srv.get("/admin/", credentials("alice", "a"))
    assert resp.status == 401 and 'realm="Admin"' in resp.header("WWW-Authenticate")
    assert srv.get("/admin/", credentials("root", "r")).body == b"admin\n"


def test_an_internal_redirect_to_another_file_is_checked_against_that_file(tern_factory, tmp_path):
    """Regression: a user one location's file let in passed a location with
    another file that an internal redirect (try_files) led to unchecked."""
    users, admins = tmp_path / "htpasswd", tmp_path / "admins"
    htpasswd(users, "alice", "a", "-B", "-C", "5")
    htpasswd(admins, "root", "r", "-B", "-C", "5")
    config, _ = guarded(users, [
        {"prefix": "/a/", "try_files": ["$uri", "/admin/fallback"]},
        {"prefix": "/admin/", "auth_basic": {"realm": "Admin", "users": str(admins)},
         "return": {"status": 200, "body": "admin"}},
    ])
    srv = tern_factory(config)
    resp = srv.get("/a/missing", credentials("alice", "a"))
    assert resp.status == 401 and 'realm="Admin"' in resp.header("WWW-Authenticate"), (resp.status, resp.body)
    # Once remembered by the first file, still not the second's.
    assert srv.get("/a/missing", credentials("alice", "a")).status == 401
    assert srv.get("/admin/x", credentials("root", "r")).body == b"admin"


def test_requests_with_the_same_credentials_at_once_share_one_check(tern_factory, tmp_path):
    """A browser's first page: many requests with the credentials it was
    just given. One check answers them all, and counts once."""
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "10")
    srv = tern_factory(guarded(users, attempts=2, workers=2)[0])
    with ThreadPoolExecutor(30) as pool:
        statuses = list(pool.map(lambda _: srv.get("/", credentials("alice", "secret")).status, range(30)))
    assert statuses == [200] * 30, statuses
    # One or two checks (one per worker at most) of the two allowed.
    assert srv.get("/", credentials("alice", "wrong")).status in (401, 429)


def test_a_body_held_for_its_turn_and_its_check_reaches_the_upstream_whole(tern_factory, tmp_path, apps):
    """Regression: a request that waited under a [[limit]] and then for its
    password check lost what arrived of its body during the check."""
    (app,) = apps("app")
    users = tmp_path / "htpasswd"
    for i in range(4):  # a user each: every request has a check of its own
        htpasswd(users, f"user{i}", "secret", "-B", "-C", "10")
    config, _ = guarded(users, [{"prefix": "/", "limit": ["api"], "proxy": {"pass": f"http://{app.address}"}}],
                        limit=[{"name": "api", "rate": "10r/s", "burst": 5}])
    srv = tern_factory(config)
    body = bytes(range(256)) * 1024  # 256 KiB

    def post(i):
        head = ("POST /sha256 HTTP/1.1\r\nHost: a\r\nAuthorization: " + credentials(f"user{i}", "secret")[0][1]
                + "\r\n").encode()
        with HttpConn.open(srv.port) as conn:
            conn.send(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
            return conn.read_response("POST")

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, range(4)))
    want = __import__("hashlib").sha256(body).hexdigest()
    for resp in answers:
        assert resp.status == 200, resp.body[:200]
        answer = json.loads(resp.body)
        assert (answer["sha256"], answer["length"]) == (want, len(body))


def test_expect_100_continue_is_answered_once_the_check_lets_the_request_through(tern_factory, tmp_path, apps):
    """Regression: a client that waits to be asked for its body (Expect:
    100-continue) heard 100 Continue before its password was checked, and
    sent a body that only a 401 answered. Now a wrong password is 401
    without the 100 (the body never sent), a right one hears the 100 once
    checked, and its body reaches the application."""
    (app,) = apps("app")
    users = tmp_path / "htpasswd"
    htpasswd(users, "alice", "secret", "-B", "-C", "8")  # a check of some milliseconds
    config, _ = guarded(users, [{"prefix": "/", "proxy": {"pass": f"http://{app.address}"}}])
    srv = tern_factory(config)
    body = bytes(range(256)) * 8

    def head(password):
        return build_request("POST", "/sha256", credentials("alice", password)
                             + [("Content-Length", str(len(body))), ("Expect", "100-continue")])

    with HttpConn.open(srv.port) as conn:
        conn.send(head("wrong"))
        resp = conn.read_response("POST", skip_interim=False)
        assert resp.status == 401, resp
    with HttpConn.open(srv.port) as conn:
        for _ in range(2):  # checked, then remembered
            conn.send(head("secret"))
            resp = conn.read_response("POST", skip_interim=False)
            assert resp.status == 100, resp
            conn.send(body)
            resp = conn.read_response("POST")
            assert resp.status == 200, resp.body[:200]
            assert json.loads(resp.body)["length"] == len(body)

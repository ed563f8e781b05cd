"""The users application end to end: registration, login with a signed
session cookie, /api/me and logout, over both user stores: SQLite (a file
in the test's folder) and a real MariaDB (the session's server from
mariadb.py, a database of the test's own).

Covers validation (400), duplicates (409), content types (415), wrong
credentials (401, one message for both cases), SQL injection attempts,
tampered, foreign and expired cookies, a cookie from one tern accepted by
another with the same secret and database, the database going away (503,
static files unaffected) and coming back without restarting tern, the
per-address login rate limit (429 with Retry-After), 405 for other
methods, argon2id hashes at rest, and the [auth] config checks.

Every tern here uses cheap argon2id settings (1 pass, 8 MiB) and a high
login_attempts unless the test is about them."""

import base64
import concurrent.futures
import json
import os
import re
import sqlite3
import subprocess
import time

import pytest

from auth_api import (JSON_TYPE, OTHER_SECRET, SECRET, SESSION_COOKIE, CookieJar, auth_config,
                      call, error_of, json_body, login, login_cookie, logout, me, register, request_bytes,
                      session_set_cookie, wait_until)
from tern_server import TERN_BIN, free_port, merge

# How long tern may take to notice that MariaDB is back (its pool retries
# by itself); generous for sanitizer builds.
RECOVERY_WINDOW = 30.0
STATIC_BODY = b"static file\n"


# -- stores ----------------------------------------------------------------------


class SqliteStore:
    kind = "sqlite"

    def __init__(self, path):
        self.path = path
        self.url = f"sqlite:{path}"
        self.secret = None  # tern makes <dir>/session.key

    def rows(self):
        """{username: password_hash} read straight from the file."""
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            with_hash = [t for t in tables
                         if "password_hash" in [c[1] for c in conn.execute(f'PRAGMA table_info("{t}")')]]
            assert len(with_hash) == 1, f"expected one table with a password_hash column in {self.path}: {tables}"
            return dict(conn.execute(f'SELECT username, password_hash FROM "{with_hash[0]}"').fetchall())
        finally:
            conn.close()


class MysqlStore:
    kind = "mysql"

    def __init__(self, db):
        self.db = db
        self.url = db.url_socket
        self.url_tcp = db.url_tcp
        self.secret = SECRET  # required for mysql stores

    def rows(self):
        tables = self.db.query(f"SELECT table_name FROM information_schema.columns "
                               f"WHERE table_schema = '{self.db.name}' AND column_name = 'password_hash'")
        assert len(tables) == 1, f"expected one table with a password_hash column in {self.db.name}: {tables}"
        return dict(self.db.query(f"SELECT username, password_hash FROM `{tables[0][0]}`"))


@pytest.fixture(params=["sqlite", "mysql"])
def store(request, tmp_path):
    if request.param == "sqlite":
        folder = tmp_path / "db"
        folder.mkdir()
        return SqliteStore(folder / "users.db")
    return MysqlStore(request.getfixturevalue("mysql_db"))


def start_app(tern_factory, store, url=None, config=None, name=None, **auth):
    """A tern with the users application on this store, a static file
    (/static.txt) and a front page in its root."""
    auth.setdefault("secret", store.secret)
    srv = tern_factory(merge(auth_config(url or store.url, **auth), config), name=name)
    srv.write_file("static.txt", STATIC_BODY)
    srv.write_file("index.html", "<!DOCTYPE html><title>home</title>\n")
    return srv


@pytest.fixture
def app(tern_factory, store):
    return start_app(tern_factory, store)


def static_ok(srv):
    resp = srv.get("/static.txt")
    assert resp.status == 200 and resp.body == STATIC_BODY, resp
    return True


def new_log(srv, offset):
    return srv.stderr()[offset:]


LOG_PROBLEM = re.compile(r" (warn|warning|error|critical) \[")


# -- the happy path --------------------------------------------------------------


def test_register_login_me_logout(tern_factory, store):
    app = start_app(tern_factory, store, session_ttl="7d")
    resp = register(app, "alice", "correct horse")
    assert json_body(resp, 201) == {"username": "alice"}

    jar = CookieJar()
    resp = jar.update(login(app, "alice", "correct horse"))
    assert json_body(resp, 200) == {"username": "alice"}
    name, value, attrs = session_set_cookie(resp)
    assert value, "empty session cookie"
    assert attrs.get("path") == "/", attrs
    assert attrs.get("max-age") == str(7 * 24 * 3600), attrs
    assert "httponly" in attrs and attrs["httponly"] == "", attrs
    assert attrs.get("samesite", "").lower() == "lax", attrs
    assert "secure" not in attrs, "Secure over plain HTTP: a browser would drop the cookie"
    assert SESSION_COOKIE in jar

    resp = me(app, jar.header())
    assert json_body(resp, 200) == {"username": "alice"}

    resp = jar.update(logout(app, jar.header()))
    assert resp.status == 204 and resp.body == b"", resp
    name, value, attrs = session_set_cookie(resp)
    assert value == "" and attrs.get("max-age") == "0", attrs
    assert attrs.get("path") == "/" and "httponly" in attrs and attrs.get("samesite", "").lower() == "lax", attrs
    assert SESSION_COOKIE not in jar, "the browser still holds the session cookie after logout"

    # What the browser sees now: no cookie, so not logged in.
    error_of(me(app, jar.header()), 401)
    # Without any cookie at all, likewise.
    error_of(me(app), 401)


def test_session_ttl_sets_max_age(tern_factory, store):
    srv = start_app(tern_factory, store, session_ttl="2h")
    assert register(srv, "ttl_user", "password1").status == 201
    _, _, attrs = session_set_cookie(login(srv, "ttl_user", "password1"))
    assert attrs.get("max-age") == "7200", attrs


def test_logout_without_a_cookie_is_204(app):
    resp = logout(app)
    assert resp.status == 204, resp
    _, value, attrs = session_set_cookie(resp)
    assert value == "" and attrs.get("max-age") == "0"


def test_users_and_sessions_survive_a_restart_of_tern(tern_factory, store):
    first = start_app(tern_factory, store)
    assert register(first, "persist", "password1").status == 201
    cookie = login_cookie(first, "persist", "password1")
    assert first.stop() == 0
    # For SQLite without a secret this is the key kept in <dir>/session.key.
    second = start_app(tern_factory, store)
    assert json_body(me(second, cookie), 200) == {"username": "persist"}
    login_cookie(second, "persist", "password1")
    error_of(register(second, "persist", "password2"), 409)


# -- registration ----------------------------------------------------------------


def test_duplicate_username_is_409_and_keeps_the_first_password(app, store):
    assert register(app, "bob", "first password").status == 201
    message = error_of(register(app, "bob", "second password"), 409)
    assert message
    login_cookie(app, "bob", "first password")
    error_of(login(app, "bob", "second password"), 401)
    assert set(store.rows()) == {"bob"}


def test_concurrent_registrations_of_one_name_give_one_201(app, store):
    passwords = [f"password-{i}" for i in range(8)]
    with concurrent.futures.ThreadPoolExecutor(len(passwords)) as pool:
        results = list(pool.map(lambda pw: register(app, "racer", pw), passwords))
    statuses = sorted(r.status for r in results)
    assert statuses == [201] + [409] * (len(passwords) - 1), statuses
    winner = passwords[[r.status for r in results].index(201)]
    login_cookie(app, "racer", winner)
    assert list(store.rows()) == ["racer"]


U8 = "é"  # two bytes in UTF-8

# (id, body as JSON-able object or raw bytes, expected status)
REGISTER_CASES = [
    # usernames: 3-32 of [A-Za-z0-9_.-]
    ("username-3", {"username": "abc", "password": "password1"}, 201),
    ("username-32", {"username": "u" * 32, "password": "password1"}, 201),
    ("username-all-classes", {"username": "A.b-c_9", "password": "password1"}, 201),
    ("username-2", {"username": "ab", "password": "password1"}, 400),
    ("username-33", {"username": "v" * 33, "password": "password1"}, 400),
    ("username-empty", {"username": "", "password": "password1"}, 400),
    ("username-space", {"username": "bad name", "password": "password1"}, 400),
    ("username-leading-space", {"username": " alice2", "password": "password1"}, 400),
    ("username-newline", {"username": "alice2\n", "password": "password1"}, 400),
    ("username-slash", {"username": "bad/name", "password": "password1"}, 400),
    ("username-non-ascii", {"username": "b" + U8 + "d", "password": "password1"}, 400),
    ("username-markup", {"username": "<b>x</b>", "password": "password1"}, 400),
    ("username-quote", {"username": "al'ice", "password": "password1"}, 400),
    ("username-percent", {"username": "al%ice", "password": "password1"}, 400),
    ("username-nul", {"username": "al\u0000ice", "password": "password1"}, 400),
    # passwords: 8-128 bytes
    ("password-8", {"username": "pw8", "password": "x" * 8}, 201),
    ("password-128", {"username": "pw128", "password": "y" * 128}, 201),
    ("password-128-bytes-multibyte", {"username": "pwu128", "password": U8 * 64}, 201),
    ("password-7", {"username": "pw7", "password": "x" * 7}, 400),
    ("password-129", {"username": "pw129", "password": "y" * 129}, 400),
    ("password-130-bytes-multibyte", {"username": "pwu130", "password": U8 * 65}, 400),
    ("password-4-chars-8-bytes", {"username": "pwu8", "password": U8 * 4}, 201),
    ("password-empty", {"username": "pw0", "password": ""}, 400),
    # missing fields and wrong types
    ("empty-object", {}, 400),
    ("missing-password", {"username": "nopass"}, 400),
    ("missing-username", {"password": "password1"}, 400),
    ("username-number", {"username": 12345, "password": "password1"}, 400),
    ("username-null", {"username": None, "password": "password1"}, 400),
    ("username-array", {"username": ["arr"], "password": "password1"}, 400),
    ("password-number", {"username": "numpass", "password": 123456789}, 400),
    ("password-object", {"username": "objpass", "password": {"a": "password1"}}, 400),
    # not an object
    ("json-array", [], 400),
    ("json-array-of-object", [{"username": "inarray", "password": "password1"}], 400),
    ("json-string", "username", 400),
    ("json-number", 42, 400),
    ("json-null", None, 400),
    ("json-true", True, 400),
    # not JSON
    ("malformed-open-brace", b"{", 400),
    ("malformed-single-quotes", b"{'username': 'sq', 'password': 'password1'}", 400),
    ("malformed-unterminated", b'{"username": "unterm", "password": "password1"', 400),
    ("malformed-trailing-garbage", b'{"username": "trail", "password": "password1"} x', 400),
    ("malformed-empty-body", b"", 400),
    ("malformed-form-body", b"username=form&password=password1", 400),
    ("malformed-invalid-utf8", b'{"username": "badutf", "password": "pass\xff\xfeword"}', 400),
]


def test_register_validation(app, store):
    """Every case on one tern; all mismatches reported at once."""
    problems = []
    created = set()
    for case_id, body, expected in REGISTER_CASES:
        if isinstance(body, bytes):
            resp = call(app, "POST", "/api/register", body=body)
        else:
            resp = call(app, "POST", "/api/register", body=json.dumps(body))
        try:
            if expected == 201:
                data = json_body(resp, 201)
                assert data == {"username": body["username"]}, data
                created.add(body["username"])
                # The password works as sent (bytes, not characters, counted).
                login_cookie(app, body["username"], body["password"])
            else:
                error_of(resp, expected)
        except AssertionError as e:
            problems.append(f"{case_id}: {e}")
    assert not problems, "\n".join(problems)
    assert set(store.rows()) == created


@pytest.mark.parametrize("path", ["/api/register", "/api/login"])
def test_non_json_content_types_are_415(app, store, path):
    assert register(app, "ctype", "password1").status == 201
    good = json.dumps({"username": "ctype", "password": "password1"})
    form = "username=ctype&password=password1"
    cases = [
        ("text/plain", good),
        ("text/plain;charset=UTF-8", good),
        ("application/x-www-form-urlencoded", form),
        ("multipart/form-data; boundary=xyz",
         "--xyz\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\nctype\r\n--xyz--\r\n"),
        ("application/jsonp", good),
        ("application/json-seq", good),
        ("text/json", good),
        (None, good),
    ]
    problems = []
    for ctype, body in cases:
        resp = call(app, "POST", path, body=body, content_type=ctype)
        try:
            error_of(resp, 415)
            assert not resp.header_all("Set-Cookie"), "415 set a cookie"
        except AssertionError as e:
            problems.append(f"Content-Type {ctype!r}: {e}")
    assert not problems, "\n".join(problems)
    assert set(store.rows()) == {"ctype"}


@pytest.mark.parametrize("ctype", ["application/json; charset=utf-8", "application/json;charset=UTF-8",
                                   "Application/JSON"])
def test_json_content_type_with_parameters_or_other_case_is_accepted(app, ctype):
    body = json.dumps({"username": "params", "password": "password1"})
    assert json_body(call(app, "POST", "/api/register", body=body, content_type=ctype), 201) == {"username": "params"}
    assert json_body(call(app, "POST", "/api/login", body=body, content_type=ctype), 200) == {"username": "params"}


def test_malformed_login_bodies_are_400(app):
    for body in (b"{", b"[]", b'{"username": "x"}', b'{"username": 1, "password": 2}', b""):
        error_of(call(app, "POST", "/api/login", body=body), 400)


# -- login -----------------------------------------------------------------------


def test_wrong_password_and_unknown_user_get_the_same_401(app):
    assert register(app, "carol", "carol password").status == 201
    wrong = login(app, "carol", "not her password")
    unknown = login(app, "nobody", "not her password")
    error_of(wrong, 401)
    error_of(unknown, 401)
    assert wrong.body == unknown.body, (wrong.body, unknown.body)
    assert not wrong.header_all("Set-Cookie") and not unknown.header_all("Set-Cookie")
    # Case matters in passwords; a prefix is not the password.
    error_of(login(app, "carol", "Carol password"), 401)
    error_of(login(app, "carol", "carol passwor"), 401)
    login_cookie(app, "carol", "carol password")


def test_password_hash_is_argon2id_not_plain_text(tern_factory, store):
    srv = start_app(tern_factory, store, password_ops=2, password_memory="16MiB")
    password = "plain text never"
    assert register(srv, "hashme", password).status == 201
    stored = store.rows()["hashme"]
    assert stored.startswith("$argon2id$"), stored
    assert password not in stored
    # libsodium's string carries the parameters: memory in KiB, passes.
    assert "m=16384" in stored and "t=2" in stored, stored
    if store.kind == "sqlite":  # nor anywhere in the files (WAL mode: the -wal file too)
        for path in store.path.parent.glob(store.path.name + "*"):
            assert password.encode() not in path.read_bytes(), f"the password in clear in {path.name}"
    assert register(srv, "hashme2", password).status == 201
    assert store.rows()["hashme2"] != stored, "same hash for the same password: no salt"


# -- SQL injection ---------------------------------------------------------------

INJECTIONS = ["admin'--", "x' OR '1'='1", "'; DROP TABLE users; --", "\" OR \"\"=\"", "alice'/*",
              "alice' #", "alice\\", "%", "' UNION SELECT 'alice', '$argon2id$' --"]


def test_sql_injection_attempts_change_nothing(app, store):
    for name, pw in (("alice", "alice password"), ("bob", "bob password"), ("admin", "admin password")):
        assert register(app, name, pw).status == 201
    for attempt in INJECTIONS:
        # As a username: not a valid name, so rejected before any SQL.
        error_of(register(app, attempt, "password1"), 400)
        # Logging in with it finds nobody (400 or 401, never 200 or 5xx).
        resp = login(app, attempt, "alice password")
        assert resp.status in (400, 401) and not resp.header_all("Set-Cookie"), (attempt, resp)
        json_body(resp)
    created = {"alice", "bob", "admin"}
    for i, attempt in enumerate(INJECTIONS):
        if len(attempt.encode()) < 8:
            continue
        # As a password: stored (hashed) verbatim and works only for its user.
        name = f"inject{i}"
        assert json_body(register(app, name, attempt), 201) == {"username": name}
        created.add(name)
        login_cookie(app, name, attempt)
        error_of(login(app, "alice", attempt), 401)
        error_of(login(app, "admin", attempt), 401)
    # A LIKE pattern would let al_ce or a% match alice.
    error_of(login(app, "al_ce", "alice password"), 401)
    error_of(login(app, "a.ice", "alice password"), 401)
    for name, pw in (("alice", "alice password"), ("bob", "bob password"), ("admin", "admin password")):
        login_cookie(app, name, pw)
    assert set(store.rows()) == created


def test_password_with_nul_is_not_truncated(app):
    resp = register(app, "nulpass", "password\u0000suffix")
    if resp.status == 400:  # rejecting control characters is fine too
        error_of(resp, 400)
        return
    assert resp.status == 201, resp
    error_of(login(app, "nulpass", "password"), 401)
    login_cookie(app, "nulpass", "password\u0000suffix")


# -- cookies ---------------------------------------------------------------------


def b64url(text):
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def tampered_variants(value):
    """Copies of a cookie value with one character changed at several
    places (never the last, which in base64 may carry only padding bits),
    truncated, extended, and emptied."""
    out = []
    for i in sorted({0, len(value) // 4, len(value) // 2, 3 * len(value) // 4, len(value) - 2}):
        if 0 <= i < len(value):
            out.append(value[:i] + ("1" if value[i] == "0" else "0") + value[i + 1:])
    out += [value[:-4], value[: len(value) // 2], value + "00", "", "garbage", "a.b.c", "0" * len(value)]
    return [v for v in dict.fromkeys(out) if v != value]


def test_tampered_cookies_are_401(app):
    assert register(app, "dave", "dave password").status == 201
    assert register(app, "erin", "erin password").status == 201  # same length as dave
    cookie = login_cookie(app, "dave", "dave password")
    value = cookie.split("=", 1)[1]
    assert json_body(me(app, cookie), 200) == {"username": "dave"}
    problems = []
    variants = tampered_variants(value)
    # The name in clear or in base64: swap it for another user's.
    for mine, theirs in (("dave", "erin"), (b64url("dave"), b64url("erin"))):
        if mine in value:
            variants.append(value.replace(mine, theirs))
    for variant in variants:
        resp = me(app, f"{SESSION_COOKIE}={variant}")
        if resp.status != 401:
            problems.append(f"{variant!r}: {resp.status} {resp.body[:200]!r}")
        else:
            error_of(resp, 401)
    assert not problems, "tampered cookies accepted:\n" + "\n".join(problems)
    # The real one still works, also among other cookies.
    assert json_body(me(app, f"other=1; {cookie}; more=2"), 200) == {"username": "dave"}


def test_cookie_signed_with_another_secret_is_401(tern_factory, store):
    first = start_app(tern_factory, store, secret=SECRET)
    second = start_app(tern_factory, store, secret=OTHER_SECRET)
    assert register(first, "frank", "frank password").status == 201
    cookie = login_cookie(first, "frank", "frank password")
    assert json_body(me(first, cookie), 200) == {"username": "frank"}
    error_of(me(second, cookie), 401)


def test_expired_cookie_is_401(tern_factory, store):
    srv = start_app(tern_factory, store, session_ttl="2s")
    assert register(srv, "grace", "grace password").status == 201
    resp = login(srv, "grace", "grace password")
    name, value, attrs = session_set_cookie(resp)
    assert attrs.get("max-age") == "2", attrs
    cookie = f"{name}={value}"
    assert me(srv, cookie).status == 200
    time.sleep(3.5)  # past the expiry signed into the cookie, whatever its rounding
    error_of(me(srv, cookie), 401)


def test_cookie_from_one_tern_works_on_another_sharing_mariadb(tern_factory, mysql_db):
    store = MysqlStore(mysql_db)
    # One over the unix socket, one over TCP: both URL forms.
    first = start_app(tern_factory, store, url=mysql_db.url_socket)
    second = start_app(tern_factory, store, url=mysql_db.url_tcp)
    assert first.port != second.port
    assert json_body(register(first, "heidi", "heidi password"), 201) == {"username": "heidi"}
    error_of(register(second, "heidi", "other password"), 409)
    cookie = login_cookie(second, "heidi", "heidi password")
    assert json_body(me(first, cookie), 200) == {"username": "heidi"}
    assert json_body(me(second, cookie), 200) == {"username": "heidi"}
    cookie = login_cookie(first, "heidi", "heidi password")
    assert json_body(me(second, cookie), 200) == {"username": "heidi"}


def test_sqlite_relative_path_and_generated_session_key(tern_factory, tmp_path):
    workdir = tmp_path / "relative"
    (workdir / "data").mkdir(parents=True)
    srv = tern_factory(auth_config("sqlite:data/users.db"), name="relative")
    assert srv.workdir == workdir
    assert register(srv, "ivan", "ivan password").status == 201
    cookie = login_cookie(srv, "ivan", "ivan password")
    assert (workdir / "data" / "users.db").is_file()
    key = workdir / "data" / "session.key"
    assert key.is_file() and key.stat().st_size > 0
    assert key.stat().st_mode & 0o077 == 0, f"session.key is readable by others: {oct(key.stat().st_mode)}"
    before = key.read_bytes()
    # A second tern on the same database (no secret) uses the same key.
    other = SqliteStore(workdir / "data" / "users.db")
    second = start_app(tern_factory, other, url=other.url)
    assert json_body(me(second, cookie), 200) == {"username": "ivan"}
    assert key.read_bytes() == before


# -- the database going away -----------------------------------------------------


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_mariadb_outage_is_503_and_tern_recovers_by_itself(tern_factory, mysql_db, how):
    store = MysqlStore(mysql_db)
    srv = start_app(tern_factory, store)
    assert register(srv, "judy", "judy password").status == 201
    cookie = login_cookie(srv, "judy", "judy password")
    log_offset = len(srv.stderr())

    if how == "stop":
        mysql_db.server.stop()
    else:
        mysql_db.server.kill()

    for attempt in range(2):  # the first may find a pooled connection gone, the second none
        started = time.monotonic()
        error_of(login(srv, "judy", "judy password"), 503)
        error_of(register(srv, f"kim{attempt}", "kim password"), 503)
        assert time.monotonic() - started < 20, "503 took too long"
    static_ok(srv)
    resp = me(srv, cookie)  # a signed cookie needs no database, but must not fail badly
    assert resp.status in (200, 503), resp
    assert wait_until(lambda: LOG_PROBLEM.search(new_log(srv, log_offset)), 10), \
        f"no error-log line about the database:\n{new_log(srv, log_offset)}"

    mysql_db.server.start()
    recovered = wait_until(lambda: login(srv, "judy", "judy password").status == 200, RECOVERY_WINDOW, 0.25)
    assert recovered, f"tern did not recover within {RECOVERY_WINDOW}s; stderr:\n{srv.stderr()[-3000:]}"
    assert json_body(register(srv, "kim", "kim password"), 201) == {"username": "kim"}
    login_cookie(srv, "kim", "kim password")
    assert json_body(me(srv, cookie), 200) == {"username": "judy"}
    assert set(store.rows()) == {"judy", "kim"}


def test_tern_starts_while_mariadb_is_down_and_creates_the_table_later(tern_factory, mysql_db):
    store = MysqlStore(mysql_db)
    mysql_db.server.stop()
    srv = start_app(tern_factory, store)
    error_of(register(srv, "late", "late password"), 503)
    error_of(login(srv, "late", "late password"), 503)
    static_ok(srv)
    mysql_db.server.start()
    created = wait_until(lambda: register(srv, "late", "late password").status == 201, RECOVERY_WINDOW, 0.25)
    assert created, f"tern did not recover within {RECOVERY_WINDOW}s; stderr:\n{srv.stderr()[-3000:]}"
    login_cookie(srv, "late", "late password")
    assert set(store.rows()) == {"late"}


# -- rate limit ------------------------------------------------------------------


def test_eleventh_login_attempt_in_a_minute_is_429(tern_factory, store):
    srv = start_app(tern_factory, store, login_attempts=10)
    # Registered from another address, so that only logins from 127.0.0.1 count.
    assert register(srv, "mallory", "mallory password", source="127.0.0.3").status == 201
    started = time.monotonic()
    for i in range(10):
        error_of(login(srv, "mallory", f"guess {i:03d}"), 401)
    resp = login(srv, "mallory", "guess 010")
    assert time.monotonic() - started < 50, "too slow to test a per-minute limit"
    error_of(resp, 429)
    retry_after = resp.header("Retry-After")
    assert retry_after is not None and retry_after.isdigit(), resp.headers
    assert 1 <= int(retry_after) <= 60, retry_after
    # Even the right password is refused now.
    resp = login(srv, "mallory", "mallory password")
    error_of(resp, 429)
    assert not resp.header_all("Set-Cookie")
    # Static files are not limited, nor is another client address.
    for _ in range(3):
        static_ok(srv)
    login_cookie(srv, "mallory", "mallory password", source="127.0.0.2")


# -- methods and connections -----------------------------------------------------


METHOD_CASES = [
    ("GET", "/api/login", "POST"),
    ("GET", "/api/register", "POST"),
    ("GET", "/api/logout", "POST"),
    ("PUT", "/api/login", "POST"),
    ("DELETE", "/api/register", "POST"),
    ("POST", "/api/me", "GET"),
    ("PUT", "/api/me", "GET"),
    ("DELETE", "/api/me", "GET"),
]


def test_other_methods_are_405(app):
    problems = []
    for method, path, allowed in METHOD_CASES:
        resp = call(app, method, path, content_type=JSON_TYPE)
        try:
            error_of(resp, 405)
            allow = {m.strip().upper() for m in (resp.header("Allow") or "").split(",")}
            assert allowed in allow, f"Allow: {resp.header('Allow')!r}"
        except AssertionError as e:
            problems.append(f"{method} {path}: {e}")
    assert not problems, "\n".join(problems)


def test_api_on_one_keep_alive_connection_and_pipelined(app):
    # Error answers may close the connection, if they say so (Connection:
    # close, then EOF); either way the next request must be read right.
    for raw_request, method, status in (
            (request_bytes("POST", "/api/register", body="username=x&password=password1",
                           content_type="text/plain"), "POST", 415),
            (request_bytes("POST", "/api/register", body=b"{"), "POST", 400),
            (request_bytes("GET", "/api/login"), "GET", 405),
            (request_bytes("POST", "/api/login", {"username": "nobody", "password": "password1"}), "POST", 401)):
        with app.connect() as conn:
            resp = conn.request(raw_request, method)
            assert resp.status == status, resp
            if "close" in resp.connection_tokens():
                assert conn.is_closed(), f"{status} said Connection: close but the connection stayed open"
            else:
                assert json_body(register(app, f"after{status}", "password1", conn=conn), 201)
    # Successful exchanges keep the connection open (logout, last, may close it).
    with app.connect() as conn:
        assert register(app, "judith", "judith password", conn=conn).status == 201
        resp = login(app, "judith", "judith password", conn=conn)
        name, value, _ = session_set_cookie(resp)
        assert json_body(me(app, f"{name}={value}", conn=conn), 200) == {"username": "judith"}
        # Three requests in one write: answers in order.
        conn.send(request_bytes("POST", "/api/login",
                                {"username": "judith", "password": "judith password"})
                  + request_bytes("GET", "/api/me")
                  + request_bytes("POST", "/api/login", {"username": "judith", "password": "wrong password"}))
        assert json_body(conn.read_response("POST"), 200) == {"username": "judith"}
        error_of(conn.read_response("GET"), 401)
        error_of(conn.read_response("POST"), 401)
        assert conn.get("/static.txt").body == STATIC_BODY
        resp = logout(app, f"{name}={value}", conn=conn)
        assert resp.status == 204
        if "close" in resp.connection_tokens():
            assert conn.is_closed()


def test_concurrent_logins_all_succeed(app):
    users = [f"conc{i}" for i in range(12)]
    for user in users:
        assert register(app, user, f"{user} password").status == 201
    with concurrent.futures.ThreadPoolExecutor(len(users)) as pool:
        results = list(pool.map(lambda u: login(app, u, f"{u} password"), users))
    for user, resp in zip(users, results):
        assert json_body(resp, 200) == {"username": user}


# -- config ----------------------------------------------------------------------

BAD_AUTH_CONFIGS = [
    # (id, text, key that the one-line message must name)
    ("ops-zero", '[auth]\nstore = "sqlite:users.db"\npassword_ops = 0\n', "auth.password_ops"),
    ("memory-below-8KiB", '[auth]\nstore = "sqlite:users.db"\npassword_memory = "4KiB"\n', "auth.password_memory"),
    ("secret-too-short", '[auth]\nstore = "sqlite:users.db"\nsecret = "only 31 characters long, see???"\n',
     "auth.secret"),
    ("mysql-without-secret", '[auth]\nstore = "mysql://u:p@127.0.0.1:3306/db"\n', "secret"),
    ("unknown-key", '[auth]\nstore = "sqlite:users.db"\nsekret = "x"\n', "auth.sekret"),
    ("bad-ttl", '[auth]\nstore = "sqlite:users.db"\nsession_ttl = "soon"\n', "auth.session_ttl"),
    ("db-pool-zero", '[auth]\nstore = "mysql://u:p@127.0.0.1:3306/db"\nsecret = "' + SECRET + '"\ndb_pool = 0\n',
     "auth.db_pool"),
    ("task-threads-zero", 'task_threads = 0\n', "task_threads"),
    ("store-not-a-string", '[auth]\nstore = 5\n', "auth.store"),
]


def run_tern(*args, cwd, timeout=30):
    return subprocess.run([str(TERN_BIN), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.mark.parametrize("text,key", [c[1:] for c in BAD_AUTH_CONFIGS], ids=[c[0] for c in BAD_AUTH_CONFIGS])
def test_bad_auth_config_fails_check_naming_the_key(tmp_path, text, key):
    (tmp_path / "www").mkdir()
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and key in lines[0], lines[0]


def test_full_auth_config_passes_check(tmp_path):
    (tmp_path / "www").mkdir()
    (tmp_path / "data").mkdir()
    path = tmp_path / "good.toml"
    path.write_text(
        'task_threads = 4\n'
        '[auth]\n'
        'store = "sqlite:data/users.db"\n'
        f'secret = "{SECRET}"\n'
        'password_ops = 2\n'
        'password_memory = "64MiB"\n'
        'session_ttl = "7d"\n'
        'login_attempts = 10\n'
        'db_pool = 4\n')
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc


def test_unknown_store_scheme_stops_startup(tmp_path):
    (tmp_path / "www").mkdir()
    path = tmp_path / "bad.toml"
    path.write_text(f'listen = ["127.0.0.1:{free_port()}"]\n[static]\nroot = "www"\n'
                    f'[auth]\nstore = "postgres://u:p@127.0.0.1/db"\nsecret = "{SECRET}"\n')
    try:
        proc = run_tern("-c", str(path), cwd=tmp_path, timeout=15)
    except subprocess.TimeoutExpired:
        raise AssertionError("tern started with a postgres:// store") from None
    assert proc.returncode != 0, proc
    assert "store" in proc.stderr, proc.stderr


# -- the MariaDB harness itself --------------------------------------------------


def test_mariadb_fixture_user_connects_with_its_password(mysql_db):
    server = mysql_db.server
    for tcp in (False, True):
        out = server.sql("SELECT CURRENT_USER(), DATABASE()", database=mysql_db.name, user=server.user,
                         password=server.password, tcp=tcp)
        host = "127.0.0.1" if tcp else "localhost"
        assert out.split() == [f"{server.user}@{host}", mysql_db.name], out
        denied = server.sql("SELECT 1", database=mysql_db.name, user=server.user, password="wrong", tcp=tcp,
                            check=False)
        assert denied.returncode != 0 and "Access denied" in denied.stderr, denied
    # Grant tables are in force: the user sees only its databases.
    visible = server.sql("SHOW DATABASES", user=server.user, password=server.password).split()
    assert mysql_db.name in visible and "mysql" not in visible, visible
    assert mysql_db.url_socket.startswith(f"mysql://{server.user}:{server.password}@localhost/{mysql_db.name}?socket=/")
    assert mysql_db.url_tcp == f"mysql://{server.user}:{server.password}@127.0.0.1:{server.port}/{mysql_db.name}"
    assert len(os.fsencode(str(server.socket_path))) <= 107


# -- hardening -------------------------------------------------------------------


def test_logout_ends_the_session_on_every_node(tern_factory, store, tmp_path):
    # Two nodes on one store and one secret: a cookie from one works on the
    # other, and a logout on either ends it on both.
    secret = store.secret or SECRET
    first = start_app(tern_factory, store, secret=secret, name="first")
    second = start_app(tern_factory, store, secret=secret, name="second")
    assert register(first, "ivan", "ivan password").status == 201
    cookie = login_cookie(first, "ivan", "ivan password")
    stolen = cookie  # a copy kept elsewhere
    assert json_body(me(second, cookie), 200) == {"username": "ivan"}
    assert logout(second, cookie).status == 204
    error_of(me(first, stolen), 401)
    error_of(me(second, stolen), 401)
    # Logging in again works, with a new cookie.
    fresh = login_cookie(second, "ivan", "ivan password")
    assert json_body(me(first, fresh), 200) == {"username": "ivan"}
    error_of(me(first, stolen), 401)


def test_usernames_are_unique_without_regard_to_case(app, store):
    assert json_body(register(app, "Alice", "alice password"), 201) == {"username": "Alice"}
    for other in ("alice", "ALICE", "aLiCe"):
        error_of(register(app, other, "impostor password"), 409)
    assert list(store.rows()) == ["Alice"]
    # Typed in any case, the login finds the account and names it as registered.
    resp = login(app, "aLICE", "alice password")
    assert json_body(resp, 200) == {"username": "Alice"}
    cookie = f"{SESSION_COOKIE}={session_set_cookie(resp)[1]}"
    assert json_body(me(app, cookie), 200) == {"username": "Alice"}


def test_registrations_are_limited_per_address(tern_factory, store):
    srv = start_app(tern_factory, store, register_attempts=3)
    for i in range(3):
        assert register(srv, f"bulk{i}", "bulk password").status == 201
    resp = register(srv, "bulk3", "bulk password")
    error_of(resp, 429)
    retry_after = resp.header("Retry-After")
    assert retry_after is not None and 1 <= int(retry_after) <= 3600, resp.headers
    assert resp.header("Cache-Control") == "no-store"
    # Another address may still register; logins are not counted here.
    assert register(srv, "bulk3", "bulk password", source="127.0.0.2").status == 201
    login_cookie(srv, "bulk0", "bulk password")


def test_an_account_backs_off_after_failed_logins_from_many_addresses(tern_factory, store):
    # The per-address limit sees one attempt per address; the account's
    # own count stops the guessing all the same.
    srv = start_app(tern_factory, store, account_login_failures=3)
    assert register(srv, "judy", "judy password").status == 201
    assert register(srv, "karl", "karl password").status == 201
    for i in range(3):
        error_of(login(srv, "judy", f"guess {i}", source=f"127.0.0.{10 + i}"), 401)
    for password in ("guess 4", "judy password"):
        resp = login(srv, "JUDY", password, source="127.0.0.20")
        error_of(resp, 429)
        assert not resp.header_all("Set-Cookie")
        assert int(resp.header("Retry-After")) >= 1, resp.headers
    # Other accounts are not affected.
    login_cookie(srv, "karl", "karl password", source="127.0.0.10")


def test_every_api_response_says_no_store(app):
    assert register(app, "lena", "lena password").status == 201
    cookie = login_cookie(app, "lena", "lena password")
    responses = {
        "201": register(app, "lena2", "lena password"),
        "200 me": me(app, cookie),
        "401": me(app),
        "405": call(app, "GET", "/api/login"),
        "415": call(app, "POST", "/api/login", body=b"x", content_type="text/plain"),
        "400": call(app, "POST", "/api/login", body=b"[]"),
        "204": logout(app, cookie),
    }
    for what, resp in responses.items():
        assert resp.header("Cache-Control") == "no-store", f"{what}: {resp!r} {resp.headers}"


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", None])
def test_logout_needs_the_json_content_type(app, ctype):
    # A cross-site form could otherwise log a user out.
    assert register(app, "mona", "mona password").status == 201
    cookie = login_cookie(app, "mona", "mona password")
    resp = call(app, "POST", "/api/logout", cookie=cookie, body=b"", content_type=ctype)
    error_of(resp, 415)
    assert json_body(me(app, cookie), 200) == {"username": "mona"}

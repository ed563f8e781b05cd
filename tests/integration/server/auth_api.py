"""Client helpers for the users application's JSON API (/api/register,
/api/login, /api/me, /api/logout): config blocks for tern, one request per
call over http_client (or on a connection the caller keeps), JSON bodies,
and a small cookie jar that keeps and drops cookies as a browser does.
Shared by test_auth.py and test_auth_browser.py."""

import json
import time

from http_client import build_request

SESSION_COOKIE = "tern_session"
# At least 32 characters, as [auth].secret must be.
SECRET = "tern-tests-secret-0123456789abcdefghij"
OTHER_SECRET = "another-secret-for-tern-tests-9876543210"
# Cheap argon2id for tests: one pass over 8 MiB (libsodium's minimum memory
# is 8 KiB; 8 MiB keeps the hash realistic and still fast under sanitizers).
FAST_HASH = {"password_ops": 1, "password_memory": "8MiB"}
JSON_TYPE = "application/json"


def auth_config(store, secret=None, task_threads=4, **auth):
    """A config dict with task_threads and an [auth] block for this store
    URL. The rate limits are high unless a test sets them: only the
    rate-limit tests are about them."""
    block = {"store": store, **FAST_HASH, "login_attempts": 1000, "register_attempts": 1000,
             "account_login_failures": 1000}
    if secret is not None:
        block["secret"] = secret
    block.update(auth)
    return {"task_threads": task_threads, "auth": block}


def request_bytes(method, path, payload=None, body=None, content_type=JSON_TYPE, cookie=None,
                  headers=()):
    """The bytes of one API request. payload is JSON-encoded; body is sent
    as it is (str or bytes); a POST/PUT/PATCH without either sends an empty
    body with Content-Length: 0. content_type=None sends no Content-Type."""
    if payload is not None:
        body = json.dumps(payload)
    if isinstance(body, str):
        body = body.encode()
    items = [("Host", "test")]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        body = body or b""
        items.append(("Content-Length", str(len(body))))
        if content_type is not None:
            items.append(("Content-Type", content_type))
    if cookie:
        items.append(("Cookie", cookie))
    items += list(headers)
    return build_request(method, path, items) + (body or b"")


def call(srv, method, path, payload=None, conn=None, source=None, **kwargs):
    """One request; on a fresh connection (closed after) unless conn is given."""
    raw = request_bytes(method, path, payload, **kwargs)
    if conn is not None:
        return conn.request(raw, method)
    with srv.connect(source=source) as fresh:
        return fresh.request(raw, method)


def register(srv, username, password, **kwargs):
    return call(srv, "POST", "/api/register", {"username": username, "password": password}, **kwargs)


def login(srv, username, password, **kwargs):
    return call(srv, "POST", "/api/login", {"username": username, "password": password}, **kwargs)


def me(srv, cookie=None, **kwargs):
    return call(srv, "GET", "/api/me", cookie=cookie, **kwargs)


def logout(srv, cookie=None, **kwargs):
    return call(srv, "POST", "/api/logout", cookie=cookie, **kwargs)


def json_body(resp, status=None):
    """The parsed JSON body, after checking the status (if given) and that
    the response says it is JSON."""
    if status is not None:
        assert resp.status == status, f"expected {status}, got {resp!r}: {resp.body[:1000]!r}"
    ctype = resp.header("Content-Type") or ""
    assert ctype.split(";")[0].strip().lower() == JSON_TYPE, f"not JSON: {resp!r} {resp.body[:300]!r}"
    try:
        return json.loads(resp.body)
    except ValueError as e:
        raise AssertionError(f"body is not valid JSON ({e}): {resp.body[:1000]!r}") from None


def error_of(resp, status):
    """The API's {"error": message} for a response of this status; the
    message must be a non-empty string."""
    data = json_body(resp, status)
    assert isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"].strip(), \
        f"no {{\"error\": message}} in {resp.status} body {resp.body[:500]!r}"
    return data["error"]


def parse_set_cookie(value):
    """(name, value, {attribute-name-lowercased: value}) of a Set-Cookie."""
    parts = [p.strip() for p in value.split(";")]
    name, _, val = parts[0].partition("=")
    attrs = {}
    for part in parts[1:]:
        if part:
            key, _, v = part.partition("=")
            attrs[key.strip().lower()] = v.strip()
    return name.strip(), val.strip(), attrs


def session_set_cookie(resp):
    """The one Set-Cookie for the session cookie in resp, parsed."""
    cookies = [parse_set_cookie(v) for v in resp.header_all("Set-Cookie")]
    ours = [c for c in cookies if c[0] == SESSION_COOKIE]
    assert len(ours) == 1, f"expected one Set-Cookie for {SESSION_COOKIE}: {resp.header_all('Set-Cookie')}"
    return ours[0]


class CookieJar:
    """Keeps cookies the way a browser would for one origin: Max-Age=0 (or
    an empty value with Max-Age <= 0) removes the cookie."""

    def __init__(self):
        self.cookies = {}

    def update(self, resp):
        for value in resp.header_all("Set-Cookie"):
            name, val, attrs = parse_set_cookie(value)
            max_age = attrs.get("max-age")
            if max_age is not None and int(max_age) <= 0:
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = val
        return resp

    def header(self):
        return "; ".join(f"{k}={v}" for k, v in self.cookies.items()) or None

    def __contains__(self, name):
        return name in self.cookies


def login_cookie(srv, username, password, **kwargs):
    """Logs in (must answer 200) and returns the Cookie header value."""
    resp = login(srv, username, password, **kwargs)
    assert json_body(resp, 200) == {"username": username}, resp.body
    name, value, _ = session_set_cookie(resp)
    return f"{name}={value}"


def wait_until(predicate, timeout, interval=0.2):
    """Polls predicate until it returns a true value (returned) or timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result or time.monotonic() >= deadline:
            return result
        time.sleep(interval)

"""[[limit]]: request rates per key, as nginx's limit_req. A burst beyond
the rate waits its turn (paced at the rate), `delay` of it goes at once
(`nodelay`: all), and what overflows the burst is a 429 with Retry-After;
keys are limited apart; a request that waits keeps its body, over HTTP/1.1
and HTTP/2; at five times the rate, the rate is what gets through."""

import hashlib
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from http_client import HttpConn
from test_proxy import apps  # noqa: F401 (a fixture)


def limited(limit, location=None, **extra):
    return {
        "limit": [{"name": "api", **limit}],
        "server": [{"location": [location or {"prefix": "/", "limit": ["api"],
                                              "return": {"status": 200, "body": "ok"}}]}],
        **extra,
    }


def timed_get(srv, path="/", headers=()):
    started = time.monotonic()
    resp = srv.get(path, headers)
    return resp, time.monotonic() - started


def at_once(srv, count, headers=()):
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: timed_get(srv, headers=headers), range(count)))


def test_a_burst_waits_its_turn_and_what_overflows_it_is_429(tern_factory):
    srv = tern_factory(limited({"rate": "10r/s", "burst": 3}))
    results = at_once(srv, 6)
    ok = sorted(elapsed for resp, elapsed in results if resp.status == 200)
    refused = [resp for resp, _ in results if resp.status == 429]
    assert len(ok) == 4 and len(refused) == 2, [r.status for r, _ in results]
    # One at once, then one every 100 ms.
    assert ok[0] < 0.09 and 0.25 <= ok[3] < 1.5, ok
    for resp in refused:
        assert resp.header("Retry-After") == "1", resp.headers
    assert "limit api: 127.0.0.1 is over 10 r/s (burst 3): 429" in srv.stderr()
    time.sleep(0.5)
    assert srv.get("/").status == 200


def test_nodelay_sends_the_burst_at_once_and_the_status_is_configurable(tern_factory):
    srv = tern_factory(limited({"rate": "1r/s", "burst": 3, "nodelay": True, "status": 503}))
    results = at_once(srv, 5)
    statuses = sorted(resp.status for resp, _ in results)
    assert statuses == [200, 200, 200, 200, 503], statuses
    assert max(elapsed for resp, elapsed in results if resp.status == 200) < 0.5
    refused = [resp for resp, _ in results if resp.status == 503][0]
    assert refused.header("Retry-After") == "1"


def test_each_key_is_limited_apart(tern_factory):
    srv = tern_factory(limited({"rate": "1r/m", "key": "$http_x_client"}))
    for client in ("a", "b"):
        assert srv.get("/", [("X-Client", client)]).status == 200
    for client in ("a", "b"):
        resp = srv.get("/", [("X-Client", client)])
        assert resp.status == 429
        # 1r/m drains at 16 thousandths a second, as nginx counts it.
        assert 55 <= int(resp.header("Retry-After")) <= 63, resp.headers
    # No key, no limit.
    assert [srv.get("/").status for _ in range(3)] == [200, 200, 200]


def test_at_five_times_the_rate_the_rate_gets_through(tern_factory):
    srv = tern_factory(limited({"rate": "20r/s", "nodelay": True}))
    counts = {200: 0, 429: 0}
    started = time.monotonic()
    sent = 0
    with HttpConn.open(srv.port) as conn:
        while time.monotonic() - started < 3.0:
            resp = conn.get("/")
            counts[resp.status] += 1
            sent += 1
            # 100 a second: five times the rate.
            time.sleep(max(0.0, started + sent / 100 - time.monotonic()))
    elapsed = time.monotonic() - started
    expected = 1 + 20 * elapsed
    assert abs(counts[200] - expected) <= 0.1 * expected, (counts, elapsed)
    assert counts[429] >= sent - counts[200], counts


def test_a_request_that_waits_keeps_its_body(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(limited({"rate": "10r/s", "burst": 5}, {
        "prefix": "/", "limit": ["api"], "proxy": {"pass": f"http://{app.address}"}}))
    body = bytes(range(256)) * 1024  # 256 KiB

    def post(_):
        with HttpConn.open(srv.port) as conn:
            conn.send(b"POST /sha256 HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            return conn.read_response("POST")

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, range(4)))
    want = hashlib.sha256(body).hexdigest()
    for resp in answers:
        assert resp.status == 200, resp.body[:200]
        answer = json.loads(resp.body)
        assert (answer["sha256"], answer["length"]) == (want, len(body))


def test_requests_wait_their_turn_over_http2(tern_factory):
    """Streams of one connection, from nghttp2's client (curl 7.88 fails its
    own -Z prior-knowledge transfers, against any server)."""
    srv = tern_factory(limited({"rate": "10r/s", "burst": 3}), listen_flags="h2c")
    urls = [f"http://127.0.0.1:{srv.port}/{i}" for i in range(5)]
    started = time.monotonic()
    proc = subprocess.run(["nghttp", "-v", "-n", "-t", "20", *urls], capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    statuses = sorted(line.split()[-1] for line in proc.stdout.splitlines() if ":status:" in line)
    assert statuses == ["200", "200", "200", "200", "429"], statuses
    assert 0.25 <= elapsed < 10, elapsed

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

from http_client import ConnectionClosed, HttpConn
from test_proxy import apps, wait_for_slow  # noqa: F401 (apps: a fixture)


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
    # Slow enough that the six arrive before a place drains (half a second)
    # on a busy machine.
    srv = tern_factory(limited({"rate": "2r/s", "burst": 3}))
    results = at_once(srv, 6)
    ok = sorted(elapsed for resp, elapsed in results if resp.status == 200)
    refused = [resp for resp, _ in results if resp.status == 429]
    assert len(ok) == 4 and len(refused) == 2, [r.status for r, _ in results]
    # One at once, then one every 500 ms.
    assert ok[0] < 0.4 and 1.2 <= ok[3] < 3.5, ok
    for resp in refused:
        assert resp.header("Retry-After") == "1", resp.headers
    assert srv.wait_for_log("limit api: 127.0.0.1 is over 2 r/s (burst 3): 429"), srv.stderr()
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


# A burst keeps what drained between two arrivals: without one, a request
# is let in only once a whole 50 ms has drained (nginx: the excess never
# goes below zero), and the wait for the next arrival is lost each time.
BURST = 5


def test_at_five_times_the_rate_the_rate_gets_through(tern_factory):
    srv = tern_factory(limited({"rate": "20r/s", "burst": BURST, "nodelay": True}))
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
    expected = 1 + BURST + 20 * elapsed
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



def test_a_request_that_waits_hears_100_continue_when_its_turn_comes(tern_factory, apps):
    """A client that waits to be asked for its body (Expect: 100-continue)
    is asked when its turn comes, not while it waits: over the limit it is
    answered 429 without having sent the body."""
    (app,) = apps("app")
    srv = tern_factory(limited({"rate": "2r/s", "burst": 1}, {
        "prefix": "/", "limit": ["api"], "proxy": {"pass": f"http://{app.address}"}}))
    body = b"b" * 5000
    head = (b"POST /sha256 HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
            % len(body))
    conns = [HttpConn.open(srv.port) for _ in range(3)]
    try:
        started = time.monotonic()
        for conn in conns:
            conn.send(head)
            time.sleep(0.05)  # in this order
        # The first goes at once; the second waits its turn (500 ms at 2r/s);
        # the third overflows the burst.
        first = conns[0].read_response("POST", skip_interim=False)
        assert first.status == 100, first
        third = conns[2].read_response("POST", skip_interim=False)
        assert third.status == 429, third
        second = conns[1].read_response("POST", skip_interim=False)
        waited = time.monotonic() - started
        assert second.status == 100 and waited >= 0.35, (second, waited)
        for conn in conns[:2]:
            conn.send(body)
            resp = conn.read_response("POST")
            assert resp.status == 200 and json.loads(resp.body)["length"] == len(body), resp.body[:200]
    finally:
        for conn in conns:
            conn.close()

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


def metric(srv, sample):
    """The value of one sample line ("name{labels}") of the Prometheus text
    at /metrics; None if absent."""
    text = srv.get("/metrics").body.decode()
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return None


METRICS = {"exact": "/metrics", "metrics": "prometheus", "allow": ["127.0.0.0/8"]}
STATUS = {"exact": "/status", "metrics": "status", "allow": ["127.0.0.0/8"]}


def test_a_limit_shared_by_two_workers_holds_in_sum(tern_factory):
    """Connections alternate between the workers (dispatch: round robin):
    what gets through is the rate once, not once per worker."""
    srv = tern_factory(limited({"rate": "20r/s", "burst": BURST, "nodelay": True}, workers=2))
    counts = {200: 0, 429: 0}
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 3.0:
        # A connection each: both workers answer.
        counts[srv.get("/").status] += 1
        sent += 1
        time.sleep(max(0.0, started + sent / 100 - time.monotonic()))
    elapsed = time.monotonic() - started
    expected = 1 + BURST + 20 * elapsed
    assert abs(counts[200] - expected) <= 0.1 * expected, (counts, elapsed)


def test_refusals_are_counted_logged_once_a_second_per_key_and_survive_a_reload(tern_factory):
    config = limited({"rate": "1r/m", "key": "$http_x_client"},
                     {"prefix": "/", "limit": ["api"], "return": {"status": 200, "body": "ok"}})
    config["server"][0]["location"][:0] = [METRICS, STATUS]
    srv = tern_factory(config)
    refused = 'tern_limit_requests_total{limit="api",kind="rate",result="refused"}'
    assert srv.get("/", [("X-Client", "a")]).status == 200
    for _ in range(5):
        assert srv.get("/", [("X-Client", "a")]).status == 429
    assert srv.get("/", [("X-Client", "b")]).status == 200
    assert srv.get("/", [("X-Client", "b")]).status == 429
    assert metric(srv, refused) == 6
    assert metric(srv, 'tern_limit_keys{limit="api",kind="rate"}') == 2
    assert srv.wait_for_log("limit api: b is over"), srv.stderr()
    log = srv.stderr()
    # Five refusals of "a" within a second or two: one or two lines, not five.
    assert 1 <= log.count("limit api: a is over") <= 2, log
    assert log.count("limit api: b is over") == 1, log
    # A reload that keeps the limit keeps its table: "a" is still over it,
    # and the counts carry on.
    config["server"][0]["location"][2]["return"]["body"] = "reloaded"
    srv.reload(config)
    resp = srv.get("/", [("X-Client", "a")])
    assert resp.status == 429, resp.body
    assert srv.get("/", [("X-Client", "c")]).body == b"reloaded"
    assert metric(srv, refused) == 7
    status = json.loads(srv.get("/status?format=json").body)
    assert status["limits"] == [{"name": "api", "kind": "rate", "delayed": 0, "refused": 7, "keys": 3}], status


def test_held_requests_are_counted(tern_factory):
    # The second and third are held if they come within half a second of
    # the first.
    config = limited({"rate": "2r/s", "burst": 2})
    config["server"][0]["location"].insert(0, METRICS)
    srv = tern_factory(config)
    statuses = sorted(resp.status for resp, _ in at_once(srv, 3))
    assert statuses == [200, 200, 200], statuses
    assert metric(srv, 'tern_limit_requests_total{limit="api",kind="rate",result="delayed"}') == 2


def connection_limited(connections=20, **extra):
    return {
        "limit_connections": ["perip"],
        "limit": [{"name": "perip", "connections": connections}],
        "server": [{"location": [METRICS, {"prefix": "/", "return": {"status": 200, "body": "ok"}}]}],
        **extra,
    }


def served(conn):
    """Whether the connection answers a request (False: closed unanswered)."""
    try:
        return conn.get("/").status == 200
    except (OSError, ConnectionClosed):
        return False


def test_an_address_holds_at_most_its_connections_and_another_is_not_held_back(tern_factory):
    srv = tern_factory(connection_limited(20))
    held = [srv.connect() for _ in range(20)]
    try:
        assert all(served(conn) for conn in held)
        with srv.connect() as extra:
            assert not served(extra)  # the 21st: closed at accept
        # Another address is counted apart.
        with srv.connect(source="127.0.0.2") as other:
            assert served(other)
        # A connection that closes gives its place back.
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:
            with srv.connect() as again:
                if served(again):
                    break
            assert time.monotonic() < deadline, "the place of a closed connection never came back"
            time.sleep(0.05)
    finally:
        for conn in held:
            conn.close()
    assert srv.wait_for_log("limit perip: 127.0.0.1 holds 20 connections, its limit; closing a new one"), srv.stderr()
    with srv.connect(source="127.0.0.3") as scraper:
        text = scraper.get("/metrics").body.decode()
    assert 'tern_limit_requests_total{limit="perip",kind="connections",result="refused"} ' in text, text
    refused = [line for line in text.splitlines()
               if line.startswith('tern_limit_requests_total{limit="perip"')][0]
    assert float(refused.split()[-1]) >= 1, refused


def test_the_connection_limit_counts_the_client_a_proxy_protocol_header_names(tern_factory):
    """Behind a load balancer every connection comes from its address: the
    limit counts the clients its PROXY headers name."""
    srv = tern_factory(connection_limited(2, real_ip={"from": ["127.0.0.0/8"]}), listen_flags="proxy_protocol")

    def relayed(client):
        conn = HttpConn.open(srv.port)
        conn.send(f"PROXY TCP4 {client} 127.0.0.1 40000 {srv.port}\r\n".encode())
        return conn

    first = [relayed("192.0.2.1") for _ in range(2)]
    try:
        assert all(served(conn) for conn in first)
        with relayed("192.0.2.1") as third:
            assert not served(third)
        with relayed("192.0.2.2") as other:
            assert served(other)
    finally:
        for conn in first:
            conn.close()


def in_flight(app, connections=2, key="$http_x_client"):
    """Every path but /metrics goes to the application under a limit of
    requests in flight."""
    config = limited({"connections": connections, "key": key},
                     {"prefix": "/", "limit": ["api"], "proxy": {"pass": f"http://{app.address}"}})
    config["server"][0]["location"].insert(0, METRICS)
    return config


def test_requests_in_flight_per_key_are_limited_and_given_back(tern_factory, apps):
    """A limit of connections named by a location: at most 2 requests of a
    key at once there (nginx's limit_conn); the third is 503 at once,
    another key is not held back, and the places come back as the
    responses end."""
    (app,) = apps("app")
    srv = tern_factory(in_flight(app))

    def slow(client):
        return timed_get(srv, "/slow?delay=1.5", [("X-Client", client)])

    with ThreadPoolExecutor(5) as pool:
        first = [pool.submit(slow, "a") for _ in range(2)]
        wait_for_slow(app, 2)  # both are at the application
        third, elapsed = slow("a")
        assert third.status == 503 and elapsed < 1.0, (third.status, elapsed)
        assert third.header("Retry-After") is None
        other = pool.submit(slow, "b")
        assert [f.result()[0].status for f in first] == [200, 200]
        assert other.result()[0].status == 200
    # Given back: two at once again.
    with ThreadPoolExecutor(2) as pool:
        assert [r.status for r, _ in pool.map(lambda _: slow("a"), range(2))] == [200, 200]
    assert srv.wait_for_log("limit api: a has 2 requests in flight: 503"), srv.stderr()
    assert metric(srv, 'tern_limit_requests_total{limit="api",kind="connections",result="refused"}') == 1


def test_a_client_that_leaves_gives_its_places_back(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(in_flight(app, connections=1))
    for i in range(3):
        conn = HttpConn.open(srv.port)
        conn.send(b"GET /slow?delay=30 HTTP/1.1\r\nHost: a\r\nX-Client: a\r\n\r\n")
        wait_for_slow(app, i + 1)  # at the application, its place taken
        conn.close()
        time.sleep(0.3)
    resp, elapsed = timed_get(srv, "/slow?delay=0.1", [("X-Client", "a")])
    assert resp.status == 200 and elapsed < 5, (resp.status, elapsed)


def test_streams_of_one_http2_connection_are_requests_in_flight(tern_factory, apps):
    (app,) = apps("app")
    srv = tern_factory(in_flight(app, key="$remote_addr"), listen_flags="h2c")
    urls = [f"http://127.0.0.1:{srv.port}/slow?delay=1&i={i}" for i in range(3)]
    proc = subprocess.run(["nghttp", "-v", "-n", "-t", "20", *urls], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    statuses = sorted(line.split()[-1] for line in proc.stdout.splitlines() if ":status:" in line)
    assert statuses == ["200", "200", "503"], statuses

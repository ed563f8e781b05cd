"""Metrics over real HTTP: a location with `metrics = "prometheus"` answers
the text exposition format 0.0.4, one with `metrics = "status"` the status
page (and at ?format=json the figures it polls).

The counts are checked exactly against requests the tests make, with a
strict parser of the exposition format written here; then the real
Prometheus (Debian's package) scrapes tern and its query API must see the
same counts; then the status page runs in headless Chromium under load and
its charts must move, computed as Prometheus would compute them.

What a scrape counts: each response is counted, to the series of the site
and location that answered it, once it is answered, so a scrape does not
see itself (it may, if the count is taken earlier: the tests allow one
more on the metrics location, and assert exact counts on the others).
Every server here runs one worker, so that a scrape, answered on the only
loop, sees no request half counted."""

import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from cdp import Browser, find_chromium
from http_client import build_request
from tern_server import REPO_ROOT, TERN_BIN, free_port

ARTIFACTS = REPO_ROOT / "build" / "test-artifacts"
SITE = "metrics.test"  # the site's first name: its `site` label
CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Upper bounds of the request duration histogram, in seconds (+Inf follows).
BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
# Connection gauges are sampled by each loop once a second: a change shows
# within about two seconds, more under a sanitizer.
GAUGE_TIMEOUT = 15.0

# Every family tern exposes, and its type.
FAMILIES = {
    "tern_build_info": "gauge",
    "tern_start_time_seconds": "gauge",
    "tern_requests_total": "counter",
    "tern_request_duration_seconds": "histogram",
    "tern_received_bytes_total": "counter",
    "tern_sent_bytes_total": "counter",
    "tern_connections": "gauge",
    "tern_connections_active": "gauge",
    "tern_connections_accepted_total": "counter",
    "tern_connections_shed_total": "counter",
    "tern_tls_handshakes_total": "counter",
    "tern_tls_resumed_total": "counter",
    "tern_tls_handshake_failures_total": "counter",
    "tern_tls_kernel_connections_total": "counter",
    "tern_upstream_requests_total": "counter",
    "tern_upstream_failures_total": "counter",
    "tern_upstream_response_seconds_total": "counter",
    "tern_upstream_up": "gauge",
    "tern_open_file_cache_hits_total": "counter",
    "tern_open_file_cache_misses_total": "counter",
    "tern_response_cache_hits_total": "counter",
    "tern_response_cache_misses_total": "counter",
    "tern_response_cache_bypass_total": "counter",
    "tern_response_cache_stale_total": "counter",
    "tern_response_cache_revalidated_total": "counter",
    "tern_log_dropped_total": "counter",
}
# Families whose samples exist only when upstreams are configured.
UPSTREAM_FAMILIES = {name for name in FAMILIES if name.startswith("tern_upstream_")}

# A FastCGI server nobody listens on: its requests end 502 and it shows in
# the upstream figures with its failures.
DEAD_FASTCGI = {"regex": r"\.php$", "fastcgi": {"pass": "127.0.0.1:1", "connect_timeout": "1s"}}
DEAD_FASTCGI_LABEL = r"~ \.php$"  # the location's label, as nginx writes it


def metrics_site(*extra_locations, allow=("127.0.0.1/32",)):
    """One site named SITE (and the default) on the static root, with
    locations "/", "/a/", "/b/", the Prometheus text at /metrics and the
    status page at /status, both only for `allow`."""
    return {"server": [{"names": [SITE], "default": True, "location": [
        {"prefix": "/"},
        {"prefix": "/a/"},
        {"prefix": "/b/"},
        {"prefix": "/metrics", "metrics": "prometheus", "allow": list(allow)},
        {"prefix": "/status", "metrics": "status", "allow": list(allow)},
        *extra_locations,
    ]}]}


def binary_version():
    """The version `tern --version` prints ("tern 0.1.0 (malloc: ...)")."""
    out = subprocess.run([str(TERN_BIN), "--version"], capture_output=True, text=True, timeout=30).stdout
    return out.split()[1]


# -- the text exposition format --

METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE_LINE = re.compile(rf"^({METRIC_NAME})(?:\{{(.*)\}})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
LABEL_PAIR = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(?:,|$)')
ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def parse_labels(text, where):
    labels = {}
    pos = 0
    while pos < len(text):
        match = LABEL_PAIR.match(text, pos)
        assert match and match.end() > pos, f"bad label set at {text[pos:]!r}: {where}"
        name, raw = match.group(1), match.group(2)
        for escape in re.findall(r"\\(.)", raw):
            assert escape in ESCAPES, f"escape \\{escape} is not in the format: {where}"
        assert name not in labels, f"label {name} twice: {where}"
        labels[name] = re.sub(r"\\(.)", lambda m: ESCAPES[m.group(1)], raw)
        pos = match.end()
    return labels


class Exposition:
    """A scrape in the text exposition format 0.0.4, parsed strictly: every
    sample's family announced by # TYPE before it, a family's lines
    together, no series twice, the text ending in a line feed."""

    def __init__(self, text):
        assert text.endswith("\n"), f"the text does not end in a line feed: {text[-80:]!r}"
        self.text = text
        self.types = {}  # family -> type
        self.helps = {}  # family -> help text
        self.samples = []  # (name, {label: value}, value)
        current = None
        finished = set()
        series = set()

        def enter(family, where):
            nonlocal current
            if family != current:
                assert family not in finished, f"the lines of {family} are not together: {where}"
                if current is not None:
                    finished.add(current)
                current = family

        for number, line in enumerate(text[:-1].split("\n"), 1):
            where = f"line {number}: {line!r}"
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
                    continue  # a plain comment
                kind, name, rest = parts[1], parts[2], parts[3] if len(parts) > 3 else ""
                enter(name, where)
                table = self.types if kind == "TYPE" else self.helps
                assert name not in table, f"a second # {kind} for {name}: {where}"
                if kind == "TYPE":
                    assert rest in ("counter", "gauge", "histogram", "summary", "untyped"), where
                    assert not any(self.family_of(s[0]) == name for s in self.samples), \
                        f"# TYPE after samples of {name}: {where}"
                table[name] = rest
                continue
            match = SAMPLE_LINE.match(line)
            assert match, f"not a sample line: {where}"
            name, label_text, value = match.groups()
            family = self.family_of(name)
            assert family is not None, f"a sample of a family without # TYPE: {where}"
            enter(family, where)
            labels = parse_labels(label_text or "", where)
            key = (name, tuple(sorted(labels.items())))
            assert key not in series, f"a series twice: {where}"
            series.add(key)
            self.samples.append((name, labels, float(value)))

    def family_of(self, name):
        if name in self.types:
            return name
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[:-len(suffix)]
            if name.endswith(suffix) and self.types.get(base) in ("histogram", "summary"):
                return base
        return None

    def matching(self, name, labels=None):
        """[(labels, value)] of the samples of `name` whose labels include
        `labels`."""
        want = labels or {}
        return [(l, v) for n, l, v in self.samples if n == name and all(l.get(k) == x for k, x in want.items())]

    def value(self, name, labels=None):
        """The value of the one sample of `name` with exactly `labels`, or
        None."""
        found = [v for n, l, v in self.samples if n == name and l == (labels or {})]
        assert len(found) <= 1, (name, labels, found)
        return found[0] if found else None

    def total(self, name, labels=None):
        return sum(v for _, v in self.matching(name, labels))

    def requests(self, site, location):
        """{class: count} of one site and location, absent classes 0 (tern
        leaves out series that have counted nothing)."""
        out = dict.fromkeys(CLASSES, 0)
        for labels, value in self.matching("tern_requests_total", {"site": site, "location": location}):
            assert labels["class"] in out, labels
            assert value == int(value), (labels, value)
            out[labels["class"]] = int(value)
        return out


def classes(**counts):
    """{class: count} with the given classes ("c2xx=7"), the others 0."""
    out = dict.fromkeys(CLASSES, 0)
    for key, value in counts.items():
        out[key[1:]] = value
    return out


def scrape(srv, path="/metrics"):
    """(response, Exposition) of one scrape on a fresh connection."""
    resp = srv.get(path)
    assert resp.status == 200, (resp, resp.body[:500])
    assert resp.header("Content-Type") == PROMETHEUS_TYPE, resp
    return resp, Exposition(resp.body.decode("utf-8"))


def check_families(exp):
    """Every family tern exposes has its # HELP and its # TYPE, of the right
    type, and samples unless it is about upstreams."""
    for name, kind in FAMILIES.items():
        assert exp.types.get(name) == kind, f"# TYPE of {name}: {exp.types.get(name)!r}, expected {kind}"
        assert exp.helps.get(name), f"no # HELP for {name}"
        names = [f"{name}_bucket", f"{name}_sum", f"{name}_count"] if kind == "histogram" else [name]
        if name not in UPSTREAM_FAMILIES:
            for sample in names:
                assert exp.matching(sample), f"no sample of {sample}"
    unknown = {exp.family_of(n) for n, _, _ in exp.samples} - set(FAMILIES)
    assert not unknown, f"families not in the list the tests know: {unknown}"


def check_histogram(bounds, buckets, total_sum, count):
    """A duration histogram (bounds in seconds; cumulative counts, the last
    the +Inf bucket) is cumulative, ends at `count`, and has a sum that its
    buckets allow: each duration lies in (lower bound, upper bound] of its
    bucket, so the sum lies between the counts times the lower bounds and,
    when nothing fell in +Inf, the counts times the upper bounds. That
    catches a sum in the wrong unit as well as a duration in the wrong
    bucket."""
    assert list(bounds) == BOUNDS, bounds
    assert len(buckets) == len(BOUNDS) + 1, buckets
    assert all(a <= b for a, b in zip(buckets, buckets[1:])), f"not cumulative: {buckets}"
    assert buckets[-1] == count, (buckets, count)
    per_bucket = [buckets[0]] + [b - a for a, b in zip(buckets, buckets[1:])]
    lowest = sum(n * lower for n, lower in zip(per_bucket, [0] + BOUNDS))
    assert total_sum >= lowest - 1e-6, (total_sum, lowest, buckets)
    if per_bucket[-1] == 0:
        highest = sum(n * upper for n, upper in zip(per_bucket, BOUNDS))
        assert total_sum <= highest + 1e-6, (total_sum, highest, buckets)


def exposition_histogram(exp):
    """(bounds, cumulative buckets, sum, count) of tern_request_duration_seconds."""
    buckets = {labels["le"]: value for labels, value in exp.matching("tern_request_duration_seconds_bucket")}
    assert buckets.get("+Inf") is not None, buckets
    finite = sorted(((float(le), n) for le, n in buckets.items() if le != "+Inf"))
    bounds = [le for le, _ in finite]
    counts = [n for _, n in finite] + [buckets["+Inf"]]
    return (bounds, counts, exp.value("tern_request_duration_seconds_sum"),
            exp.value("tern_request_duration_seconds_count"))


def request_bytes(path):
    return len(build_request("GET", path))


# -- the Prometheus text --


def test_prometheus_text_counts_requests(tern_factory):
    started = time.time()
    srv = tern_factory(metrics_site())
    srv.write_file("a/page.html", "<p>a page</p>\n")
    _, first = scrape(srv)
    assert first.requests(SITE, "/a/") == classes() and first.requests(SITE, "/b/") == classes()

    with srv.connect() as conn:  # seven on one keep-alive connection
        for _ in range(7):
            assert conn.get("/a/page.html").status == 200
    for _ in range(3):  # three on a connection each
        assert srv.get("/b/missing.html").status == 404
    resp, exp = scrape(srv)

    assert exp.requests(SITE, "/a/") == classes(c2xx=7)
    assert exp.requests(SITE, "/b/") == classes(c4xx=3)
    assert exp.requests(SITE, "/") == classes()
    # The first scrape, counted once answered; this one may count itself.
    assert 1 <= exp.requests(SITE, "/metrics")["2xx"] <= 2, exp.requests(SITE, "/metrics")
    check_families(exp)
    assert exp.value("tern_build_info", {"version": binary_version()}) == 1
    assert started - 5 <= exp.value("tern_start_time_seconds") <= time.time()

    # Every response counted is in the histogram, with its duration.
    bounds, buckets, total_sum, count = exposition_histogram(exp)
    check_histogram(bounds, buckets, total_sum, count)
    assert count == exp.total("tern_requests_total"), (count, exp.matching("tern_requests_total"))

    # Bytes on the sockets, counted as they move: a request sent and a
    # scrape read since are in the next scrape.
    received = exp.value("tern_received_bytes_total")
    sent = exp.value("tern_sent_bytes_total")
    accepted = exp.value("tern_connections_accepted_total")
    assert received > 0 and sent > 0 and accepted >= 5
    assert srv.get("/a/page.html").status == 200
    _, after = scrape(srv)
    assert after.value("tern_received_bytes_total") - received >= request_bytes("/a/page.html") + \
        request_bytes("/metrics")
    assert after.value("tern_sent_bytes_total") - sent >= len(resp.raw_head) + len(resp.body)
    assert after.value("tern_connections_accepted_total") >= accepted + 2
    assert after.requests(SITE, "/a/") == classes(c2xx=8)
    assert after.value("tern_connections_shed_total") == 0


def test_metrics_allow_restricts(tern_factory):
    srv = tern_factory(metrics_site({"prefix": "/loopback-metrics", "metrics": "prometheus",
                                     "allow": ["127.0.0.0/8"]}, allow=("10.9.9.9/32",)))
    for path in ("/metrics", "/status", "/status?format=json"):
        resp = srv.get(path)
        assert resp.status == 403, (path, resp)
        assert b"tern_" not in resp.body and b'"requests"' not in resp.body, (path, resp.body[:300])
    # The same kind of location answers a client it admits: the 403s above
    # are the allow list's doing. The refusals count to their locations.
    _, exp = scrape(srv, "/loopback-metrics")
    assert exp.requests(SITE, "/metrics") == classes(c4xx=1)
    assert exp.requests(SITE, "/status") == classes(c4xx=2)


def connection_gauges(exp):
    states = {labels["state"]: value for labels, value in exp.matching("tern_connections")}
    assert set(states) == {"reading", "writing", "idle"}, states
    return {"active": exp.value("tern_connections_active"), **states}


def poll_gauges(srv, predicate, what, timeout=GAUGE_TIMEOUT):
    """Scrapes until predicate(gauges) holds; returns the gauges."""
    deadline = time.monotonic() + timeout
    while True:
        gauges = connection_gauges(scrape(srv)[1])
        if predicate(gauges):
            return gauges
        assert time.monotonic() < deadline, f"{what}: not seen within {timeout}s; last gauges {gauges}"
        time.sleep(0.2)


def test_connection_gauges(tern_factory):
    # Long header and keep-alive timeouts: the connections below stay put
    # however slowly the gauges come.
    srv = tern_factory({**metrics_site(), "timeouts": {"header": "60s", "keepalive": "60s"}})
    srv.write_file("a/page.html", "x")
    count = 6
    conns = []
    try:
        for _ in range(count):
            conn = srv.connect()
            conns.append(conn)
            resp = conn.get("/a/page.html")
            assert resp.status == 200 and "close" not in resp.connection_tokens()
        # And one that has sent half a request head: reading.
        partial = srv.connect()
        conns.append(partial)
        partial.send(b"GET /a/page.html HTTP/1.1\r\nHost: test\r\n")
        gauges = poll_gauges(srv, lambda g: g["idle"] >= count and g["reading"] >= 1 and g["active"] >= count + 1,
                             f"{count} idle connections and one reading")
        assert gauges["active"] >= gauges["idle"] + gauges["reading"]
    finally:
        for conn in conns:
            conn.close()
    # Closed: they leave the gauges (the scrape's own connection may remain).
    poll_gauges(srv, lambda g: g["idle"] == 0 and g["reading"] == 0 and g["active"] <= 1,
                "the connections gone from the gauges")


# -- the real Prometheus --

PROMETHEUS = shutil.which("prometheus") or ("/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK)
                                              else None)
PROMETHEUS_TIMEOUT = 30.0
# Plain HTTP to 127.0.0.1 whatever proxy the environment names.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Prometheus:
    """A Prometheus server of its own (config, storage and log in workdir,
    a free loopback port) that scrapes one target each second."""

    def __init__(self, workdir, target, metrics_path="/metrics"):
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path = workdir / "prometheus.yml"
        self.log_path = workdir / "prometheus.log"
        self.config_path.write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  scrape_timeout: 1s\n"  # at most the interval (the default, 10s, is refused)
            "  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: tern\n"
            f"    metrics_path: {metrics_path}\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.proc = None
        self.port = None

    def flags(self):
        return [f"--config.file={self.config_path}", f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]

    def start(self):
        for _ in range(3):  # another process may take the free port first
            self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen([PROMETHEUS, *self.flags()], stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=log, cwd=self.workdir)
            deadline = time.monotonic() + PROMETHEUS_TIMEOUT
            while self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    with DIRECT.open(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as resp:
                        if resp.status == 200:
                            return self
                except (OSError, urllib.error.URLError):
                    pass
                time.sleep(0.2)
            if self.proc.poll() is None:
                break
            if "address already in use" not in self.log():
                break
        self.stop()
        raise AssertionError(f"prometheus did not get ready; its log:\n{self.log()[-4000:]}")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def log(self):
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(params)}"
        with DIRECT.open(url, timeout=10) as resp:
            doc = json.load(resp)
        assert doc.get("status") == "success", doc
        return doc["data"]

    def query(self, expr):
        """An instant query: [(labels, value)]."""
        data = self.api("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def wait_for(self, expr, predicate, what):
        """Queries until the vector's single value satisfies predicate;
        returns that value."""
        deadline = time.monotonic() + PROMETHEUS_TIMEOUT
        result = None
        while time.monotonic() < deadline:
            result = self.query(expr)
            if len(result) == 1 and predicate(result[0][1]):
                return result[0][1]
            time.sleep(0.25)
        raise AssertionError(f"{what}: {expr} gave {result} for {PROMETHEUS_TIMEOUT}s; prometheus log:\n"
                             f"{self.log()[-3000:]}")


def test_real_prometheus_scrapes_tern(tern_factory, tmp_path):
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (Debian package prometheus)")
    srv = tern_factory(metrics_site())
    srv.write_file("a/page.html", "<p>a page</p>\n")
    prometheus = Prometheus(tmp_path / "prometheus", f"127.0.0.1:{srv.port}")
    try:
        prometheus.start()
        with srv.connect() as conn:
            for _ in range(25):
                assert conn.get("/a/page.html").status == 200
        for _ in range(5):
            assert srv.get("/b/missing.html").status == 404

        prometheus.wait_for('up{job="tern"}', lambda v: v == 1, "the target up")
        prometheus.wait_for('sum(tern_requests_total{job="tern",class="2xx",location!="/metrics"})',
                            lambda v: v == 25, "the 2xx requests")
        prometheus.wait_for('sum(tern_requests_total{job="tern",class="4xx"})', lambda v: v == 5,
                            "the 4xx requests")
        # Prometheus' own scrapes, one a second, counted to /metrics.
        prometheus.wait_for(f'tern_requests_total{{job="tern",site="{SITE}",location="/metrics",class="2xx"}}',
                            lambda v: v >= 2, "the scrapes counted")
        prometheus.wait_for('sum(rate(tern_requests_total{job="tern",location="/metrics"}[10s]))',
                            lambda v: 0.2 <= v <= 5, "a rate of about one scrape a second")
        p90 = prometheus.wait_for(
            'histogram_quantile(0.9, sum by (le) (rate(tern_request_duration_seconds_bucket{job="tern"}[10s])))',
            lambda v: math.isfinite(v), "a latency percentile")
        assert 0 <= p90 <= BOUNDS[-1], p90

        targets = [t for t in prometheus.api("/api/v1/targets", state="active")["activeTargets"]
                   if t["labels"].get("job") == "tern"]
        assert len(targets) == 1, targets
        assert targets[0]["health"] == "up" and targets[0]["lastError"] == "", targets[0]
        assert targets[0]["scrapeUrl"] == f"http://127.0.0.1:{srv.port}/metrics", targets[0]

        # Prometheus took the # TYPE and # HELP lines, and every family.
        for name, kind in (("tern_requests_total", "counter"), ("tern_request_duration_seconds", "histogram"),
                           ("tern_connections", "gauge")):
            metadata = prometheus.api("/api/v1/metadata", metric=name).get(name)
            assert metadata and metadata[0]["type"] == kind and metadata[0]["help"], (name, metadata)
        names = {labels["__name__"] for labels, _ in
                 prometheus.query('group by (__name__) ({job="tern",__name__=~"tern_.*"})')}
        for name, kind in FAMILIES.items():
            if name in UPSTREAM_FAMILIES:
                continue
            for sample in ([f"{name}_bucket", f"{name}_sum", f"{name}_count"] if kind == "histogram" else [name]):
                assert sample in names, f"{sample} not in Prometheus: {sorted(names)}"
    finally:
        prometheus.stop()


# -- the status page and its JSON --

JSON_KEYS = {"version", "start_time", "time", "requests", "locations", "duration", "bytes", "connections", "tls",
             "upstreams", "limits", "certificates", "caches", "log"}


def status_json(srv):
    """(response, document) of GET /status?format=json."""
    resp = srv.get("/status?format=json")
    assert resp.status == 200, (resp, resp.body[:500])
    assert resp.header("Content-Type").split(";")[0] == "application/json", resp
    assert resp.header("Cache-Control") == "no-store", resp
    return resp, json.loads(resp.body)


def check_status_document(doc):
    """The shape of the JSON, and the sums that must agree inside it."""
    assert set(doc) == JSON_KEYS, set(doc) ^ JSON_KEYS
    assert set(doc["requests"]) == {"total", "by_class"} and set(doc["requests"]["by_class"]) == set(CLASSES)
    for location in doc["locations"]:
        assert set(location) == {"site", "location", "by_class"} and set(location["by_class"]) == set(CLASSES)
    assert doc["requests"]["by_class"] == {c: sum(l["by_class"][c] for l in doc["locations"]) for c in CLASSES}
    assert doc["requests"]["total"] == sum(doc["requests"]["by_class"].values())
    duration = doc["duration"]
    assert set(duration) == {"bounds", "buckets", "sum", "count"}
    check_histogram(duration["bounds"], duration["buckets"], duration["sum"], duration["count"])
    assert duration["count"] == doc["requests"]["total"]
    assert set(doc["bytes"]) == {"received", "sent"}
    assert set(doc["connections"]) == {"active", "reading", "writing", "idle", "accepted", "shed"}
    assert set(doc["tls"]) == {"handshakes", "resumed", "failed"}
    for limit in doc["limits"]:
        assert set(limit) == {"name", "kind", "delayed", "refused", "keys"} and limit["kind"] in ("rate", "connections")
    for upstream in doc["upstreams"]:
        assert set(upstream) == {"kind", "group", "server", "requests", "failures", "latency_sum", "up"}, upstream
        assert isinstance(upstream["up"], bool) and upstream["failures"] <= upstream["requests"], upstream
    assert set(doc["caches"]) == {"open_file", "response"}
    assert set(doc["caches"]["open_file"]) == {"hits", "misses"}
    assert set(doc["caches"]["response"]) == {"hits", "misses", "bypass", "stale", "revalidated"}
    assert set(doc["log"]) == {"dropped"} and set(doc["log"]["dropped"]) == {"error", "access"}
    for group in ("bytes", "connections", "tls"):
        assert all(isinstance(v, int) and v >= 0 for v in doc[group].values()), doc[group]


def test_status_json(tern_factory):
    started = time.time()
    srv = tern_factory(metrics_site(DEAD_FASTCGI))
    srv.write_file("a/page.html", "<p>a page</p>\n")
    srv.write_file("app/index.php", "<?php echo 1;")
    for _ in range(4):
        assert srv.get("/a/page.html").status == 200
    for _ in range(2):
        assert srv.get("/b/missing.html").status == 404
    assert srv.get("/app/index.php").status == 502

    resp, doc = status_json(srv)
    check_status_document(doc)
    assert doc["version"] == binary_version()
    assert started - 5 <= doc["start_time"] <= doc["time"] <= time.time() + 1
    by_location = {(l["site"], l["location"]): l["by_class"] for l in doc["locations"]}
    assert by_location[(SITE, "/a/")] == classes(c2xx=4)
    assert by_location[(SITE, "/b/")] == classes(c4xx=2)
    assert by_location[(SITE, DEAD_FASTCGI_LABEL)] == classes(c5xx=1)
    assert doc["connections"]["accepted"] >= 8 and doc["connections"]["shed"] == 0
    assert doc["bytes"]["received"] > 0 and doc["bytes"]["sent"] > 0
    assert doc["tls"] == {"handshakes": 0, "resumed": 0, "failed": 0}
    assert doc["log"]["dropped"] == {"error": 0, "access": 0}
    dead = [u for u in doc["upstreams"] if u["server"] == "127.0.0.1:1"]
    assert len(dead) == 1, doc["upstreams"]
    assert dead[0]["kind"] == "fastcgi" and dead[0]["requests"] >= 1 and dead[0]["failures"] >= 1, dead

    # The Prometheus text of the next moment: the same counts, and one
    # response more. Counted once answered, that is the JSON request; counted
    # as it is answered, the JSON held itself and the text holds the scrape.
    _, exp = scrape(srv)
    for (site, location), by_class in by_location.items():
        if location not in ("/status", "/metrics"):
            assert exp.requests(site, location) == by_class, (site, location)
    assert exp.requests(SITE, "/status") == classes(c2xx=1)
    assert exp.total("tern_requests_total") == doc["requests"]["total"] + 1
    _, _, _, count = exposition_histogram(exp)
    assert count == doc["duration"]["count"] + 1
    assert exp.value("tern_start_time_seconds") == pytest.approx(doc["start_time"], abs=0.002)
    assert exp.value("tern_build_info", {"version": doc["version"]}) == 1
    assert exp.value("tern_received_bytes_total") - doc["bytes"]["received"] >= request_bytes("/metrics")
    assert exp.value("tern_sent_bytes_total") - doc["bytes"]["sent"] >= len(resp.raw_head) + len(resp.body)
    assert exp.value("tern_connections_accepted_total") >= doc["connections"]["accepted"] + 1
    for upstream in doc["upstreams"]:
        labels = {k: upstream[k] for k in ("kind", "group", "server")}
        assert exp.value("tern_upstream_requests_total", labels) == upstream["requests"], labels
        assert exp.value("tern_upstream_failures_total", labels) == upstream["failures"], labels
        assert exp.value("tern_upstream_up", labels) == (1 if upstream["up"] else 0), labels
    for cache, key in (("open_file", "open_file_cache"), ("response", "response_cache")):
        for what in ("hits", "misses") + (("bypass", "stale", "revalidated") if cache == "response" else ()):
            assert exp.value(f"tern_{key}_{what}_total") >= doc["caches"][cache][what], (cache, what)


def test_status_page_is_self_contained(tern_factory):
    srv = tern_factory(metrics_site())
    resp = srv.get("/status")
    assert resp.status == 200
    assert resp.header("Content-Type") == "text/html; charset=utf-8" and resp.header("Cache-Control") == "no-store"
    html = resp.body.decode("utf-8")
    assert "<title>tern status</title>" in html and "<canvas" in html and "?format=json" in html
    # Nothing from elsewhere: no URL with a scheme or a network path in an
    # attribute, a stylesheet or a script.
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?(?:[a-z][a-z0-9+.-]*:)?//""", html, re.I), html
    assert not re.search(r"""url\(\s*["']?(?:https?:)?//|@import|<script[^>]+src""", html, re.I)
    assert srv.get("/status", method="HEAD").body == b""


# -- the status page in a browser --

needs_chromium = pytest.mark.skipif(find_chromium() is None,
                                    reason="chromium is not installed (scripts/test installs it)")
LOAD_THREADS = 3


class Load:
    """Keep-alive GETs from a few threads until stopped, each on its own
    connection: nine in ten for an existing page (200), one for a missing
    one (404)."""

    def __init__(self, srv, threads=LOAD_THREADS):
        self.srv = srv
        self.stopping = threading.Event()
        self.statuses = {}
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]

    def run(self):
        paths = ["/a/page.html"] * 9 + ["/b/missing.html"]
        conn = None
        while not self.stopping.is_set():
            try:
                conn = conn or self.srv.connect(timeout=10)
                for path in paths:
                    status = conn.get(path).status
                    with self.lock:
                        self.statuses[status] = self.statuses.get(status, 0) + 1
                time.sleep(0.002)  # a breath, so that the browser and the server keep a share of the CPUs
            except Exception as e:  # noqa: BLE001 - kept for the test to report
                with self.lock:
                    self.errors.append(repr(e))
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)


# The URLs the page loaded (Resource Timing).
RESOURCES_JS = "performance.getEntriesByType('resource').map((e) => e.name)"

# Each canvas: its size, how many pixels are not of its commonest colour
# (the background), and its image.
CANVASES_JS = """Array.from(document.querySelectorAll('canvas')).map((c) => {
  const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const seen = new Map();
  for (let i = 0; i < data.length; i += 4) {
    const key = data[i] + ',' + data[i + 1] + ',' + data[i + 2] + ',' + data[i + 3];
    seen.set(key, (seen.get(key) || 0) + 1);
  }
  const background = Math.max(...seen.values());
  return {id: c.id, width: c.width, height: c.height, painted: data.length / 4 - background, image: c.toDataURL()};
})"""


def page_problems(page, origin):
    """What went wrong in the page so far: uncaught exceptions, console
    errors, failed or refused loads (the Log domain), and requests to
    another origin (anything but the server itself and data: URLs)."""
    problems = [f"exception: {e.get('exception', {}).get('description') or e.get('text')}"
                for e in page.exceptions()]
    for session, method, params in page.browser.events:
        if session != page.session:
            continue
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            problems.append(f"console.{params['type']}: {[a.get('value') for a in params.get('args', [])]}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            problems.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if not (url.startswith(origin + "/") or url.startswith("data:")):
                problems.append(f"request to another origin: {url}")
    for url in page.evaluate(RESOURCES_JS):
        if not url.startswith(origin + "/"):
            problems.append(f"resource from another origin: {url}")
    return problems


def open_status_page(browser, url):
    """A tab on the status page, watching its console, log and network."""
    page = browser.new_page()
    page.call("Network.enable")
    page.call("Log.enable")
    page.goto(url)
    return page


def quantile(q, bounds, counts):
    """Prometheus' histogram_quantile() over one interval's cumulative
    bucket counts, in milliseconds; None when the interval counted nothing."""
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    i = next(i for i, n in enumerate(counts) if n >= rank)
    if i == len(bounds):
        return bounds[-1] * 1000
    lower, below = (0, 0) if i == 0 else (bounds[i - 1], counts[i - 1])
    inside = counts[i] - below
    return (lower + (bounds[i] - lower) * ((rank - below) / inside if inside > 0 else 1)) * 1000


def check_series_against_samples(status):
    """The page's series are what its samples say: requests per second from
    the counters' deltas over the server's clock, percentiles from the
    histogram's bucket deltas, connections as sampled."""
    samples, series = status["samples"], status["series"]
    n = len(samples)
    for name in ("p50", "p90", "p99", "active", "reading", "writing", "idle"):
        assert len(series[name]) == n, (name, len(series[name]), n)
    for c in CLASSES:
        assert len(series["rps"][c]) == n, c
    for i in range(1, n):
        prev, cur = samples[i - 1], samples[i]
        dt = cur["time"] - prev["time"]
        if cur["start_time"] != prev["start_time"] or dt <= 0:
            continue
        for c in CLASSES:
            expected = (cur["requests"]["by_class"][c] - prev["requests"]["by_class"][c]) / dt
            assert series["rps"][c][i] == pytest.approx(expected, rel=1e-6, abs=1e-9), (c, i)
        counts = [b - a for a, b in zip(prev["duration"]["buckets"], cur["duration"]["buckets"])]
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            expected = quantile(q, cur["duration"]["bounds"], counts)
            if expected is None:
                assert series[name][i] is None, (name, i, series[name][i])
            else:
                assert series[name][i] == pytest.approx(expected, rel=1e-6), (name, i, counts)
        for state in ("active", "reading", "writing", "idle"):
            assert series[state][i] == cur["connections"][state], (state, i)


@needs_chromium
def test_status_page_charts_move_under_load(tern_factory):
    srv = tern_factory(metrics_site(DEAD_FASTCGI))
    srv.write_file("a/page.html", "<p>a page</p>\n")
    srv.write_file("app/index.php", "<?php echo 1;")
    assert srv.get("/app/index.php").status == 502  # the upstream table has a row that failed
    origin = srv.url("")
    with Load(srv) as load, Browser(window=(1280, 1100)) as browser:
        page = open_status_page(browser, srv.url("/status"))
        assert page.evaluate("document.title") == "tern status"
        # Five draws: four intervals with rates. Under a sanitizer the
        # polls may come late; the bound is generous.
        page.wait_for("window.ternStatus && window.ternStatus.draws >= 5", timeout=60)
        before = page.evaluate(CANVASES_JS)
        draws = page.evaluate("window.ternStatus.draws")
        page.wait_for(f"window.ternStatus.draws >= {draws + 2}", timeout=30)
        after = page.evaluate(CANVASES_JS)
        status = page.evaluate("window.ternStatus")
        text = page.text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(ARTIFACTS / "status-page.png")
        # The dark scheme: other colours, the charts drawn again in them.
        light = page.evaluate("getComputedStyle(document.body).backgroundColor")
        draws = page.evaluate("window.ternStatus.draws")
        page.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        page.wait_for(f"window.ternStatus.draws > {draws}", timeout=30)
        dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
        page.screenshot(ARTIFACTS / "status-page-dark.png")
        problems = page_problems(page, origin)
    assert not load.errors, load.errors[:5]
    assert load.statuses.get(200, 0) > 100 and load.statuses.get(404, 0) > 10, load.statuses
    assert not problems, problems
    assert light != dark, (light, dark)

    assert status["connected"] is True and status["draws"] >= 7
    check_series_against_samples(status)
    rps = [v for v in status["series"]["rps"]["2xx"] if v is not None]
    assert len(rps) >= 6, status["series"]["rps"]
    # Far above the page's own poll (one a second), and moving.
    assert max(rps) > 20, rps
    assert len({round(v, 3) for v in rps}) > 1, rps
    assert any(v and v > 0 for v in status["series"]["rps"]["4xx"]), status["series"]["rps"]["4xx"]
    assert any(v is not None for v in status["series"]["p50"]), status["series"]["p50"]
    for p50, p90, p99 in zip(status["series"]["p50"], status["series"]["p90"], status["series"]["p99"]):
        if p50 is not None:
            assert 0 <= p50 <= p90 <= p99 <= BOUNDS[-1] * 1000, (p50, p90, p99)
    # The load's keep-alive connections, once a loop has sampled them.
    assert max(status["series"]["active"]) >= LOAD_THREADS, status["series"]["active"]

    # Every chart has something on it, and changed between two draws.
    assert len(before) == len(after) >= 3, after
    for old, new in zip(before, after):
        assert new["width"] > 0 and new["height"] > 0, new["id"]
        assert new["painted"] > 0.01 * new["width"] * new["height"], (new["id"], new["painted"])
        assert new["image"] != old["image"], f"{new['id']} did not change between draws"

    # The tables: the locations by name, the dead FastCGI server.
    assert "tern " + binary_version() in text
    for label in (SITE, "/a/", "/b/", DEAD_FASTCGI_LABEL, "127.0.0.1:1"):
        assert label in text, (label, text[:3000])


def restart_on_same_port(srv):
    """Starts tern again with the config file it had (the same port), as
    srv.proc; the fixture stops it at the end."""
    with open(srv.stderr_path, "ab") as err:
        srv.proc = subprocess.Popen([str(TERN_BIN), "-c", str(srv.config_path), *srv.args],
                                    stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=srv.workdir)
    assert srv._wait_listening(), f"tern did not start again; stderr:\n{srv.stderr()[-3000:]}"


@needs_chromium
def test_status_page_shows_disconnected_and_keeps_trying(tern_factory):
    srv = tern_factory(metrics_site())
    with Browser() as browser:
        page = open_status_page(browser, srv.url("/status"))
        page.wait_for("window.ternStatus.draws >= 2 && document.body.dataset.state === 'live'", timeout=30)
        assert srv.stop() == 0
        page.wait_for("document.body.dataset.state === 'disconnected'", timeout=15)
        assert "disconnected" in page.text().lower()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(ARTIFACTS / "status-page-disconnected.png")
        errors = page.evaluate("window.ternStatus.errors")
        page.wait_for(f"window.ternStatus.errors >= {errors + 2}", timeout=15)  # still polling
        draws = page.evaluate("window.ternStatus.draws")

        restart_on_same_port(srv)
        page.wait_for(f"document.body.dataset.state === 'live' && window.ternStatus.draws >= {draws + 2}",
                      timeout=30)
        assert "disconnected" not in page.text().lower()
        assert not page.exceptions(), page.exceptions()


# -- the config --

PREAMBLE = "# a comment line\n\n"  # the errors below are on line 6


@pytest.mark.parametrize("value", ['"bogus"', '""', "1", '["prometheus"]'],
                         ids=["unknown-word", "empty", "integer", "array"])
def test_metrics_config_errors(tmp_path, value):
    (tmp_path / "www").mkdir()
    path = tmp_path / "bad.toml"
    path.write_text(PREAMBLE + f'[[server]]\n[[server.location]]\nprefix = "/metrics"\nmetrics = {value}\n')
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(path)], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"{path}:6:" in lines[0] and "server[0].location[0].metrics" in lines[0], lines[0]


def test_metrics_locations_pass_the_check(tmp_path):
    (tmp_path / "www").mkdir()
    path = tmp_path / "good.toml"
    path.write_text(f'listen = ["127.0.0.1:{free_port()}"]\n[static]\nroot = "{tmp_path / "www"}"\n'
                    '[[server]]\n'
                    '[[server.location]]\nprefix = "/"\n'
                    '[[server.location]]\nexact = "/metrics"\nmetrics = "prometheus"\nallow = ["127.0.0.1/32"]\n'
                    '[[server.location]]\nprefix = "/status"\nmetrics = "status"\n')
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(path)], capture_output=True, text=True, timeout=30,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr

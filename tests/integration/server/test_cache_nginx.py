"""tern's response cache against nginx's proxy_cache: one origin each (the
proxy tests' application), both caches configured alike (revalidation,
stale on error and 503, a bypass cookie and query parameter, a no-store
request field), the same requests sent to both in the same order, and for
each the same status, the same body (the origin numbers its responses, so
a body also says how many requests reached it) and the same verdict in the
access log: tern's $cache_status against nginx's $upstream_cache_status.

The rows where tern means to answer otherwise are in INTENDED, each with
its reason. (A Vary'd response is kept per variant by both.)
"""

import shutil
import subprocess
import time

import pytest

from http_client import HttpConn, build_request
from tern_server import free_port
from test_access import wait_for_lines
from test_cache import url
from test_proxy import apps, site  # noqa: F401 (apps is a fixture)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
HOST = "cache.test"

# Step label -> (tern's status, nginx's), where they differ on purpose.
# - Range on a hit: tern answers a range from any whole stored body (RFC
#   9111 3.4 lets a cache); nginx only when the origin's response said
#   Accept-Ranges (proxy_force_ranges off), which this one does not.
INTENDED = {
    "fresh range": (206, 200),
}


def steps():
    """(label, method, target, fields) and ("sleep", s) / ("origin", path) /
    ("abandon", label, target) rows, run against both in order. An abandoned
    GET closes its connection once the head of its response has come."""
    fresh = url("/cached/fresh", "Cache-Control: max-age=60")
    expires = url("/cached/expires", "Expires: Thu, 01 Jan 2099 00:00:00 GMT")
    stale304 = url("/cached/reval", "Cache-Control: max-age=2", 'ETag: "r1"')
    stale503 = url("/cached/down", "Cache-Control: max-age=2")
    vary = url("/cached/vary", "Cache-Control: max-age=60", "Vary: Accept-Language")
    private = url("/cached/nostore", "Cache-Control: max-age=60")
    return [
        ("fresh", "GET", fresh, ()),
        ("fresh again", "GET", fresh, ()),
        ("fresh HEAD", "HEAD", fresh, ()),
        # A HEAD that misses fills the entry as a GET would (nginx's
        # proxy_cache_convert_head, on by default).
        ("cold HEAD", "HEAD", url("/cached/head", "Cache-Control: max-age=60"), ()),
        ("GET after a cold HEAD", "GET", url("/cached/head", "Cache-Control: max-age=60"), ()),
        # A fill whose client gives up in the middle of the body goes on for
        # the cache (nginx reads on for a cacheable response).
        ("abandon", "abandoned fill", url("/cached/left", "Cache-Control: max-age=60", n="100000",
                                          body_delay="1")),
        ("sleep", 1.5),
        ("GET after an abandoned fill", "GET", url("/cached/left", "Cache-Control: max-age=60", n="100000",
                                                   body_delay="1"), ()),
        # A miss's client conditions and Range are answered from the
        # response the fill asked for whole (nginx: for a cacheable one).
        ("cold conditional", "GET", url("/cached/coldc", "Cache-Control: max-age=60", 'ETag: "c1"'),
         (("If-None-Match", '"c1"'),)),
        ("cold conditional then hit", "GET", url("/cached/coldc", "Cache-Control: max-age=60", 'ETag: "c1"'), ()),
        ("cold range", "GET", url("/cached/coldr", "Cache-Control: max-age=60", "Accept-Ranges: bytes"),
         (("Range", "bytes=-8"),)),  # the end of the body, the same from both origins
        ("cold range then hit", "GET", url("/cached/coldr", "Cache-Control: max-age=60", "Accept-Ranges: bytes"), ()),
        ("cold conditional, not stored", "GET", url("/cached/coldn", "Cache-Control: no-store", 'ETag: "n1"'),
         (("If-None-Match", '"n1"'),)),
        ("fresh conditional", "GET", fresh, (("If-None-Match", "*"),)),
        ("fresh range", "GET", fresh, (("Range", "bytes=0-3"),)),
        ("expires", "GET", expires, ()),
        ("expires again", "GET", expires, ()),
        ("no-store", "GET", url("/cached/ns", "Cache-Control: no-store"), ()),
        ("no-store again", "GET", url("/cached/ns", "Cache-Control: no-store"), ()),
        ("private", "GET", url("/cached/pv", "Cache-Control: private, max-age=60"), ()),
        ("private again", "GET", url("/cached/pv", "Cache-Control: private, max-age=60"), ()),
        ("set-cookie", "GET", url("/cached/sc", "Cache-Control: max-age=60", "Set-Cookie: a=1"), ()),
        ("set-cookie again", "GET", url("/cached/sc", "Cache-Control: max-age=60", "Set-Cookie: a=1"), ()),
        ("404", "GET", url("/cached/gone", "Cache-Control: max-age=60", status="404"), ()),
        ("404 again", "GET", url("/cached/gone", "Cache-Control: max-age=60", status="404"), ()),
        ("post", "POST", fresh, ()),
        ("bypass cookie", "GET", fresh, (("Cookie", "nocache=1"),)),
        ("bypass argument", "GET", fresh + "&fresh=1", ()),
        ("no_store field", "GET", private, (("X-Private", "1"),)),
        ("no_store field: not stored", "GET", private, ()),
        ("no_store field: then stored", "GET", private, ()),
        ("vary: de", "GET", vary, (("Accept-Language", "de"),)),
        ("vary: de hit", "GET", vary, (("Accept-Language", "de"),)),
        ("vary: fr", "GET", vary, (("Accept-Language", "fr"),)),
        ("vary: de again", "GET", vary, (("Accept-Language", "de"),)),
        ("to revalidate", "GET", stale304, ()),
        ("to serve stale", "GET", stale503, ()),
        ("sleep", 3.1),
        ("revalidated", "GET", stale304, ()),
        ("revalidated then hit", "GET", stale304, ()),
        ("origin", "/cachedfail?status=503"),
        ("stale for a 503", "GET", stale503, ()),
        ("origin", "/cachedfail"),
        ("after the 503", "GET", stale503, ()),
    ]


def tern_config(origin, cache_dir):
    cache = {"zone": "pages", "use_stale": ["error", "timeout", "503"],
             "bypass": ["$cookie_nocache", "$arg_fresh"], "no_store": ["$http_x_private"]}
    return {**site({"prefix": "/", "proxy": {"pass": f"http://{origin.address}", "cache": cache}},
                   cache=[{"name": "pages", "path": str(cache_dir)}]),
            "access_log": "access.log", "access_log_format": "$cache_status $status"}


def nginx_config(tmp, port, origin):
    # Its worker as root: pytest's folders are its user's alone.
    return f"""
user root;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    proxy_cache_path {tmp}/cache levels=1:2 keys_zone=pages:1m;
    log_format verdict '$upstream_cache_status $status';
    access_log {tmp}/access.log verdict;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{origin.address};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache pages;
            proxy_cache_key $scheme$host$request_uri;
            proxy_cache_revalidate on;
            proxy_cache_lock on;
            proxy_cache_use_stale error timeout http_503;
            proxy_cache_bypass $cookie_nocache $arg_fresh;
            proxy_no_cache $http_x_private;
        }}
    }}
}}
"""


@pytest.fixture
def nginx_cache(tmp_path, apps):  # noqa: F811
    origin = apps("nginx-origin")[0]
    ngx = tmp_path / "nginx"
    ngx.mkdir()
    port = free_port()
    conf = ngx / "nginx.conf"
    conf.write_text(nginx_config(ngx, port, origin))
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while True:
        try:
            HttpConn.open(port, timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"nginx did not start: {proc.stderr.read().decode()}")
            time.sleep(0.05)
    yield port, origin, ngx / "access.log"
    proc.terminate()
    proc.wait(timeout=10)


def fetch(port, method, target, fields):
    with HttpConn.open(port) as conn:
        return conn.request(build_request(method, target, [("Host", HOST), *fields]), method)


def abandon(port, target):
    with HttpConn.open(port) as conn:
        conn.sock.sendall(build_request("GET", target, [("Host", HOST)]))
        assert conn.sock.recv(100).startswith(b"HTTP/1.1 200")


def test_the_cache_answers_as_nginx_proxy_cache_does(tern_factory, apps, nginx_cache, tmp_path):  # noqa: F811
    nginx_port, nginx_origin, nginx_log = nginx_cache
    tern_origin = apps("tern-origin")[0]
    srv = tern_factory(tern_config(tern_origin, tmp_path / "cache"))
    rows = []  # (label, tern's answer, nginx's)
    for step in steps():
        if step[0] == "sleep":
            time.sleep(step[1])
        elif step[0] == "origin":
            tern_origin.post(step[1])
            nginx_origin.post(step[1])
        elif step[0] == "abandon":
            abandon(srv.port, step[2])
            abandon(nginx_port, step[2])
            rows.append((step[1], None, None))
        else:
            label, method, target, fields = step
            rows.append((label, fetch(srv.port, method, target, fields), fetch(nginx_port, method, target, fields)))
    tern_verdicts = wait_for_lines(srv.workdir / "access.log", len(rows))
    nginx_verdicts = wait_for_lines(nginx_log, len(rows))
    assert len(tern_verdicts) == len(nginx_verdicts) == len(rows)
    differences = []
    for (label, got, want), tern_line, nginx_line in zip(rows, tern_verdicts, nginx_verdicts):
        tern_verdict, nginx_verdict = tern_line.split()[0], nginx_line.split()[0]
        if label in INTENDED:
            if (got.status, want.status) != INTENDED[label] or tern_verdict != nginx_verdict:
                differences.append(f"{label}: tern {got.status} {tern_verdict}, nginx {want.status} "
                                   f"{nginx_verdict}, intended statuses {INTENDED[label]}")
            continue
        if got is None:  # abandoned: no answer, its verdict and status logged
            if tern_line != nginx_line:
                differences.append(f"{label}: logged {tern_line!r}, nginx {nginx_line!r}")
            continue
        if got.status != want.status:
            differences.append(f"{label}: status {got.status}, nginx {want.status}")
        # The body names its origin: the rest (the count of requests that
        # reached it, the path, a padding) must be the same, but for the
        # byte that the names' lengths shift out of a body padded to n.
        ours, theirs = got.body.replace(b"tern-origin", b""), want.body.replace(b"nginx-origin", b"")
        if abs(len(ours) - len(theirs)) > 1 or ours[:len(theirs)] != theirs[:len(ours)]:
            differences.append(f"{label}: body {got.body[:60]!r}, nginx {want.body[:60]!r}")
        if tern_verdict != nginx_verdict:
            differences.append(f"{label}: $cache_status {tern_verdict}, nginx {nginx_verdict}")
    assert not differences, "\n".join(differences)

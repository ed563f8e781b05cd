"""tern against nginx: the same two sites and locations configured in both,
the same requests sent to both, the same status, Location and body expected
from each (bodies of redirects aside: those are informational pages that
differ by design). nginx is the reference for what sites and locations
mean; this test is where tern's reading of them is checked against it."""

import os
import shutil
import subprocess
import time

import pytest

from http_client import HttpConn, build_request
from tern_server import free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def make_tree(base):
    a, b = base / "a", base / "b"
    files = {
        a / "index.html": "a home\n",
        a / "page.html": "a page\n",
        a / "docs" / "index.html": "docs index\n",
        a / "docs" / "guide.txt": "the guide\n",
        a / "docs" / "sub" / "deep.txt": "deep doc\n",
        a / "static" / "logo.png": "png bytes\n",
        a / "static" / "app.css": "css\n",
        a / "assets" / "photo.jpg": "jpg bytes\n",
        a / "app" / "index.html": "spa shell\n",
        a / "app" / "main.js": "js\n",
        a / "private" / "key.txt": "secret\n",
        a / "errors" / "404.html": "a: not found\n",
        a / "errors" / "403.html": "a: forbidden\n",
        a / "errors" / "410.html": "a: gone\n",
        a / "pictures" / "cat.txt": "a cat\n",
        a / "strict" / "here.txt": "strict file\n",
        a / "noindex" / "file.txt": "in a directory without index\n",
        a / "space dir" / "a b.txt": "spaced\n",
        b / "index.html": "b home\n",
        b / "only-b.txt": "b file\n",
        b / "404.html": "b: not found\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return a, b


def tern_sites(a, b):
    return {"server": [
        {"names": ["a.test", "www.a.test"], "default": True, "root": str(a),
         "error_page": {"404": "/errors/404.html", "403": "/errors/403.html", "410": "/errors/410.html"},
         "location": [
             {"prefix": "/"},
             {"exact": "/exact", "return": {"status": 200, "body": "exact match"}},
             {"prefix": "/docs/"},
             {"prefix": "/static/", "skip_regex": True},
             {"iregex": r"\.(png|jpg)$", "return": {"status": 200, "body": "image by regex"}},
             {"regex": r"^/api/(\w+)$", "return": {"status": 200, "body": "api $1"}},
             {"prefix": "/old/", "return": {"status": 301, "url": "/docs/"}},
             {"regex": r"^/move/(.*)/(.*)$", "return": {"status": 302, "url": "/to/$2/$1"}},
             {"prefix": "/app/", "try_files": ["$uri", "$uri/", "/app/index.html"]},
             {"prefix": "/strict/", "try_files": ["$uri", "=404"]},
             {"prefix": "/private/", "deny": True},
             {"prefix": "/img/", "alias": str(a / "pictures")},
             {"exact": "/gone", "return": 410},
             {"prefix": "/errors/", "internal": True},
         ]},
        {"names": ["b.test", "*.b.test"], "root": str(b),
         "error_page": {"404": "/404.html"},
         "location": [
             {"prefix": "/"},
             {"prefix": "/b-only/", "return": {"status": 200, "body": "b only"}},
         ]},
    ]}


def nginx_conf(tmp, port, a, b):
    return f"""
user root;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    absolute_redirect off;
    default_type text/plain;
    server {{
        listen 127.0.0.1:{port} default_server;
        server_name a.test www.a.test;
        root {a};
        error_page 404 /errors/404.html;
        error_page 403 /errors/403.html;
        error_page 410 /errors/410.html;
        location / {{ }}
        location = /exact {{ return 200 "exact match"; }}
        location /docs/ {{ }}
        location ^~ /static/ {{ }}
        location ~* \\.(png|jpg)$ {{ return 200 "image by regex"; }}
        location ~ ^/api/(\\w+)$ {{ return 200 "api $1"; }}
        location /old/ {{ return 301 /docs/; }}
        location ~ ^/move/(.*)/(.*)$ {{ return 302 /to/$2/$1; }}
        location /app/ {{ try_files $uri $uri/ /app/index.html; }}
        location /strict/ {{ try_files $uri =404; }}
        location /private/ {{ deny all; }}
        location /img/ {{ alias {a}/pictures/; }}
        location = /gone {{ return 410; }}
        location /errors/ {{ internal; }}
    }}
    server {{
        listen 127.0.0.1:{port};
        server_name b.test *.b.test;
        root {b};
        error_page 404 /404.html;
        location / {{ }}
        location /b-only/ {{ return 200 "b only"; }}
    }}
}}
"""


# (Host, method, target). Over sixty requests across both sites.
REQUESTS = [
    ("a.test", "GET", "/"),
    ("a.test", "GET", "/index.html"),
    ("a.test", "GET", "/page.html"),
    ("a.test", "HEAD", "/page.html"),
    ("a.test", "GET", "/missing.html"),
    ("a.test", "GET", "/exact"),
    ("a.test", "GET", "/exact/"),
    ("a.test", "GET", "/exactly"),
    ("a.test", "GET", "/docs/"),
    ("a.test", "GET", "/docs"),
    ("a.test", "GET", "/docs/guide.txt"),
    ("a.test", "GET", "/docs/sub/deep.txt"),
    ("a.test", "GET", "/docs/sub"),
    ("a.test", "GET", "/docs/nothing"),
    ("a.test", "GET", "/docs/a.png"),
    ("a.test", "GET", "/static/logo.png"),
    ("a.test", "GET", "/static/app.css"),
    ("a.test", "GET", "/static/missing.png"),
    ("a.test", "GET", "/assets/photo.jpg"),
    ("a.test", "GET", "/assets/PHOTO.JPG"),
    ("a.test", "GET", "/anything.PNG"),
    ("a.test", "GET", "/api/users"),
    ("a.test", "GET", "/api/users/1"),
    ("a.test", "GET", "/api/"),
    ("a.test", "GET", "/old/"),
    ("a.test", "GET", "/old/page"),
    ("a.test", "GET", "/old"),
    ("a.test", "GET", "/move/x/y"),
    ("a.test", "GET", "/move/one/two"),
    ("a.test", "GET", "/app/"),
    ("a.test", "GET", "/app/main.js"),
    ("a.test", "GET", "/app/settings"),
    ("a.test", "GET", "/app/users/42/edit"),
    ("a.test", "GET", "/app/logo.png"),
    ("a.test", "GET", "/strict/here.txt"),
    ("a.test", "GET", "/strict/absent.txt"),
    ("a.test", "GET", "/strict/"),
    ("a.test", "GET", "/private/key.txt"),
    ("a.test", "GET", "/private/"),
    ("a.test", "GET", "/img/cat.txt"),
    ("a.test", "GET", "/img/dog.txt"),
    ("a.test", "GET", "/img/"),
    ("a.test", "GET", "/gone"),
    ("a.test", "GET", "/errors/404.html"),
    ("a.test", "GET", "/noindex/"),
    ("a.test", "GET", "/noindex/file.txt"),
    ("a.test", "GET", "/space%20dir/a%20b.txt"),
    ("a.test", "GET", "/space%20dir"),
    ("a.test", "GET", "/docs/../page.html"),
    ("a.test", "GET", "/docs/./guide.txt"),
    ("a.test", "GET", "/%64ocs/guide.txt"),
    ("a.test", "GET", "/page.html?x=1"),
    ("A.TEST", "GET", "/page.html"),
    ("www.a.test", "GET", "/"),
    ("a.test:8080", "GET", "/"),
    ("unknown.test", "GET", "/"),
    ("unknown.test", "GET", "/only-b.txt"),
    ("b.test", "GET", "/"),
    ("b.test", "GET", "/only-b.txt"),
    ("b.test", "GET", "/page.html"),
    ("b.test", "GET", "/b-only/x"),
    ("b.test", "GET", "/exact"),
    ("x.b.test", "GET", "/only-b.txt"),
    ("deep.x.b.test", "GET", "/"),
    ("B.Test", "GET", "/only-b.txt"),
    ("b.test", "HEAD", "/missing"),
    ("b.test", "GET", "/missing"),
]


@pytest.fixture
def nginx_and_tern(tmp_path, tern_factory):
    a, b = make_tree(tmp_path / "sites")
    port = free_port()
    ngx = tmp_path / "nginx"
    ngx.mkdir()
    conf = ngx / "nginx.conf"
    conf.write_text(nginx_conf(ngx, port, a, b))
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
    srv = tern_factory(tern_sites(a, b), name="tern")
    yield port, srv
    proc.terminate()
    proc.wait(timeout=10)


def fetch(port, host, method, target):
    with HttpConn.open(port) as conn:
        return conn.request(build_request(method, target, [("Host", host)]), method)


def test_tern_answers_as_nginx_does(nginx_and_tern):
    nginx_port, srv = nginx_and_tern
    assert len(REQUESTS) >= 60
    differences = []
    for host, method, target in REQUESTS:
        want = fetch(nginx_port, host, method, target)
        got = fetch(srv.port, host, method, target)
        row = f"{method} {host}{target}"
        if got.status != want.status:
            differences.append(f"{row}: status {got.status}, nginx {want.status}")
        elif 300 <= want.status < 400:
            if got.header("Location") != want.header("Location"):
                differences.append(f"{row}: Location {got.header('Location')!r}, nginx {want.header('Location')!r}")
        elif got.body != want.body:
            differences.append(f"{row}: body {got.body[:80]!r}, nginx {want.body[:80]!r}")
    assert not differences, "\n".join(differences)

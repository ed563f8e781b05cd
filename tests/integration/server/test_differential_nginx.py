"""tern against nginx: the same three sites and locations configured in
both, the same requests sent to both, and for each the same status, the
same Location on a redirect, the same chosen header fields (FIELDS, and the
Content-Type of a file) and the same body expected from each. nginx is the
reference for what sites and locations mean; this test is where tern's
reading of them is checked against it.

Bodies are compared (by sha256) where they come from the sites: files,
`return` bodies, a site's error_page files. Pages either server builds
itself (its built-in error pages, the small page of a redirect) differ by
design and are not compared, nor is the Content-Type of a `return` body
(nginx takes it from the URI's extension). The few rows where tern means
to answer otherwise are listed in INTENDED, each with its reason.
"""

import os
import shutil
import subprocess
import time

import pytest

from http_client import HttpConn, build_request
from tern_server import free_port, sha256

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

# Every file's mtime, so that If-Modified-Since can name it exactly.
MTIME = 1704067200
MTIME_HTTP = "Mon, 01 Jan 2024 00:00:00 GMT"

# A `return` body with every variable.
VARS = "$scheme $host $request_uri $uri $args $is_args"

# Header fields compared on every answer (absent on both is equal).
FIELDS = ("X-Shell", "X-Html", "X-Root", "X-Add", "X-Always", "X-Error-Page",
          "Cache-Control", "Content-Range", "Allow")

# Intended differences: (Host, method, target) -> the answer expected from
# tern and the one from nginx, each a status and fields (None: absent).
# - `methods` against `limit_except`: a method a location does not admit is
#   405 with Allow in tern (RFC 9110 15.5.6); nginx has no such setting, and
#   `limit_except GET { deny all; }`, its nearest, is an access rule: 403.
# - Allow on a 405: tern names the methods it admits, as RFC 9110 15.5.6
#   requires; nginx's static files say 405 without Allow.
# - allow/deny beside `return`: tern refuses a client before anything
#   answers; nginx runs `return` in its rewrite phase, before access
#   checks, so a location's `return` answers even a denied client.
# - `$uri` in a `return` URL: tern percent-encodes the decoded path again;
#   nginx writes it decoded, so a space gives an invalid Location and an
#   encoded `?` (%3F) a Location that names another target.
ALLOW = {"Allow": "GET, HEAD"}
INTENDED = {
    ("c.test", "POST", "/ro/file.txt"): ((405, ALLOW), (403, {"Allow": None})),
    ("c.test", "DELETE", "/ro/file.txt"): ((405, ALLOW), (403, {"Allow": None})),
    ("a.test", "POST", "/page.html"): ((405, ALLOW), (405, {"Allow": None})),
    ("a.test", "DELETE", "/page.html"): ((405, ALLOW), (405, {"Allow": None})),
    ("c.test", "POST", "/h/file.txt"): ((405, {**ALLOW, "X-Add": None, "X-Always": "h"}),
                                        (405, {"Allow": None, "X-Add": None, "X-Always": "h"})),
    ("c.test", "GET", "/lanret/x"): ((403, {}), (200, {})),
    ("c.test", "GET", "/keep/a%20b"): ((302, {"Location": "http://c.test/keep/a%20b"}),
                                       (302, {"Location": "http://c.test/keep/a b"})),
    ("c.test", "GET", "/keep/a%3Fb"): ((302, {"Location": "http://c.test/keep/a%3Fb"}),
                                       (302, {"Location": "http://c.test/keep/a?b"})),
}


def make_tree(base):
    a, b, c = base / "a", base / "b", base / "c"
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
        a / "app" / "sub" / "index.html": "app sub index\n",
        a / "app" / "empty" / "note.txt": "no index here\n",
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
        c / "index.html": "c home\n",
        c / "page.txt": "c page\n",
        c / "shop" / "index.html": "shop index\n",
        c / "portal" / "index.html": "portal file\n",
        c / "alt" / "home.html": "alt home\n",
        c / "alt" / "index.html": "alt index\n",
        c / "alt" / "sub" / "index.html": "alt sub index\n",
        c / "noindex" / "file.txt": "c without index\n",
        c / "spa" / "shell.html": "c shell\n",
        c / "spa" / "app.js": "c js\n",
        c / "spa" / "sub" / "index.html": "spa sub index\n",
        c / "spa" / "bare" / "file.txt": "bare file\n",
        c / "errors" / "404.html": "c: not found\n",
        c / "h" / "file.txt": "header file\n",
        c / "h" / "dir" / "x.txt": "h dir\n",
        c / "hd" / "x.txt": "hd file\n",
        c / "cached" / "file.txt": "cached file\n",
        c / "cached" / "dir" / "x.txt": "cached dir\n",
        c / "pictures" / "cat.txt": "c cat\n",
        c / "pictures" / "kittens" / "index.html": "kittens\n",
        c / "deep" / "x.html": "deep x\n",
        c / "deep" / "er" / "x.html": "deeper x\n",
        c / "ro" / "file.txt": "read only\n",
        c / "virtual" / "other.txt": "other\n",
        c / "lan" / "x.txt": "lan\n",
        c / "local" / "x.txt": "local\n",
        c / "notme" / "x.txt": "notme\n",
        c / "mixed" / "x.txt": "mixed\n",
        c / "other" / "x.txt": "other\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (MTIME, MTIME))
    return a, b, c


def tern_sites(a, b, c):
    h = {"headers": {"X-Add": "h"}, "headers_always": {"X-Always": "h"}}
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
        {"names": ["c.test"], "root": str(c), "index": ["index.html"],
         "error_page": {"404": "/errors/404.html"},
         "location": [
             {"prefix": "/", "headers": {"X-Root": "c"}},
             {"exact": "/index.html", "headers": {"X-Shell": "app"}},
             {"regex": r"\.html$", "headers": {"X-Html": "yes"}},
             {"exact": "/portal/index.html", "return": {"status": 200, "body": "portal by index"}},
             {"prefix": "/alt/", "index": ["home.html", "index.html"]},
             {"prefix": "/spa/", "try_files": ["$uri", "$uri/", "/spa/shell.html"]},
             {"prefix": "/errors/", "skip_regex": True, "internal": True,
              "headers_always": {"X-Error-Page": "c"}},
             {"prefix": "/h/", **h},
             {"prefix": "/hd/", "deny": True, **h},
             {"exact": "/h201", "return": {"status": 201, "body": "created"}, **h},
             {"exact": "/h204", "return": 204, **h},
             {"exact": "/h302", "return": {"status": 302, "url": "/h/file.txt"}, **h},
             {"exact": "/h303", "return": {"status": 303, "url": "/h/file.txt"}, **h},
             {"exact": "/h307", "return": {"status": 307, "url": "/h/file.txt"}, **h},
             {"exact": "/h308", "return": {"status": 308, "url": "/h/file.txt"}, **h},
             {"exact": "/h404", "return": 404, **h},
             {"exact": "/h410", "return": 410, **h},
             {"prefix": "/vars/", "return": {"status": 200, "body": VARS}},
             {"prefix": "/secure/", "return": {"status": 301, "url": "https://$host$request_uri"}},
             {"prefix": "/keep/", "return": {"status": 302, "url": "$scheme://$host$uri$is_args$args"}},
             {"prefix": "/lan/", "allow": ["10.0.0.0/8"]},
             {"prefix": "/local/", "allow": ["127.0.0.0/8"]},
             {"prefix": "/notme/", "deny": ["127.0.0.1"]},
             {"prefix": "/mixed/", "allow": ["127.0.0.0/8"], "deny": ["127.0.0.1"]},
             {"prefix": "/other/", "deny": ["10.0.0.0/8"]},
             {"prefix": "/lanret/", "allow": ["10.0.0.0/8"], "return": {"status": 200, "body": "lan only"}},
             {"prefix": "/ro/", "methods": ["GET"]},
             {"prefix": "/cached/", "expires": "1h"},
             {"prefix": "/pics/", "skip_regex": True, "alias": str(c / "pictures")},
             {"regex": r"^/order/", "return": {"status": 200, "body": "first"}},
             {"iregex": r"/order/x$", "return": {"status": 200, "body": "second"}},
             {"prefix": "/deep/", "skip_regex": True},
             {"prefix": "/deep/er/", "headers": {"X-Add": "deeper"}},
             {"exact": "/virtual/index.html", "return": {"status": 200, "body": "virtual"}},
         ]},
    ]}


def nginx_conf(tmp, port, a, b, c):
    h = "add_header X-Add h; add_header X-Always h always;"
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
    types {{
        text/html html; text/plain txt; text/css css; text/javascript js;
        image/png png; image/jpeg jpg;
    }}
    default_type text/plain;
    charset utf-8;
    charset_types text/html text/plain text/css text/javascript;
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
    server {{
        listen 127.0.0.1:{port};
        server_name c.test;
        root {c};
        index index.html;
        error_page 404 /errors/404.html;
        location / {{ add_header X-Root c; }}
        location = /index.html {{ add_header X-Shell app; }}
        location ~ \\.html$ {{ add_header X-Html yes; }}
        location = /portal/index.html {{ return 200 "portal by index"; }}
        location /alt/ {{ index home.html index.html; }}
        location /spa/ {{ try_files $uri $uri/ /spa/shell.html; }}
        location ^~ /errors/ {{ internal; add_header X-Error-Page c always; }}
        location /h/ {{ {h} }}
        location /hd/ {{ deny all; {h} }}
        location = /h201 {{ {h} return 201 "created"; }}
        location = /h204 {{ {h} return 204; }}
        location = /h302 {{ {h} return 302 /h/file.txt; }}
        location = /h303 {{ {h} return 303 /h/file.txt; }}
        location = /h307 {{ {h} return 307 /h/file.txt; }}
        location = /h308 {{ {h} return 308 /h/file.txt; }}
        location = /h404 {{ {h} return 404; }}
        location = /h410 {{ {h} return 410; }}
        location /vars/ {{ return 200 "{VARS}"; }}
        location /secure/ {{ return 301 https://$host$request_uri; }}
        location /keep/ {{ return 302 $scheme://$host$uri$is_args$args; }}
        location /lan/ {{ allow 10.0.0.0/8; deny all; }}
        location /local/ {{ allow 127.0.0.0/8; deny all; }}
        location /notme/ {{ deny 127.0.0.1; allow all; }}
        location /mixed/ {{ deny 127.0.0.1; allow 127.0.0.0/8; deny all; }}
        location /other/ {{ deny 10.0.0.0/8; allow all; }}
        location /lanret/ {{ allow 10.0.0.0/8; deny all; return 200 "lan only"; }}
        location /ro/ {{ limit_except GET {{ deny all; }} }}
        location /cached/ {{ expires 1h; }}
        location ^~ /pics/ {{ alias {c}/pictures/; }}
        location ~ ^/order/ {{ return 200 "first"; }}
        location ~* /order/x$ {{ return 200 "second"; }}
        location ^~ /deep/ {{ }}
        location /deep/er/ {{ add_header X-Add deeper; }}
        location = /virtual/index.html {{ return 200 "virtual"; }}
    }}
}}
"""


RANGE = (("Range", "bytes=2-7"),)
SINCE = (("If-Modified-Since", MTIME_HTTP),)
NOT_MATCHED = (("If-Match", '"not-its-etag"'),)
CHANGED_SINCE = (("If-Unmodified-Since", "Sun, 31 Dec 2023 00:00:00 GMT"),)
UNCHANGED_SINCE = (("If-Unmodified-Since", MTIME_HTTP),)

# (Host, method, target[, more header fields]).
REQUESTS = [
    # Site a: prefix, exact and regex locations, try_files, alias, deny.
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
    ("a.test", "GET", "/API/users"),
    ("a.test", "GET", "/old/"),
    ("a.test", "GET", "/old/page"),
    ("a.test", "GET", "/old/page?x=1"),
    ("a.test", "HEAD", "/old/"),
    ("a.test", "GET", "/old"),
    ("a.test", "GET", "/move/x/y"),
    ("a.test", "GET", "/move/one/two"),
    ("a.test", "GET", "/app/"),
    ("a.test", "GET", "/app/main.js"),
    ("a.test", "GET", "/app/settings"),
    ("a.test", "GET", "/app/settings?x=1"),
    ("a.test", "GET", "/app/users/42/edit"),
    ("a.test", "GET", "/app/logo.png"),
    ("a.test", "GET", "/app/sub"),
    ("a.test", "GET", "/app/sub?x=1"),
    ("a.test", "GET", "/app/sub/"),
    ("a.test", "GET", "/app/empty/"),
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
    # Methods outside any `methods` list.
    ("a.test", "POST", "/page.html"),
    ("a.test", "DELETE", "/page.html"),
    ("a.test", "POST", "/missing.html"),
    ("a.test", "POST", "/docs"),
    ("a.test", "POST", "/noindex/"),
    ("c.test", "POST", "/h/file.txt"),
    ("c.test", "POST", "/h/missing"),
    ("a.test", "POST", "/exact"),
    # Percent-encoding, dot segments, double and encoded slashes.
    ("a.test", "GET", "/space%20dir/a%20b.txt"),
    ("a.test", "GET", "/space%20dir"),
    ("a.test", "GET", "/docs/../page.html"),
    ("a.test", "GET", "/docs/./guide.txt"),
    ("a.test", "GET", "/%64ocs/guide.txt"),
    ("a.test", "GET", "/docs/%2e%2e/page.html"),
    ("a.test", "GET", "/docs/%2E%2E/page.html"),
    ("a.test", "GET", "/docs/%2e/guide.txt"),
    ("a.test", "GET", "/docs/sub/.."),
    ("a.test", "GET", "/docs/%2e%2e"),
    ("a.test", "GET", "/docs/sub/../guide.txt"),
    ("a.test", "GET", "/docs/sub/.%2e/guide.txt"),
    ("a.test", "GET", "/docs//guide.txt"),
    ("a.test", "GET", "//page.html"),
    ("a.test", "GET", "//docs"),
    ("a.test", "GET", "/docs%2Fguide.txt"),
    ("a.test", "GET", "/docs/sub%2F"),
    ("a.test", "GET", "/private%2Fkey.txt"),
    ("a.test", "GET", "/%70rivate/key.txt"),
    ("a.test", "GET", "/img/..%2Fpage.html"),
    ("a.test", "GET", "/../page.html"),
    ("a.test", "GET", "/docs/../../page.html"),
    ("a.test", "GET", "/%2e%2e/page.html"),
    ("a.test", "GET", "/page%2ehtml"),
    ("a.test", "GET", "/ex%61ct"),
    ("a.test", "GET", "/api/us%65rs"),
    ("a.test", "GET", "/move/a%2Fb/c"),
    ("a.test", "GET", "/sp%61ce%20dir"),
    ("a.test", "GET", "/docs/guide.txt/"),
    ("a.test", "GET", "/page.html?x=1"),
    # Host names and absolute-form targets (the target's authority wins).
    ("A.TEST", "GET", "/page.html"),
    ("www.a.test", "GET", "/"),
    ("a.test:8080", "GET", "/"),
    ("a.test.", "GET", "/page.html"),
    ("unknown.test", "GET", "/"),
    ("unknown.test", "GET", "/only-b.txt"),
    ("a.test", "GET", "http://b.test/only-b.txt"),
    ("a.test", "GET", "http://B.TEST:8080/only-b.txt"),
    ("b.test", "GET", "http://a.test/page.html"),
    ("b.test", "GET", "http://a.test"),
    ("a.test", "GET", "http://b.test"),
    ("a.test", "GET", "http://unknown.test/only-b.txt"),
    ("b.test", "GET", "http://c.test/secure/x?y=1"),
    ("b.test", "GET", "http://c.test/vars/a?b=1"),
    ("c.test", "GET", "http://c.test/secure/x"),
    ("c.test", "GET", "HTTP://C.test:80/vars/x"),
    # Site b.
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
    # Site c: index files through their own locations.
    ("c.test", "GET", "/"),
    ("c.test", "HEAD", "/"),
    ("c.test", "GET", "/index.html"),
    ("c.test", "GET", "/page.txt"),
    ("c.test", "GET", "/shop/"),
    ("c.test", "GET", "/shop"),
    ("c.test", "GET", "/shop/index.html"),
    ("c.test", "GET", "/portal/"),
    ("c.test", "GET", "/alt/"),
    ("c.test", "GET", "/alt/sub/"),
    ("c.test", "GET", "/noindex/"),
    ("c.test", "GET", "/virtual/"),
    # try_files with $uri/ and a fallback.
    ("c.test", "GET", "/spa/app.js"),
    ("c.test", "GET", "/spa/route/deep"),
    ("c.test", "GET", "/spa/sub"),
    ("c.test", "GET", "/spa/sub/"),
    ("c.test", "GET", "/spa/%73ub"),
    ("c.test", "GET", "/spa/bare"),
    ("c.test", "GET", "/spa/bare/"),
    ("c.test", "GET", "/spa/"),
    # Header fields on 2xx, 3xx and 4xx; error pages from an internal location.
    ("c.test", "GET", "/h/file.txt"),
    ("c.test", "HEAD", "/h/file.txt"),
    ("c.test", "GET", "/h/file.txt", RANGE),
    ("c.test", "GET", "/h/file.txt", SINCE),
    ("c.test", "GET", "/h/file.txt", NOT_MATCHED),
    ("c.test", "GET", "/h/file.txt", CHANGED_SINCE),
    ("c.test", "GET", "/h/file.txt", UNCHANGED_SINCE),
    ("c.test", "HEAD", "/h/file.txt", NOT_MATCHED),
    ("c.test", "GET", "/h/dir"),
    ("c.test", "GET", "/h/dir/"),
    ("c.test", "GET", "/h/missing"),
    ("c.test", "GET", "/hd/x.txt"),
    ("c.test", "GET", "/h201"),
    ("c.test", "GET", "/h204"),
    ("c.test", "GET", "/h302"),
    ("c.test", "GET", "/h303"),
    ("c.test", "GET", "/h307"),
    ("c.test", "GET", "/h308"),
    ("c.test", "GET", "/h404"),
    ("c.test", "GET", "/h410"),
    ("c.test", "GET", "/errors/404.html"),
    ("c.test", "GET", "/cached/file.txt"),
    ("c.test", "GET", "/cached/dir"),
    ("c.test", "GET", "/cached/missing"),
    # return with variables.
    ("c.test", "GET", "/vars/x"),
    ("c.test", "GET", "/vars/x?a=1&b=2"),
    ("C.TEST:8080", "GET", "/vars/x?"),
    ("c.test", "GET", "/vars/a%20b?q=%20"),
    ("c.test", "GET", "/vars/../vars/y"),
    ("c.test", "GET", "/vars/%E2%82%AC?x=%E2"),
    ("c.test", "GET", "/vars/a+b?c+d"),
    ("c.test", "GET", "/secure/page?x=1"),
    ("c.test", "GET", "/keep/p?x=1"),
    ("c.test", "GET", "/keep/p"),
    ("c.test", "GET", "/keep/a%20b"),
    ("c.test", "GET", "/keep/a%3Fb"),
    # allow and deny (the client is 127.0.0.1); methods.
    ("c.test", "GET", "/lan/x.txt"),
    ("c.test", "GET", "/local/x.txt"),
    ("c.test", "GET", "/notme/x.txt"),
    ("c.test", "GET", "/mixed/x.txt"),
    ("c.test", "GET", "/other/x.txt"),
    ("c.test", "GET", "/lanret/x"),
    ("c.test", "GET", "/ro/file.txt"),
    ("c.test", "HEAD", "/ro/file.txt"),
    ("c.test", "POST", "/ro/file.txt"),
    ("c.test", "DELETE", "/ro/file.txt"),
    # alias, ^~ and regex order.
    ("c.test", "GET", "/pics/cat.txt"),
    ("c.test", "GET", "/pics/kittens"),
    ("c.test", "GET", "/pics/kittens/"),
    ("c.test", "GET", "/pics/kittens?x=1"),
    ("c.test", "GET", "/pics"),
    ("c.test", "GET", "/pics/%2e%2e/index.html"),
    ("c.test", "GET", "/order/x"),
    ("c.test", "GET", "/ORDER/X"),
    ("c.test", "GET", "/order/x.html"),
    ("c.test", "GET", "/deep/x.html"),
    ("c.test", "GET", "/deep/er/x.html"),
]


@pytest.fixture
def nginx_and_tern(tmp_path, tern_factory):
    a, b, c = make_tree(tmp_path / "sites")
    port = free_port()
    ngx = tmp_path / "nginx"
    ngx.mkdir()
    conf = ngx / "nginx.conf"
    conf.write_text(nginx_conf(ngx, port, a, b, c))
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
    srv = tern_factory(tern_sites(a, b, c), name="tern")
    yield port, srv
    proc.terminate()
    proc.wait(timeout=10)


def fetch(port, host, method, target, fields=()):
    with HttpConn.open(port) as conn:
        return conn.request(build_request(method, target, [("Host", host), *fields]), method)


def own_page(resp):
    """True for a page nginx builds itself (an error page, a redirect's)."""
    return b"<hr><center>nginx" in resp.body


def field(resp, name):
    values = resp.header_all(name)
    return ", ".join(values) if values else None


def compare(got, want):
    """What differs between tern's answer (got) and nginx's (want)."""
    out = []
    if got.status != want.status:
        return [f"status {got.status}, nginx {want.status}"]
    if 300 <= want.status < 400 and got.header("Location") != want.header("Location"):
        out.append(f"Location {got.header('Location')!r}, nginx {want.header('Location')!r}")
    for name in FIELDS:
        if field(got, name) != field(want, name):
            out.append(f"{name} {field(got, name)!r}, nginx {field(want, name)!r}")
    if want.header("Last-Modified") is not None and want.status != 304:  # a file
        got_type, want_type = got.header("Content-Type"), want.header("Content-Type")
        if got_type != want_type:
            out.append(f"Content-Type {got_type!r}, nginx {want_type!r}")
    if not own_page(want) and not 300 <= want.status < 400:
        if sha256(got.body) != sha256(want.body):
            out.append(f"body {got.body[:80]!r}, nginx {want.body[:80]!r}")
    return out


def differs(resp, status, fields):
    """None if resp has that status and those fields, else what it has."""
    seen = {name: resp.header(name) for name in fields}
    return None if (resp.status, seen) == (status, fields) else f"{resp.status} {seen}"


def test_tern_answers_as_nginx_does(nginx_and_tern):
    nginx_port, srv = nginx_and_tern
    assert len(REQUESTS) >= 100
    differences = []
    for host, method, target, *more in REQUESTS:
        fields = more[0] if more else ()
        got = fetch(srv.port, host, method, target, fields)
        want = fetch(nginx_port, host, method, target, fields)
        row = f"{method} {host} {target}"
        if (host, method, target) in INTENDED:
            answers = zip(("tern", "nginx"), (got, want), INTENDED[host, method, target])
            for who, resp, (status, expected) in answers:
                if (seen := differs(resp, status, expected)) is not None:
                    differences.append(f"{row}: {who} {seen}, intended {status} {expected}")
            continue
        differences += [f"{row}: {d}" for d in compare(got, want)]
    assert not differences, "\n".join(differences)

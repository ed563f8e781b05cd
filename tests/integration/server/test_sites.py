"""Sites ([[server]]) and locations ([[server.location]]) over real HTTP:
which site a Host reaches, which location a path falls in, and what each
location setting does to the answer."""

import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import TERN_BIN
from php_site import install_scripts
from test_load import raise_fd_limit
from tern_server import free_port, scaled, to_toml


def host(name):
    return [("Host", name)]


def make_sites(tmp_path, srv_root):
    """Two sites: shop.test (its own root) and the default, in srv_root."""
    shop = tmp_path / "shop"
    (shop / "assets").mkdir(parents=True)
    (shop / "index.html").write_text("shop home\n")
    (shop / "assets" / "app.js").write_text("console.log('shop')\n")
    (srv_root / "index.html").write_text("main home\n")
    (srv_root / "about.html").write_text("about main\n")
    return {"server": [
        {"names": ["main.test", "www.main.test"], "default": True,
         "location": [{"prefix": "/"}]},
        {"names": ["shop.test", "*.shop.test"], "root": str(shop),
         "location": [{"prefix": "/"},
                      {"prefix": "/assets/", "expires": "365d"}]},
    ]}


def test_host_selects_the_site(tern_factory, tmp_path):
    srv = tern_factory()
    srv.write_config(make_sites(tmp_path, srv.root))
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded")
    rows = [
        ("shop.test", b"shop home\n"),
        ("SHOP.Test", b"shop home\n"),        # case
        ("shop.test:8080", b"shop home\n"),   # port
        ("shop.test.", b"shop home\n"),       # trailing dot
        ("eu.shop.test", b"shop home\n"),     # wildcard
        ("main.test", b"main home\n"),
        ("unknown.test", b"main home\n"),     # the default site
        ("[::1]:8080", b"main home\n"),       # an IPv6 literal nobody names
    ]
    for name, body in rows:
        resp = srv.get("/", headers=host(name))
        assert resp.status == 200 and resp.body == body, (name, resp)
    # HTTP/1.0 without Host: the default site.
    resp = srv.get("/", version="HTTP/1.0")
    assert resp.status == 200 and resp.body == b"main home\n"
    # Per-location settings belong to their site.
    resp = srv.get("/assets/app.js", headers=host("shop.test"))
    assert resp.status == 200 and resp.header("Cache-Control") == "max-age=31536000"
    assert srv.get("/assets/app.js", headers=host("main.test")).status == 404


@pytest.fixture
def site(tern_factory, tmp_path):
    """One site with a location for every setting, and the files they serve."""
    root = tmp_path / "root"
    pics = tmp_path / "pictures"
    for d in (root / "app" / "static", root / "docs", root / "old", root / "private", pics,
              root / "conf", root / "errors"):
        d.mkdir(parents=True)
    (root / "index.html").write_text("home\n")
    (root / "app" / "index.html").write_text("spa shell\n")
    (root / "app" / "static" / "main.css").write_text("body{}\n")
    (root / "docs" / "index.html").write_text("docs index\n")
    (root / "docs" / "a.txt").write_text("doc a\n")
    (root / "private" / "secret.txt").write_text("secret\n")
    (root / "conf" / "local.php").write_text("<?php $password = 'x';\n")
    (root / "errors" / "gone.html").write_text("it is gone\n")
    (pics / "cat.png").write_bytes(b"\x89PNG cat")
    (root / "plain").mkdir()
    (root / "files" / "sub").mkdir(parents=True)
    (root / "files" / "report.txt").write_text("12345")
    (root / "files" / "<img src=x onerror=alert(1)>").write_text("x")
    (root / "errors" / "404.html").write_text("custom not found\n")
    (root / "errors" / "403.html").write_text("custom forbidden\n")
    (root / "errors" / "docs404.html").write_text("no such document\n")
    config = {"server": [{"root": str(root),
                          "error_page": {"404": "/errors/404.html", "403": "/errors/403.html",
                                         "405": "/errors/403.html", "410": "/errors/missing.html"},
                          "location": [
        {"prefix": "/"},
        {"prefix": "/app/", "try_files": ["$uri", "$uri/", "/app/index.html"]},
        {"prefix": "/strict/", "try_files": ["$uri", "=404"]},
        {"prefix": "/docs/", "headers": {"X-Frame-Options": "DENY"},
         "headers_always": {"X-Served-By": "docs"}, "error_page": {"404": "/errors/docs404.html"}},
        {"prefix": "/img/", "alias": str(pics)},
        {"exact": "/old", "return": {"status": 301, "url": "$scheme://$host/new$is_args$args"}},
        {"prefix": "/old/", "return": {"status": 308, "url": "/docs/$1"}},
        {"regex": r"^/old/(.*)$", "return": {"status": 302, "url": "/docs/$1"}},
        {"exact": "/health", "return": {"status": 200, "body": "ok $uri\n"}},
        {"exact": "/gone", "return": 410},
        {"prefix": "/private/", "deny": True},
        {"prefix": "/lan/", "allow": ["10.0.0.0/8"]},
        {"prefix": "/local/", "allow": ["127.0.0.0/8"], "deny": ["127.0.0.2"],
         "return": {"status": 200, "body": "local\n"}},
        {"prefix": "/ro/", "methods": ["GET"], "return": {"status": 200, "body": "read only\n"}},
        {"regex": "^/(conf|bin|inc)/", "deny": True},
        {"prefix": "/errors/", "internal": True, "headers_always": {"X-Page-From": "errors"}},
        {"prefix": "/fallback/", "try_files": ["$uri", "/errors/gone.html"]},
        {"prefix": "/files/", "autoindex": True},
    ]}]}
    return tern_factory(config, name="site"), root


def test_try_files_serves_a_single_page_app(site):
    srv, _ = site
    assert srv.get("/app/static/main.css").body == b"body{}\n"  # a file that exists
    for path in ("/app/", "/app/settings", "/app/users/42/edit"):
        resp = srv.get(path)
        assert resp.status == 200 and resp.body == b"spa shell\n", (path, resp)
    assert srv.get("/strict/nothing").status == 404  # "=404" as the last entry


def test_autoindex_lists_a_directory_without_an_index(site):
    srv, _ = site
    resp = srv.get("/files/")
    assert resp.status == 200 and resp.header("Content-Type") == "text/html; charset=utf-8"
    body = resp.body.decode()
    assert '<a href="sub/">sub/</a>' in body and '<a href="report.txt">report.txt</a>' in body
    assert body.index("sub/") < body.index("report.txt")  # directories first
    assert "<img" not in body and "&lt;img src=x onerror=alert(1)&gt;" in body
    assert srv.get("/files/", method="HEAD").body == b""
    moved = srv.get("/files/sub")
    assert moved.status == 301 and moved.header("Location") == "/files/sub/"
    assert srv.get("/files/sub/").status == 200
    # Elsewhere a directory without an index stays forbidden.
    assert srv.get("/plain/").status == 403


def test_error_page_answers_with_a_file_of_the_site(site):
    srv, _ = site
    resp = srv.get("/nothing/here")
    assert resp.status == 404 and resp.body == b"custom not found\n"
    assert resp.header("Content-Type") == "text/html; charset=utf-8"
    assert srv.get("/nothing/here", method="HEAD").body == b""
    resp = srv.get("/private/secret.txt")
    assert resp.status == 403 and resp.body == b"custom forbidden\n"
    resp = srv.get("/ro/x", method="DELETE")  # a 405 keeps its Allow
    assert resp.status == 405 and resp.header("Allow") == "GET, HEAD" and resp.body == b"custom forbidden\n"
    # A location's own pages replace the site's.
    resp = srv.get("/docs/none.txt")
    assert resp.status == 404 and resp.body == b"no such document\n"
    # The page is an internal redirect: its own location's fields, not the failed one's.
    assert resp.header("X-Served-By") is None
    assert resp.header("X-Page-From") == "errors"
    # A page that does not exist: the built-in one.
    resp = srv.get("/gone")
    assert resp.status == 410 and b"410 Gone" in resp.body


def test_error_page_for_an_application_that_is_down(tern_factory, tmp_path):
    srv = tern_factory({"server": [{"error_page": {"502": "/50x.html"}, "location": [
        {"prefix": "/"},
        {"regex": r"\.php$", "fastcgi": {"pass": "127.0.0.1:1", "connect_timeout": "1s"}},
    ]}]}, name="down")
    srv.write_file("50x.html", "be right back\n")
    srv.write_file("index.php", "<?php echo 1;")
    resp = srv.get("/index.php")
    assert resp.status == 502 and resp.body == b"be right back\n"


def test_internal_locations_answer_only_internal_redirects(site):
    srv, _ = site
    assert srv.get("/errors/gone.html").status == 404  # not for clients
    resp = srv.get("/fallback/missing")
    assert resp.status == 200 and resp.body == b"it is gone\n"


def test_return_redirects_and_bodies(site):
    srv, _ = site
    resp = srv.get("/old?x=1", headers=host("Main.Test:80"))
    assert resp.status == 301 and resp.header("Location") == "http://main.test/new?x=1"
    resp = srv.get("/old/page.html")
    assert resp.status == 302 and resp.header("Location") == "/docs/page.html"  # regex beats prefix
    resp = srv.get("/health")
    assert resp.status == 200 and resp.body == b"ok /health\n"
    resp = srv.get("/health", method="HEAD")
    assert resp.status == 200 and resp.body == b""
    assert srv.get("/gone").status == 410


def test_headers_on_success_or_always(site):
    srv, _ = site
    ok = srv.get("/docs/a.txt")
    assert ok.status == 200
    assert ok.header("X-Frame-Options") == "DENY" and ok.header("X-Served-By") == "docs"
    missing = srv.get("/docs/none.txt")
    assert missing.status == 404
    assert missing.header("X-Frame-Options") is None  # 2xx and 3xx only
    # Its error page comes from /errors/, whose headers_always apply (every status), not /docs/'s.
    assert missing.header("X-Served-By") is None
    assert missing.header_all("X-Page-From") == ["errors"]
    denied = srv.get("/private/secret.txt")  # an error page of the site, for a location without fields
    assert denied.status == 403 and denied.header_all("X-Page-From") == ["errors"]
    # Without an error page (/docs/ has one for 404 only), the location's own error has its fields.
    refused = srv.get("/docs/a.txt", method="DELETE")
    assert refused.status == 405 and refused.header("X-Served-By") == "docs"
    assert refused.header("X-Page-From") is None
    # A 304 is a success too; a directory's 301 as well.
    etag = ok.header("ETag")
    assert srv.get("/docs/a.txt", headers=[("If-None-Match", etag)]).header("X-Frame-Options") == "DENY"
    moved = srv.get("/docs")  # location "/": a directory without its slash
    assert moved.status == 301 and moved.header("Location") == "/docs/"
    assert moved.header("X-Frame-Options") is None
    assert srv.get("/").header("X-Frame-Options") is None  # other locations get none


def test_alias_replaces_the_prefix(site):
    srv, _ = site
    resp = srv.get("/img/cat.png")
    assert resp.status == 200 and resp.body == b"\x89PNG cat"
    assert srv.get("/img/../private/secret.txt").status == 403  # normalised first
    assert srv.get("/img/missing.png").status == 404


def test_allow_and_deny(site):
    srv, _ = site
    assert srv.get("/private/secret.txt").status == 403
    assert srv.get("/lan/x").status == 403  # 127.0.0.1 is not in 10.0.0.0/8
    assert srv.get("/local/x").body == b"local\n"
    with srv.connect(source="127.0.0.2") as conn:
        assert conn.get("/local/x").status == 403  # denied inside the allowed network


def test_a_deny_regex_keeps_configuration_files_unreachable(site):
    """DokuWiki's conf/, data/ and inc/ must never be served or run."""
    srv, _ = site
    resp = srv.get("/conf/local.php")
    assert resp.status == 403 and b"password" not in resp.body


def test_methods(site):
    srv, _ = site
    assert srv.get("/ro/x").status == 200
    assert srv.get("/ro/x", method="HEAD").status == 200  # GET admits HEAD
    resp = srv.get("/ro/x", method="DELETE")
    assert resp.status == 405 and resp.header("Allow") == "GET, HEAD"


def test_a_body_sent_to_a_location_answered_from_the_head_is_dropped(site):
    srv, _ = site
    with srv.connect() as conn:
        resp = conn.request(b"POST /health HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        assert resp.status == 200 and resp.body == b"ok /health\n"
        assert conn.get("/docs/a.txt").body == b"doc a\n"  # the connection goes on


def test_php_runs_only_where_a_location_says(tern_factory, fpm, tmp_path):
    srv = tern_factory({"server": [{"location": [
        {"prefix": "/"},
        {"regex": "^/(conf|inc)/", "deny": True},
        {"regex": r"\.php(/|$)", "fastcgi": {"pass": fpm.pass_address, "pool": 2}},
        {"prefix": "/uploads/", "skip_regex": True},
    ]}]}, name="php")
    install_scripts(srv.root)
    srv.write_file("conf/local.php", "<?php echo 'config';")
    srv.write_file("uploads/evil.php", "<?php echo 'ran';")
    resp = srv.get("/hello.php")
    assert resp.status == 200 and resp.body == b"hello\n"
    assert srv.get("/conf/local.php").status == 403
    # skip_regex: the uploads are files, never scripts.
    resp = srv.get("/uploads/evil.php")
    assert resp.status == 200 and resp.body == b"<?php echo 'ran';"
    assert srv.get("/missing.php").status == 404


@pytest.mark.parametrize("text, key", [
    ('[[server]]\nnames = ["a b"]\n', "server[0].names"),
    ('[[server]]\n[[server.location]]\nprefix = "no-slash"\n', "server[0].location[0].prefix"),
    ('[[server]]\n[[server.location]]\nregex = "(open"\n', "server[0].location[0].regex"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nexact = "/"\n', "server[0].location[0].prefix"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nreturn = { status = 301 }\n', "return.url"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nreturn = { status = 200, body = "$nope" }\n',
     "server[0].location[0].return"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\ntry_files = ["$uri"]\n',
     "server[0].location[0].try_files"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nheaders = { "Bad Name" = "x" }\n',
     "server[0].location[0].headers.Bad Name"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nallow = ["10.0.0.1/8"]\n',
     "server[0].location[0].allow"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nunknown = 1\n', "server[0].location[0].unknown"),
    ('[[server]]\ndefault = true\n[[server]]\ndefault = true\n', "server[1].default"),
    ('[[server]]\nheaders_remove = ["Content-Length"]\n', "server[0].headers_remove"),
    ('[[server]]\nerror_page = { 404 = "=99 /x.html" }\n', "server[0].error_page.404"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\ntry_files = ["$uri", "@nowhere"]\n', "server[0].location.try_files"),
    ('[[server]]\n[[server.location]]\nnamed = "app"\n', "server[0].location[0].named"),
    ('[[server]]\n[[server.location]]\nregex = "^/(a)$"\nalias = "/srv/$nope"\n', "server[0].location[0].alias"),
    ('[[server]]\n[[server.location]]\nexact = "/a"\nalias = "/srv/a"\n', "server[0].location[0].alias"),
    ('[[server]]\nerror_page = { 404 = "=200 https://example.com/" }\n', "server[0].error_page.404"),
    ('[[server]]\nerror_page = { 404 = "ftp://example.com/" }\n', "server[0].error_page.404"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\naccess = ["permit 10.0.0.0/8"]\n', "server[0].location[0].access"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\naccess = ["deny all"]\nallow = ["10.0.0.0/8"]\n',
     "server[0].location[0].access"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nheaders = { Transfer-Encoding = "x" }\n',
     "server[0].location[0].headers.Transfer-Encoding"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "http://127.0.0.1:9", remove_headers = ["host"] }\n',
     "server[0].location[0].proxy.remove_headers"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "http://127.0.0.1:9", set_headers = { Content-Length = "1" } }\n',
     "server[0].location[0].proxy.set_headers.Content-Length"),
    ('[[server]]\nerror_page = { 99 = "/x.html" }\n', "server[0].error_page.99"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nerror_page = { 404 = "x.html" }\n',
     "server[0].location[0].error_page.404"),
    ('[[server]]\n[[server.location]]\nprefix = "/"\nautoindex = "yes"\n', "server[0].location[0].autoindex"),
    ('[[fastcgi]]\nmatch = "x"\npass = "127.0.0.1:9000"\n[[server]]\n', "fastcgi"),
])
def test_bad_site_config_fails_check_naming_the_key(tmp_path, text, key):
    path = tmp_path / "tern.toml"
    path.write_text(f'[static]\nroot = "{tmp_path}"\n' + text)
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and key in lines[0], proc.stderr


def test_sighup_applies_new_sites_and_locations(tern_factory, tmp_path):
    srv = tern_factory()
    srv.write_file("a.txt", "a\n")
    assert srv.get("/a.txt").status == 200
    srv.write_config({"server": [{"location": [
        {"prefix": "/"}, {"exact": "/a.txt", "return": {"status": 200, "body": "replaced\n"}}]}]})
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded")
    assert srv.get("/a.txt").body == b"replaced\n"
    # A file with an error keeps the running configuration.
    srv.config_path.write_text(srv.config_path.read_text() + '\n[[server.location]]\nregex = "("\n')
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("keeping the running configuration")
    assert srv.get("/a.txt").body == b"replaced\n"


def generation_config(generation):
    """A config whose answers differ by generation only in a header (so that
    ab's length check holds across reloads)."""
    return {"workers": 2, "server": [{"location": [
        {"prefix": "/", "headers": {"X-Generation": f"g{generation % 10}"}},
        {"exact": "/hello", "return": {"status": 200, "body": "hello"},
         "headers": {"X-Generation": f"g{generation % 10}"}},
    ]}]}


def test_twenty_reloads_under_load_lose_no_request(tern_factory):
    if shutil.which("ab") is None or shutil.which("wrk") is None:
        pytest.skip("ab and wrk are installed by scripts/test")
    assert raise_fd_limit(512) > 300
    srv = tern_factory(generation_config(0))
    srv.write_file("page.html", "<p>" + "x" * 500 + "</p>\n")
    seconds = scaled(10, 4)
    wrk = subprocess.Popen(["wrk", "-t1", "-c50", f"-d{seconds}s", srv.url("/page.html")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ab = subprocess.Popen(["ab", "-q", "-t", str(seconds), "-n", "10000000", "-c", "200", "-s", "30",
                           srv.url("/hello")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    for generation in range(1, 21):
        srv.write_config(generation_config(generation))
        srv.signal(signal.SIGHUP)
        assert srv.wait_for_log("configuration reloaded", generation), srv.stderr()[-2000:]
        time.sleep((seconds - 2) / 20)
    wrk_out, _ = wrk.communicate(timeout=seconds + 60)
    ab_out, _ = ab.communicate(timeout=seconds + 60)
    assert wrk.returncode == 0, wrk_out
    assert "Socket errors" not in wrk_out and "Non-2xx" not in wrk_out, wrk_out
    requests = int(re.search(r"(\d+) requests in", wrk_out).group(1))
    assert requests > 1000, wrk_out
    assert ab.returncode == 0, ab_out
    assert re.search(r"^Failed requests:\s+0$", ab_out, re.M), ab_out
    assert "Non-2xx responses" not in ab_out, ab_out
    assert int(re.search(r"^Complete requests:\s+(\d+)$", ab_out, re.M).group(1)) > 1000, ab_out
    assert srv.get("/hello").header("X-Generation") == "g0"  # the 20th: 20 % 10


def test_sites_listen_on_their_own_addresses(tern_factory, tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for d, text in ((one, "site one\n"), (two, "site two\n")):
        d.mkdir()
        (d / "index.html").write_text(text)
    other = free_port()
    srv = tern_factory(name="ports")
    main = srv.port
    srv.write_config({"server": [
        {"names": ["same.test"], "root": str(one)},                       # the top-level listen
        {"names": ["same.test"], "root": str(two), "listen": [f"127.0.0.1:{other}"]},
        {"names": ["default.test"], "root": str(two), "listen": [f"127.0.0.1:{other}"], "default": True},
    ]})
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded"), srv.stderr()
    assert srv.get("/", headers=host("same.test")).body == b"site one\n"
    srv.port = other
    assert srv.get("/", headers=host("same.test")).body == b"site two\n"
    assert srv.get("/", headers=host("nobody.test")).body == b"site two\n"  # that address's default
    srv.port = main
    assert srv.get("/", headers=host("nobody.test")).body == b"site one\n"  # the only site here


def test_sighup_opens_and_closes_listening_addresses(tern_factory):
    srv = tern_factory(name="listeners")
    srv.write_file("a.txt", "a\n")
    first, second = srv.port, free_port()
    kept = srv.connect()
    assert kept.get("/a.txt").status == 200
    cfg = srv.config_dict()
    cfg["listen"] = [f"127.0.0.1:{first}", f"127.0.0.1:{second}"]
    srv.config_path.write_text(to_toml(cfg))
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded")
    srv.port = second
    assert srv.get("/a.txt").status == 200
    cfg["listen"] = [f"127.0.0.1:{second}"]
    srv.config_path.write_text(to_toml(cfg))
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded", 2)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", first), timeout=5).close()
    assert kept.get("/a.txt").status == 200  # an open connection stays
    kept.close()
    # An address that cannot be bound keeps the running configuration.
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        cfg["listen"] = [f"127.0.0.1:{second}", f"127.0.0.1:{blocker.getsockname()[1]}"]
        cfg["static"]["deny_dotfiles"] = False
        srv.config_path.write_text(to_toml(cfg))
        srv.signal(signal.SIGHUP)
        assert srv.wait_for_log("cannot listen")
    assert srv.get("/a.txt").status == 200
    srv.write_file(".hidden", "h")
    assert srv.get("/.hidden").status == 403  # nothing of that file was applied


def test_an_applications_x_accel_redirect_serves_an_internal_location(tern_factory, fpm, tmp_path):
    files = tmp_path / "protected"
    files.mkdir()
    (files / "report.pdf").write_bytes(b"%PDF " + b"x" * 5000)
    srv = tern_factory({"server": [{"location": [
        {"prefix": "/"},
        {"prefix": "/protected/", "internal": True, "alias": str(files)},
        {"regex": r"\.php$", "fastcgi": {"pass": fpm.pass_address, "pool": 2}},
    ]}]}, name="accel")
    srv.write_file("download.php", """<?php
header('X-Accel-Redirect: ' . ($_GET['to'] ?? '/protected/report.pdf'));
header('Content-Disposition: attachment; filename="report.pdf"');
header('Content-Type: text/plain');
echo 'this body is not sent';
""")
    srv.write_file(".env", "SECRET=1")
    resp = srv.get("/download.php")
    assert resp.status == 200 and resp.body == b"%PDF " + b"x" * 5000
    assert resp.header("Content-Disposition") == 'attachment; filename="report.pdf"'
    assert resp.header("Content-Type") == "application/pdf"  # the file's, as nginx
    assert srv.get("/protected/report.pdf").status == 404   # not for clients
    ranged = srv.get("/download.php", headers=[("Range", "bytes=0-3")])
    assert ranged.status == 206 and ranged.body == b"%PDF"  # downloads resume
    with srv.connect() as conn:
        posted = conn.request(b"POST /download.php HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
        assert posted.status == 200 and posted.body.startswith(b"%PDF")  # answered as a GET
        assert conn.get("/protected/report.pdf").status == 404  # and the connection goes on
    assert srv.get("/download.php?to=/protected/none.pdf").status == 404
    assert srv.get("/download.php?to=/.env").status == 404  # dotfiles stay refused
    assert b"SECRET" not in srv.get("/download.php?to=/%2e%65nv").body


def test_body_bytes_per_location(tern_factory, fpm):
    srv = tern_factory({"limits": {"body_bytes": "64KiB"}, "server": [{"location": [
        {"prefix": "/"},
        {"exact": "/upload.php", "body_bytes": "1MiB", "fastcgi": {"pass": fpm.pass_address, "pool": 2}},
        {"regex": r"\.php$", "fastcgi": {"pass": fpm.pass_address, "pool": 2}},
        {"prefix": "/tiny/", "body_bytes": "10", "return": {"status": 200, "body": "ok"}},
    ]}]}, name="limits")
    install_scripts(srv.root)
    body = b"u" * (200 * 1024)

    def post(path, data, chunked=False):
        with srv.connect() as conn:
            if chunked:
                head = f"POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
                return conn.request(head + b"%x\r\n" % len(data) + data + b"\r\n0\r\n\r\n")
            head = f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            return conn.request(head + data)

    resp = post("/upload.php", body)
    assert resp.status == 200 and b'"length":204800' in resp.body.replace(b" ", b"")
    assert post("/upload.php", body, chunked=True).status == 200
    assert post("/echo.php", body).status == 413               # the global limit
    assert post("/echo.php", body, chunked=True).status == 413
    assert post("/tiny/x", b"x" * 100).status == 413           # a lower one
    assert post("/tiny/x", b"x" * 5).status == 200
    assert post("/upload.php", b"u" * (2 * 1024 * 1024)).status == 413


def test_sighup_applies_new_fastcgi_blocks_and_lets_requests_in_flight_finish(tern_factory, fpm):
    srv = tern_factory({"server": [{"location": [{"prefix": "/"}]}]}, name="php-reload")
    install_scripts(srv.root)
    resp = srv.get("/hello.php")
    assert resp.status == 200 and b"<?php" in resp.body  # no PHP yet: the file itself

    def php_config(pool):
        return {"server": [{"location": [
            {"prefix": "/"},
            {"regex": r"\.php$", "fastcgi": {"pass": fpm.pass_address, "pool": pool}},
        ]}]}

    srv.write_config(php_config(2))
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded")
    assert srv.get("/hello.php").body == b"hello\n"
    # A slow request under the running blocks; the blocks change meanwhile.
    slow = srv.connect()
    slow.send(b"GET /sleep.php?s=1.5 HTTP/1.1\r\nHost: t\r\n\r\n")
    time.sleep(0.3)
    srv.write_config(php_config(3))
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("configuration reloaded", 2)
    assert srv.get("/hello.php").body == b"hello\n"  # the new pool
    resp = slow.read_response("GET")
    assert resp.status == 200, resp                 # the old one finished its request
    slow.close()
    assert "not applied until a restart" not in srv.stderr()
    # Once no request uses them, the replaced blocks' pools are closed.
    assert srv.wait_for_log("pools of replaced blocks are closed", timeout=15), srv.stderr()[-2000:]
    assert srv.get("/hello.php").body == b"hello\n"


# ---- Absolute-form targets ----

def test_an_absolute_form_target_chooses_the_site_by_its_authority(tern_factory, tmp_path):
    """`GET http://admin.example/...` is admin.example's request whatever
    the Host field says (RFC 9112 3.2.2): it gets that site's answer."""
    public = tmp_path / "public"
    public.mkdir()
    (public / "secret").write_text("public page\n")
    srv = tern_factory({"server": [
        {"names": ["public.example"], "default": True, "root": str(public), "location": [{"prefix": "/"}]},
        {"names": ["admin.example"], "root": str(public), "location": [{"prefix": "/", "deny": True}]},
    ]}, name="absolute")
    for target in ("http://admin.example/secret", "http://ADMIN.example:8080/secret", "http://admin.example"):
        with srv.connect() as conn:
            resp = conn.request(f"GET {target} HTTP/1.1\r\nHost: public.example\r\n\r\n")
        assert resp.status == 403 and b"public page" not in resp.body, (target, resp)
    with srv.connect() as conn:
        resp = conn.request(b"GET http://public.example/secret HTTP/1.1\r\nHost: admin.example\r\n\r\n")
    assert resp.status == 200 and resp.body == b"public page\n"
    assert srv.get("/secret", headers=host("admin.example")).status == 403  # origin-form: the Host field


def test_an_absolute_form_target_is_its_origin_form_in_variables(tern_factory):
    """$host is the target's authority, $request_uri and $uri its path (and
    query) in origin form, as nginx."""
    srv = tern_factory({"server": [
        {"names": ["other.example"], "default": True, "location": [{"prefix": "/"}]},
        {"names": ["a.example.test"], "location": [
            {"prefix": "/", "return": {"status": 301, "url": "https://$host$request_uri"}},
            {"exact": "/vars", "return": {"status": 200, "body": "$host $uri $request_uri\n"}},
        ]},
    ]}, name="absolute-vars")
    with srv.connect() as conn:
        for field in (b"a.example.test", b"other.example"):
            resp = conn.request(b"GET http://a.example.test/old?x=1 HTTP/1.1\r\nHost: %s\r\n\r\n" % field)
            assert resp.status == 301 and resp.header("Location") == "https://a.example.test/old?x=1", resp
        resp = conn.request(b"GET http://a.example.test/vars?y=2 HTTP/1.1\r\nHost: other.example\r\n\r\n")
        assert resp.status == 200 and resp.body == b"a.example.test /vars /vars?y=2\n"
        resp = conn.request(b"GET http://a.example.test?z=3 HTTP/1.1\r\nHost: other.example\r\n\r\n")
        assert resp.status == 301 and resp.header("Location") == "https://a.example.test/?z=3"


# ---- A directory's index and try_files' "$uri/" ----

DOKU = ("<?php echo 'ran ', $_SERVER['SCRIPT_NAME'], ' PATH_INFO=[', $_SERVER['PATH_INFO'] ?? '', '] id=', "
        "$_GET['id'] ?? '', ' REQUEST_URI=', $_SERVER['REQUEST_URI'], \"\\n\";\n")


@pytest.fixture
def wiki(tern_factory, fpm):
    """README's PHP site: index doku.php, a bare "/" location and FastCGI
    only in a regex location; doku.php at the root and in /dokuwiki/."""
    srv = tern_factory({"server": [{"names": ["wiki.example.org"], "index": ["doku.php"], "location": [
        {"prefix": "/"},
        {"regex": "^/(conf|data|bin|inc|vendor)/", "deny": True},
        {"regex": r"\.php(/|$)", "fastcgi": {"pass": fpm.pass_address, "pool": 2}},
    ]}]}, name="wiki")
    srv.write_file("doku.php", DOKU)
    srv.write_file("dokuwiki/doku.php", DOKU)
    return srv


def test_a_directorys_index_script_is_run_by_the_php_location(wiki):
    """The index is an internal redirect, matched against the locations
    again: /dokuwiki/ runs /dokuwiki/doku.php, never sends its source."""
    resp = wiki.get("/dokuwiki/?id=start")
    assert resp.status == 200, resp
    assert resp.body == b"ran /dokuwiki/doku.php PATH_INFO=[] id=start REQUEST_URI=/dokuwiki/?id=start\n"
    resp = wiki.get("/")
    assert resp.status == 200 and resp.body == b"ran /doku.php PATH_INFO=[] id= REQUEST_URI=/\n"
    resp = wiki.get("/dokuwiki/", method="HEAD")
    assert resp.status == 200 and resp.body == b""
    resp = wiki.get("/dokuwiki")  # the directory without its slash
    assert resp.status == 301 and resp.header("Location") == "/dokuwiki/"


def test_a_script_path_ending_in_a_slash_runs_with_path_info_slash(wiki):
    resp = wiki.get("/doku.php/")
    assert resp.status == 200 and resp.body == b"ran /doku.php PATH_INFO=[/] id= REQUEST_URI=/doku.php/\n"
    resp = wiki.get("/dokuwiki/doku.php/wiki:page/")
    assert resp.status == 200, resp
    assert resp.body == (b"ran /dokuwiki/doku.php PATH_INFO=[/wiki:page/] id= "
                         b"REQUEST_URI=/dokuwiki/doku.php/wiki:page/\n")


def test_a_directorys_index_file_gets_the_fields_of_its_own_location(tern_factory):
    """GET / is served by `location = /index.html` and /dir/ by a regex
    location for \\.html$, with their headers."""
    srv = tern_factory({"server": [{"location": [
        {"prefix": "/"},
        {"exact": "/index.html", "headers": {"X-From": "exact index"}},
        {"regex": r"\.html$", "headers": {"X-From": "html regex"}},
    ]}]}, name="index-fields")
    srv.write_file("index.html", "home\n")
    srv.write_file("dir/index.html", "dir home\n")
    srv.write_file("dir/a.txt", "a\n")
    resp = srv.get("/")
    assert resp.status == 200 and resp.body == b"home\n"
    assert resp.header_all("X-From") == ["exact index"]
    resp = srv.get("/dir/")
    assert resp.status == 200 and resp.body == b"dir home\n"
    assert resp.header_all("X-From") == ["html regex"]
    assert srv.get("/dir/a.txt").header("X-From") is None


def test_try_files_redirects_a_directory_named_without_its_slash(tern_factory):
    """try_files' "$uri/" finds a directory: without its slash it is 301 to
    the slash (query kept), with it the directory's index is served."""
    srv = tern_factory({"server": [{"location": [
        {"prefix": "/", "try_files": ["$uri", "$uri/", "=404"]},
    ]}]}, name="try-dir")
    srv.write_file("docs/index.html", "docs index\n")
    srv.write_file("docs/a.txt", "a\n")
    (srv.root / "empty").mkdir()
    for path, location in (("/docs", "/docs/"), ("/docs?x=1", "/docs/?x=1"), ("/empty", "/empty/")):
        resp = srv.get(path)
        assert resp.status == 301 and resp.header("Location") == location, (path, resp)
    resp = srv.get("/docs/")
    assert resp.status == 200 and resp.body == b"docs index\n"
    assert srv.get("/docs/a.txt").body == b"a\n"
    assert srv.get("/empty/").status == 403  # no index, no listing
    assert srv.get("/nothing").status == 404

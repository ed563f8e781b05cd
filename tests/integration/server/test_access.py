"""The access log (Combined Log Format, one line per response; JSON lines;
a format of nginx-style variables), request ids from the client or made
here, the same in the log, FastCGI's REQUEST_ID and an upstream's
X-Request-Id, and the blocked-address list."""

import contextlib
import re
import socket
import time

import pytest

from tern_server import wait_until

CLF = re.compile(
    r'^(?P<ip>\S+) - - \[(?P<time>\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4})\] '
    r'"(?P<request>[^"\\]*(?:\\.[^"\\]*)*)" (?P<status>\d{3}) (?P<bytes>\d+|-) '
    r'"(?P<referer>[^"]*)" "(?P<agent>[^"]*)"$')


def wait_for_lines(path, count, timeout=10.0):
    """The log is written on another thread: poll until count lines exist."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        if len(lines) >= count:
            time.sleep(0.2)  # long enough for a stray extra line to show up
            return path.read_text().splitlines()
        time.sleep(0.05)
    return lines


@pytest.fixture
def logged(tern_factory):
    srv = tern_factory({"access_log": "access.log"})
    srv.write_file("a.txt", b"0123456789")
    return srv, srv.workdir / "access.log"


def test_access_log_has_one_combined_format_line_per_response(logged):
    srv, log = logged
    with srv.connect() as conn:
        assert conn.get("/a.txt", {"User-Agent": "tester/1.0", "Referer": "http://ref/x"}).status == 200
        assert conn.get("/missing.txt").status == 404
        assert conn.get("/a.txt", {"Range": "bytes=2-5"}).status == 206
        etag = conn.get("/a.txt", method="HEAD").header("ETag")
        assert conn.get("/a.txt", {"If-None-Match": etag}).status == 304
        assert conn.get("/a.txt?q=1", version="HTTP/1.0").status == 200
    lines = wait_for_lines(log, 6)
    assert len(lines) == 6, lines
    parsed = [CLF.match(line) for line in lines]
    assert all(parsed), lines
    got = [(m["ip"], m["request"], m["status"], m["bytes"]) for m in parsed]
    nothing = ("0", "-")
    assert got[0] == ("127.0.0.1", "GET /a.txt HTTP/1.1", "200", "10")
    assert (parsed[0]["referer"], parsed[0]["agent"]) == ("http://ref/x", "tester/1.0")
    assert (parsed[1]["referer"], parsed[1]["agent"]) == ("-", "-")
    assert got[1][1:3] == ("GET /missing.txt HTTP/1.1", "404")
    assert got[2][1:] == ("GET /a.txt HTTP/1.1", "206", "4")
    assert got[3][1:3] == ("HEAD /a.txt HTTP/1.1", "200") and got[3][3] in nothing
    assert got[4][1:3] == ("GET /a.txt HTTP/1.1", "304") and got[4][3] in nothing
    assert got[5][1:] == ("GET /a.txt?q=1 HTTP/1.0", "200", "10")


def test_access_log_records_malformed_request_with_its_status(logged):
    srv, log = logged
    with srv.connect() as conn:
        assert conn.request(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nBad Field: 1\r\n\r\n").status == 400
    lines = wait_for_lines(log, 1)
    assert len(lines) == 1 and CLF.match(lines[0]), lines
    assert CLF.match(lines[0])["status"] == "400"


def test_refusal_after_a_whole_head_is_logged_as_that_request(tern_factory):
    # A 413 for a Content-Length over the limit is answered from a whole
    # head: the line names the request and its id, as any other response's.
    srv = tern_factory({"access_log": "access.log", "limits": {"body_bytes": "1KiB"},
                        "access_log_format": "$request_method $uri $status $request_id"})
    with srv.connect() as conn:
        resp = conn.request(b"POST /upload HTTP/1.1\r\nHost: x\r\nX-Request-Id: big-body-1\r\n"
                            b"Content-Length: 5000\r\n\r\n")
        assert resp.status == 413
    assert wait_for_lines(srv.workdir / "access.log", 1) == ["POST /upload 413 big-body-1"]


def test_access_log_escapes_quotes_and_control_bytes(logged):
    srv, log = logged
    agent = 'evil" 200 1 "x" "y\\ \xe9'  # quotes, a backslash, obs-text
    assert srv.get("/a.txt", {"User-Agent": agent}).status == 200
    lines = wait_for_lines(log, 1)
    assert len(lines) == 1
    match = CLF.match(lines[0])
    assert match, lines
    assert match["status"] == "200" and match["bytes"] == "10"
    assert '"' not in match["agent"] and "\xe9" not in match["agent"]


def test_access_log_off_writes_nothing(tern_factory):
    srv = tern_factory({"access_log": "off"})
    srv.write_file("a.txt", b"x")
    assert srv.get("/a.txt").status == 200
    time.sleep(0.3)
    assert sorted(p.name for p in srv.workdir.iterdir()) == ["tern.stderr", "tern.toml", "www"]


# -- blocked addresses -----------------------------------------------------------


def connect_and_read(port, source):
    """Sends a request from source; returns what came back before close."""
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    received = b""
    try:
        sock.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        return received
    except socket.timeout:
        return received + b"<still open after 10 s>"
    finally:
        sock.close()


def test_blocked_address_is_closed_without_a_response(tern_factory):
    srv = tern_factory({"blocked": ["127.0.0.2/32"]})
    srv.write_file("a.txt", b"alpha\n")
    assert connect_and_read(srv.port, "127.0.0.2") == b""
    with srv.connect(source="127.0.0.1") as conn:
        assert conn.get("/a.txt").body == b"alpha\n"


@pytest.mark.parametrize("accept_mode", ["dispatch", "reuseport"])
def test_blocked_address_is_refused_by_every_worker(tern_factory, accept_mode):
    srv = tern_factory({"workers": 2, "accept_mode": accept_mode, "blocked": ["127.0.0.2"]})
    srv.write_file("a.txt", b"alpha\n")
    for _ in range(6):
        assert connect_and_read(srv.port, "127.0.0.2") == b""
        assert connect_and_read(srv.port, "127.0.0.1").endswith(b"\r\n\r\nalpha\n")


def test_connections_over_max_connections_are_closed_at_accept(tern_factory):
    srv = tern_factory({"max_connections": 2})
    srv.write_file("a.txt", b"alpha\n")
    time.sleep(0.5)  # let the server reap the start-up probe connection
    first = srv.connect()
    second = None
    try:
        assert first.get("/a.txt").status == 200
        second = srv.connect()
        assert second.get("/a.txt").status == 200
        assert connect_and_read(srv.port, "127.0.0.1") == b""
        # A connection that closes gives its place back once the server has
        # read its close.
        first.close()
        assert wait_until(lambda: connect_and_read(srv.port, "127.0.0.1").endswith(b"\r\n\r\nalpha\n"), 10,
                          interval=0.05), "the place of a closed connection never came back"
        assert second.get("/a.txt").status == 200
    finally:
        first.close()
        if second is not None:
            second.close()


def test_blocked_network_covers_its_addresses_only(tern_factory):
    srv = tern_factory({"blocked": ["127.0.0.4/30", "127.0.9.9"]})
    srv.write_file("a.txt", b"alpha\n")
    for source in ("127.0.0.4", "127.0.0.5", "127.0.0.7", "127.0.9.9"):
        assert connect_and_read(srv.port, source) == b"", source
    for source in ("127.0.0.3", "127.0.0.8", "127.0.9.8"):
        with srv.connect(source=source) as conn:
            assert conn.get("/a.txt").body == b"alpha\n", source


# -- formats and request ids -----------------------------------------------------------


def test_json_format_writes_one_valid_object_per_response(tern_factory):
    import json
    srv = tern_factory({"access_log": "access.log", "access_log_format": "json"})
    srv.write_file("a.txt", b"0123456789")
    hostile = 'x"y\\z\tcaf\xe9'
    with srv.connect() as conn:
        assert conn.get("/a.txt?q=1", {"User-Agent": hostile, "X-Request-Id": "req-42"}).status == 200
        assert conn.get("/missing").status == 404
    lines = wait_for_lines(srv.workdir / "access.log", 2)
    records = [json.loads(line) for line in lines]
    first, second = records
    assert first["remote_addr"] == "127.0.0.1" and first["request_method"] == "GET"
    assert first["request_uri"] == "/a.txt?q=1" and first["server_protocol"] == "HTTP/1.1"
    assert first["status"] == 200 and first["body_bytes_sent"] == 10
    assert first["http_user_agent"] == hostile and first["http_referer"] is None
    assert first["request_id"] == "req-42" and first["scheme"] == "http" and first["ssl_protocol"] is None
    assert first["cache_status"] is None  # no [[cache]] had a part in it
    assert isinstance(first["request_time"], float) and first["request_time"] >= 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", first["time"]), first["time"]
    assert second["status"] == 404 and re.fullmatch(r"[0-9a-f]{32}", second["request_id"])


def test_custom_format_writes_the_variables_asked_for(tern_factory):
    srv = tern_factory({"access_log": "access.log",
                        "access_log_format": '$request_method $uri "$args" $status $request_time '
                                             '$request_id ${scheme}/$ssl_protocol $http_x_custom_field $pid'})
    srv.write_file("a.txt", b"0123456789")
    with srv.connect() as conn:
        # The head comes in two parts, 0.3 s apart: $request_time counts
        # from its first byte.
        conn.send(b"GET /a.txt?k=v HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.3)
        conn.send(b"X-Custom-Field: hello world\r\nX-Request-Id: abc.123\r\n\r\n")
        assert conn.read_response().status == 200
    lines = wait_for_lines(srv.workdir / "access.log", 1)
    assert len(lines) == 1, lines
    method, uri, args, status, took, rid, scheme, custom, pid = re.fullmatch(
        r'(\S+) (\S+) "(\S+)" (\d+) (\d+\.\d{3}) (\S+) (\S+) (.+) (\d+)', lines[0]).groups()
    assert (method, uri, args, status, rid, scheme) == ("GET", "/a.txt", "k=v", "200", "abc.123", "http/-")
    # Both ends are read from the loop's clock, cached once per wake-up: a
    # late first wake-up (a sanitizer build) can shorten the 0.3 s a little.
    assert 0.25 <= float(took) < 5, took
    assert custom == "hello world" and int(pid) == srv.proc.pid


def test_access_log_format_mistake_names_file_line_and_variable(tmp_path):
    import subprocess
    from tern_server import TERN_BIN
    config = tmp_path / "tern.toml"
    config.write_text('listen = ["127.0.0.1:8080"]\naccess_log_format = "$status $upstream_nonsense"\n')
    out = subprocess.run([str(TERN_BIN), "-t", "-c", str(config)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tern: {config}:2: access_log_format: unknown variable "
                                                    "$upstream_nonsense"), lines


def test_request_id_reaches_fastcgi_and_the_log_alike(php_factory):
    import json
    srv = php_factory(config={"access_log": "access.log",
                              "access_log_format": "$request_id $uri $upstream_response_time"})
    given = json.loads(srv.get("/echo.php", {"X-Request-Id": "from-client-7"}).body)
    made = json.loads(srv.get("/echo.php").body)
    srv.get("/no-such-file")  # answered without an upstream
    assert given["server"]["REQUEST_ID"] == "from-client-7"
    assert re.fullmatch(r"[0-9a-f]{32}", made["server"]["REQUEST_ID"])
    lines = wait_for_lines(srv.workdir / "access.log", 3)
    assert re.fullmatch(r"from-client-7 /echo\.php \d+\.\d{3}", lines[0]), lines
    assert re.fullmatch(made["server"]["REQUEST_ID"] + r" /echo\.php \d+\.\d{3}", lines[1]), lines
    assert lines[2].endswith(" -"), lines


def test_request_id_reaches_an_upstream_and_the_log_alike(tern_factory, tmp_path):
    import json
    from test_proxy import App, free_ports, site
    with open(tmp_path / "app.log", "ab") as log:
        app = App("app", free_ports(1)[0], log)
        try:
            srv = tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{app.address}"}},
                                    access_log="access.log",
                                    access_log_format="$request_id $uri $upstream_response_time"))
            seen = [dict((k.lower(), v) for k, v in json.loads(srv.get(path, headers).body)["headers"])
                    for path, headers in (("/echo/a", {"X-Request-Id": "from-client-8"}), ("/echo/b", {}))]
        finally:
            app.kill()
    assert seen[0]["x-request-id"] == "from-client-8"
    made = seen[1]["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    lines = wait_for_lines(srv.workdir / "access.log", 2)
    assert [line.rsplit(" ", 1)[0] for line in lines] == ["from-client-8 /echo/a", f"{made} /echo/b"]
    assert all(re.fullmatch(r"\d+\.\d{3}", line.rsplit(" ", 1)[1]) for line in lines), lines


@contextlib.contextmanager
def behind_tern(tern_factory, tmp_path, **config):
    """tern, with an access log and h2c, proxying / to test_proxy's App."""
    from test_proxy import App, free_ports, site
    with open(tmp_path / "app.log", "ab") as log:
        app = App("app", free_ports(1)[0], log)
        try:
            yield tern_factory(site({"prefix": "/", "proxy": {"pass": f"http://{app.address}"}},
                                    access_log="access.log", **config), listen_flags="h2c")
        finally:
            app.kill()


def leave_a_slow_upstream(srv, after):
    """A client over HTTP/1.1, then one over h2c, each giving up on an
    upstream that takes 3 s after `after` seconds: their two log lines."""
    import subprocess
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(b"GET /slow?delay=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(after)
    wait_for_lines(srv.workdir / "access.log", 1)
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge", "--max-time", str(after),
                    srv.url("/slow?delay=3")], check=False)
    return wait_for_lines(srv.workdir / "access.log", 2)


def test_a_request_left_while_its_upstream_worked_logs_the_time_it_took(tern_factory, tmp_path):
    """A client that gives up on a slow upstream: its 499 line says how long
    the upstream had worked by then ($upstream_response_time), as nginx's,
    rather than "-" (which says it went to none)."""
    with behind_tern(tern_factory, tmp_path,
                     access_log_format="$status $upstream_response_time $request_time") as srv:
        lines = leave_a_slow_upstream(srv, 0.6)
    for line in lines:
        status, upstream, request = line.split()
        assert status == "499", lines
        # (Over HTTP/2 $request_time counts from the real clock, the upstream's
        # time from the loop's, which a round's work may leave behind.)
        # The upstream was asked a moment after the request came (more under
        # a sanitizer): 0.3 s of the 0.6 the client waited.
        assert 0.3 <= float(upstream) <= float(request) + 0.05 and float(upstream) < 2.5, lines


def test_requests_left_or_cut_short_are_logged_as_they_stand(tern_factory, tmp_path):
    """As nginx: a request whose client went away before anything was
    answered is logged with 499, over HTTP/1.1 and over HTTP/2, and one
    that left in the middle of its response with the response's status, as
    is one that the upstream cut short."""
    import subprocess
    with behind_tern(tern_factory, tmp_path) as srv:
        leave_a_slow_upstream(srv, 0.4)
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"GET /stream?n=20&size=1000&delay=0.1 HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
            time.sleep(0.3)
        wait_for_lines(srv.workdir / "access.log", 3)
        # A response the upstream cuts short, over each.
        subprocess.run(["curl", "-s", "-o", "/dev/null", srv.url("/cut?n=100000")], check=False)
        wait_for_lines(srv.workdir / "access.log", 4)
        subprocess.run(["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge", srv.url("/cut?n=100000")],
                       check=False)
        lines = wait_for_lines(srv.workdir / "access.log", 5)
    parsed = [CLF.match(line) for line in lines]
    assert len(lines) == 5 and all(parsed), lines
    assert [(m["request"], m["status"]) for m in parsed] == [
        ("GET /slow?delay=3 HTTP/1.1", "499"), ("GET /slow?delay=3 HTTP/2.0", "499"),
        ("GET /stream?n=20&size=1000&delay=0.1 HTTP/1.1", "200"),
        ("GET /cut?n=100000 HTTP/1.1", "200"), ("GET /cut?n=100000 HTTP/2.0", "200")], lines
    assert parsed[0]["bytes"] in ("0", "-") and parsed[1]["bytes"] in ("0", "-")
    # (Over HTTP/2 what waited for the stream's window is not sent.)
    assert 0 < int(parsed[3]["bytes"]) < 100000 and int(parsed[4]["bytes"]) < 100000, lines

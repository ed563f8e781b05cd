"""examples/site_server, the library's static-file, FastCGI and proxy
handlers in a program of one's own, with real parts: a real php-fpm runs
the scripts, a Python HTTP server is the application behind /api/, and
http.client is the browser. Files, scripts and the API each answer what
they own; a script's source is never sent; a missing script never reaches
php-fpm; a backend that is gone is 502 and the site keeps serving."""

import hashlib
import http.client
import http.server
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading

import pytest

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1] / "server"))
from php_fpm import PhpFpm  # noqa: E402  (the server tests' real php-fpm)

INFO_PHP = """<?php
header('Content-Type: application/json');
echo json_encode([
    'script_name' => $_SERVER['SCRIPT_NAME'],
    'script_filename' => $_SERVER['SCRIPT_FILENAME'],
    'path_info' => $_SERVER['PATH_INFO'] ?? '',
    'query' => $_SERVER['QUERY_STRING'],
    'method' => $_SERVER['REQUEST_METHOD'],
    'server_name' => $_SERVER['SERVER_NAME'],
    'remote_addr' => $_SERVER['REMOTE_ADDR'],
    'body' => file_get_contents('php://input'),
]), "\\n";
"""


class Backend(http.server.BaseHTTPRequestHandler):
    """The application behind /api/: says what it was asked, as JSON."""
    protocol_version = "HTTP/1.1"

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        data = json.dumps({
            "method": self.command,
            "target": self.path,
            "host": self.headers.get("Host"),
            "forwarded_for": self.headers.get("X-Forwarded-For"),
            "body_bytes": len(body),
            "body_sha": hashlib.sha256(body).hexdigest(),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = answer

    def log_message(self, *args):
        pass


@pytest.fixture
def backend():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "www"
    (root / "app").mkdir(parents=True)
    (root / "index.html").write_text("<h1>home</h1>\n")
    (root / "style.css").write_text("h1{color:teal}\n")
    (root / "info.php").write_text(INFO_PHP)
    (root / "app" / "index.php").write_text("<?php echo 'app index ', $_SERVER['SCRIPT_NAME'], \"\\n\";\n")
    (root / ".git").mkdir()
    (root / ".git" / "hook.php").write_text("<?php echo 'ran';\n")
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("notes\n")
    return root


@pytest.fixture
def fpm(tmp_path):
    php = PhpFpm(tmp_path / "fpm", children=2).start()
    yield php
    php.stop()


def call(server, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), response
    finally:
        conn.close()


@pytest.mark.parametrize("stream", ["0", "1"], ids=["buffered", "streamed"])
def test_files_scripts_and_the_api_each_answer_what_they_own(example, site, fpm, backend, stream):
    server = example("site_server", "--root", site, "--php", fpm.pass_address, "--api", backend,
                     "--threads", 2, "--stream", stream)
    status, body, _ = call(server, "GET", "/healthz")
    assert (status, body) == (200, b"ok\n")
    status, body, response = call(server, "GET", "/")
    assert (status, body) == (200, b"<h1>home</h1>\n")
    status, body, response = call(server, "GET", "/style.css")
    assert (status, body) == (200, b"h1{color:teal}\n")
    assert response.getheader("Content-Type") == "text/css; charset=utf-8"
    assert call(server, "GET", "/notes")[2].getheader("Location") == "/notes/"

    status, body, response = call(server, "GET", "/info.php/a/b?x=1", headers={"Host": "example.test:8080"})
    assert status == 200, body
    info = json.loads(body)
    assert info["script_name"] == "/info.php"
    assert info["script_filename"] == str(site / "info.php")
    assert info["path_info"] == "/a/b"
    assert info["query"] == "x=1"
    assert info["server_name"] == "example.test"
    assert info["remote_addr"] == "127.0.0.1"
    status, body, _ = call(server, "POST", "/info.php", body=b"name=tern",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and json.loads(body)["body"] == "name=tern"
    # A directory's index script.
    status, body, _ = call(server, "GET", "/app/")
    assert (status, body) == (200, b"app index /app/index.php\n")

    status, body, _ = call(server, "GET", "/api/users?id=7", headers={"Host": "example.test"})
    assert status == 200, body
    asked = json.loads(body)
    assert asked["target"] == "/users?id=7"
    assert asked["host"] == "example.test"
    assert asked["forwarded_for"] == "127.0.0.1"
    # A body larger than any buffer arrives whole.
    payload = bytes(range(256)) * 8192  # 2 MiB
    status, body, _ = call(server, "PUT", "/api/upload", body=payload)
    asked = json.loads(body)
    assert status == 200 and asked["method"] == "PUT" and asked["body_bytes"] == len(payload)
    assert asked["body_sha"] == hashlib.sha256(payload).hexdigest()


def test_a_scripts_source_is_never_sent_and_a_missing_one_never_reaches_php(example, site, fpm, backend):
    server = example("site_server", "--root", site, "--php", fpm.pass_address, "--api", backend)
    for path in ["/info.php", "/info.php/", "/INFO.php", "/app/index.php/x"]:
        status, body, _ = call(server, "GET", path)
        assert b"<?php" not in body and b"json_encode" not in body, (path, status, body)
    # Answered here, not by php-fpm (whose answer is "File not found.").
    for path in ["/missing.php", "/missing.php/more", "/app/missing.php"]:
        status, body, _ = call(server, "GET", path)
        assert status == 404 and b"File not found." not in body, (path, body)
    # Nothing beneath a dot directory runs or is sent.
    status, body, _ = call(server, "GET", "/.git/hook.php")
    assert status == 403 and b"ran" not in body and b"<?php" not in body
    # Outside the site: refused, nothing beside the root is read.
    status, body, _ = call(server, "GET", "/%2e%2e/fpm/php-fpm.conf")
    assert status == 400 and b"[global]" not in body

def test_an_application_that_is_gone_is_502_and_the_site_keeps_serving(example, site, tmp_path):
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        gone = f"127.0.0.1:{closed.getsockname()[1]}"
    server = example("site_server", "--root", site, "--php", f"unix:{tmp_path}/no-fpm.sock", "--api", gone)
    assert call(server, "GET", "/api/users")[0] == 502
    assert call(server, "GET", "/info.php")[0] == 502
    assert call(server, "GET", "/")[:2] == (200, b"<h1>home</h1>\n")
    assert call(server, "GET", "/healthz")[0] == 200


def test_a_bad_root_fails_the_program_with_a_message(site):
    examples = pathlib.Path(os.environ.get("TERN_EXAMPLES_DIR", "build/release/examples"))
    result = subprocess.run([str(examples / "site_server"), "--port", "0", "--root", str(site / "nowhere")],
                            capture_output=True, timeout=20)
    assert result.returncode == 2
    assert b"site_server: " in result.stderr and b"nowhere" in result.stderr

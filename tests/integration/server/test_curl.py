"""curl as a real client: plain GET, --compressed with a .gz sibling,
ranges, HTTP/1.0 and HEAD."""

import gzip
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")

PLAIN = b"The quick brown fox jumps over the lazy dog.\n" * 100


@pytest.fixture
def site(server):
    server.write_file("fox.txt", PLAIN)
    server.write_file("fox.txt.gz", gzip.compress(PLAIN))
    server.write_file("index.html", b"<h1>curl</h1>\n")
    return server


def curl(*args):
    """Runs curl -sS -D- ...; returns (status, {header: value}, body)."""
    dump = [] if "-I" in args else ["-D-"]  # -I already prints the head
    proc = subprocess.run(["curl", "-sS", "--max-time", "30", *dump, *args], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    head, _, body = proc.stdout.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, body


def test_curl_gets_a_file(site):
    status, headers, body = curl(site.url("/fox.txt"))
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-length"] == str(len(PLAIN))
    assert headers["content-type"].startswith("text/plain")
    assert body == PLAIN


def test_curl_compressed_gets_the_gz_sibling_and_decodes_it(site):
    status, headers, body = curl("--compressed", site.url("/fox.txt"))
    assert status.startswith("HTTP/1.1 200")
    assert headers["content-encoding"] == "gzip"
    assert headers["content-length"] == str((site.root / "fox.txt.gz").stat().st_size)
    assert body == PLAIN


def test_curl_range_gets_206(site):
    status, headers, body = curl("-r", "4-8", site.url("/fox.txt"))
    assert status.startswith("HTTP/1.1 206")
    assert headers["content-range"] == f"bytes 4-8/{len(PLAIN)}"
    assert body == PLAIN[4:9]


def test_curl_http10_gets_the_file_and_a_closed_connection(site):
    status, headers, body = curl("--http1.0", site.url("/index.html"))
    assert status.split(" ")[1] == "200"
    assert body == b"<h1>curl</h1>\n"


def test_curl_head_gets_headers_only(site):
    status, headers, body = curl("-I", site.url("/fox.txt"))
    assert status.startswith("HTTP/1.1 200")
    assert headers["content-length"] == str(len(PLAIN))
    assert body == b""


def test_curl_reuses_one_connection_for_two_urls(site):
    proc = subprocess.run(["curl", "-sS", "-v", "--max-time", "30", "-o", "/dev/null", "-o", "/dev/null",
                           site.url("/fox.txt"), site.url("/index.html")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Re-using existing connection" in proc.stderr or "Reusing existing connection" in proc.stderr

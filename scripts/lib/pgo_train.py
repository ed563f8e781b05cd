#!/usr/bin/env python3
"""The training run of a profile-guided build (scripts/build-release).

Starts the instrumented tern on a free loopback port, sends it the traffic a
static site sees (what bench/compare measures, plus conditional, range, HEAD,
error and malformed requests), stops it with SIGTERM so that it writes its
profile on exit, and checks that the profile is there. With h2load
(nghttp2-client) and openssl there, HTTP/2 too: h2c on the same address,
then h2 over TLS from a second run (the profiles add up): code no load went
through is optimised for size, as cold.

usage: pgo_train.py TERN_BINARY PROFILE_DIR [SECONDS_PER_LOAD]
"""

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
PIPELINE_LUA = os.path.join(BENCH, "pipeline.lua")
sys.path.insert(0, BENCH)
from lib.servers import tern_config  # noqa: E402  (the config bench/compare measures)


def fail(message):
    print(f"pgo_train: {message}", file=sys.stderr)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_site(root):
    os.makedirs(os.path.join(root, "docs"))
    with open(os.path.join(root, "1k.html"), "w") as f:
        f.write("<!DOCTYPE html>\n" + "x" * (1024 - 17) + "\n")
    with open(os.path.join(root, "docs", "index.html"), "w") as f:
        f.write("<!DOCTYPE html>\n<title>docs</title>\n")
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(os.urandom(1 << 20) * 8)  # 8 MiB: sent with sendfile


def wait_listening(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            fail(f"tern exited with status {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    fail(f"tern is not listening on port {port}")


def wrk(url, seconds, *args):
    cmd = ["wrk", "-t1", f"-d{seconds}s", *args, url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0 or "requests in" not in out.stdout:
        fail(f"{' '.join(cmd)} failed: {out.stdout}{out.stderr}")


def exchange(port, raw):
    """Sends raw bytes on a fresh connection and reads until the server closes
    or goes quiet; the answer is not checked, only the server's path through
    the request matters here."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(65536):
                pass
        except OSError:
            pass


def odd_requests(port, rounds):
    host = f"Host: 127.0.0.1:{port}\r\n"
    etag = None
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(f"HEAD /1k.html HTTP/1.1\r\n{host}\r\n".encode())
        head = s.recv(65536).decode("latin-1")
        for line in head.split("\r\n"):
            if line.lower().startswith("etag:"):
                etag = line.split(":", 1)[1].strip()
    if etag is None:
        fail("no ETag in the answer to HEAD /1k.html")
    requests = [
        f"GET /1k.html HTTP/1.1\r\n{host}If-None-Match: {etag}\r\n\r\n",
        f"GET /1k.html HTTP/1.1\r\n{host}Range: bytes=100-199\r\n\r\n",
        f"GET /1k.html HTTP/1.1\r\n{host}Accept-Encoding: gzip, deflate, br\r\n"
        "User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: text/html,*/*;q=0.8\r\n"
        "Accept-Language: en-GB,en;q=0.9\r\nConnection: keep-alive\r\n\r\n",
        f"HEAD /1k.html HTTP/1.1\r\n{host}\r\n",
        f"GET /missing.html HTTP/1.1\r\n{host}\r\n",
        f"GET /docs HTTP/1.1\r\n{host}\r\n",
        f"GET /docs/ HTTP/1.1\r\n{host}\r\n",
        f"GET /a/../1k.html?x=1 HTTP/1.1\r\n{host}\r\n",
        "GET /1k.html HTTP/1.0\r\n\r\n",
        f"POST /1k.html HTTP/1.1\r\n{host}Content-Length: 3\r\n\r\nabc",
        f"GET /1k.html HTTP/1.1\r\n{host}Connection: close\r\n\r\n",
    ]
    keep_alive = "".join(r for r in requests if "Connection: close" not in r
                         and "HTTP/1.0" not in r and "POST" not in r).encode()
    for _ in range(rounds):
        exchange(port, keep_alive)
        for r in requests:
            exchange(port, r.encode())
        exchange(port, b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n")        # 400
        exchange(port, b"GET /\x01 HTTP/1.1\r\n\r\n")                  # 400
        exchange(port, b"GET / HTTP/2.0\r\nHost: x\r\n\r\n")          # 505


def h2load(url, seconds, *args):
    cmd = ["h2load", "-t1", "-D", str(seconds), *args, url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
    if out.returncode != 0 or " 0 succeeded" in out.stdout:
        fail(f"{' '.join(cmd)} failed: {out.stdout[-500:]}{out.stderr[-500:]}")


def run_tern(tern, config, work, port, load):
    """Runs tern on `config` while `load()` goes, then stops it so that it
    writes its profile."""
    log = open(os.path.join(work, "tern.log"), "w")
    proc = subprocess.Popen([tern, "-c", config], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_listening(port, proc)
        load()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("tern did not stop within 30 s of SIGTERM")
    if status != 0:
        with open(os.path.join(work, "tern.log")) as f:
            fail(f"tern exited with status {status}: {f.read()[-2000:]}")


def tls_files(work):
    cert, key = os.path.join(work, "tls.pem"), os.path.join(work, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "2", "-keyout", key, "-out", cert, "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def main():
    if len(sys.argv) not in (3, 4):
        fail("usage: pgo_train.py TERN_BINARY PROFILE_DIR [SECONDS_PER_LOAD]")
    tern, profile_dir = sys.argv[1], sys.argv[2]
    seconds = int(sys.argv[3]) if len(sys.argv) == 4 else 2
    if shutil.which("wrk") is None:
        fail("wrk is not installed")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 8192), max(hard, 8192)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns_1000 = 1000 if resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4096 else 200

    with tempfile.TemporaryDirectory(prefix="tern-pgo-") as work:
        root = os.path.join(work, "www")
        make_site(root)
        http2 = shutil.which("h2load") is not None
        ws = types.SimpleNamespace(path=lambda name: os.path.join(work, name), docroot=root,
                                   tls_files=lambda: tls_files(work))
        port = free_port()
        base = f"http://127.0.0.1:{port}"

        def load():
            wrk(f"{base}/1k.html", seconds, "-c100")
            wrk(f"{base}/1k.html", seconds, f"-c{conns_1000}")
            wrk(f"{base}/1k.html", seconds, "-c100", "-s", PIPELINE_LUA)
            wrk(f"{base}/1k.html", seconds, "-c50", "-H", "Connection: close")
            wrk(f"{base}/big.bin", seconds, "-c4")
            odd_requests(port, 50)
            if http2:
                h2load(f"{base}/1k.html", seconds, "-c100", "-m10")

        run_tern(tern, tern_config(ws, port, h2c=http2), work, port, load)
        if http2 and shutil.which("openssl") is not None:
            port = free_port()
            secure = f"https://127.0.0.1:{port}"

            def load_tls():
                h2load(f"{secure}/1k.html", seconds, "-c100", "-m10")
                h2load(f"{secure}/big.bin", seconds, "-c4", "-m1")

            run_tern(tern, tern_config(ws, port, tls=True, name="tern-tls"), work, port, load_tls)
    profiles = [n for n in os.listdir(profile_dir) if n.endswith(".gcda")] \
        if os.path.isdir(profile_dir) else []
    if not profiles:
        fail(f"tern wrote no profile into {profile_dir}")
    print(f"pgo_train: {len(profiles)} profile files in {profile_dir}")


if __name__ == "__main__":
    main()

"""The kernel TLS checks, run inside the test machine that test_ktls.py
boots (tests/vm): a kernel with TLS, the host's files read-only, a
writable $TMPDIR, this process as root. For each I/O backend, tern serves HTTPS with kernel_tls on
and real clients (curl, openssl s_client, Python's ssl) fetch files on
every cipher the kernel takes, resume by ticket, read the closing alert and
ask for a key update; the kernel's own counters (/proc/net/tls_stat) say
whether the connections sent through it. With kernel_tls off they must
not. Writes {check: {"ok", "detail"}} as JSON to the path it is given.

    ktls_guest.py PARAMS_JSON RESULTS_JSON
"""

import hashlib
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

PARAMS = json.loads(Path(sys.argv[1]).read_text())
os.environ["TERN_BIN"] = PARAMS["binary"]
os.environ.setdefault("TERN_TEST_SCALE", "1.0")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from tern_server import TernServer  # noqa: E402

RESULTS = {}
CA = PARAMS["ca"]
# Sizes: under a record, a few records, many, and past one sendfile step.
SIZES = {"one.bin": 1, "small.bin": 1000, "mid.bin": 100 * 1024, "big.bin": 3 * 1024 * 1024 + 5}
TLS13_SUITES = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]
TLS12_CIPHERS = ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
                 "ECDHE-ECDSA-CHACHA20-POLY1305"]


def check(name, ok, detail=""):
    RESULTS[name] = {"ok": bool(ok), "detail": str(detail)[-3000:]}


def tls_stat():
    with open("/proc/net/tls_stat") as f:
        return {name: int(value) for name, value in (line.split() for line in f if line.strip())}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def client_context(**kwargs):
    context = ssl.create_default_context(cafile=CA)
    context.check_hostname = False
    for key, value in kwargs.items():
        setattr(context, key, value)
    return context


def curl(port, paths, *args):
    """The bodies of `paths`, fetched by one curl on one connection."""
    outputs = []
    command = ["curl", "-sS", "--cacert", CA, "--resolve", f"a.test:{port}:127.0.0.1", *args]
    for i, path in enumerate(paths):
        out = os.path.join(tempfile.gettempdir(), f"curl-{i}.out")
        outputs.append(out)
        command += [f"https://a.test:{port}{path}", "-o", out]
    done = subprocess.run(command, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"curl {args}: exit {done.returncode}: {done.stderr.decode(errors='replace')}")
    return [Path(out).read_bytes() for out in outputs]


class Responses:
    """Responses with a Content-Length read off one connection, in order
    (pipelined ones arrive together)."""

    def __init__(self, conn):
        self.conn = conn
        self.data = b""

    def _more(self, what):
        chunk = self.conn.recv(65536)
        if not chunk:
            raise AssertionError(f"closed {what} ({len(self.data)} bytes unread)")
        self.data += chunk

    def next(self):
        """(head, body)."""
        while b"\r\n\r\n" not in self.data:
            self._more("before a whole head")
        head, self.data = self.data.split(b"\r\n\r\n", 1)
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(self.data) < length:
            self._more("inside a body")
        body, self.data = self.data[:length], self.data[length:]
        return head, body


def read_response(conn):
    return Responses(conn).next()


def start_tern(name, kernel_tls):
    workdir = Path(tempfile.gettempdir()) / name
    root = workdir / "www"
    root.mkdir(parents=True)
    for file, size in SIZES.items():
        (root / file).write_bytes(DATA[file])
    config = {"tls": {"cert": PARAMS["cert"], "key": PARAMS["key"], "kernel_tls": kernel_tls},
              "log": {"level": "debug"}}
    server = TernServer(workdir, root, config, tls=True, env={"TERN_IO": PARAMS["io"][name]})
    server.client_tls = client_context()
    return server.start()


def guarded(name, function, *args):
    try:
        function(*args)
    except Exception:  # noqa: BLE001 (each check reports its own failure)
        check(name, False, traceback.format_exc())


def files_on_every_cipher(tag, server):
    paths = [f"/{file}" for file in SIZES]
    expected = [sha256(DATA[file]) for file in SIZES]
    for suite in TLS13_SUITES:
        bodies = curl(server.port, paths, "--tlsv1.3", "--tls13-ciphers", suite)
        check(f"{tag}: TLS 1.3 {suite}: files whole on one connection",
              [sha256(b) for b in bodies] == expected, [len(b) for b in bodies])
    for cipher in TLS12_CIPHERS:
        bodies = curl(server.port, paths, "--tlsv1.2", "--tls-max", "1.2", "--ciphers", cipher)
        check(f"{tag}: TLS 1.2 {cipher}: files whole on one connection",
              [sha256(b) for b in bodies] == expected, [len(b) for b in bodies])
    part = curl(server.port, ["/big.bin"], "-r", "1000000-2000000")[0]
    check(f"{tag}: a range of a file", part == DATA["big.bin"][1000000:2000001], len(part))


def pipelined_keep_alive(tag, server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        with server.client_tls.wrap_socket(raw, server_hostname="a.test") as conn:
            conn.sendall(b"GET /mid.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /small.bin HTTP/1.1\r\nHost: a\r\n\r\n"
                         b"GET /big.bin HTTP/1.1\r\nHost: a\r\n\r\n")
            responses = Responses(conn)
            bodies = [responses.next()[1] for _ in range(3)]
            conn.sendall(b"GET /one.bin HTTP/1.1\r\nHost: a\r\n\r\n")
            bodies.append(responses.next()[1])
    expected = [DATA["mid.bin"], DATA["small.bin"], DATA["big.bin"], DATA["one.bin"]]
    check(f"{tag}: pipelined and keep-alive requests", bodies == expected, [len(b) for b in bodies])


def resumption_by_ticket(tag, server):
    context = client_context(minimum_version=ssl.TLSVersion.TLSv1_3)
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        with context.wrap_socket(raw, server_hostname="a.test") as conn:
            conn.sendall(b"GET /small.bin HTTP/1.1\r\nHost: a\r\n\r\n")
            read_response(conn)  # the ticket came before the response
            session = conn.session
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        with context.wrap_socket(raw, server_hostname="a.test", session=session) as conn:
            conn.sendall(b"GET /mid.bin HTTP/1.1\r\nHost: a\r\n\r\n")
            body = read_response(conn)[1]
            reused = conn.session_reused
    check(f"{tag}: TLS 1.3 resumption by a ticket sent through the kernel", reused and body == DATA["mid.bin"],
          f"reused={reused}")


def closing_alert(tag, server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as raw:
        conn = server.client_tls.wrap_socket(raw, server_hostname="a.test", suppress_ragged_eofs=False)
        conn.sendall(b"GET /mid.bin HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        body = read_response(conn)[1]
        try:
            rest = conn.recv(100)
            clean = rest == b""  # close_notify read: a clean end
        except ssl.SSLZeroReturnError:
            clean = True
        except (ssl.SSLEOFError, ssl.SSLError) as e:
            clean = False
            rest = e
        conn.close()
    check(f"{tag}: close_notify through the kernel after Connection: close", clean and body == DATA["mid.bin"],
          rest)


def key_update_closes(tag, server):
    # s_client's "K" asks the server to update its keys too, which kernel
    # TLS cannot follow: tern closes the connection rather than send under
    # stale keys; other clients go on.
    proc = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{server.port}", "-tls1_3",
                             "-CAfile", CA], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    time.sleep(3)
    proc.stdin.write(b"GET /small.bin HTTP/1.1\r\nHost: a\r\n\r\n")
    proc.stdin.flush()
    time.sleep(3)
    proc.stdin.write(b"K\n")
    proc.stdin.flush()
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    ended = proc.poll() is not None  # tern closed it: s_client's input is still open
    if not ended:
        proc.kill()
    out = proc.stdout.read()
    proc.wait(timeout=30)
    proc.stdin.close()
    after = curl(server.port, ["/mid.bin"])[0]
    said = "asked for a key update, which kernel TLS cannot make" in server.stderr()
    check(f"{tag}: a key update ends the connection, others are served",
          ended and said and after == DATA["mid.bin"] and b"200 OK" in out,
          f"ended={ended} said={said}: " + out.decode(errors="replace")[-1500:])


def run(tag, kernel_tls):
    server = start_tern(tag, kernel_tls)
    before = tls_stat()
    # Off, OpenSSL encrypts and follows a key update itself: that is
    # test_tls.py's ground; here it only shows the kernel is not used.
    steps = (files_on_every_cipher, pipelined_keep_alive, resumption_by_ticket, closing_alert, key_update_closes)
    try:
        for step in steps if kernel_tls else steps[:1]:
            guarded(f"{tag}: {step.__name__}", step, tag, server)
    finally:
        status = server.stop()
    after = tls_stat()
    log = server.stderr()
    sent = after["TlsTxSw"] - before["TlsTxSw"]
    if kernel_tls:
        check(f"{tag}: the start log names kernel TLS", "kernel TLS: connections whose cipher" in log, log[-2000:])
        # Every connection above handed its sending to the kernel: 6
        # curls on ciphers, a range, the other checks' connections.
        check(f"{tag}: the kernel counted the connections' sending sides", sent >= 10, f"TlsTxSw +{sent}")
        check(f"{tag}: tern counted them", "kernel TLS sends from here" in log, log[-2000:])
    else:
        check(f"{tag}: with kernel_tls = false the kernel sends nothing", sent == 0, f"TlsTxSw +{sent}")
        check(f"{tag}: the start log says kernel_tls = false", "(kernel_tls = false)" in log, log[-2000:])
    check(f"{tag}: tern exits 0 on SIGTERM", status == 0, f"status {status}; {log[-2000:]}")


DATA = {name: os.urandom(size) for name, size in SIZES.items()}
try:
    check("the kernel has TLS", Path("/proc/net/tls_stat").exists(), open("/proc/sys/net/ipv4/tcp_available_ulp").read())
    for tag, kernel_tls in PARAMS["runs"]:
        guarded(tag, run, tag, kernel_tls)
finally:
    Path(sys.argv[2]).write_text(json.dumps(RESULTS, indent=1))

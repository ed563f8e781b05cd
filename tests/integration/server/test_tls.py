"""HTTPS end to end: a test CA and certificates made with the openssl tool,
tern with addresses marked "tls", and real clients (curl, openssl s_client,
Python's ssl) for files, SNI, ALPN, resumption, reload, PHP and the users
app; hostile clients (plain HTTP, garbage, stalled handshakes, slow readers)
get a clear answer or a close, and the others go on being served."""

import json
import os
import signal
import socket
import ssl
import subprocess
import time

import pytest

from auth_api import auth_config, json_body, login, register
from http_client import IO_TIMEOUT
from php_site import RssSampler, install_scripts, start_fastcgi_server, fastcgi_block
from tern_server import REPO_ROOT, TERN_BIN, link_into, sha256


def run(*args, **kwargs):
    return subprocess.run(list(args), check=True, capture_output=True, timeout=60, **kwargs)


class Pki:
    """A test CA in `directory` and certificates it signs."""

    def __init__(self, directory):
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.ca = directory / "ca.pem"
        self.ca_key = directory / "ca.key"
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(self.ca_key), "-out", str(self.ca), "-days", "30", "-subj", "/CN=tern test CA")

    def issue(self, name, rsa=False, expired=False, tag="", extra=()):
        """(cert, key) for `name` (its CN and DNS name), signed by the CA;
        `extra`: more -addext values."""
        base = self.dir / f"{name}{tag}{'.rsa' if rsa else ''}"
        cert, key, csr = base.with_suffix(".pem"), base.with_suffix(".key"), base.with_suffix(".csr")
        algorithm = ["rsa:2048"] if rsa else ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        run("openssl", "req", "-new", "-newkey", *algorithm, "-nodes", "-keyout", str(key), "-out", str(csr),
            "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}",
            *[arg for ext in extra for arg in ("-addext", ext)])
        os.chmod(key, 0o600)
        if expired:
            # Dates in the past need the ca command and its database.
            database = self.dir / "index.txt"
            database.touch()
            (self.dir / "serial").write_text(f"{int(time.time() * 1000):016x}\n")
            conf = self.dir / "ca.cnf"
            conf.write_text("[ca]\ndefault_ca=t\n[t]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\n"
                            "default_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n")
            run("openssl", "ca", "-config", str(conf), "-batch", "-notext", "-cert", str(self.ca), "-keyfile",
                str(self.ca_key), "-in", str(csr), "-out", str(cert), "-startdate", "20200101000000Z",
                "-enddate", "20200102000000Z", cwd=self.dir)
        else:
            run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(self.ca), "-CAkey", str(self.ca_key),
                "-CAcreateserial", "-days", "90", "-copy_extensions", "copy", "-out", str(cert))
        return str(cert), str(key)

    @staticmethod
    def spki(cert):
        """The base64 SHA-256 of a certificate's public key (what Chromium's
        --ignore-certificate-errors-spki-list takes)."""
        return subprocess.run(
            f"openssl x509 -pubkey -noout -in {cert} | openssl pkey -pubin -outform der | "
            "openssl dgst -sha256 -binary | base64", shell=True, check=True, capture_output=True,
            timeout=30).stdout.decode().strip()

    def client_context(self):
        context = ssl.create_default_context(cafile=str(self.ca))
        context.check_hostname = False  # connections are to 127.0.0.1; SNI names are checked below
        return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def https(tern_factory, pki):
    """A tern whose address speaks TLS with a certificate for a.test."""
    cert, key = pki.issue("a.test")
    server = tern_factory({"tls": {"cert": cert, "key": key}}, tls=True)
    server.client_tls = pki.client_context()
    return server


def s_client(port, *args, linger=0.5, timeout=20):
    """openssl s_client's output (stdout and stderr together), its input
    left open for `linger` seconds (TLS 1.3 tickets come after the
    handshake)."""
    proc = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(linger)
    return proc.communicate(input=b"", timeout=timeout)[0].decode(errors="replace")


def curl(server, pki, path, *args):
    out = subprocess.run(["curl", "-sS", "--cacert", str(pki.ca), "--resolve", f"a.test:{server.port}:127.0.0.1",
                          *args, f"https://a.test:{server.port}{path}"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout


@pytest.mark.parametrize("size", [1, 1000, 100 * 1024, 3 * 1024 * 1024 + 5])
def test_static_files_arrive_whole_over_https(https, pki, size):
    data = os.urandom(size)
    https.write_file("f.bin", data)
    assert sha256(curl(https, pki, "/f.bin")) == sha256(data)


def test_a_64_mib_file_and_a_range_of_it(https, pki, big_file):
    path, digest = big_file
    link_into(https, path, "big.bin")
    assert sha256(curl(https, pki, "/big.bin")) == digest
    with open(path, "rb") as f:
        f.seek(10_000_000)
        expected = f.read(1_000_001)
    assert curl(https, pki, "/big.bin", "-r", "10000000-11000000") == expected


def test_keep_alive_and_pipelining_over_tls(https):
    https.write_file("a.txt", b"alpha\n")
    https.write_file("b.txt", b"beta\n")
    with https.connect() as conn:
        conn.send(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        bodies = [conn.read_response().body for _ in range(3)]
        assert bodies == [b"alpha\n", b"beta\n", b"alpha\n"]
        assert conn.get("/b.txt").body == b"beta\n"


def test_alpn_protocols_and_cipher(https):
    out = s_client(https.port, "-alpn", "h2,http/1.1", "-servername", "a.test")
    assert "ALPN protocol: h2" in out, out
    out = s_client(https.port, "-alpn", "spdy/3,http/1.1", "-servername", "a.test")
    assert "ALPN protocol: http/1.1" in out, out
    assert "New, TLSv1.3, Cipher is TLS_AES_" in out, out
    out = s_client(https.port, "-tls1_2")
    assert "New, TLSv1.2, Cipher is ECDHE-ECDSA-AES" in out, out


def test_old_protocols_are_refused(https):
    for flag in ("-tls1", "-tls1_1"):
        out = s_client(https.port, flag, "-cipher", "DEFAULT@SECLEVEL=0")
        # Refused by the server (its alert), not by the client's own policy.
        assert "New, (NONE), Cipher is (NONE)" in out and "alert protocol version" in out, out
    with https.connect() as conn:  # and the server goes on
        conn.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.read_response().status in (200, 403, 404)


def test_sni_picks_each_sites_certificate_and_a_default(tern_factory, pki):
    a_cert, a_key = pki.issue("a.test")
    b_cert, b_key = pki.issue("b.test")
    server = tern_factory({"server": [
        {"names": ["a.test"], "tls": {"cert": a_cert, "key": a_key}},
        {"names": ["b.test", "*.b.test"], "tls": {"cert": b_cert, "key": b_key}},
    ]}, tls=True)
    subjects = {}
    for name in ("a.test", "b.test", "www.b.test", "unknown.test", None):
        out = s_client(server.port, *(("-servername", name) if name else ("-noservername",)))
        line = next(l for l in out.splitlines() if l.startswith("subject="))
        subjects[name] = line.split("CN = ")[-1].strip()
    assert subjects == {"a.test": "a.test", "b.test": "b.test", "www.b.test": "b.test",
                        "unknown.test": "a.test", None: "a.test"}


def test_sessions_resume_by_ticket_and_by_session_id(https, tmp_path):
    for label, args in (("ticket 1.2", ["-tls1_2"]), ("session id 1.2", ["-tls1_2", "-no_ticket"]),
                        ("ticket 1.3", ["-tls1_3"])):
        session = tmp_path / label.replace(" ", "_")
        first = s_client(https.port, *args, "-sess_out", str(session))
        assert "New, TLSv1." in first, (label, first)
        second = s_client(https.port, *args, "-sess_in", str(session))
        assert "Reused, TLSv1." in second, (label, second)


def test_renegotiation_is_refused(https):
    # "R" on s_client's input asks for a renegotiation (TLS 1.2).
    proc = subprocess.Popen(["openssl", "s_client", "-connect", f"127.0.0.1:{https.port}", "-tls1_2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(1.0)
    try:
        proc.stdin.write(b"R\n")
        proc.stdin.flush()
        time.sleep(1.0)
    except BrokenPipeError:
        pass
    proc.kill()
    out = proc.communicate(timeout=10)[0].decode(errors="replace")
    assert "RENEGOTIATING" in out, out
    assert "no renegotiation" in out or "alert" in out, out


def test_plain_http_on_the_https_address_gets_a_400_that_says_so(https):
    out = subprocess.run(["curl", "-sS", "-i", f"http://127.0.0.1:{https.port}/"], capture_output=True,
                         timeout=30)
    text = out.stdout.decode(errors="replace")
    assert text.startswith("HTTP/1.1 400 Bad Request"), text
    assert "HTTPS" in text


def test_hostile_handshakes_are_closed_and_others_served(tern_factory, pki):
    cert, key = pki.issue("a.test")
    server = tern_factory({"tls": {"cert": cert, "key": key, "handshake_timeout": "1s"}}, tls=True)
    server.write_file("ok.txt", b"ok\n")
    stalled = []
    for i in range(200):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT)
        s.sendall([b"\x16\x03\x01\x02\x00\x01", b"\x00garbage\xff" * 3, b""][i % 3])
        stalled.append(s)
    # Served meanwhile.
    with server.connect() as conn:
        assert conn.get("/ok.txt").body == b"ok\n"
    # Each stalled one is closed by the handshake timeout (or at once: garbage).
    deadline = time.monotonic() + 15
    for s in stalled:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
        s.close()
    with server.connect() as conn:
        assert conn.get("/ok.txt").body == b"ok\n"


def test_a_thousand_concurrent_handshakes(https):
    https.write_file("ok.txt", b"ok\n")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    sockets = []
    for _ in range(1000):
        s = socket.create_connection(("127.0.0.1", https.port), timeout=IO_TIMEOUT)
        sockets.append(context.wrap_socket(s, do_handshake_on_connect=False))
    for s in sockets:
        s.setblocking(False)
    pending = list(sockets)
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        still = []
        for s in pending:
            try:
                s.do_handshake()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                still.append(s)
        pending = still
        if pending:
            time.sleep(0.01)
    assert not pending, f"{len(pending)} handshakes not done"
    for s in sockets[:50]:
        s.setblocking(True)
        s.settimeout(IO_TIMEOUT)
        s.sendall(b"GET /ok.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"ok\n")
    for s in sockets:
        s.close()


def test_slow_readers_of_a_large_file_hold_bounded_memory(https, big_file):
    """Clients that ask for 64 MiB over TLS and read nothing: each holds at
    most one step of ciphertext in tern, not the file."""
    path, _ = big_file
    link_into(https, path, "big.bin")
    https.stop()  # again, with ASan's quarantine small (as in test_hardening.py)
    https.env = {"ASAN_OPTIONS": "quarantine_size_mb=4:thread_local_quarantine_size_kb=64"}
    https.start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    # Heap, not the file's pages: the file may be read through a mapping,
    # whose resident pages are the page cache's, shared and reclaimable.
    class Anonymous:
        def rss_kib(self):
            return https.rss_kib("RssAnon")

    sampler = RssSampler(Anonymous())
    sampler.start()
    clients = []
    for _ in range(20):
        s = context.wrap_socket(socket.create_connection(("127.0.0.1", https.port), timeout=IO_TIMEOUT))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        clients.append(s)
    time.sleep(2.0)
    growth = sampler.growth_mib()
    print(f"RSS growth {growth:.1f} MiB")  # shown with pytest -rP
    # 20 x 64 MiB would be 1280 MiB; a step of ciphertext and OpenSSL's
    # record buffers each are about 3 MiB. ThreadSanitizer's shadow memory
    # is several times what it shadows.
    bound = 16 * (4 if https.runs_under("libtsan") else 1)
    assert growth < bound, f"RSS grew {growth:.1f} MiB"
    for s in clients:
        s.close()
    with https.connect() as conn:
        conn.send(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.read_response().status == 404


def test_a_renewed_certificate_is_used_after_sighup_without_dropping_connections(tern_factory, pki):
    cert, key = pki.issue("a.test", tag=".one")
    server = tern_factory({"tls": {"cert": cert, "key": key}}, tls=True)
    server.write_file("ok.txt", b"ok\n")
    serial = lambda out: next(l for l in out.splitlines() if "serialNumber" in l or l.startswith("subject="))
    before = s_client(server.port, "-showcerts")
    kept = server.connect()
    assert kept.get("/ok.txt").body == b"ok\n"
    # The renewal replaces the files in place, as certbot's hooks do.
    new_cert, new_key = pki.issue("a.test", tag=".two")
    os.replace(new_cert, cert)
    os.replace(new_key, key)
    fingerprint = run("openssl", "x509", "-in", cert, "-noout", "-fingerprint", "-sha256").stdout.decode()
    server.reload()
    after = s_client(server.port, "-showcerts")
    pem = after[after.index("-----BEGIN CERTIFICATE-----"):after.index("-----END CERTIFICATE-----") + 25]
    seen = run("openssl", "x509", "-noout", "-fingerprint", "-sha256", input=pem.encode()).stdout.decode()
    assert seen == fingerprint
    assert before != after
    assert kept.get("/ok.txt").body == b"ok\n"  # the connection made before goes on
    kept.close()


def test_certificate_reloads_under_load_fail_no_request(tern_factory, pki):
    import threading
    cert, key = pki.issue("a.test", tag=".load")
    server = tern_factory({"tls": {"cert": cert, "key": key}}, tls=True)
    server.write_file("ok.txt", b"ok\n")
    stop = threading.Event()
    results = {"ok": 0, "failed": []}
    lock = threading.Lock()

    def client():
        while not stop.is_set():
            try:
                with server.connect() as conn:  # a new connection (and handshake) each time
                    for _ in range(3):
                        resp = conn.get("/ok.txt")
                        assert resp.status == 200 and resp.body == b"ok\n", resp
                with lock:
                    results["ok"] += 1
            except Exception as e:  # noqa: BLE001 - every failure is the finding
                with lock:
                    results["failed"].append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for round_ in range(3):
            time.sleep(0.5)
            new_cert, new_key = pki.issue("a.test", tag=f".load{round_}")
            os.replace(new_cert, cert)
            os.replace(new_key, key)
            server.reload()
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert results["failed"] == [], results["failed"][:5]
    assert results["ok"] > 10


def test_scheme_and_a_redirect_to_https(tern_factory, pki):
    cert, key = pki.issue("a.test")
    server = tern_factory({"tls": {"cert": cert, "key": key}, "server": [{
        "location": [{"exact": "/go", "return": {"status": 301, "url": "$scheme://$host/there"}},
                     {"prefix": "/", "headers": {"Strict-Transport-Security": "max-age=63072000"}}],
    }]}, tls=True)
    server.write_file("index.html", b"home\n")
    with server.connect() as conn:
        resp = conn.get("/go", headers=[("Host", "a.test")])
        assert resp.status == 301 and resp.header("Location") == "https://a.test/there"
        resp = conn.get("/", headers=[("Host", "a.test")])
        assert resp.header("Strict-Transport-Security") == "max-age=63072000"


def test_php_sees_https(php_factory, tern_factory, fpm, pki):
    cert, key = pki.issue("a.test")
    server = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address)],
                                  {"tls": {"cert": cert, "key": key}}, tls=True)
    with server.connect() as conn:
        resp = conn.get("/echo.php")
        assert resp.status == 200, resp.body
        seen = json.loads(resp.body)["server"]
    assert seen["HTTPS"] == "on"
    assert seen["REQUEST_SCHEME"] == "https"
    assert seen["SSL_PROTOCOL"] in ("TLSv1.2", "TLSv1.3")
    assert seen["SSL_CIPHER"]


def test_the_users_app_marks_its_cookie_secure_over_https(tern_factory, pki, tmp_path):
    cert, key = pki.issue("a.test")
    config = auth_config(f"sqlite:{tmp_path}/users.db")
    config["tls"] = {"cert": cert, "key": key}
    server = tern_factory(config, tls=True)
    json_body(register(server, "alice", "correct horse battery"), 201)
    resp = login(server, "alice", "correct horse battery")
    json_body(resp, 200)
    assert "; Secure" in resp.header("Set-Cookie")


def tern_check(tmp_path, config_text):
    conf = tmp_path / "tls.toml"
    conf.write_text(config_text)
    return subprocess.run([str(TERN_BIN), "-t", "-c", str(conf)], capture_output=True, timeout=30)


def test_tls_config_mistakes_are_one_line_and_exit_2(tmp_path, pki):
    cert, key = pki.issue("a.test")
    other_cert, other_key = pki.issue("b.test")
    loose_key = tmp_path / "loose.key"
    loose_key.write_bytes(open(key, "rb").read())
    os.chmod(loose_key, 0o644)
    www = tmp_path / "www"
    www.mkdir()
    head = f'listen = ["127.0.0.1:8443 tls"]\n[static]\nroot = "{www}"\n'
    cases = {
        "does not match": f'[tls]\ncert = "{cert}"\nkey = "{other_key}"\n',
        "every user": f'[tls]\ncert = "{cert}"\nkey = "{loose_key}"\n',
        "no site there has a certificate": "",
        "only \"TLSv1.2\" and \"TLSv1.3\"": f'[tls]\ncert = "{cert}"\nkey = "{key}"\nprotocols = ["TLSv1.1"]\n',
        "as many key files": f'[tls]\ncert = ["{cert}", "{other_cert}"]\nkey = "{key}"\n',
        "tls.cert": f'[tls]\ncert = "{tmp_path}/missing.pem"\nkey = "{key}"\n',
        "kernel_tls": f'[tls]\ncert = "{cert}"\nkey = "{key}"\nkernel_tls = "yes"\n',
    }
    for needle, tls in cases.items():
        out = tern_check(tmp_path, head + tls)
        lines = out.stderr.decode().strip().splitlines()
        assert out.returncode == 2, (needle, out.stderr.decode())
        assert len(lines) == 1 and needle in lines[0] and "tls.toml:" in lines[0], (needle, lines)
    # An expired certificate is a warning: the check passes and says so.
    old_cert, old_key = pki.issue("old.test", expired=True)
    out = tern_check(tmp_path, head + f'[tls]\ncert = "{old_cert}"\nkey = "{old_key}"\n')
    assert out.returncode == 0, out.stderr.decode()
    assert "expired" in out.stderr.decode()


def test_tls_flags_make_every_listen_address_https(tern_factory, pki, tmp_path):
    cert, key = pki.issue("a.test")
    server = tern_factory(args=["--tls-cert", cert, "--tls-key", key])
    server.tls = True  # the config's address is plain: the flags made it HTTPS
    server.write_file("ok.txt", b"ok\n")
    with server.connect() as conn:
        assert conn.get("/ok.txt").body == b"ok\n"
    out = subprocess.run([str(TERN_BIN), "-t", "--tls-cert", cert], capture_output=True, timeout=30)
    assert out.returncode == 2 and b"--tls-key" in out.stderr


ARTIFACTS = REPO_ROOT / "build" / "test-artifacts"


def test_testssl_rates_nothing_high_or_critical(tern_factory, pki, tmp_path):
    """testssl.sh's protocol, cipher, defaults, header and vulnerability
    checks, with the test CA trusted; its verdicts are kept in
    build/test-artifacts/testssl.json. Once per build without TSan (a
    scan is hundreds of handshakes)."""
    cert, key = pki.issue("a.test", tag=".scan", extra=["crlDistributionPoints=URI:http://crl.a.test/ca.crl"])
    server = tern_factory({"tls": {"cert": cert, "key": key}}, tls=True)
    if server.runs_under("libtsan"):
        pytest.skip("testssl.sh runs in the builds without ThreadSanitizer")
    server.write_file("index.html", b"home\n")
    report = tmp_path / "testssl.json"
    out = subprocess.run(["testssl", "--quiet", "--color", "0", "--warnings", "off", "--add-ca", str(pki.ca),
                          "--ip", "127.0.0.1", "--protocols", "--server-defaults", "--fs", "--headers",
                          "--vulnerable", "--jsonfile-pretty", str(report), f"https://a.test:{server.port}/"],
                         capture_output=True, timeout=600)
    assert report.exists(), out.stdout.decode(errors="replace")[-3000:]
    scan = json.loads(report.read_text())["scanResult"][0]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "testssl.json").write_text(report.read_text())
    findings = [(section, f["id"], f["severity"], f["finding"]) for section, items in scan.items()
                if isinstance(items, list) for f in items if isinstance(f, dict)]
    bad = [f for f in findings if f[2] in ("HIGH", "CRITICAL")]
    assert not bad, bad
    by_id = {f[1]: f[3] for f in findings}
    for old in ("SSLv2", "SSLv3", "TLS1", "TLS1_1"):
        assert by_id[old].startswith("not offered"), (old, by_id[old])
    assert by_id["TLS1_2"].startswith("offered") and by_id["TLS1_3"].startswith("offered")
    assert by_id["PFS"] == "offered", by_id["PFS"]  # forward secrecy

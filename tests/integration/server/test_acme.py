"""Automatic HTTPS against a real ACME CA: Pebble (Debian `pebble`), with
pebble-challtestsrv as its DNS server (every name is 127.0.0.1), validating
HTTP-01 on tern's plain port. tern orders a certificate for a site with
[server.tls] acme = true, serves a self-signed stand-in until it has it,
renews it, and shares its storage with another node."""

import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tern_server import START_TIMEOUT, TERN_BIN, free_port, wait_until

PEBBLE = os.environ.get("TERN_PEBBLE") or shutil.which("pebble")
CHALLTESTSRV = shutil.which("pebble-challtestsrv")
NAME = "site.tern.test"

pytestmark = pytest.mark.skipif(not PEBBLE or not CHALLTESTSRV,
                                reason="pebble is not installed (./scripts/test installs it)")


class Pebble:
    """Pebble and its DNS, on free ports; HTTP-01 validated on http_port."""

    def __init__(self, workdir, http_port, tls_port, env=None, mac_keys=None):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.http_port = http_port
        self.tls_port = tls_port
        self.env = env or {}
        self.port = free_port()
        self.management = free_port()
        self.dns = _free_udp_and_tcp_port()
        self.procs = []
        cert, key = self.dir / "listener.pem", self.dir / "listener.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "2",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True)
        self.listener_cert = cert
        (self.dir / "pebble.json").write_text(json.dumps({"pebble": {
            "listenAddress": f"127.0.0.1:{self.port}",
            "managementListenAddress": f"127.0.0.1:{self.management}",
            "certificate": str(cert), "privateKey": str(key),
            "httpPort": http_port, "tlsPort": tls_port, "ocspResponderURL": "",
            "externalAccountBindingRequired": bool(mac_keys), "externalAccountMACKeys": mac_keys or {}}}))

    def validate_http_on(self, port):
        """HTTP-01 is validated on `port` (tern's plain port, known once it
        runs); before start()."""
        self.http_port = port
        config = json.loads((self.dir / "pebble.json").read_text())
        config["pebble"]["httpPort"] = port
        (self.dir / "pebble.json").write_text(json.dumps(config))

    @property
    def directory(self):
        # By address, not "localhost": that name is ::1 first, where another
        # test's server may hold the same port number at the same time (the
        # port was found free on 127.0.0.1 only), and a client that reaches
        # it waits out its read timeout.
        return f"https://127.0.0.1:{self.port}/dir"

    def start(self):
        """Starts the DNS server and the CA; returns once both answer. The
        DNS server's ports are picked again when another process took one
        between the pick and the bind (the CA's own port is in tern's
        config already)."""
        for _ in range(5):
            log = open(self.dir / "challtestsrv.log", "ab")
            dns = subprocess.Popen(
                [CHALLTESTSRV, "-dns01", f"127.0.0.1:{self.dns}", "-http01", "", "-https01", "", "-tlsalpn01", "",
                 "-management", f"127.0.0.1:{free_port()}", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""],
                stdout=log, stderr=log)
            if wait_until(lambda: dns.poll() is not None or _resolves(self.dns, NAME), 10) and dns.poll() is None:
                self.procs.append(dns)
                break
            dns.kill()
            dns.wait()
            self.dns = _free_udp_and_tcp_port()
        else:
            raise AssertionError("pebble-challtestsrv did not start: " +
                                 (self.dir / "challtestsrv.log").read_text(errors="replace")[-2000:])
        env = {**os.environ, "PEBBLE_VA_NOSLEEP": "1", **self.env}
        # The CA's directory, over TLS with its listener's certificate: not
        # merely something listening on its port.
        context = ssl.create_default_context(cafile=str(self.listener_cert))

        def answers():
            try:
                with urllib.request.urlopen(self.directory, context=context, timeout=2) as response:
                    return response.status == 200
            except (OSError, ssl.SSLError):
                return False

        # The management port, picked when the config was written, may have
        # been taken since (an ephemeral port of some connection): pick it
        # again. The CA's own port is in tern's config, so it stays.
        for _ in range(5):
            log_path = self.dir / "pebble.log"
            seen = log_path.stat().st_size if log_path.exists() else 0
            log = open(log_path, "ab")
            pebble = subprocess.Popen(
                [PEBBLE, "-config", str(self.dir / "pebble.json"), "-dnsserver", f"127.0.0.1:{self.dns}"],
                stdout=log, stderr=log, env=env)
            if wait_until(lambda: pebble.poll() is not None or answers(), START_TIMEOUT) and pebble.poll() is None:
                self.procs.append(pebble)
                return self
            pebble.kill()
            pebble.wait()
            this_try = log_path.read_bytes()[seen:].decode(errors="replace")
            if f"127.0.0.1:{self.management}: bind: address already in use" not in this_try:
                break
            self.management = free_port()
            config = json.loads((self.dir / "pebble.json").read_text())
            config["pebble"]["managementListenAddress"] = f"127.0.0.1:{self.management}"
            (self.dir / "pebble.json").write_text(json.dumps(config))
        # Its last line (why it stopped) first: a summary shows one line.
        log = (self.dir / "pebble.log").read_text(errors="replace")
        lines = log.strip().splitlines() or ["(its log is empty)"]
        holders = subprocess.run(["ss", "-Htanp", f"sport = :{self.port}"], capture_output=True, text=True).stdout
        held_by = holders.strip().replace("\n", " | ") or "nothing"
        raise AssertionError(f"pebble did not start: {lines[-1]}; on its port {self.port}: {held_by}\n{log}")

    def offers_renewal_info(self):
        """Whether the CA's directory names renewal information (RFC 9773):
        Pebble 2.8 or later, which also checks the certificate an order
        says it replaces."""
        context = ssl.create_default_context(cafile=str(self.listener_cert))
        with urllib.request.urlopen(self.directory, context=context, timeout=10) as response:
            return "renewalInfo" in json.load(response)

    def log(self):
        """The end of Pebble's log, for a failure's message."""
        return "\npebble: " + (self.dir / "pebble.log").read_text(errors="replace")[-3000:]

    def root(self):
        """The PEM of the root Pebble issues under (made at its start)."""
        context = ssl.create_default_context(cafile=str(self.listener_cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{self.management}/roots/0", context=context,
                                    timeout=10) as response:
            path = self.dir / "root.pem"
            path.write_bytes(response.read())
            return path

    def set_renewal_window(self, certificate_pem, start, end):
        """Has the CA answer renewal information (RFC 9773) about the
        certificate with this window (Pebble 2.8 or later); False when
        this Pebble cannot."""
        window = {"suggestedWindow": {"start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
                                      "end": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end))}}
        body = json.dumps({"Certificate": certificate_pem, "ARIResponse": json.dumps(window)}).encode()
        context = ssl.create_default_context(cafile=str(self.listener_cert))
        request = urllib.request.Request(f"https://127.0.0.1:{self.management}/set-renewal-info/", data=body,
                                         method="POST")
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return response.status == 200
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False
            raise

    def stop(self):
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs = []


def _free_udp_and_tcp_port():
    """A port free for both UDP and TCP on 127.0.0.1 (a DNS server's)."""
    for _ in range(50):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise AssertionError("no port free for both UDP and TCP")


def _resolves(port, name):
    """Whether the DNS server on 127.0.0.1:port answers an A query for name."""
    query = struct.pack(">HHHHHH", 0x7e57, 0x0100, 1, 0, 0, 0)
    query += b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    query += struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.settimeout(0.5)
        try:
            udp.sendto(query, ("127.0.0.1", port))
            answer = udp.recv(512)
        except OSError:
            return False
    return len(answer) >= 12 and answer[:2] == query[:2] and struct.unpack(">H", answer[6:8])[0] > 0


@pytest.fixture
def pebbles():
    started = []

    def make(*args, **kwargs):
        pebble = Pebble(*args, **kwargs)
        started.append(pebble)
        return pebble

    yield make
    for pebble in started:
        pebble.stop()


def acme_config(pebble_dir, directory, tls_port, storage, **acme):
    """A catch-all plain site (the top-level listen: HTTP-01 is answered
    there, and the metrics and status page) and NAME's site on tls_port
    with acme."""
    return {
        "acme": {"directory": directory, "email": "ops@tern.test", "agree_tos": True, "storage": str(storage),
                 "ca_root": str(Path(pebble_dir) / "listener.pem"), "retry_after": "1s", **acme},
        "server": [
            {"names": [NAME], "listen": [f"127.0.0.1:{tls_port} tls"], "tls": {"acme": True}},
            {"names": [], "default": True, "location": [
                {"prefix": "/"},
                {"prefix": "/metrics", "metrics": "prometheus"},
                {"prefix": "/status", "metrics": "status"}]},
        ],
    }


def peer_certificate(port, name=NAME, cafile=None):
    """The DER of the certificate tern presents for `name`, and whether it
    verifies against `cafile`."""
    context = ssl.create_default_context(cafile=str(cafile)) if cafile else ssl._create_unverified_context()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=name) as tls:
            return tls.getpeercert(binary_form=True)


def issuer_of(der):
    out = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-issuer", "-serial"], input=der,
                         capture_output=True, check=True)
    return out.stdout.decode()


def wait_for(predicate, timeout, what):
    """predicate()'s first true value within timeout seconds; `what` names
    it in the failure, and may be a function called then (for the logs as
    they stand at the time out)."""
    value = wait_until(predicate, timeout, interval=0.1)
    if not value:
        raise AssertionError("timed out waiting for " + (what() if callable(what) else what))
    return value


def issued(server):
    return server.stderr().count("certificate issued")


def curl_https(port, root, path="/"):
    return subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", str(root), "--resolve",
                           f"{NAME}:{port}:127.0.0.1", "-o", "/dev/null", "-w", "%{http_code}",
                           f"https://{NAME}:{port}{path}"], capture_output=True, text=True)


def test_a_site_gets_its_certificate_by_http01_after_a_self_signed_stand_in(tern_factory, pebbles, tmp_path):
    tls_port = free_port()
    storage = tmp_path / "acme"
    pebble_dir = tmp_path / "pebble"
    # The CA is not up yet when tern starts (its port, which the CA
    # validates on, is known only then): the stand-in is served, the
    # failure logged and the order tried again.
    pebble = pebbles(pebble_dir, 0, tls_port)
    server = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, storage))
    server.wait_for_log("self-signed one is served until it is issued", timeout=30)
    server.wait_for_log("ordering a certificate failed", timeout=30)
    stand_in = peer_certificate(tls_port)
    metrics = server.get("/metrics").body.decode()
    assert f'tern_certificate_self_signed{{names="{NAME}"}} 1' in metrics, metrics
    assert f'tern_certificate_renewal_failing{{names="{NAME}"}} 1' in metrics
    assert "CN" in issuer_of(stand_in) and NAME in issuer_of(stand_in)
    # Storage: the directory 0700, the key 0600.
    assert oct(os.stat(storage).st_mode & 0o777) == "0o700"
    assert oct(os.stat(storage / "certificates" / NAME / "key.pem").st_mode & 0o777) == "0o600"

    pebble.validate_http_on(server.port)
    pebble.start()
    wait_for(lambda: issued(server) >= 1, 60, lambda: "the certificate: " + server.stderr()[-3000:])
    root = pebble.root()
    # New handshakes get the CA's certificate, which a client that trusts
    # the CA's root accepts for the name.
    der = wait_for(lambda: (d := peer_certificate(tls_port)) != stand_in and d, 10, "the new certificate")
    peer_certificate(tls_port, cafile=root)
    server.write_file("index.html", b"hello over https\n")
    result = curl_https(tls_port, root)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "200"
    assert "Pebble" in issuer_of(der)
    assert oct(os.stat(storage / "account.key").st_mode & 0o777) == "0o600"
    # The challenge's token was withdrawn from the storage once validated.
    assert list((storage / "challenges").iterdir()) == []

    # The metrics and the status page say what it is.
    metrics = server.get("/metrics").body.decode()
    names = f'names="{NAME}"'
    assert f"tern_certificate_self_signed{{{names}}} 0" in metrics, metrics
    assert f"tern_certificate_renewal_failing{{{names}}} 0" in metrics
    expiry = re.search(rf"tern_certificate_expiry_seconds{{{names}}} (\d+)", metrics)
    assert expiry and int(expiry.group(1)) > time.time() + 86400
    status = json.loads(server.get("/status?format=json").body)
    [certificate] = status["certificates"]
    assert certificate["names"] == [NAME] and certificate["last_result"] == "issued"
    assert certificate["self_signed"] is False and certificate["not_after"] == int(expiry.group(1))

    # A restart keeps it: no new order.
    server.stop()
    again = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, storage), name="again")
    time.sleep(2)
    assert peer_certificate(tls_port, cafile=root) == der
    assert issued(again) == 0
    assert "self-signed" not in again.stderr()


def test_a_site_gets_its_certificate_by_tls_alpn01(tern_factory, pebbles, tmp_path):
    tls_port = free_port()
    pebble_dir = tmp_path / "pebble"
    # The CA validates on the TLS port only; no plain port of tern's.
    pebble = pebbles(pebble_dir, free_port(), tls_port).start()
    server = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, tmp_path / "acme",
                                      challenges=["tls-alpn-01"]))
    wait_for(lambda: issued(server) >= 1, 60, lambda: "the certificate: " + server.stderr()[-3000:] + pebble.log())
    root = pebble.root()
    der = wait_for(lambda: _verified(tls_port, root), 10, "the certificate served")
    assert "Pebble" in issuer_of(der)
    # Once validated, a client offering acme-tls/1 gets the site's
    # certificate and no acme-tls/1 (no challenge is pending), and an
    # ordinary client is served.
    context = ssl.create_default_context(cafile=str(root))
    context.set_alpn_protocols(["acme-tls/1"])
    with socket.create_connection(("127.0.0.1", tls_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=NAME) as tls:
            assert tls.selected_alpn_protocol() is None
            assert tls.getpeercert(binary_form=True) == der
    server.write_file("index.html", b"hello\n")
    result = curl_https(tls_port, root)
    assert result.returncode == 0 and result.stdout == "200", result


def test_renewal_is_served_to_new_handshakes_and_open_connections_go_on(tern_factory, pebbles, tmp_path):
    tls_port = free_port()
    pebble_dir = tmp_path / "pebble"
    # A CA that refuses a third of the nonces: the client rides over it.
    pebble = pebbles(pebble_dir, 0, tls_port, env={"PEBBLE_WFE_NONCEREJECT": "30"})
    # Every certificate is past its renewal point at once: renewed at each check.
    server = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, tmp_path / "acme",
                                      renew_before="100000h", check_interval="3s"))
    pebble.validate_http_on(server.port)
    pebble.start()
    wait_for(lambda: issued(server) >= 1, 60, lambda: "the first certificate: " + server.stderr()[-3000:])
    root = pebble.root()
    first = wait_for(lambda: (d := peer_certificate(tls_port, cafile=root)) and d, 10, "the first certificate")
    # A connection made now stays open across the renewal.
    context = ssl.create_default_context(cafile=str(root))
    raw = socket.create_connection(("127.0.0.1", tls_port), timeout=10)
    kept = context.wrap_socket(raw, server_hostname=NAME)
    wait_for(lambda: issued(server) >= 2, 60, lambda: "the renewal: " + server.stderr()[-3000:])
    second = wait_for(lambda: (d := peer_certificate(tls_port, cafile=root)) != first and d, 10,
                      "the renewed certificate")
    assert issuer_of(second) != issuer_of(first)  # another serial
    kept.sendall(f"GET / HTTP/1.1\r\nHost: {NAME}\r\nConnection: close\r\n\r\n".encode())
    answer = b""
    while chunk := kept.recv(65536):
        answer += chunk
    kept.close()
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    assert server.proc.poll() is None


def test_the_cas_renewal_information_brings_the_renewal_forward(tern_factory, pebbles, tmp_path):
    tls_port = free_port()
    storage = tmp_path / "acme"
    pebble_dir = tmp_path / "pebble"
    pebble = pebbles(pebble_dir, 0, tls_port)
    server = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, storage, check_interval="2s"))
    pebble.validate_http_on(server.port)
    pebble.start()
    wait_for(lambda: issued(server) >= 1, 60, lambda: "the certificate: " + server.stderr()[-3000:] + pebble.log())
    root = pebble.root()
    first = wait_for(lambda: _verified(tls_port, root), 10, "the certificate served")
    # The CA's window for a new certificate is far ahead: checks come and
    # go with no order.
    time.sleep(5)
    assert issued(server) == 1, server.stderr()[-3000:]
    # The CA moves it into the past (as for a revocation to come): renewed
    # at the next check, the order naming the certificate it replaces.
    leaf = (storage / "certificates" / NAME / "certificate.pem").read_text()
    leaf = leaf[:leaf.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")] + "\n"
    now = time.time()
    if not pebble.set_renewal_window(leaf, now - 7200, now - 3600):
        pytest.skip("this Pebble has no renewal information to set (2.8 or later has; ./scripts/test builds one)")
    wait_for(lambda: issued(server) >= 2, 30, lambda: "the renewal: " + server.stderr()[-3000:] + pebble.log())
    second = wait_for(lambda: (d := _verified(tls_port, root)) != first and d, 10, "the renewed certificate")
    assert issuer_of(second) != issuer_of(first)
    assert "is a replacement of" in (pebble.dir / "pebble.log").read_text()
    time.sleep(3)
    assert issued(server) == 2, server.stderr()[-3000:]


def test_a_ca_that_needs_an_external_account_gets_the_binding_from_the_config(tern_factory, pebbles, tmp_path):
    tls_port, bare_tls_port = free_port(), free_port()
    pebble_dir = tmp_path / "pebble"
    mac_key = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"
    pebble = pebbles(pebble_dir, 0, tls_port, mac_keys={"kid-7": mac_key})
    # With the kid and key the CA issued: an account, and the certificate;
    # without them, the CA's refusal is logged and the stand-in stays.
    server = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, tmp_path / "acme",
                                      eab={"kid": "kid-7", "hmac_key": mac_key}))
    bare = tern_factory(acme_config(pebble_dir, pebble.directory, bare_tls_port, tmp_path / "bare"), name="bare")
    pebble.validate_http_on(server.port)
    pebble.start()
    wait_for(lambda: issued(server) >= 1, 60, lambda: "the certificate: " + server.stderr()[-3000:] + pebble.log())
    root = pebble.root()
    wait_for(lambda: _verified(tls_port, root), 10, "the certificate")
    bare.wait_for_log("externalAccountRequired", timeout=30)
    assert issued(bare) == 0


def test_a_ca_that_forgot_the_account_and_the_certificate_gets_both_anew(tern_factory, pebbles, tmp_path):
    tls_port = free_port()
    pebble_dir = tmp_path / "pebble"
    pebble = pebbles(pebble_dir, 0, tls_port)
    server = tern_factory(acme_config(pebble_dir, pebble.directory, tls_port, tmp_path / "acme",
                                      renew_before="100000h", check_interval="2s"))
    pebble.validate_http_on(server.port)
    pebble.start()
    wait_for(lambda: issued(server) >= 1, 60, lambda: "the certificate: " + server.stderr()[-3000:] + pebble.log())
    # The CA starts again with an empty database and a new root (on the
    # same address), as after a reset or when `directory` names another
    # CA: the account tern knows is gone, and the certificate it replaces
    # is not the CA's. The next renewal makes the account again and orders
    # without naming what it replaces.
    pebble.stop()
    pebble.start()
    wait_for(lambda: issued(server) >= 2, 60, lambda: "the renewal: " + server.stderr()[-3000:] + pebble.log())
    root = pebble.root()
    wait_for(lambda: _verified(tls_port, root), 10, "the certificate of the new CA")
    # The error log is flushed about once a second: the lines that came
    # before the certificate may not be there yet when it is served.
    assert server.wait_for_log("accountDoesNotExist"), server.stderr()[-3000:]
    if pebble.offers_renewal_info():  # an older Pebble ignores what an order replaces
        assert server.wait_for_log("refused the order as a replacement"), server.stderr()[-3000:]


def test_nodes_sharing_the_storage_order_once_and_answer_each_others_challenges(tern_factory, pebbles, tmp_path):
    tls_a, tls_b = free_port(), free_port()
    storage = tmp_path / "shared"
    pebble_dir = tmp_path / "pebble"
    pebble = pebbles(pebble_dir, 0, tls_a)
    a = tern_factory(acme_config(pebble_dir, pebble.directory, tls_a, storage, check_interval="2s"), name="a")
    b = tern_factory(acme_config(pebble_dir, pebble.directory, tls_b, storage, check_interval="2s"), name="b")
    # The CA validates on a's port only: whichever node orders, a answers
    # (b's tokens are in the storage).
    pebble.validate_http_on(a.port)
    pebble.start()
    wait_for(lambda: issued(a) + issued(b) >= 1, 60,
             lambda: "a certificate: " + a.stderr()[-3000:] + b.stderr()[-3000:] + pebble.log())
    root = pebble.root()
    der_a = wait_for(lambda: _verified(tls_a, root), 30, "a's certificate")
    der_b = wait_for(lambda: _verified(tls_b, root), 30, "b's certificate")
    assert der_a == der_b
    time.sleep(3)
    assert issued(a) + issued(b) == 1, a.stderr()[-2000:] + b.stderr()[-2000:]


def test_a_node_answers_the_challenge_another_node_asked_for(tern_factory, pebbles, tmp_path):
    tls_a, tls_b = free_port(), free_port()
    storage = tmp_path / "shared"
    pebble_dir = tmp_path / "pebble"
    pebble = pebbles(pebble_dir, 0, tls_a)
    # a fails its first order (the CA is not up) and waits an hour; b
    # orders as soon as the CA is up, and the CA asks a (its port).
    a = tern_factory(acme_config(pebble_dir, pebble.directory, tls_a, storage, check_interval="2s",
                                 retry_after="1h"), name="a")
    a.wait_for_log("ordering a certificate failed", timeout=30)
    b = tern_factory(acme_config(pebble_dir, pebble.directory, tls_b, storage), name="b")
    pebble.validate_http_on(a.port)
    pebble.start()
    wait_for(lambda: issued(b) >= 1, 60,
             lambda: "b's certificate: " + a.stderr()[-3000:] + b.stderr()[-3000:] + pebble.log()
             + "\nb's threads:\n" + b.thread_stacks())
    root = pebble.root()
    # a, which ordered nothing, finds it in the storage on its next look.
    der_a = wait_for(lambda: _verified(tls_a, root), 30, "a's certificate")
    assert der_a == _verified(tls_b, root)
    assert issued(a) == 0
    assert a.stderr().count("ordering a certificate failed") == 1


def _verified(port, root):
    try:
        return peer_certificate(port, cafile=root)
    except ssl.SSLError:
        return None


@pytest.mark.parametrize("site, acme, message", [
    ({"names": ["*.tern.test"]}, {}, "wildcard needs DNS-01"),
    ({"names": ["~^a+\\.tern\\.test$"]}, {}, "exact names"),
    ({"names": []}, {}, "needs its names"),
    ({"names": [NAME]}, {"agree_tos": False}, "agree_tos"),
    ({"names": [NAME], "tls": {"acme": True, "cert": "c.pem", "key": "k.pem"}}, {}, "not both"),
])
def test_acme_configs_that_cannot_work_are_refused_with_file_line_and_key(tmp_path, site, acme, message):
    tls = site.pop("tls", {"acme": True})
    config = {"acme": {"agree_tos": True, "storage": str(tmp_path / "acme"), **acme}}
    lines = [f"listen = [\"127.0.0.1:{free_port()} tls\"]", "[acme]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in config["acme"].items()]
    lines += ["[[server]]", f"names = {json.dumps(site['names'])}", "[server.tls]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in tls.items()]
    path = tmp_path / "tern.toml"
    path.write_text("\n".join(lines) + "\n")
    result = subprocess.run([str(TERN_BIN), "-t", "-c", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result.stderr
    assert re.search(r"tern\.toml:\d+", result.stderr), result.stderr
    assert message in result.stderr, result.stderr
    assert "acme" in result.stderr


def test_acme_in_the_top_level_tls_table_is_refused(tmp_path):
    path = tmp_path / "tern.toml"
    path.write_text("[tls]\nacme = true\n")
    result = subprocess.run([str(TERN_BIN), "-t", "-c", str(path)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "tls.acme" in result.stderr and "per site" in result.stderr

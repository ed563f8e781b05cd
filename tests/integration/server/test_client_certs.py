"""Mutual TLS: a site asks its clients for certificates from a CA of its
own ([server.tls] client_ca, verify_client, client_crl). curl with and
without a certificate, over HTTP/1.1 and HTTP/2: a verified one gets in,
none, a revoked one, an expired one or one from another CA get 400; what
was found goes to the access log, to PHP (SSL_CLIENT_*) and to an upstream
(set_headers = { X = "$ssl_client_s_dn" }); a resumed session keeps its
certificate, and a session made where no certificate was asked does not
open a site that asks for one."""

import json
import socket
import ssl
import subprocess
import time

import pytest

from php_site import fastcgi_block, start_fastcgi_server
from test_access import wait_for_lines
from test_proxy import apps  # noqa: F401 (a fixture)
from tern_server import TERN_BIN
from test_tls import Pki, run


class ClientCa:
    """A CA of client certificates with a database, so that it can revoke
    them and publish a revocation list."""

    def __init__(self, directory):
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.ca = directory / "ca.pem"
        self.crl = directory / "crl.pem"
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(directory / "ca.key"), "-out", str(self.ca), "-days", "30",
            "-subj", "/CN=tern client CA")
        (directory / "index.txt").touch()
        (directory / "serial").write_text("1000\n")
        (directory / "ca.cnf").write_text(
            "[ca]\ndefault_ca=t\n[t]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\n"
            "policy=p\nunique_subject=no\ndefault_days=30\ndefault_crl_days=30\n[p]\ncommonName=supplied\n"
            "organizationName=optional\n")
        self.publish()

    def _ca(self, *args):
        run("openssl", "ca", "-config", "ca.cnf", "-batch", "-cert", "ca.pem", "-keyfile", "ca.key", *args,
            cwd=self.dir)

    def issue(self, name, expired=False):
        """(cert, key) with the subject CN=name, O=Example ("O=Example,CN=name"
        in RFC 2253's order, the last name first, as nginx writes it)."""
        cert, key, csr = (str(self.dir / f"{name}{suffix}") for suffix in (".pem", ".key", ".csr"))
        run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN={name}/O=Example")
        dates = ["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"] if expired else []
        self._ca("-notext", "-in", csr, "-out", cert, *dates)
        return cert, key

    def revoke(self, cert):
        self._ca("-revoke", cert)
        self.publish()

    def publish(self):
        self._ca("-gencrl", "-out", str(self.crl))


def fingerprint(cert):
    out = run("openssl", "x509", "-noout", "-fingerprint", "-sha1", "-in", cert).stdout.decode()
    return out.strip().split("=", 1)[1].replace(":", "").lower()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    return ClientCa(tmp_path_factory.mktemp("clients"))


LOG_FORMAT = '$status $ssl_client_verify "$ssl_client_s_dn" "$ssl_client_i_dn" $ssl_client_fingerprint'


def curl(server, pki, path, *args, version="--http1.1"):
    """(status, body) of a GET for https://a.test/path."""
    out = subprocess.run(["curl", "-sS", version, "--cacert", str(pki.ca), "--resolve",
                          f"a.test:{server.port}:127.0.0.1", "-w", "\n%{http_code} %{http_version}", *args,
                          f"https://a.test:{server.port}{path}"], capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode()
    body, _, tail = out.stdout.rpartition(b"\n")
    status, got_version = tail.decode().split()
    assert got_version == ("2" if version == "--http2" else "1.1"), got_version
    return int(status), body


def with_cert(pair):
    return ("--cert", pair[0], "--key", pair[1])


@pytest.fixture
def guarded(tern_factory, pki, clients):
    """a.test asks every client for a certificate from `clients` (on)."""
    cert, key = pki.issue("a.test")
    server = tern_factory({
        "access_log": "access.log", "access_log_format": LOG_FORMAT,
        "server": [{"names": ["a.test"],
                    "tls": {"cert": cert, "key": key, "client_ca": str(clients.ca), "client_crl": str(clients.crl)},
                    "location": [{"prefix": "/", "return": {"status": 200, "body": "in"}}]}],
    }, tls=True)
    return server


@pytest.mark.parametrize("version", ["--http1.1", "--http2"])
def test_verify_client_on_lets_in_only_a_verified_certificate(guarded, pki, clients, tmp_path_factory, version):
    alice = clients.issue(f"alice{version[-1]}")
    bob = clients.issue(f"bob{version[-1]}")
    clients.revoke(bob[0])
    old = clients.issue(f"old{version[-1]}", expired=True)
    stranger = Pki(tmp_path_factory.mktemp("other")).issue("mallory")
    guarded.reload()  # the revocation list, published again

    assert curl(guarded, pki, "/", *with_cert(alice), version=version) == (200, b"in")
    for refused in ((), with_cert(bob), with_cert(old), with_cert(stranger)):
        status, _ = curl(guarded, pki, "/", *refused, version=version)
        assert status == 400, refused
    lines = wait_for_lines(guarded.workdir / "access.log", 5)
    assert lines[0] == f'200 SUCCESS "O=Example,CN=alice{version[-1]}" "CN=tern client CA" {fingerprint(alice[0])}'
    assert lines[1] == '400 NONE "-" "-" -'
    assert lines[2].startswith('400 FAILED:certificate revoked "O=Example,CN=bob'), lines[2]
    assert lines[3].startswith('400 FAILED:certificate has expired "O=Example,CN=old'), lines[3]
    assert lines[4].startswith('400 FAILED:unable to ') and '"CN=mallory"' in lines[4], lines[4]
    assert len(lines) == 5, lines


def test_optional_asks_and_a_location_may_require(tern_factory, pki, clients, apps, tmp_path_factory):
    (app,) = apps("app")
    cert, key = pki.issue("a.test")
    alice = clients.issue("alice-optional")
    stranger = Pki(tmp_path_factory.mktemp("stranger")).issue("mallory")
    server = tern_factory({"server": [{
        "names": ["a.test"],
        "tls": {"cert": cert, "key": key, "client_ca": str(clients.ca), "verify_client": "optional"},
        "location": [
            {"prefix": "/admin/", "require_client_cert": True, "return": {"status": 200, "body": "admin"}},
            {"prefix": "/", "proxy": {"pass": f"http://{app.address}", "set_headers": {
                "X-Client-DN": "$ssl_client_s_dn", "X-Client-Verify": "$ssl_client_verify",
                "X-Client-Fingerprint": "$ssl_client_fingerprint"}}},
        ]}]}, tls=True)
    for version in ("--http1.1", "--http2"):
        assert curl(server, pki, "/admin/", version=version)[0] == 400
        assert curl(server, pki, "/admin/", *with_cert(alice), version=version) == (200, b"admin")
        status, body = curl(server, pki, "/echo", *with_cert(alice), version=version)
        assert status == 200, body
        seen = {k.lower(): v for k, v in json.loads(body)["headers"]}
        assert seen["x-client-dn"] == "O=Example,CN=alice-optional"
        assert seen["x-client-verify"] == "SUCCESS"
        assert seen["x-client-fingerprint"] == fingerprint(alice[0])
        # Without a certificate: NONE, and no empty fields.
        status, body = curl(server, pki, "/echo", "-H", "X-Client-DN: forged", version=version)
        seen = {k.lower(): v for k, v in json.loads(body)["headers"]}
        assert seen["x-client-verify"] == "NONE"
        assert "x-client-dn" not in seen and "x-client-fingerprint" not in seen, seen
        # One that does not verify is refused everywhere, as nginx does:
        # its subject is no one's to pass on.
        assert curl(server, pki, "/echo", *with_cert(stranger), version=version)[0] == 400


def test_php_sees_the_client_certificate(php_factory, tern_factory, fpm, pki, clients):
    cert, key = pki.issue("a.test")
    alice = clients.issue("alice-php")
    server = start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address)], {"tls": {
        "cert": cert, "key": key, "client_ca": str(clients.ca), "verify_client": "optional"}}, tls=True)
    status, body = curl(server, pki, "/echo.php", *with_cert(alice))
    assert status == 200, body
    seen = json.loads(body)["server"]
    assert seen["SSL_CLIENT_VERIFY"] == "SUCCESS"
    assert seen["SSL_CLIENT_S_DN"] == "O=Example,CN=alice-php"
    assert seen["SSL_CLIENT_I_DN"] == "CN=tern client CA"
    assert seen["SSL_CLIENT_FINGERPRINT"] == fingerprint(alice[0])
    assert int(seen["SSL_CLIENT_M_SERIAL"], 16) > 0
    status, body = curl(server, pki, "/echo.php")
    seen = json.loads(body)["server"]
    assert seen["SSL_CLIENT_VERIFY"] == "NONE" and "SSL_CLIENT_S_DN" not in seen


def https_get(port, context, name, session=None, host=None):
    """(status line, the TLS session, whether it resumed) of GET / with SNI
    `name` (and Host `host`, else the same); the connection reads its
    response, so TLS 1.3 tickets arrive."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=name, session=session) as tls:
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {host or name}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := tls.recv(65536):
                data += chunk
            return data.split(b"\r\n", 1)[0].decode(), tls.session, tls.session_reused


@pytest.mark.parametrize("protocol", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_resumed_session_keeps_its_certificate_and_opens_no_other_site(tern_factory, pki, clients, protocol):
    a_cert, a_key = pki.issue("a.test")
    b_cert, b_key = pki.issue("b.test")
    alice = clients.issue(f"alice-resumed-{protocol.name}")
    server = tern_factory({
        "access_log": "access.log", "access_log_format": LOG_FORMAT,
        "server": [
            {"names": ["open.test"], "default": True, "tls": {"cert": b_cert, "key": b_key},
             "location": [{"prefix": "/", "return": {"status": 200, "body": "open"}}]},
            {"names": ["a.test"], "tls": {"cert": a_cert, "key": a_key, "client_ca": str(clients.ca)},
             "location": [{"prefix": "/", "return": {"status": 200, "body": "in"}}]},
        ]}, tls=True)

    def context(with_certificate):
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ctx.check_hostname = False
        ctx.minimum_version = ctx.maximum_version = protocol
        if with_certificate:
            ctx.load_cert_chain(*alice)
        return ctx

    ctx = context(True)
    status, session, reused = https_get(server.port, ctx, "a.test")
    assert status == "HTTP/1.1 200 OK" and not reused
    status, _, reused = https_get(server.port, ctx, "a.test", session)
    assert status == "HTTP/1.1 200 OK" and reused
    lines = wait_for_lines(server.workdir / "access.log", 2)
    assert lines[0] == lines[1] == (f'200 SUCCESS "O=Example,CN=alice-resumed-{protocol.name}" '
                                    f'"CN=tern client CA" {fingerprint(alice[0])}'), lines

    # A session of the site that asks for nothing, offered to the one that
    # asks: a full handshake, without a certificate, refused.
    bare = context(False)
    status, session, _ = https_get(server.port, bare, "open.test")
    assert status == "HTTP/1.1 200 OK"
    status, _, reused = https_get(server.port, bare, "a.test", session)
    assert not reused and status == "HTTP/1.1 400 Bad Request"
    # A connection made for the open site, asked for the other: 421, the
    # client is to connect again for that name.
    status, _, _ = https_get(server.port, ctx, "open.test", host="a.test")
    assert status == "HTTP/1.1 421 Misdirected Request"


def test_a_certificate_of_another_sites_ca_is_misdirected(tern_factory, pki, clients, tmp_path_factory):
    """a.test trusts one CA (optional), b.test another (on): a connection
    made for a.test with a.test's client certificate, asked for b.test, is
    421 (the client connects again for b.test), not let in."""
    other = ClientCa(tmp_path_factory.mktemp("other-clients"))
    a_cert, a_key = pki.issue("a.test")
    b_cert, b_key = pki.issue("b.test")
    alice = clients.issue("alice-a")
    bob = other.issue("bob-b")
    server = tern_factory({"server": [
        {"names": ["a.test"], "default": True,
         "tls": {"cert": a_cert, "key": a_key, "client_ca": str(clients.ca), "verify_client": "optional"},
         "location": [{"prefix": "/", "return": {"status": 200, "body": "a"}}]},
        {"names": ["b.test"], "tls": {"cert": b_cert, "key": b_key, "client_ca": str(other.ca)},
         "location": [{"prefix": "/", "return": {"status": 200, "body": "b"}}]},
    ]}, tls=True)

    def context(pair):
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ctx.check_hostname = False
        ctx.load_cert_chain(*pair)
        return ctx

    assert https_get(server.port, context(alice), "a.test")[0] == "HTTP/1.1 200 OK"
    assert https_get(server.port, context(bob), "b.test")[0] == "HTTP/1.1 200 OK"
    assert https_get(server.port, context(alice), "a.test", host="b.test")[0] == "HTTP/1.1 421 Misdirected Request"


def test_a_session_from_before_a_revocation_is_verified_again(tern_factory, pki, tmp_path_factory):
    """The CRL changes at the same path and tern reloads: a session made
    with the certificate before it was revoked does not resume, and the
    certificate is refused."""
    clients = ClientCa(tmp_path_factory.mktemp("revoking"))
    cert, key = pki.issue("a.test")
    carol = clients.issue("carol")
    server = tern_factory({"server": [{
        "names": ["a.test"],
        "tls": {"cert": cert, "key": key, "client_ca": str(clients.ca), "client_crl": str(clients.crl)},
        "location": [{"prefix": "/", "return": {"status": 200, "body": "in"}}]}]}, tls=True)
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.check_hostname = False
    ctx.load_cert_chain(*carol)
    status, session, _ = https_get(server.port, ctx, "a.test")
    assert status == "HTTP/1.1 200 OK"
    assert https_get(server.port, ctx, "a.test", session)[2], "resumes before the revocation"
    clients.revoke(carol[0])
    server.reload()
    status, _, reused = https_get(server.port, ctx, "a.test", session)
    assert not reused and status == "HTTP/1.1 400 Bad Request", (status, reused)


def test_client_certificate_settings_are_checked(pki, clients, tmp_path):
    cert, key = pki.issue("a.test")
    cases = [
        ({"verify_client": "on"}, "server[0].tls.client_ca", "required"),
        ({"verify_client": "sometimes", "client_ca": str(clients.ca)}, "server[0].tls.verify_client", "expected"),
        ({"client_ca": str(tmp_path / "missing.pem")}, "server[0].tls.client_ca", "missing.pem"),
        ({"client_ca": str(clients.ca), "client_crl": str(tmp_path / "none.pem")}, "server[0].tls.client_crl",
         "none.pem"),
    ]
    for extra, key_name, words in cases:
        config = tmp_path / "tern.toml"
        tls = {"cert": cert, "key": key, **extra}
        config.write_text("listen = [\"127.0.0.1:8443 tls\"]\n[[server]]\n[server.tls]\n" +
                          "".join(f'{k} = "{v}"\n' for k, v in tls.items()))
        proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(config)], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 2, (extra, proc.stdout, proc.stderr)
        message = (proc.stdout + proc.stderr).strip().splitlines()[-1]
        assert f"{config}:" in message and key_name in message and words in message, (extra, message)
    config.write_text(f'listen = ["127.0.0.1:8443 tls"]\n[[server]]\n[server.tls]\ncert = "{cert}"\nkey = "{key}"\n'
                      '[[server.location]]\nprefix = "/"\nrequire_client_cert = true\n')
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(config)], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "require_client_cert" in proc.stderr, proc.stderr


def test_the_readme_example_serves_as_written(tern_factory, pki, clients, apps, tmp_path):
    """README "Client certificates (mutual TLS)": its config with its files
    made by the test CAs and the application on the test's port."""
    from test_config import readme_toml
    import tomllib
    (app,) = apps("app")
    cert, key = pki.issue("internal.example.com")
    alice = clients.issue("alice-readme")
    # /api/x goes up as /echo/x, which the application answers.
    text = readme_toml("### Client certificates").replace('"http://127.0.0.1:3000"', f'"http://{app.address}/echo/"')
    for name, path in (("internal.pem", cert), ("internal.key", key), ("clients-ca.pem", clients.ca),
                       ("clients-crl.pem", clients.crl)):
        text = text.replace(f"/etc/tern/{name}", str(path))
    config = tomllib.loads(text)
    del config["listen"]  # the test's own address
    config["access_log"] = "access.log"
    srv = tern_factory(config, tls=True)
    srv.write_file("admin/index.html", b"admin\n")

    def get(path, *args):
        out = subprocess.run(["curl", "-sS", "--cacert", str(pki.ca), "--resolve",
                              f"internal.example.com:{srv.port}:127.0.0.1", "-w", "\n%{http_code}", *args,
                              f"https://internal.example.com:{srv.port}{path}"], capture_output=True, timeout=60)
        body, _, status = out.stdout.rpartition(b"\n")
        return int(status), body

    assert get("/admin/")[0] == 400
    assert get("/admin/", *with_cert(alice)) == (200, b"admin\n")
    status, body = get("/api/x", *with_cert(alice))
    assert status == 200, body
    seen = {k.lower(): v for k, v in json.loads(body)["headers"]}
    assert (seen["x-client-dn"], seen["x-client-verify"]) == ("O=Example,CN=alice-readme", "SUCCESS")
    lines = wait_for_lines(srv.workdir / "access.log", 3)
    assert lines[1].startswith('127.0.0.1 "O=Example,CN=alice-readme" SUCCESS "GET /admin/ HTTP/2.0" 200'), lines

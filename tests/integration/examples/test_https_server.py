"""examples/https_server with real TLS clients (curl over HTTP/1.1 and
HTTP/2, Python's ssl): the certificate verifies, ALPN picks the protocol,
and certificates that do not load stop it with the reason."""

import socket
import ssl
import subprocess

import pytest

from conftest import EXAMPLES_DIR


@pytest.fixture
def certificate(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def curl(server, cert, *args):
    result = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", str(cert),
                             "--resolve", f"localhost:{server.port}:127.0.0.1",
                             "-w", "\n%{http_version} %{response_code}", *args,
                             f"https://localhost:{server.port}/hello"],
                            capture_output=True, text=True, timeout=20)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("threads", [0, 2])
def test_http1_and_http2_over_a_verified_certificate(example, certificate, threads):
    cert, key = certificate
    server = example("https_server", "--cert", cert, "--key", key, "--threads", threads)
    assert curl(server, cert, "--http1.1") == "Hello over HTTP/1.1 and TLS\n\n1.1 200"
    assert curl(server, cert, "--http2") == "Hello over HTTP/2.0 and TLS\n\n2 200"


def test_alpn_and_the_handshake_seen_from_python(example, certificate):
    cert, key = certificate
    server = example("https_server", "--cert", cert, "--key", key)
    context = ssl.create_default_context(cafile=str(cert))
    context.set_alpn_protocols(["http/1.1"])
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.selected_alpn_protocol() == "http/1.1"
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            tls.sendall(b"GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"\r\nStrict-Transport-Security: max-age=31536000\r\n" in answer
    # A client that does not trust the certificate fails the handshake.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            ssl.create_default_context().wrap_socket(raw, server_hostname="localhost")


def test_a_certificate_that_does_not_load_stops_it_with_the_reason(certificate, tmp_path):
    cert, key = certificate
    missing = tmp_path / "nothing.pem"
    result = subprocess.run([str(EXAMPLES_DIR / "https_server"), "--port", "0", "--cert", str(cert),
                             "--key", str(missing)], capture_output=True, text=True, timeout=20)
    assert result.returncode == 2
    assert str(missing) in result.stderr
    not_a_key = tmp_path / "bad.pem"
    not_a_key.write_text("-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n")
    result = subprocess.run([str(EXAMPLES_DIR / "https_server"), "--port", "0", "--cert", str(cert),
                             "--key", str(not_a_key)], capture_output=True, text=True, timeout=20)
    assert result.returncode == 2 and result.stderr.startswith("https_server: "), result.stderr

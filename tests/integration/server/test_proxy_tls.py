"""The reverse proxy to upstreams over HTTPS: a real aiohttp application
speaking TLS (upstream_app.py with a certificate from a test CA) behind
tern. The certificate verified (chain and name), SNI sent, sessions
resumed by new connections, bodies both ways, health checks over TLS, and
an upstream that fails verification answered 502 with a log line."""

import hashlib
import http.client
import json
import os
import ssl
import time
from collections import Counter

import pytest

from test_proxy import apps, group, names_of, site  # noqa: F401 (apps is a fixture)
from test_tls import Pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


def tls_state(conn, close=False):
    response = conn.get("/tls?close=1" if close else "/tls")
    assert response.status == 200, response.body
    return json.loads(response.body)


def app_post(app, pki, path):
    """A POST straight to an HTTPS app, past tern."""
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", app.port, context=context, timeout=10)
    try:
        conn.request("POST", path, body=b"")
        return conn.getresponse().status
    finally:
        conn.close()


def test_an_https_upstream_is_verified_named_and_its_sessions_resumed(tern_factory, apps, pki):
    (app,) = apps("a", tls=pki.issue("app.test"))
    # The group's name is the name verified and sent (nginx's $proxy_host).
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "https://app.test", "tls": {"ca": str(pki.ca)}}},
                            [group("app.test", [app])]))
    assert srv.wait_for_log("proxy: upstream app.test over TLS (app.test, verified against")
    with srv.connect() as conn:
        first = tls_state(conn, close=True)
        assert first["sni"] == "app.test"
        assert first["version"] == "TLSv1.3"
        assert not first["resumed"]
        # The upstream closed that connection: the next one resumes the
        # session it was given.
        second = tls_state(conn, close=True)
        assert second["resumed"], second
        # Bodies both ways, over the pooled connection.
        body = os.urandom(900_001)
        answer = conn.request(b"POST /sha256 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert answer.status == 200
        assert json.loads(answer.body) == {"sha256": hashlib.sha256(body).hexdigest(), "length": len(body), "name": "a"}
        download = conn.get("/bytes?n=2000000")
        assert download.status == 200 and len(download.body) == 2_000_000
        echoed = dict(json.loads(conn.get("/echo/x").body)["headers"])
        assert echoed["X-Forwarded-Proto"] == "http"


def test_a_certificate_that_fails_verification_gets_502_and_says_why(tern_factory, apps, pki):
    (app,) = apps("a", tls=pki.issue("app.test"))
    address = f"127.0.0.1:{app.port}"
    srv = tern_factory(site([
        # No name: the address's IP is what the certificate must carry, and
        # it carries app.test only.
        {"prefix": "/by-ip/", "proxy": {"pass": f"https://{address}/", "tls": {"ca": str(pki.ca)}}},
        # A CA that did not sign it.
        {"prefix": "/other-ca/", "proxy": {"pass": f"https://{address}/",
                                           "tls": {"name": "app.test", "ca": pki.issue("stranger.test")[0]}}},
        # Named right: verified.
        {"prefix": "/named/", "proxy": {"pass": f"https://{address}/", "tls": {"name": "app.test", "ca": str(pki.ca)}}},
        # Not verified at all.
        {"prefix": "/unverified/", "proxy": {"pass": f"https://{address}/", "tls": {"verify": False}}},
    ]))
    with srv.connect() as conn:
        assert conn.get("/by-ip/name").status == 502
        assert srv.wait_for_log("certificate verify failed: IP address mismatch")
        time.sleep(1.1)  # connect failures are logged at most once a second
        assert conn.get("/other-ca/name").status == 502
        assert srv.wait_for_log("certificate verify failed: unable to get local issuer certificate")
        assert conn.get("/named/name").body == b"a"
        state = json.loads(conn.get("/named/tls").body)
        assert state["sni"] == "app.test"
        assert conn.get("/unverified/name").body == b"a"
        # An IP address is never sent as SNI.
        assert json.loads(conn.get("/unverified/tls").body)["sni"] is None


def test_health_checks_and_balancing_go_over_tls(tern_factory, apps, pki):
    cert = pki.issue("app.test")
    a, b = apps("a", "b", tls=cert)
    health = {"path": "/health", "interval": "200ms", "timeout": "500ms", "rise": 2, "fall": 2}
    srv = tern_factory(site({"prefix": "/", "proxy": {"pass": "https://app.test", "tls": {"ca": str(pki.ca)}}},
                            [group("app.test", [a, b], health=health)]))
    with srv.connect() as conn:
        assert names_of(conn, 10) == Counter({"a": 5, "b": 5})
        assert app_post(b, pki, "/health/down") == 200
        assert srv.wait_for_log(f"proxy app.test {b.address}: health check failed 2 time(s) in a row (status 503)")
        assert names_of(conn, 10) == Counter({"a": 10})
        assert app_post(b, pki, "/health/up") == 200
        assert srv.wait_for_log(f"proxy app.test {b.address}: health check passed 2 time(s) in a row (status 200)")
        assert names_of(conn, 10) == Counter({"a": 5, "b": 5})
    # The checks never failed on TLS itself.
    assert "TLS handshake" not in srv.stderr()

"""Upstreams by name, as in Docker Compose or Kubernetes: a real DNS server
(dnsmasq on a loopback port, answering from a hosts file the test rewrites)
names the application; tern follows its answer without a reload, no
request failing while the name moves, every address of the name serving,
and the last addresses kept when the DNS server goes away.

The two application "hosts" are 127.0.0.2 and 127.0.0.3, on the same port:
HTTP applications for the proxy, php-fpm pools for FastCGI ("php:9000", as
in a Compose file)."""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from http_client import HttpConn
from php_fpm import PhpFpm
from php_site import fastcgi_block, start_fastcgi_server
from test_proxy import App

DNSMASQ = shutil.which("dnsmasq") or "/usr/sbin/dnsmasq"


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free_on_both():
    """A TCP port free on 127.0.0.2 and 127.0.0.3."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.2", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.3", port))
                    return port
                except OSError:
                    continue
    raise AssertionError("no port free on both addresses")


class Dnsmasq:
    """dnsmasq answering from `hosts` with a TTL of one second."""

    def __init__(self, workdir, hosts):
        self.hosts = Path(workdir) / "hosts"
        self.hosts.write_text(hosts)
        log_path = Path(workdir) / "dnsmasq.log"
        self.log = open(log_path, "ab")
        exits = []
        for _ in range(5):  # a port free for UDP may be taken for TCP: another one
            self.port = free_udp_port()
            self.proc = subprocess.Popen(
                [DNSMASQ, "--keep-in-foreground", "--log-facility=-", f"--port={self.port}",
                 "--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv", "--no-hosts",
                 f"--addn-hosts={self.hosts}", "--local-ttl=1", "--conf-file=/dev/null", "--pid-file=",
                 f"--user={'root' if os.geteuid() == 0 else ''}"],
                stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
            if self._answers():
                return
            self.stop_process()
            exits.append(self.proc.returncode)
        raise AssertionError(f"dnsmasq did not start (exit statuses {exits}): {log_path.read_text()}")

    def _answers(self, timeout=10.0):
        """True once dnsmasq answers a query on its port; False if it exits
        or stays silent for `timeout` seconds."""
        query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03app\x04test\x00\x00\x01\x00\x01"
        deadline = time.monotonic() + timeout
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.1)
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                s.sendto(query, ("127.0.0.1", self.port))
                try:
                    if s.recv(512)[:2] == b"\x12\x34":
                        return True
                except OSError:  # a timeout, or ICMP's refusal before it binds
                    pass
        return False

    def stop_process(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def answer(self, hosts):
        self.hosts.write_text(hosts)
        self.proc.send_signal(signal.SIGHUP)

    def stop(self):
        self.stop_process()
        self.log.close()


@pytest.fixture
def world(tmp_path):
    """(port, dnsmasq answering app.test with 127.0.0.2) with an app "a" on
    127.0.0.2 and "b" on 127.0.0.3, both on port."""
    if not os.access(DNSMASQ, os.X_OK):
        pytest.fail("no dnsmasq: ./scripts/test installs it (Debian dnsmasq)")
    port = port_free_on_both()
    log = open(tmp_path / "apps.log", "ab")
    apps = [App("a", port, log, host="127.0.0.2"), App("b", port, log, host="127.0.0.3")]
    dns = Dnsmasq(tmp_path, "127.0.0.2 app.test\n")
    yield port, dns
    dns.stop()
    for app in apps:
        app.kill()
    log.close()


def config(port, dns, **extra):
    return {
        "resolver": [f"127.0.0.1:{dns.port}"],
        "upstream": [{"name": "app", "servers": [{"address": f"app.test:{port}"}], **extra}],
        "server": [{"location": [{"prefix": "/", "proxy": {"pass": "http://app"}}]}],
    }


def names_until(srv, want, timeout=15.0, path="/name"):
    """Asks `path` until the answers seen in a row of 10 are `want` (a set)."""
    deadline = time.monotonic() + timeout
    recent = []
    while time.monotonic() < deadline:
        resp = srv.get(path)
        recent = (recent + [resp.body.decode() if resp.status == 200 else f"status {resp.status}"])[-10:]
        if len(recent) == 10 and set(recent) == want:
            return recent
        time.sleep(0.05)
    raise AssertionError(f"wanted {want}, last answers {recent}; stderr:\n{srv.stderr()[-3000:]}")


def test_a_name_that_moves_under_load_fails_no_request(tern_factory, world):
    port, dns = world
    srv = tern_factory(config(port, dns))
    names_until(srv, {"a"})
    stop = threading.Event()
    seen = Counter()
    failures = []

    def load():
        with HttpConn.open(srv.port) as conn:
            while not stop.is_set():
                try:
                    resp = conn.get("/name")
                except OSError as e:  # a dropped connection is a failure too
                    failures.append(repr(e))
                    return
                if resp.status != 200:
                    failures.append(resp.status)
                seen[resp.body.decode()] += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    dns.answer("127.0.0.3 app.test\n")  # the container moved
    try:
        names_until(srv, {"b"})
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not failures, failures[:10]
    assert seen["a"] > 0 and seen["b"] > 0, seen
    assert "app.test is now 127.0.0.3 (was 127.0.0.2)" in srv.stderr()


def test_every_address_of_a_name_serves_and_the_last_ones_outlive_the_dns_server(tern_factory, world):
    port, dns = world
    srv = tern_factory(config(port, dns, health={"path": "/health", "interval": "200ms", "rise": 1, "fall": 1}))
    names_until(srv, {"a"})
    dns.answer("127.0.0.2 app.test\n127.0.0.3 app.test\n")
    names_until(srv, {"a", "b"})
    dns.stop()  # the name stops resolving: its addresses stay
    deadline = time.monotonic() + 15
    while "does not resolve" not in srv.stderr() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "upstream app: app.test does not resolve" in srv.stderr(), srv.stderr()[-3000:]
    names_until(srv, {"a", "b"})


def test_a_name_that_never_resolved_is_a_502_and_serves_once_it_does(tern_factory, world):
    port, dns = world
    dns.answer("")
    srv = tern_factory(config(port, dns))
    time.sleep(0.5)
    assert srv.get("/name").status == 502
    dns.answer("127.0.0.3 app.test\n")
    names_until(srv, {"b"})


def test_a_pass_may_name_the_application_directly(tern_factory, world):
    port, dns = world
    srv = tern_factory({"resolver": [f"127.0.0.1:{dns.port}"], "resolve_interval": "300ms",
                        "server": [{"location": [{"prefix": "/", "proxy": {"pass": f"http://app.test:{port}"}}]}]})
    names_until(srv, {"a"})
    dns.answer("127.0.0.3 app.test\n")
    names_until(srv, {"b"})


def test_php_fpm_given_by_name_is_followed_when_it_moves(tern_factory, tmp_path):
    port = port_free_on_both()
    pools = [PhpFpm(tmp_path / f"fpm-{name}", children=4, tcp_port=port, tcp_host=host, env={"FPM_NAME": name})
             for name, host in (("a", "127.0.0.2"), ("b", "127.0.0.3"))]
    dns = Dnsmasq(tmp_path, "127.0.0.2 php.test\n")
    try:
        for pool in pools:
            pool.start()
        srv = start_fastcgi_server(tern_factory, [fastcgi_block(f"php.test:{port}", pool=2)],
                                   {"resolver": [f"127.0.0.1:{dns.port}"]})
        srv.write_file("pool.php", "<?php echo $_SERVER['FPM_NAME'];\n")
        names_until(srv, {"a"}, path="/pool.php")
        statuses = Counter()
        dns.answer("127.0.0.3 php.test\n")  # the container moved
        deadline = time.monotonic() + 15
        recent = []
        while time.monotonic() < deadline and recent[-10:] != ["b"] * 10:
            resp = srv.get("/pool.php")
            statuses[resp.status] += 1
            recent.append(resp.body.decode())
        assert recent[-10:] == ["b"] * 10, (recent[-20:], srv.stderr()[-3000:])
        assert set(statuses) == {200}, statuses
        assert "php.test is now 127.0.0.3 (was 127.0.0.2)" in srv.stderr()
    finally:
        dns.stop()
        for pool in pools:
            pool.cleanup()

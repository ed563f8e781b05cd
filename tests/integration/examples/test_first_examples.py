"""The first examples (echo_server, udp_echo, hello_http, reconnecting_client)
driven by real clients."""

import http.client
import os
import select
import socket
import subprocess
import time

from conftest import EXAMPLES_DIR


def test_echo_server_sends_every_byte_back_on_each_mode(example):
    for args in ([], ["--threads", "2", "--mode", "reuseport", "--trigger", "edge"]):
        server = example("echo_server", *args)
        data = os.urandom(1 << 20)
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(data)
            got = b""
            while len(got) < len(data):
                chunk = sock.recv(1 << 20)
                assert chunk
                got += chunk
        assert got == data


def test_udp_echo_sends_every_datagram_back(example):
    server = example("udp_echo")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(5)
    for size in (1, 1400, 60000):
        payload = os.urandom(size)
        sock.sendto(payload, ("127.0.0.1", server.port))
        assert sock.recv(65536) == payload


def test_hello_http_routes_and_answers_later(example):
    server = example("hello_http")
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    conn.request("GET", "/hello")
    assert conn.getresponse().read() == b"Hello, world!\n"
    conn.request("POST", "/echo", body=b"some bytes")
    assert conn.getresponse().read() == b"some bytes"
    started = time.monotonic()
    conn.request("GET", "/later")
    response = conn.getresponse()
    assert response.status == 200 and response.read() == b"later\n"
    assert time.monotonic() - started >= 0.09
    conn.request("GET", "/nothing")
    assert conn.getresponse().status == 404


def test_reconnecting_client_comes_back_when_its_server_does(example):
    first = example("echo_server")
    port = first.port
    client = subprocess.Popen([str(EXAMPLES_DIR / "reconnecting_client"), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        def wait_for(text, timeout=15):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if select.select([client.stdout], [], [], 0.2)[0]:
                    line = client.stdout.readline()
                    if text in line:
                        return line
            raise AssertionError(f"the client never printed {text!r}")

        wait_for("connected to")
        wait_for("got: hello 1")
        first.stop()
        wait_for("lost")
        # The same port again (echo_server takes --port last: the fixture's 0 is overridden).
        example("echo_server", "--port", port)
        wait_for("connected to")
        assert wait_for("got: hello").startswith("got: hello ")
    finally:
        client.kill()
        client.wait()

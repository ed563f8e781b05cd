"""examples/tcp_proxy between real clients and real backends (the echo_server
example, and sockets of the test's own where a backend must stall, flood
or close): bytes through whole and in order both ways, back-pressure that
bounds the proxy's memory whichever side is slow, and closes passed on."""

import hashlib
import os
import socket
import threading
import time

TIMEOUT = 10.0
MiB = 1024 * 1024


def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(TIMEOUT)
    return sock


def connect(proxy):
    return socket.create_connection((proxy.host, proxy.port), timeout=TIMEOUT)


def send_until_blocked(sock, total):
    """Sends up to `total` bytes; stops once the socket has taken nothing for
    a second. Returns the bytes sent and their digest."""
    digest = hashlib.sha256()
    sent = 0
    chunk = os.urandom(64 * 1024)
    sock.setblocking(False)
    idle_since = time.monotonic()
    while sent < total and time.monotonic() - idle_since < 1.0:
        try:
            n = sock.send(chunk[: total - sent])
        except BlockingIOError:
            time.sleep(0.01)
            continue
        digest.update(chunk[:n])
        sent += n
        idle_since = time.monotonic()
    sock.setblocking(True)
    sock.settimeout(TIMEOUT)
    return sent, digest.hexdigest()


def receive(sock, count):
    digest = hashlib.sha256()
    got = 0
    while got < count:
        chunk = sock.recv(min(1 << 20, count - got))
        assert chunk, f"closed after {got} of {count} bytes"
        digest.update(chunk)
        got += len(chunk)
    return digest.hexdigest()


def test_bytes_go_through_whole_and_in_order_on_many_connections(example):
    echo = example("echo_server")
    proxy = example("tcp_proxy", "--threads", 2, "--to", f"127.0.0.1:{echo.port}")
    failures = []

    def one(size):
        try:
            data = os.urandom(size)
            with connect(proxy) as sock:
                writer = threading.Thread(target=sock.sendall, args=(data,))
                writer.start()
                assert receive(sock, size) == hashlib.sha256(data).hexdigest()
                writer.join()
        except Exception as error:  # reported below, with the others
            failures.append(repr(error))

    threads = [threading.Thread(target=one, args=(s,)) for s in [1, 100, 65536] + [2 * MiB] * 12]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def warm_up(proxy, backend):
    """Moves 32 MiB through the proxy on a connection of its own, so that
    its loop's receive buffers (on io_uring a fixed cost of each loop, up
    to 4 MiB, grown under bulk load, and more under a sanitizer's shadow)
    are grown before the test measures what one connection costs."""
    data = os.urandom(32 * MiB)
    with connect(proxy) as client:
        served, _ = backend.accept()
        with served:
            writer = threading.Thread(target=client.sendall, args=(data,))
            writer.start()
            assert receive(served, len(data)) == hashlib.sha256(data).hexdigest()
            writer.join()


def test_a_backend_that_stops_reading_stops_the_client_and_loses_nothing(example):
    backend = listener()
    proxy = example("tcp_proxy", "--to", f"127.0.0.1:{backend.getsockname()[1]}")
    warm_up(proxy, backend)
    client = connect(proxy)
    served, _ = backend.accept()
    served.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    rss_before = proxy.rss_kib()
    sent, digest = send_until_blocked(client, 256 * MiB)
    assert sent < 64 * MiB, f"the client sent {sent} bytes to a backend that reads nothing"
    grown = (proxy.rss_kib() - rss_before) / 1024
    assert grown < 16, f"the proxy grew by {grown:.0f} MiB"
    # The backend reads at last: everything, in order, and the client goes on.
    assert receive(served, sent) == digest
    client.sendall(b"and more")
    assert receive(served, 8) == hashlib.sha256(b"and more").hexdigest()


def test_a_client_that_stops_reading_stops_the_backend_and_loses_nothing(example):
    backend = listener()
    proxy = example("tcp_proxy", "--to", f"127.0.0.1:{backend.getsockname()[1]}")
    warm_up(proxy, backend)
    client = connect(proxy)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    served, _ = backend.accept()
    rss_before = proxy.rss_kib()
    sent, digest = send_until_blocked(served, 256 * MiB)
    assert sent < 64 * MiB, f"the backend sent {sent} bytes to a client that reads nothing"
    grown = (proxy.rss_kib() - rss_before) / 1024
    assert grown < 16, f"the proxy grew by {grown:.0f} MiB"
    assert receive(client, sent) == digest


def test_a_client_that_closes_leaves_the_backend_its_bytes_and_a_fin(example):
    backend = listener()
    proxy = example("tcp_proxy", "--to", f"127.0.0.1:{backend.getsockname()[1]}")
    client = connect(proxy)
    served, _ = backend.accept()
    data = os.urandom(3 * MiB)
    client.sendall(data)
    client.close()
    assert receive(served, len(data)) == hashlib.sha256(data).hexdigest()
    assert served.recv(1) == b""


def test_a_backend_that_closes_leaves_the_client_its_bytes_and_a_fin(example):
    backend = listener()
    proxy = example("tcp_proxy", "--to", f"127.0.0.1:{backend.getsockname()[1]}")
    client = connect(proxy)
    served, _ = backend.accept()
    data = os.urandom(3 * MiB)
    served.sendall(data)
    served.close()
    assert receive(client, len(data)) == hashlib.sha256(data).hexdigest()
    assert client.recv(1) == b""


def test_a_client_that_goes_on_sending_after_the_backend_closed_costs_nothing(example):
    backend = listener()
    proxy = example("tcp_proxy", "--to", f"127.0.0.1:{backend.getsockname()[1]}")
    warm_up(proxy, backend)
    client = connect(proxy)
    served, _ = backend.accept()
    served.sendall(b"bye")
    served.close()
    assert receive(client, 3) == hashlib.sha256(b"bye").hexdigest()
    rss_before = proxy.rss_kib()
    # The proxy sent its FIN; a client that ignores it and keeps sending
    # has its bytes dropped, not kept.
    sent = 0
    chunk = os.urandom(1 << 20)
    try:
        for _ in range(64):
            client.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    grown = (proxy.rss_kib() - rss_before) / 1024
    assert grown < 16, f"the proxy grew by {grown:.0f} MiB after sending {sent >> 20} MiB"
    assert proxy.alive()


def test_a_backend_that_is_down_closes_the_client_and_the_proxy_goes_on(example):
    down = listener()
    port = down.getsockname()[1]
    down.close()  # nothing listens there now
    proxy = example("tcp_proxy", "--to", f"127.0.0.1:{port}")
    for _ in range(3):
        with connect(proxy) as client:
            client.sendall(b"hello")
            # Closed: a FIN, or a reset where the proxy had not read "hello".
            try:
                assert client.recv(1) == b""
            except ConnectionResetError:
                pass
    assert proxy.alive()

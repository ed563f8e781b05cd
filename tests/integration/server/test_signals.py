"""Signals: SIGHUP reloads the config without dropping live connections,
SIGUSR1 reopens the logs, SIGTERM drains in-flight responses (within shutdown_timeout) and exits 0,
SIGQUIT drains them however long they take."""

import hashlib
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from http_client import HttpConn
from tern_server import link_into


def wait_until(predicate, timeout=10.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def log_lines(path):
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def closed_without_response(srv, source="127.0.0.1"):
    """Connects, sends a request, and returns the bytes that came back
    before the server closed (b"" when it answered nothing)."""
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", srv.port))
    received = b""
    try:
        sock.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        sock.close()
    return received


@pytest.fixture
def srv(server):
    server.write_file("a.txt", b"alpha\n")
    return server


# -- SIGHUP ------------------------------------------------------------------------


MODES = [({}, "1-worker"), ({"workers": 2, "accept_mode": "dispatch"}, "2-dispatch"),
         ({"workers": 2, "accept_mode": "reuseport"}, "2-reuseport")]


@pytest.mark.parametrize("config", [m[0] for m in MODES], ids=[m[1] for m in MODES])
def test_sighup_blocking_our_address_refuses_new_connections_but_keeps_open_ones(tern_factory, config):
    srv = tern_factory(config)
    srv.write_file("a.txt", b"alpha\n")
    with srv.connect() as live:
        assert live.get("/a.txt").status == 200
        srv.reload({"blocked": ["127.0.0.1/32"]})
        for _ in range(4):  # several, to reach every worker
            assert closed_without_response(srv) == b""
        # Other addresses are still served.
        with srv.connect(source="127.0.0.3") as other:
            assert other.get("/a.txt").body == b"alpha\n"
        # The connection that was open before the reload still works.
        resp = live.get("/a.txt")
        assert resp.status == 200 and resp.body == b"alpha\n"
        srv.reload({"blocked": []})
        assert srv.get("/a.txt").status == 200


@pytest.mark.parametrize("config", [m[0] for m in MODES], ids=[m[1] for m in MODES])
def test_sighup_lowering_header_bytes_applies_to_new_requests(tern_factory, config):
    srv = tern_factory(config)
    srv.write_file("a.txt", b"alpha\n")
    big_header = {"X-Padding": "p" * 4000}
    with srv.connect() as live:
        assert live.get("/a.txt", big_header).status == 200
        srv.reload({"limits": {"header_bytes": "1KiB"}})

        def rejected():
            with srv.connect() as probe:
                return probe.get("/a.txt", big_header).status == 431
        # Worker loops apply new limits a moment after the reload is logged.
        assert wait_until(rejected, timeout=5)
        for _ in range(4):  # several, to reach every worker
            with srv.connect() as fresh:
                resp = fresh.get("/a.txt", big_header)
                assert resp.status == 431
                assert fresh.is_closed()
        resp = live.get("/a.txt")
        assert resp.status == 200 and resp.body == b"alpha\n"


def test_sighup_lowering_body_bytes_applies_to_new_requests(srv):
    post = b"POST /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"b" * 100
    with srv.connect() as live:
        assert live.request(post).status == 405
        srv.reload({"limits": {"body_bytes": "64"}})
        with srv.connect() as fresh:
            assert fresh.request(post).status == 413
            assert fresh.is_closed()
        assert live.get("/a.txt").body == b"alpha\n"


def test_sighup_turning_access_log_on_logs_later_requests(srv):
    log = srv.access_log_path
    with srv.connect() as live:
        assert live.get("/a.txt").status == 200
        srv.reload({"access_log": str(log)})
        assert live.get("/a.txt?on-old-connection").status == 200
        assert srv.get("/a.txt?on-new-connection").status == 200
        assert wait_until(lambda: len(log_lines(log)) >= 2, timeout=5), \
            f"access log after turning it on by SIGHUP: {log_lines(log)}"
    lines = log_lines(log)
    assert any("/a.txt?on-old-connection" in line for line in lines)
    assert any("/a.txt?on-new-connection" in line for line in lines)


def test_sighup_moving_access_log_writes_to_the_new_file(tern_factory, tmp_path):
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    srv = tern_factory({"access_log": str(first)})
    srv.write_file("a.txt", b"alpha\n")
    assert srv.get("/a.txt?before").status == 200
    assert wait_until(lambda: len(log_lines(first)) == 1)
    srv.reload({"access_log": str(second)})
    assert srv.get("/a.txt?after").status == 200
    assert wait_until(lambda: len(log_lines(second)) == 1), log_lines(second)
    assert "/a.txt?after" in log_lines(second)[0]
    assert len(log_lines(first)) == 1


def test_sighup_raising_log_level_to_debug_logs_peer_errors(srv):
    bad = b"GET /a.txt HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n"
    with srv.connect() as conn:
        assert conn.request(bad).status == 400  # at info level: not logged
    srv.reload({"log": {"level": "debug"}})
    with srv.connect() as conn:
        assert conn.request(bad).status == 400
    needle = "400 whitespace before colon"
    assert srv.wait_for_log(needle), srv.stderr()
    assert srv.stderr().count(needle) == 1, srv.stderr()


def test_sighup_shortening_keepalive_timeout_applies(srv):
    srv.reload({"timeouts": {"keepalive": "1s"}})
    with srv.connect() as conn:
        assert conn.get("/a.txt").status == 200
        assert conn.is_closed(timeout=10)


def test_sighup_with_broken_config_keeps_the_running_one(srv):
    with srv.connect() as live:
        assert live.get("/a.txt").status == 200
        srv.config_path.write_text('workers = "many"\n')
        srv.signal(signal.SIGHUP)
        assert srv.wait_for_log("keeping the running configuration"), srv.stderr()
        assert srv.proc.poll() is None
        assert live.get("/a.txt").body == b"alpha\n"
        assert srv.get("/a.txt").body == b"alpha\n"


def test_sighup_during_a_download_does_not_disturb_it(tern_factory, big_file):
    path, expected = big_file
    srv = tern_factory()
    link_into(srv, path, "big.bin")
    conn, length, digest, got = start_download(srv)
    with conn:
        srv.reload({"limits": {"header_bytes": "1KiB"}, "timeouts": {"send": "30s"}})
        assert read_rest(conn, length, digest, got, slow_seconds=0.5) == expected
        with open(path, "rb") as f:
            assert conn.get("/big.bin", {"Range": "bytes=0-9"}).body == f.read(10)


# -- SIGUSR1 -----------------------------------------------------------------------


def test_sigusr1_reopens_the_access_log_after_rotation(tern_factory):
    srv = tern_factory({"access_log": "access.log"})
    srv.write_file("a.txt", b"alpha\n")
    log = srv.workdir / "access.log"
    rotated = srv.workdir / "access.log.1"
    assert srv.get("/a.txt?before").status == 200
    assert wait_until(lambda: len(log_lines(log)) == 1)
    log.rename(rotated)
    srv.signal(signal.SIGUSR1)
    assert srv.wait_for_log("log files reopened"), srv.stderr()
    assert srv.get("/a.txt?after").status == 200
    assert wait_until(lambda: len(log_lines(log)) == 1), "no new access log after SIGUSR1"
    assert "?after" in log_lines(log)[0]
    assert [("?before" in line) for line in log_lines(rotated)] == [True]


# -- SIGTERM -----------------------------------------------------------------------


def start_download(srv, path="/big.bin"):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", srv.port))
    conn = HttpConn(sock)
    conn.send(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = conn.read_head()
    assert head.status == 200, head
    length = int(head.header("Content-Length"))
    digest = hashlib.sha256(bytes(conn.buf))
    got = len(conn.buf)
    conn.buf.clear()
    return conn, length, digest, got


def read_rest(conn, length, digest, got, slow_seconds=0.0):
    slow_until = time.monotonic() + slow_seconds
    while got < length:
        slow = time.monotonic() < slow_until
        chunk = conn.sock.recv(16384 if slow else 1 << 20)
        assert chunk, f"closed after {got}/{length} bytes"
        digest.update(chunk)
        got += len(chunk)
        if slow:
            time.sleep(0.01)
    return digest.hexdigest()


def refuses_connections(srv, timeout=10.0):
    def refused():
        try:
            socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True
        except ConnectionResetError:
            return False  # queued on the listener as it closed: try again
        except TimeoutError:
            # The listener is still open and its backlog full of earlier
            # probes (a slow build, TSan, is still shutting down): try again.
            return False
    return wait_until(refused, timeout)


def test_sigterm_lets_in_flight_download_finish_then_exits_0(tern_factory, big_file):
    path, expected = big_file
    srv = tern_factory({"shutdown_timeout": "60s"})
    link_into(srv, path, "big.bin")
    conn, length, digest, got = start_download(srv)
    with conn:
        time.sleep(0.5)
        srv.signal(signal.SIGTERM)
        assert refuses_connections(srv), "still accepting connections 10 s after SIGTERM"
        assert srv.proc.poll() is None, "exited before the in-flight download finished"
        assert read_rest(conn, length, digest, got, slow_seconds=1.0) == expected
        assert conn.is_closed(timeout=10)
    assert srv.wait_exit(timeout=30) == 0, srv.stderr()


@pytest.mark.parametrize("config", [m[0] for m in MODES], ids=[m[1] for m in MODES])
def test_sigterm_closes_idle_keep_alive_connections_and_exits_promptly(tern_factory, config):
    srv = tern_factory(config)
    srv.write_file("a.txt", b"alpha\n")
    conns = [srv.connect() for _ in range(4)]
    try:
        for conn in conns:
            assert conn.get("/a.txt").status == 200
        started = time.monotonic()
        srv.signal(signal.SIGTERM)
        assert refuses_connections(srv), "still accepting connections 10 s after SIGTERM"
        for conn in conns:
            assert conn.is_closed(timeout=10)
            conn.close()
        assert srv.wait_exit(timeout=30) == 0, srv.stderr()
        # The default shutdown_timeout is 10 s: idle connections must not wait for it.
        assert time.monotonic() - started < 5
    finally:
        for conn in conns:
            conn.close()


def test_sigterm_gives_up_on_stalled_download_after_shutdown_timeout(tern_factory, big_file):
    path, _ = big_file
    srv = tern_factory({"shutdown_timeout": "1s"})
    link_into(srv, path, "big.bin")
    conn, _, _, _ = start_download(srv)
    with conn:  # and never read again
        started = time.monotonic()
        srv.signal(signal.SIGTERM)
        assert srv.wait_exit(timeout=30) == 0, srv.stderr()
        assert 0.5 <= time.monotonic() - started < 10


def test_second_sigterm_exits_without_waiting_for_downloads(tern_factory, big_file):
    path, _ = big_file
    srv = tern_factory({"shutdown_timeout": "60s"})
    link_into(srv, path, "big.bin")
    conn, _, _, _ = start_download(srv)
    with conn:
        srv.signal(signal.SIGTERM)
        assert srv.wait_for_log("stopping")
        started = time.monotonic()
        srv.signal(signal.SIGTERM)
        assert srv.wait_exit(timeout=30) == 0, srv.stderr()
        assert time.monotonic() - started < 10


def test_sigint_stops_like_sigterm(srv):
    srv.signal(signal.SIGINT)
    assert srv.wait_exit(timeout=30) == 0, srv.stderr()


# -- SIGQUIT -----------------------------------------------------------------------


def test_sigquit_waits_for_a_download_past_shutdown_timeout(tern_factory, big_file):
    path, expected = big_file
    srv = tern_factory({"shutdown_timeout": "1s"})
    link_into(srv, path, "big.bin")
    conn, length, digest, got = start_download(srv)
    with conn:
        srv.signal(signal.SIGQUIT)
        assert refuses_connections(srv), "still accepting connections 10 s after SIGQUIT"
        # Stalled for longer than shutdown_timeout, which SIGTERM would end.
        time.sleep(2.5)
        assert srv.proc.poll() is None, "SIGQUIT gave up on the download at shutdown_timeout"
        assert read_rest(conn, length, digest, got) == expected
        assert conn.is_closed(timeout=10)
    assert srv.wait_exit(timeout=30) == 0, srv.stderr()
    assert "however long they take" in srv.stderr()


def test_sigterm_after_sigquit_exits_now(tern_factory, big_file):
    path, _ = big_file
    srv = tern_factory()
    link_into(srv, path, "big.bin")
    conn, _, _, _ = start_download(srv)
    with conn:
        srv.signal(signal.SIGQUIT)
        assert srv.wait_for_log("stopping")
        started = time.monotonic()
        srv.signal(signal.SIGTERM)
        assert srv.wait_exit(timeout=30) == 0, srv.stderr()
        assert time.monotonic() - started < 10


def keep_alive_clients(port, count, stop_event):
    """Threads that send requests back to back on keep-alive connections,
    reconnecting when the server says Connection: close (and retrying when
    it refuses, once it stopped). Returns (threads, failures, answered):
    failures are the requests an established connection lost (a reset, or
    the close before the response)."""
    failures, answered = [], [0]

    def client():
        sock = None
        while not stop_event.is_set():
            if sock is None:
                try:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                except OSError:
                    time.sleep(0.02)
                    continue
            try:
                sock.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
                data = b""
                while not data.endswith(b"alpha\n"):
                    chunk = sock.recv(4096)
                    if not chunk:
                        raise EOFError(f"closed after {len(data)} bytes of the response")
                    data += chunk
                answered[0] += 1
                if b"Connection: close" in data:
                    sock.close()
                    sock = None
            except (OSError, EOFError) as e:
                failures.append(repr(e))
                sock.close()
                sock = None
        if sock is not None:
            sock.close()

    threads = [threading.Thread(target=client) for _ in range(count)]
    for t in threads:
        t.start()
    return threads, failures, answered


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGQUIT], ids=["SIGTERM", "SIGQUIT"])
def test_stop_under_load_fails_no_request_on_an_open_connection(tern_factory, signo):
    # Regression: a connection whose last response the kernel had not taken
    # yet when the stop began (io_uring: the send still in flight) was
    # closed then, against the request its client sent next.
    if shutil.which("ab") is None:
        pytest.skip("ab is installed by scripts/test")
    srv = tern_factory({"workers": 2})
    srv.write_file("a.txt", b"alpha\n")
    ab = subprocess.Popen(["ab", "-q", "-t", "4", "-n", "10000000", "-c", "100", "-s", "30", srv.url("/a.txt")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()
    threads, failures, answered = keep_alive_clients(srv.port, 16, stop)
    try:
        time.sleep(1.5)
        before = answered[0]
        srv.signal(signo)
        assert srv.wait_exit(timeout=30) == 0, srv.stderr()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        ab.kill()
        ab.wait()
    assert before > 100, "the clients were not under way when the stop began"
    assert failures == [], failures

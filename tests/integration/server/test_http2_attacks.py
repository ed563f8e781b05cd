"""HTTP/2 against hostile clients (frames written by hand, h2_frames.py):
rapid reset, control-frame and CONTINUATION floods, an HPACK bomb, readers
that keep their windows shut or never read, connections that send the
preface and nothing more, a body that stops, an idle connection kept busy
with PINGs, the last stream id. Each connection ends with the right GOAWAY
code (or the stream with the right answer), and a client beside it on the
same loop goes on being served.

What an attack costs is measured on the running server: its CPU time
(utime + stime of /proc/PID/stat) against the attacker's own (the test
thread's), its resident memory (VmRSS) while the attack lasts and once its
connections are gone, and the neighbour's latency meanwhile."""

import os
import socket
import ssl
import threading
import time

import pytest

import h2_frames as h2
from auth_api import auth_config
from php_site import RssSampler
from tern_server import SCALE, scaled

# Sanitizer builds (TERN_TEST_SCALE < 1) answer more slowly: wider upper
# bounds on timings; and ASan's quarantine would hide what memory is freed.
SLACK = 1.0 if SCALE >= 1 else 3.0
LOW_QUARANTINE = {"ASAN_OPTIONS": "quarantine_size_mb=4:thread_local_quarantine_size_kb=64"}
# ASan's red zones and allocator make every block larger: wider bounds on
# memory there.
MEMORY_SLACK = 1.0 if SCALE >= 1 else 2.5
# What ASan's quarantine (LOW_QUARANTINE) may hold of what was freed.
QUARANTINE_MIB = 0 if SCALE >= 1 else 4
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
NEIGHBOUR_BODY = b"neighbour\n" * 103  # 1 KiB or so


def memory_slack(server):
    """MEMORY_SLACK, four times as much under TSan: its shadow memory
    grows with every byte the process touches."""
    return MEMORY_SLACK * (4 if server.runs_under("libtsan") else 1)


class Neighbour(threading.Thread):
    """Fetches a 1 KiB file over HTTP/1.1 again and again while an attack
    runs on the same loop; keeps when each fetch began and how long it
    took."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server
        self.server.write_file("n.txt", NEIGHBOUR_BODY)
        self.slowest = 0.0
        self.fetches = []  # (began, seconds)
        self.failures = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            start = time.monotonic()
            try:
                with self.server.connect() as conn:
                    resp = conn.get("/n.txt")
                    if resp.status != 200 or resp.body != NEIGHBOUR_BODY:
                        self.failures.append(resp.status)
            except OSError as e:
                self.failures.append(repr(e))
            took = time.monotonic() - start
            self.slowest = max(self.slowest, took)
            self.fetches.append((start, took))
            time.sleep(0.01)

    @property
    def count(self):
        return len(self.fetches)

    def latencies(self, since, until=None):
        """The fetches' times, sorted, of those that began in [since, until]."""
        until = until if until is not None else time.monotonic()
        return sorted(took for began, took in list(self.fetches) if since <= began <= until)

    def stop(self):
        self.done.set()
        self.join(timeout=10)
        assert not self.failures, self.failures
        assert self.count > 0
        assert self.slowest < 2.0 * SLACK, f"a neighbour's request took {self.slowest:.2f}s"


def cpu_seconds(server):
    """The CPU time tern has used, user and system, all threads."""
    with open(f"/proc/{server.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_until_quiet(server, timeout=30):
    """Waits until tern stops using CPU (less than a tick in 200 ms), as
    after an attack it may still be working through what was sent."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(server)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = cpu_seconds(server)
        if now - last < 0.015:
            return
        last = now


def warm_up(server, tls=None):
    """A few HTTP/2 connections with requests, then some hundreds that only
    send the preface, so that what tern sets up on first use is in the
    baseline; among it, with io_uring, the loop's ring of provided receive
    buffers (1,024 of 4 KiB), each touched the first time a receive takes
    it."""
    for sock in preface_only(server, 300 if tls else 600, tls):
        sock.close()
    if tls is not None:
        return
    for _ in range(3):
        with h2.H2Socket(server.port) as conn:
            conn.send(b"".join(h2.headers(2 * i + 1, h2.request_block("/f.txt")) for i in range(20)))
            deadline = time.monotonic() + 10
            ends = 0
            while ends < 20 and (f := conn.read_frame(deadline)) is not None:
                ends += (f[0] in (h2.DATA, h2.HEADERS)) and bool(f[1] & h2.END_STREAM)
    time.sleep(0.3)


def rss_after_release(server, target_kib, timeout=4.0):
    """tern's RSS once it fell to target_kib, or as it is after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        rss = server.rss_kib()
        if rss <= target_kib or time.monotonic() > deadline:
            return rss
        time.sleep(0.1)


def start_attacked(tern_factory, tmp_path, timeouts):
    config = auth_config(f"sqlite:{tmp_path}/users.db")
    config["timeouts"] = timeouts
    server = tern_factory(config, listen_flags="h2c", env=LOW_QUARANTINE)
    server.write_file("f.txt", b"x" * 1024)
    warm_up(server)
    time.sleep(0.7)  # the warm-up's connections gone, and their memory
    server.neighbour = Neighbour(server)
    server.neighbour.start()
    return server


@pytest.fixture
def attacked(tern_factory, tmp_path):
    """A one-worker tern with h2c, the users app, short timeouts, and a
    neighbour running."""
    server = start_attacked(tern_factory, tmp_path, {"send": "2s", "body": "1s", "keepalive": "2s"})
    yield server
    server.neighbour.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from test_tls import Pki
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def besieged(tern_factory, tmp_path):
    """As `attacked`, with timeouts long enough for attackers that hold
    their connections to be measured while they do."""
    server = start_attacked(tern_factory, tmp_path, {"send": "30s", "body": "30s", "keepalive": "30s"})
    yield server
    server.neighbour.stop()


def test_rapid_reset_ends_the_connection(attacked):
    with h2.H2Socket(attacked.port) as conn:
        burst = b"".join(h2.headers(2 * i + 1, h2.request_block("/f.txt")) + h2.rst_stream(2 * i + 1)
                         for i in range(3000))
        conn.send(burst)
        assert conn.goaway_code() == h2.ENHANCE_YOUR_CALM
    # The error log is flushed about once a second.
    assert attacked.wait_for_log("HTTP/2: flood of control frames")


@pytest.mark.parametrize("kind", ["settings", "ping", "priority", "empty data"])
def test_control_frame_floods_end_the_connection(attacked, kind):
    with h2.H2Socket(attacked.port) as conn:
        if kind == "settings":
            one = h2.frame(h2.SETTINGS, 0, 0)
        elif kind == "ping":
            one = h2.ping()
        elif kind == "priority":
            one = h2.frame(h2.PRIORITY, 0, 1, bytes(5))
        else:
            # A request whose body never comes, only empty DATA frames.
            conn.send(h2.headers(1, h2.request_block("/api/login", method="POST", extra=[
                ("content-type", "application/json"), ("content-length", "100")]), end_stream=False))
            one = h2.frame(h2.DATA, 0, 1)
        conn.send(one * 5000)
        assert conn.goaway_code() == h2.ENHANCE_YOUR_CALM, kind


def test_continuation_flood_ends_the_connection(attacked):
    with h2.H2Socket(attacked.port) as conn:
        conn.send(h2.headers(1, h2.request_block("/f.txt"), end_headers=False))
        piece = h2.literal("x-filler", "y" * 50)
        conn.send(b"".join(h2.frame(h2.CONTINUATION, 0, 1, piece) for _ in range(1000)))
        assert conn.goaway_code() == h2.ENHANCE_YOUR_CALM


def hpack_bomb(references):
    """A request head that puts one 4,000-byte field in the dynamic table,
    then refers to it `references` times, one byte each."""
    return h2.request_block("/f.txt") + h2.indexed_new("x-bomb", "b" * 4000) + b"\xbe" * references


def test_an_hpack_bomb_ends_its_connection_and_not_the_others(attacked):
    with h2.H2Socket(attacked.port) as other, h2.H2Socket(attacked.port) as conn:
        # 12,000 references: 48 MB of fields from 16 KB on the wire. The
        # head is past its limit after a few: decoding stops there and the
        # connection ends.
        conn.send(h2.headers(1, hpack_bomb(12000)))
        assert conn.goaway_code() in (h2.ENHANCE_YOUR_CALM, h2.COMPRESSION_ERROR)
        assert conn.closed
        # Another connection on the same loop is answered (:status 200 is
        # index 8 of the static table).
        other.send(h2.headers(1, h2.request_block("/f.txt")))
        deadline = time.monotonic() + 5 * SLACK
        while (f := other.read_frame(deadline)) is not None and f[0] != h2.HEADERS:
            pass
        assert f is not None and f[3][:1] == b"\x88", f


def test_an_hpack_bomb_costs_tern_less_than_the_attacker(attacked):
    # 120 blocks of 64 KiB (7.5 MiB): each names a 4,000-byte entry about
    # 61,000 times, some 245 MB of fields. Sent on one connection after
    # another, as each is told to go away.
    block = hpack_bomb(61_400)
    spent_before, mine_before = cpu_seconds(attacked), time.thread_time()
    start = time.monotonic()
    conn, connections, codes, sent = None, 0, [], 0
    try:
        for _ in range(120):
            if conn is None or conn.closed:
                if conn is not None:
                    conn.close()
                conn = h2.H2Socket(attacked.port, timeout=10 * SLACK)
                connections += 1
                stream_id = 1
            conn.send(h2.header_frames(stream_id, block))
            stream_id += 2
            sent += 1
            for kind, _, _, payload in conn.frames_now():
                if kind == h2.GOAWAY:
                    codes.append(int.from_bytes(payload[4:8], "big"))
                    conn.closed = True
    except socket.timeout:
        pass  # tern stopped taking what was sent: it is still decoding
    finally:
        conn.close()
    attacked_until = time.monotonic()
    mine = time.thread_time() - mine_before
    wait_until_quiet(attacked)
    spent = cpu_seconds(attacked) - spent_before
    latencies = attacked.neighbour.latencies(start, attacked_until + 0.1)
    median = latencies[len(latencies) // 2] if latencies else float("inf")
    print(f"HPACK bomb: {sent} blocks sent, tern {spent:.2f} CPU-s, attacker {mine:.2f} CPU-s, "
          f"{connections} connection(s), "
          f"{time.monotonic() - start:.1f} s; neighbour median {median * 1000:.1f} ms, "
          f"max {max(latencies, default=0) * 1000:.1f} ms over {len(latencies)} fetches")
    assert sent == 120, f"tern took {sent - 1} blocks and then no more for {10 * SLACK:.0f} s"
    assert codes and set(codes) <= {h2.ENHANCE_YOUR_CALM, h2.COMPRESSION_ERROR}, codes
    # What the attacker spends to send, tern may spend a small multiple of
    # to refuse (and an attacker in C spends far less than this one).
    assert spent < max(0.3, 2 * mine) * SLACK, f"tern spent {spent:.2f} CPU-s for the attacker's {mine:.2f}"
    assert median < 0.05 * SLACK, f"the neighbour's median latency was {median * 1000:.0f} ms"
    assert latencies[-1] < 0.5 * SLACK, f"the neighbour's slowest fetch took {latencies[-1] * 1000:.0f} ms"


def test_a_zero_window_reader_is_cut_off_and_memory_stays_bounded(attacked):
    attacked.write_file("big.bin", os.urandom(4 << 20))
    sampler = RssSampler(attacked)
    sampler.start()
    conns = [h2.H2Socket(attacked.port, initial_settings=h2.settings(initial_window_size=0)) for _ in range(20)]
    start = time.monotonic()
    for conn in conns:
        conn.send(b"".join(h2.headers(2 * i + 1, h2.request_block("/big.bin")) for i in range(100)))
    for conn in conns:
        frames = conn.frames_until_close(timeout=15 * SLACK)
        assert conn.closed, "a connection that takes no data was not closed"
        assert not any(kind == h2.DATA and payload for kind, _, _, payload in frames)
        conn.close()
    assert time.monotonic() - start < 12 * SLACK
    growth = sampler.growth_mib()
    assert growth < 48, f"RSS grew {growth:.1f} MiB for 2,000 stalled streams"


def test_a_request_body_that_stops_gets_408(attacked):
    with h2.H2Socket(attacked.port) as conn:
        start = time.monotonic()
        conn.send(h2.headers(1, h2.request_block("/api/register", method="POST",
                                                 extra=[("content-type", "application/json")]), end_stream=False))
        frames = []
        deadline = start + 5 * SLACK
        while (f := conn.read_frame(deadline)) is not None:
            frames.append(f)
            if f[0] == h2.RST_STREAM:
                break
        answers = [payload for kind, _, stream_id, payload in frames if kind == h2.HEADERS and stream_id == 1]
        # ":status 408" as a literal (its Huffman code is no shorter).
        assert answers and b"408" in answers[0], frames
        # Then the client is asked to stop sending the body (RST_STREAM NO_ERROR).
        assert frames[-1][0] == h2.RST_STREAM and frames[-1][3] == bytes(4), frames
        assert time.monotonic() - start < 3 * SLACK


def test_an_idle_connection_gets_goaway_even_with_pings(attacked):
    with h2.H2Socket(attacked.port) as conn:
        start = time.monotonic()
        code = None
        while time.monotonic() - start < 10 and code is None:
            conn.send(h2.ping())
            deadline = time.monotonic() + 0.2
            while (f := conn.read_frame(deadline)) is not None:
                if f[0] == h2.GOAWAY:
                    code = int.from_bytes(f[3][4:8], "big")
                    break
        assert code == h2.NO_ERROR
        assert 1.5 < time.monotonic() - start < 6 * SLACK


def test_the_last_stream_id_is_served_and_then_no_lower_one(attacked):
    with h2.H2Socket(attacked.port) as conn:
        top = 2**31 - 1
        conn.send(h2.headers(top, h2.request_block("/f.txt")))
        deadline = time.monotonic() + 10
        while (f := conn.read_frame(deadline)) is not None:
            if f[0] == h2.HEADERS and f[2] == top:
                assert f[3][:1] == b"\x88"  # :status 200
                break
        else:
            pytest.fail("no answer on the last stream id")
        # No stream id is left above it: a lower one is not served, and the
        # connection, idle, ends gracefully.
        conn.send(h2.headers(1, h2.request_block("/f.txt")))
        frames = conn.frames_until_close(timeout=10)
        assert not any(kind == h2.HEADERS and stream_id == 1 for kind, _, stream_id, _ in frames), frames
        goaways = [payload for kind, _, _, payload in frames if kind == h2.GOAWAY]
        assert goaways and int.from_bytes(goaways[-1][:4], "big") == top, goaways
        assert conn.closed


# ---- what attacks cost in memory, and whether it comes back ----

class PeakRss:
    """tern's resident memory from now on: the baseline, and the peak (the
    kernel's high-water mark, VmHWM, reset here through clear_refs; where
    that is not allowed, sampled every 20 ms)."""

    def __init__(self, server):
        self.server = server
        self.sampler = None
        try:
            with open(f"/proc/{server.proc.pid}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            self.sampler = RssSampler(server)
            self.sampler.start()
        self.baseline = server.rss_kib()

    def growth_mib(self):
        if self.sampler is not None:
            return self.sampler.growth_mib()
        return (self.server.rss_kib("VmHWM") - self.baseline) / 1024


def rapid_resets(server, connections, streams=900):
    """Connections that each open `streams` streams and reset them at once
    (fewer than the control-frame budget, so they stay open), then PING;
    returned open once each PING was answered (the burst was read)."""
    burst = b"".join(h2.headers(2 * i + 1, h2.request_block("/f.txt")) + h2.rst_stream(2 * i + 1)
                     for i in range(streams))
    conns = []
    for _ in range(connections):
        conn = h2.H2Socket(server.port, timeout=30)
        conn.send(burst + h2.ping(b"burstend"))
        conns.append(conn)
    deadline = time.monotonic() + 30 * SLACK
    for conn in conns:
        while (f := conn.read_frame(deadline)) is not None and not (f[0] == h2.PING and f[1] & h2.ACK):
            pass
        assert f is not None, "a burst of resets was not answered"
    return conns


def preface_only(server, count, tls=None):
    """Connections that send the preface (the client's SETTINGS included),
    acknowledge the server's SETTINGS, and nothing more; `tls`: a client
    context for a TLS address. Returned once tern took each."""
    socks = []
    # A hundred at a time, each taken before the next: a listen queue that
    # overflows would delay the neighbour's connections, not tern.
    for batch in range(0, count, 100):
        for _ in range(min(100, count - batch)):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname="a.test")
                assert sock.selected_alpn_protocol() == "h2"
            sock.sendall(h2.PREFACE + h2.frame(h2.SETTINGS, 0, 0))
            socks.append(sock)
        for sock in socks[batch:]:
            first = sock.recv(4096)
            assert len(first) >= 9 and first[3] == h2.SETTINGS, first
            sock.sendall(h2.frame(h2.SETTINGS, h2.ACK, 0))
    # The acknowledgements were sent last: a PING on the last connection
    # comes back once tern has read them all.
    socks[-1].sendall(h2.ping())
    deadline = time.monotonic() + 10 * SLACK
    seen = b""
    while h2.frame(h2.PING, h2.ACK, 0, b"12345678") not in seen and time.monotonic() < deadline:
        seen += socks[-1].recv(4096)
    time.sleep(0.2)
    return socks


def non_readers(server, connections, streams=100):
    """Connections that each ask for `streams` copies of big.bin and read
    nothing (a receive buffer of 4 KiB: the kernel holds little for them);
    returned once tern has stopped working on them."""
    request = b"".join(h2.headers(2 * i + 1, h2.request_block("/big.bin")) for i in range(streams))
    conns = []
    for _ in range(connections):
        conn = h2.H2Socket(server.port, receive_buffer=4096, timeout=30)
        conn.send(request)
        conns.append(conn)
    wait_until_quiet(server)
    return conns


def test_rapid_resets_on_many_connections_cost_little_memory(besieged):
    # 100 connections open 900 streams each and reset them at once: 90,000
    # requests begun and abandoned.
    connections = scaled(100, 20)
    peak = PeakRss(besieged)
    conns = rapid_resets(besieged, connections)
    growth = peak.growth_mib()
    for conn in conns:
        conn.close()
    print(f"rapid reset: {connections} connections x 900 streams, RSS +{growth:.1f} MiB")
    # What each connection holds between bursts (nghttp2 keeps up to 128
    # closed streams each, to answer frames sent on them), and no more.
    assert growth < (2 + connections * 48 / 1024) * memory_slack(besieged) + QUARANTINE_MIB, \
        f"RSS grew {growth:.1f} MiB for {connections} connections resetting their streams"


@pytest.mark.parametrize("transport", ["h2c", "tls"])
def test_connections_that_only_sent_the_preface_cost_little(tern_factory, tmp_path, pki, transport):
    # They hold no stream: a few KiB each (nginx takes 1.5 over h2c).
    if transport == "tls":
        cert, key = pki.issue("a.test")
        config = {"tls": {"cert": cert, "key": key}, "timeouts": {"keepalive": "30s"}}
        server = tern_factory(config, tls=True, env=LOW_QUARANTINE)
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.load_verify_locations(pki.ca)
        client.set_alpn_protocols(["h2"])
        count, per_connection_kib = scaled(1000, 200), 20
    else:
        server = tern_factory({"timeouts": {"keepalive": "30s"}}, listen_flags="h2c", env=LOW_QUARANTINE)
        client = None
        count, per_connection_kib = scaled(2000, 400), 4
    warm_up(server, client)
    time.sleep(0.7)  # the warm-up's connections gone, and their memory
    peak = PeakRss(server)
    socks = preface_only(server, count, client)
    growth = peak.growth_mib()
    for sock in socks:
        sock.close()
    each = growth * 1024 / count
    print(f"preface only over {transport}: {count} connections, RSS +{growth:.1f} MiB, {each:.2f} KiB each")
    assert each < per_connection_kib * memory_slack(server), f"{each:.1f} KiB for each connection without a stream"


def test_streams_held_by_readers_that_never_read_cost_little(besieged):
    # 200 connections ask for 100 large files each and read nothing: tern
    # holds their 20,000 streams until the send timeout.
    besieged.write_file("big.bin", os.urandom(1 << 20))
    connections = scaled(200, 40)
    peak = PeakRss(besieged)
    conns = non_readers(besieged, connections)
    growth = peak.growth_mib()
    for conn in conns:
        conn.close()
    print(f"non-readers: {connections} connections x 100 streams, RSS +{growth:.1f} MiB")
    # A KiB a stream and the frames that wait for each client in tern's
    # output, at most 64 KiB (Http2Connection::kOutputHighWater, a buffer
    # of that size).
    assert growth < (connections * 100 * 1.0 + connections * 64) / 1024 * memory_slack(besieged), \
        f"RSS grew {growth:.1f} MiB for {connections * 100} streams whose client reads nothing"


@pytest.mark.parametrize("attack", ["rapid resets", "preface only", "non-readers"])
def test_memory_taken_for_an_attack_is_given_back(besieged, attack):
    if SCALE < 1:
        pytest.skip("a sanitizer's allocator gives memory back on its own terms, not glibc's")
    besieged.write_file("big.bin", os.urandom(1 << 20))
    if attack == "preface only" and os.environ.get("TERN_IO") != "epoll":
        # A first burst of as many connections sets up what an io_uring
        # loop keeps for good whatever comes: its ring of receive buffers,
        # grown to its full 4 MiB (the kernel may write into any of them at
        # any time: they cannot be given back). The second must leave no
        # more.
        for conn in preface_only(besieged, 2000):
            conn.close()
        time.sleep(1.0)
    baseline = besieged.rss_kib()
    peak = PeakRss(besieged)
    if attack == "rapid resets":
        conns = rapid_resets(besieged, 100)
    elif attack == "preface only":
        conns = preface_only(besieged, 2000)
    else:
        conns = non_readers(besieged, 200)
    growth = peak.growth_mib()
    for conn in conns:
        conn.close()
    # Once their connections are gone, what they took goes back to the
    # system: a little is kept for the next ones (pooled buffers and
    # connections), not the peak.
    kept_allowed = max(3.0, growth / 5)
    after = (rss_after_release(besieged, baseline + kept_allowed * 1024) - baseline) / 1024
    print(f"{attack}: RSS +{growth:.1f} MiB at the peak, +{after:.1f} MiB once the connections were gone")
    assert after <= kept_allowed, f"RSS stayed {after:.1f} MiB above its baseline (+{growth:.1f} at the peak)"

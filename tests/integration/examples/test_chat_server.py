"""examples/chat_server with real TCP clients: a line reaches every client
on every loop, names and departures are announced, a client that stops
reading is dropped without holding the others up or growing the server,
and a line past the limit closes its sender."""

import socket
import time

TIMEOUT = 10.0


class Client:
    def __init__(self, server):
        self.sock = socket.create_connection((server.host, server.port), timeout=TIMEOUT)
        self.reader = self.sock.makefile("rb")
        self.name = self.line().removeprefix("* you are ")

    def send(self, text):
        self.sock.sendall(text.encode() + b"\n")

    def line(self):
        line = self.reader.readline()
        assert line.endswith(b"\n"), f"closed, with {line!r} unread"
        return line[:-1].decode()

    def until(self, wanted):
        """Reads lines up to `wanted`; returns those before it."""
        before = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            line = self.line()
            if line == wanted:
                return before
            before.append(line)
        raise AssertionError(f"no {wanted!r} in {before!r}")

    def close(self):
        self.reader.close()
        self.sock.close()


def test_a_line_reaches_every_client_on_every_loop(example):
    server = example("chat_server", "--threads", 2)
    clients = [Client(server) for _ in range(4)]  # two on each loop, round-robin
    assert len({c.name for c in clients}) == 4
    last = clients[-1]
    for c in clients:
        c.until(f"* {last.name} joined")
    clients[0].send("hello from the first")
    for c in clients:
        c.until(f"{clients[0].name}: hello from the first")
    # CRLF from a telnet-like client is taken as one line end; empty lines say nothing.
    clients[1].sock.sendall(b"\r\n\r\nwith crlf\r\n")
    for c in clients:
        assert c.until(f"{clients[1].name}: with crlf") == []


def test_names_and_departures_are_announced(example):
    server = example("chat_server", "--threads", 2)
    a, b = Client(server), Client(server)
    a.until(f"* {b.name} joined")
    a.send("/nick ada")
    b.until(f"* {a.name} is now ada")
    a.send("hi")
    b.until("ada: hi")
    a.close()
    b.until("* ada left")


def test_lines_split_across_reads_arrive_whole(example):
    server = example("chat_server")
    a, b = Client(server), Client(server)
    a.until(f"* {b.name} joined")
    b.until(f"* {b.name} joined")
    for piece in (b"sp", b"lit ", b"li", b"ne\nsecond", b" line\n"):
        a.sock.sendall(piece)
        time.sleep(0.02)
    assert b.until(f"{a.name}: split line") == []
    assert b.line() == f"{a.name}: second line"


def test_a_client_that_stops_reading_is_dropped_and_the_others_go_on(example):
    server = example("chat_server", "--threads", 2)
    stalled = Client(server)
    stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    talker, listener = Client(server), Client(server)
    for c in (talker, listener):
        c.until(f"* {listener.name} joined")
    rss_before = server.rss_kib()
    line = "x" * 1000
    # 32 MiB of broadcast: far past what the kernel buffers and the server's
    # 1 MiB backlog for the client that never reads. The two that read keep
    # up, which paces the talker.
    seen = []
    for i in range(32 * 1024):
        talker.send(f"{i} {line}")
        if i % 256 == 255:
            talker.until(f"{talker.name}: {i} {line}")
            seen += listener.until(f"{talker.name}: {i} {line}")
    grown_mib = (server.rss_kib() - rss_before) / 1024
    assert grown_mib < 24, f"the server grew by {grown_mib:.0f} MiB for one stalled client"
    # Dropped: the others were told it left (its socket's last bytes may
    # still be on their way, as the kernel sends what it had taken).
    assert f"* {stalled.name} left" in seen
    stalled.close()


def test_a_line_past_the_limit_closes_its_sender(example):
    server = example("chat_server")
    a, b = Client(server), Client(server)
    a.until(f"* {b.name} joined")
    a.sock.sendall(b"y" * 5000)
    a.until("* line too long")
    a.sock.settimeout(TIMEOUT)
    assert a.sock.recv(100) == b""
    b.until(f"* {a.name} left")
    assert server.alive()


def test_a_whole_line_past_the_limit_is_refused_too(example):
    server = example("chat_server")
    a, b = Client(server), Client(server)
    a.until(f"* {b.name} joined")
    b.until(f"* {b.name} joined")
    a.sock.sendall(b"z" * 5000 + b"\n")  # ended, in one read: still too long
    a.until("* line too long")
    assert b.until(f"* {a.name} left") == []  # nothing of it was broadcast

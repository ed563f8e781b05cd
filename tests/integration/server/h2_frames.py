"""HTTP/2 frames by hand (RFC 9113 section 4 and 6, HPACK literals of RFC
7541 6.2.2), for the tests that send what no well-behaved client would:
floods, resets, stalls. Real clients (curl, nghttp, h2load) cover the
well-behaved side."""

import socket
import struct
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4

SETTINGS_INITIAL_WINDOW_SIZE = 0x4

NO_ERROR, PROTOCOL_ERROR, CANCEL, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x8, 0x9, 0xB

MAX_FRAME = 16384  # SETTINGS_MAX_FRAME_SIZE's initial value


def frame(kind, flags, stream_id, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream_id) + payload


def _integer(value, prefix_bits, first=0):
    """An HPACK integer (RFC 7541 5.1) with `first` in the bits above the prefix."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A field as a literal without indexing, new name, no Huffman coding."""
    name, value = name.encode(), value.encode()
    return b"\x00" + _integer(len(name), 7) + name + _integer(len(value), 7) + value


def indexed_new(name, value):
    """A literal with incremental indexing (it enters the dynamic table)."""
    name, value = name.encode(), value.encode()
    return b"\x40" + _integer(len(name), 7) + name + _integer(len(value), 7) + value


def request_block(path="/", authority="test", method="GET", extra=()):
    block = literal(":method", method) + literal(":scheme", "http") + literal(":path", path)
    block += literal(":authority", authority)
    for name, value in extra:
        block += literal(name, value)
    return block


def headers(stream_id, block, end_stream=True, end_headers=True):
    flags = (END_STREAM if end_stream else 0) | (END_HEADERS if end_headers else 0)
    return frame(HEADERS, flags, stream_id, block)


def header_frames(stream_id, block, end_stream=True):
    """A header block of any size: HEADERS, then CONTINUATION frames, each
    at most MAX_FRAME."""
    pieces = [block[i:i + MAX_FRAME] for i in range(0, len(block), MAX_FRAME)] or [b""]
    out = headers(stream_id, pieces[0], end_stream=end_stream, end_headers=len(pieces) == 1)
    for i, piece in enumerate(pieces[1:], 2):
        out += frame(CONTINUATION, END_HEADERS if i == len(pieces) else 0, stream_id, piece)
    return out


def settings(**values):
    ids = {"initial_window_size": SETTINGS_INITIAL_WINDOW_SIZE}
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in values.items()))


def rst_stream(stream_id, code=CANCEL):
    return frame(RST_STREAM, 0, stream_id, struct.pack(">I", code))


def ping(data=b"12345678"):
    return frame(PING, 0, 0, data)


class H2Socket:
    """A raw HTTP/2 connection to a tern address marked h2c: frames out,
    frames in, parsed as far as the tests need."""

    def __init__(self, port, host="127.0.0.1", initial_settings=b"", timeout=10, receive_buffer=None):
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        if receive_buffer is not None:
            # Before connecting, so that the window it offers is that small.
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.timeout = timeout
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        self.buffer = b""
        self.closed = False
        self.sock.sendall(PREFACE + (initial_settings or frame(SETTINGS, 0, 0)))

    def send(self, data):
        try:
            self.sock.settimeout(self.timeout)  # a read may have shortened it
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True
            return False

    def read_frame(self, deadline):
        """(type, flags, stream id, payload), or None once closed or at the deadline."""
        while len(self.buffer) < 9 or len(self.buffer) < 9 + int.from_bytes(self.buffer[:3], "big"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed:
                return None
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
                return None
            self.buffer += chunk
        length = int.from_bytes(self.buffer[:3], "big")
        kind, flags = self.buffer[3], self.buffer[4]
        stream_id = struct.unpack(">I", self.buffer[5:9])[0] & 0x7FFFFFFF
        payload = self.buffer[9:9 + length]
        self.buffer = self.buffer[9 + length:]
        return kind, flags, stream_id, payload

    def frames_now(self):
        """The frames that have arrived, without waiting (marks the socket
        closed once the server closed it)."""
        out = []
        while (f := self.read_frame(time.monotonic() + 0.001)) is not None:
            out.append(f)
        return out

    def frames_until_close(self, timeout=10):
        """Every frame until the server closes (or the timeout)."""
        deadline = time.monotonic() + timeout
        out = []
        while (f := self.read_frame(deadline)) is not None:
            out.append(f)
        return out

    def goaway_code(self, timeout=10):
        """The error code of the server's GOAWAY, reading until it closes."""
        for kind, _, _, payload in self.frames_until_close(timeout):
            if kind == GOAWAY:
                return struct.unpack(">I", payload[4:8])[0]
        return None

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

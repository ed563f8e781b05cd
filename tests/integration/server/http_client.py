"""A small HTTP/1.1 client over raw sockets, strict about framing, for
talking to tern byte by byte. Stdlib only; every read honours the socket
timeout."""

import re
import socket

IO_TIMEOUT = 30.0


class Response:
    """One parsed HTTP response: status line, header fields in order, body."""

    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] as received
        self.body = body
        self.raw_head = raw_head

    def header(self, name):
        """The first value of a field (case-insensitive name), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def header_all(self, name):
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def connection_tokens(self):
        return {t.strip().lower() for v in self.header_all("Connection") for t in v.split(",")}

    def __repr__(self):
        return f"<Response {self.status} {self.headers} body={len(self.body)}B>"


class ConnectionClosed(Exception):
    """The peer closed before a complete response arrived."""


class HttpConn:
    """A client socket with a read buffer and an HTTP/1.1 response reader."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    @classmethod
    def open(cls, port, source=None, timeout=IO_TIMEOUT, host="127.0.0.1"):
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        if source is not None:
            sock.bind((source, 0))
        sock.connect((host, port))
        return cls(sock)

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self):
        chunk = self.sock.recv(256 * 1024) if self.sock is not None else b""
        if not chunk:
            raise ConnectionClosed(f"connection closed with {len(self.buf)} unparsed bytes: "
                                   f"{bytes(self.buf[:200])!r}")
        self.buf += chunk

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                return self._take(i + 2)[:-2]
            self._fill()

    def read_head(self):
        """Reads a response head; body bytes stay in the buffer."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        raw_head = self._take(self.buf.index(b"\r\n\r\n") + 4)
        lines = raw_head[:-4].split(b"\r\n")
        match = re.match(rb"(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        assert match, f"bad status line {lines[0]!r}"
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            assert sep and name and name == name.strip(), f"bad header line {line!r}"
            headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        return Response(match.group(1).decode(), int(match.group(2)), match.group(3).decode("latin-1"),
                        headers, b"", raw_head)

    def read_response(self, method="GET", skip_interim=True):
        """Reads one response. A HEAD request's response, 1xx, 204 and 304
        have no body; otherwise Content-Length, chunked or read-until-close
        frames it, in that order of precedence as RFC 9112 6.3 says."""
        resp = self.read_head()
        while 100 <= resp.status < 200 and skip_interim:
            resp = self.read_head()
        status = resp.status
        if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
            return resp
        te = resp.header("Transfer-Encoding")
        cl = resp.header("Content-Length")
        if te is not None:
            assert te.lower().split(",")[-1].strip() == "chunked", te
            resp.body = self._read_chunked()
        elif cl is not None:
            resp.body = self._take(int(cl))
        else:
            resp.body = self.read_until_close()
        return resp

    def _read_chunked(self):
        body = bytearray()
        while True:
            size = int(self._line().split(b";")[0], 16)
            if size == 0:
                while self._line() != b"":  # trailer section
                    pass
                return bytes(body)
            body += self._take(size)
            assert self._take(2) == b"\r\n"

    def read_until_close(self):
        while True:
            try:
                self._fill()
            except ConnectionClosed:
                out = bytes(self.buf)
                self.buf.clear()
                return out

    def request(self, raw, method=None):
        """Sends raw request bytes and reads one response."""
        if isinstance(raw, str):
            raw = raw.encode("latin-1")
        self.send(raw)
        return self.read_response(method or raw.split(b" ", 1)[0].decode("latin-1"))

    def get(self, path, headers=(), method="GET", version="HTTP/1.1"):
        return self.request(build_request(method, path, headers, version), method)

    def is_closed(self, timeout=5.0):
        """True if the peer closes (EOF or reset) within timeout with no more
        bytes; False if the connection stays open. Extra bytes fail loudly."""
        assert not self.buf, f"unexpected bytes after the response: {bytes(self.buf[:200])!r}"
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        finally:
            self.sock.settimeout(old)
        assert data == b"", f"unexpected bytes instead of close: {data[:200]!r}"
        return True


def build_request(method, path, headers=(), version="HTTP/1.1", host="test"):
    """A request head. headers is a list of (name, value) or a dict; a Host
    header is added for HTTP/1.1 unless one is given."""
    items = list(headers.items()) if isinstance(headers, dict) else list(headers)
    if version == "HTTP/1.1" and not any(k.lower() == "host" for k, _ in items):
        items.insert(0, ("Host", host))
    lines = [f"{method} {path} {version}"] + [f"{k}: {v}" for k, v in items]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_responses(data, methods=None):
    """Splits bytes read until close into responses (for smuggling checks)."""
    conn = HttpConn(None)
    conn.buf = bytearray(data)
    out = []
    while conn.buf:
        out.append(conn.read_response(methods[len(out)] if methods else "GET"))
    return out

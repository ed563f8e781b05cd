#!/usr/bin/env python3
"""bench/tls_handshakes.py: a new HTTPS connection per request, one after another.

  tls_handshakes.py PORT PATH SECONDS full|resumed

Each connection: a TLS handshake, one HTTP/1.0 GET of PATH, the response
read to the close. "full" never offers a session; "resumed" offers the
newest session ticket the server has given, and uses each ticket once, as
browsers do (RFC 8446 C.4: clients should not reuse a ticket): after a
server that gives no fresh ticket with a resumption, the next connection
is a full handshake again. Prints one line:

  connections N resumed R bytes B seconds S
"""
import socket
import ssl
import sys
import time

HOST = "127.0.0.1"


def one(context, port, request, session):
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with context.wrap_socket(raw, session=session) as s:
            s.sendall(request)
            got = 0
            while True:
                try:
                    chunk = s.recv(65536)
                except ssl.SSLZeroReturnError:
                    break
                if not chunk:
                    break
                got += len(chunk)
            # Read to the close: every ticket the server sent has arrived.
            return got, s.session_reused, s.session


def main():
    port, path, seconds, mode = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
    if mode not in ("full", "resumed"):
        raise SystemExit("mode: full or resumed")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = f"GET {path} HTTP/1.0\r\nHost: {HOST}:{port}\r\n\r\n".encode()
    used = set()  # ids of the sessions offered already
    fresh = None  # a session not offered yet
    count = resumed = total = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        offer = fresh if mode == "resumed" else None
        if offer is not None:
            used.add(offer.id)
        got, reused, session = one(context, port, request, offer)
        count += 1
        resumed += reused
        total += got
        fresh = session if session is not None and session.id not in used else None
    elapsed = time.monotonic() - start
    print(f"connections {count} resumed {resumed} bytes {total} seconds {elapsed:.3f}")


if __name__ == "__main__":
    main()

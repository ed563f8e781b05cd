#!/usr/bin/env python3
"""WebSocket echo load for bench/compare: CONNS connections, each sending a
masked text frame of SIZE bytes and waiting for it to come back before the
next, for SECONDS; prints the messages that made the round trip.

  ws_echo.py PORT PATH SECONDS CONNS SIZE

Each connection opens with a WebSocket handshake (RFC 6455) and must get a
101; what comes back is counted by length only (the bench's upstream echoes
bytes as they are). One thread, asyncio: the figure that matters is the
server's CPU per message, read by the harness."""
import asyncio
import os
import struct
import sys
import time

HANDSHAKE = ("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")


def frame(size):
    """One masked, final text frame of `size` bytes."""
    mask = os.urandom(4)
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"x" * size))
    if size < 126:
        head = struct.pack("!BB", 0x81, 0x80 | size)
    else:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, size)
    return head + mask + payload


async def session(port, path, deadline, message, counts, errors):
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(HANDSHAKE.format(path=path).encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            errors.append(head.split(b"\r\n", 1)[0].decode(errors="replace"))
            writer.close()
            return
        n = 0
        while time.monotonic() < deadline:
            writer.write(message)
            await reader.readexactly(len(message))
            n += 1
        counts.append(n)
        writer.close()
    except (OSError, asyncio.IncompleteReadError) as e:
        errors.append(f"{type(e).__name__}: {e}")


async def main(port, path, seconds, conns, size):
    message = frame(size)
    counts, errors = [], []
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(session(port, path, deadline, message, counts, errors) for _ in range(conns)))
    elapsed = time.monotonic() - started
    print(f"messages {sum(counts)} connections {len(counts)} errors {len(errors)} seconds {elapsed:.3f}")
    for e in errors[:3]:
        print(f"error: {e}")


if __name__ == "__main__":
    port, path, seconds, conns, size = sys.argv[1:6]
    asyncio.run(main(int(port), path, float(seconds), int(conns), int(size)))

"""Generates the demo site's binary assets, which are not committed:
www/media/tone.wav (about 5 MB, for range requests), www/images/gradient.png,
and www/style.css.gz (served to clients that accept gzip).

usage: make_demo_assets.py [SITE_ROOT]   (default: the repository's www/)

Standard library only. Idempotent: files that exist are left alone."""
import gzip
import math
import os
import struct
import sys
import zlib

WWW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "www")


def write_wav(path, seconds=56, rate=44100):
    frames = seconds * rate
    data = bytearray()
    for i in range(frames):
        t = i / rate
        # A slow glide between two notes, softened at both ends.
        freq = 440 + 110 * math.sin(2 * math.pi * t / 8)
        envelope = min(1.0, t * 4, (seconds - t) * 4)
        data += struct.pack("<h", int(9000 * envelope * math.sin(2 * math.pi * freq * t)))
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    header += b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
    header += b"data" + struct.pack("<I", len(data))
    with open(path, "wb") as f:
        f.write(header + data)


def write_png(path, width=320, height=200):
    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            rows += bytes((47 + x * 150 // width, 127 + y * 100 // height, 184))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def main():
    global WWW
    if len(sys.argv) > 1:
        WWW = sys.argv[1]
    targets = [
        (os.path.join(WWW, "media", "tone.wav"), write_wav),
        (os.path.join(WWW, "images", "gradient.png"), write_png),
    ]
    for path, make in targets:
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            make(path)
    css = os.path.join(WWW, "style.css")
    gz = css + ".gz"
    if not os.path.exists(gz) or os.path.getmtime(gz) < os.path.getmtime(css):
        with open(css, "rb") as src, gzip.open(gz, "wb", compresslevel=9) as dst:
            dst.write(src.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())

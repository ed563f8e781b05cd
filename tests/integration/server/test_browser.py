"""The demo site in a real browser: headless Chromium loads the pages from
tern, and the access log shows what it fetched (the gzip stylesheet, the
images, and the sound file in byte ranges). A screenshot of the front page
is kept in build/test-artifacts/ for people to look at."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "build" / "test-artifacts"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test installs it)")


def chromium(*args, timeout=60):
    profile = tempfile.mkdtemp(prefix="tern-chromium-")
    try:
        # Flags from this machine's notes: headless, as root, and no
        # background traffic to hosts that cannot be reached.
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def demo(tern_factory, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(REPO / "www", site, ignore=shutil.ignore_patterns("tone.wav", "gradient.png", "*.gz"))
    subprocess.run([sys.executable, str(REPO / "scripts" / "lib" / "make_demo_assets.py"), str(site)],
                   check=True, timeout=120)
    server = tern_factory({"static": {"root": str(site)}, "access_log": "access.log"})
    return server, site


def access_lines(server, needle, timeout=10.0):
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        if server.access_log_path.exists():
            lines = [l for l in server.access_log_path.read_text().splitlines() if needle in l]
            if lines:
                return lines
        time.sleep(0.1)
    return lines


def test_front_page_renders_in_chromium(demo):
    server, site = demo
    url = f"http://127.0.0.1:{server.port}/"
    dom = chromium("--dump-dom", "--virtual-time-budget=3000", url)
    text = dom.stdout.decode(errors="replace")
    assert "A small, fast HTTP/1.1 web server." in text, dom.stderr.decode(errors="replace")[-2000:]
    assert 'href="/gallery.html"' in text

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "demo-front-page.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1100,800", "--virtual-time-budget=3000", url)
    assert result.returncode == 0 and shot.stat().st_size > 10000

    # The stylesheet went out gzip-compressed: the bytes logged are the .gz size.
    css = access_lines(server, '"GET /style.css HTTP/1.1" 200')
    assert css, "the browser did not fetch the stylesheet"
    gz_size = (site / "style.css.gz").stat().st_size
    assert any(re.search(rf'" 200 {gz_size} ', line) for line in css), css
    assert access_lines(server, '"GET /images/tern.svg HTTP/1.1" 200')


def test_gallery_images_load_in_chromium(demo):
    server, _ = demo
    result = chromium("--dump-dom", "--virtual-time-budget=3000", f"http://127.0.0.1:{server.port}/gallery.html")
    assert b"Gradient (PNG, generated)" in result.stdout
    for image in ("/images/waves.svg", "/images/sunset.svg", "/images/gradient.png"):
        assert access_lines(server, f'"GET {image} HTTP/1.1" 200'), f"{image} not fetched"


def test_audio_is_fetched_with_range_requests(demo):
    server, _ = demo
    chromium("--dump-dom", "--autoplay-policy=no-user-gesture-required", "--virtual-time-budget=5000",
             f"http://127.0.0.1:{server.port}/media.html")
    fetches = access_lines(server, "GET /media/tone.wav")
    assert fetches, "the browser did not fetch the audio"
    assert any('" 206 ' in line for line in fetches), fetches


def test_front_page_over_https_in_chromium(tern_factory, tmp_path):
    """The demo over HTTPS: Chromium is told to trust the test certificate
    (by its public key) and reaches it by name."""
    from test_tls import Pki

    pki = Pki(tmp_path / "pki")
    cert, key = pki.issue("a.test")
    spki = Pki.spki(cert)
    site = tmp_path / "site"
    shutil.copytree(REPO / "www", site, ignore=shutil.ignore_patterns("tone.wav", "gradient.png", "*.gz"))
    server = tern_factory({"static": {"root": str(site)}, "access_log": "access.log",
                           "tls": {"cert": cert, "key": key}}, tls=True)
    dom = chromium("--dump-dom", "--virtual-time-budget=3000", f"--ignore-certificate-errors-spki-list={spki}",
                   "--host-resolver-rules=MAP a.test 127.0.0.1", f"https://a.test:{server.port}/")
    text = dom.stdout.decode(errors="replace")
    assert "A small, fast HTTP/1.1 web server." in text, dom.stderr.decode(errors="replace")[-2000:]
    # Over HTTP/2: ALPN offers h2 first (test_http2.py checks it in the DevTools protocol).
    assert access_lines(server, '"GET /style.css HTTP/2.0" 200'), "the stylesheet did not come over HTTPS"

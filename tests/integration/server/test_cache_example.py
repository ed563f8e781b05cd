"""README's caching example, run as written: examples/cache/app.py (a page
takes a second) behind examples/cache/tern.toml, with only the ports and
the zone's folder changed. A page is slow once, then fast; a cold page
asked for by many clients at once reaches the application once; the
application stopped, the last page is still served."""

import socket
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tern_server import free_port, scaled

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cache"
MAX_AGE = 2  # the application's, in seconds (the example's default is 10)


@pytest.fixture
def app():
    """The example's application on a free port, its pages fresh for 2 s:
    freshness is counted in whole seconds, so a page of max-age=1 may be
    stale a moment after it came, when the clock's second turns (as the
    Age the cache would send says a second), and the test's second
    request would find it so."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(EXAMPLE / "app.py"), str(port), str(MAX_AGE)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + scaled(10, 10)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "app.py did not start"
            time.sleep(0.05)
    yield proc, port
    proc.kill()
    proc.wait(timeout=10)


def example_config(app_port, cache_dir):
    """examples/cache/tern.toml with the test's ports and folder."""
    config = tomllib.loads((EXAMPLE / "tern.toml").read_text())
    del config["listen"]  # the fixture's free port
    (zone,) = config["cache"]
    zone["path"] = str(cache_dir)
    proxy = config["server"][0]["location"][0]["proxy"]
    assert proxy["pass"] == "http://127.0.0.1:3000"
    proxy["pass"] = f"http://127.0.0.1:{app_port}"
    return config


def get(srv, path):
    with srv.connect() as c:
        start = time.monotonic()
        resp = c.get(path)
        return resp, time.monotonic() - start


def test_the_readme_caching_example(tern_factory, app, tmp_path):
    proc, port = app
    srv = tern_factory(example_config(port, tmp_path / "cache"))

    first, took = get(srv, "/products")
    assert first.status == 200 and took >= 0.9
    assert first.header("Cache-Status") == "tern; fwd=uri-miss"
    assert b"request 1 of the application" in first.body

    again, _ = get(srv, "/products")
    assert again.status == 200 and again.body == first.body
    assert again.header("Cache-Status").startswith("tern; hit")

    # 50 clients at once for a page nobody asked for yet: one request reaches the application.
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(lambda _: get(srv, "/cold")[0], range(50)))
    assert {a.status for a in answers} == {200}
    assert len({a.body for a in answers}) == 1
    assert b"request 2 of the application" in answers[0].body

    # The application goes down; once the page's freshness has passed, the
    # last page is served stale.
    proc.kill()
    proc.wait(timeout=10)
    time.sleep(MAX_AGE + 1.1)
    stale, _ = get(srv, "/products")
    assert stale.status == 200 and stale.body == first.body
    assert stale.header("Cache-Status").startswith("tern; fwd=stale")
    assert "detail=error" in stale.header("Cache-Status")

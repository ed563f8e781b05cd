"""A tern in front of the test's php-fpm: the test scripts (php/), the
[[fastcgi]] block the tests start from, and a sampler of tern's memory.
Shared by test_fastcgi.py and test_hardening.py; the fixtures (fpm,
php_factory, php) are in conftest.py."""

import shutil
import threading
from pathlib import Path

from tern_server import merge

MIB = 1024 * 1024
SCRIPTS = Path(__file__).resolve().parent / "php"


def install_scripts(root):
    for script in SCRIPTS.glob("*.php"):
        shutil.copyfile(script, Path(root) / script.name)


def fastcgi_block(pass_address, **overrides):
    # A php-fpm child serves one FastCGI connection at a time, for as long as
    # the web server keeps it open: workers x pool must not exceed the pool's
    # children, or requests sent on the surplus connections wait for a child
    # that never comes (until read_timeout). The fixture's php-fpm has 8.
    block = {
        "match": r"\.php$",
        "pass": pass_address,
        "connect_timeout": "2s",
        "read_timeout": "30s",
        "pool": 4,
    }
    block.update(overrides)
    return block


def start_fastcgi_server(tern_factory, blocks, config=None, env=None, **kwargs):
    """A tern with these [[fastcgi]] blocks, request bodies up to 64 MiB, and
    the test scripts plus a static file (static.txt) in its root; env adds
    to its environment; other keyword arguments go to tern_factory."""
    cfg = merge({"limits": {"body_bytes": "64MiB"}}, config)
    cfg["fastcgi"] = blocks
    srv = tern_factory(cfg, env=env, **kwargs)
    install_scripts(srv.root)
    srv.write_file("static.txt", b"static file\n")
    return srv


class RssSampler(threading.Thread):
    """Samples tern's VmRSS every 20 ms; keeps the peak."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.server = server
        self.baseline = server.rss_kib()
        self.peak = self.baseline
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.02):
            try:
                self.peak = max(self.peak, self.server.rss_kib())
            except (OSError, AssertionError):
                return

    def growth_mib(self):
        self.done.set()
        self.join(timeout=5)
        return (self.peak - self.baseline) / 1024

"""Toxiproxy: a TCP proxy whose faults a test turns on and off through its
HTTP API (latency, bandwidth, a stall, a reset, a cut after N bytes, bytes
sliced into small writes). ./scripts/test builds toxiproxy-server into
build/tools and names it in $TERN_TOXIPROXY.

    proxy = toxiproxy.proxy("fpm", "127.0.0.1:9000")   # -> "127.0.0.1:PORT"
    toxiproxy.add("fpm", "latency", latency=3000)
    toxiproxy.remove("fpm", "latency")
"""

import http.client
import json
import os
import shutil
import subprocess
import time

import pytest

from tern_server import REPO_ROOT, free_port


def toxiproxy_binary():
    path = os.environ.get("TERN_TOXIPROXY")
    if path:
        assert os.access(path, os.X_OK), f"TERN_TOXIPROXY={path} is not an executable"
        return path
    built = REPO_ROOT / "build" / "tools" / "toxiproxy-server"
    if built.exists():
        return str(built)
    path = shutil.which("toxiproxy-server")
    if path is None:
        pytest.skip("toxiproxy-server is not built (./scripts/test builds it into build/tools)")
    return path


class Toxiproxy:
    def __init__(self, workdir):
        self.port = free_port()
        self.log = open(workdir / "toxiproxy.log", "ab")
        self.proc = subprocess.Popen([toxiproxy_binary(), "-host", "127.0.0.1", "-port", str(self.port)],
                                     stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.api("GET", "/version")
                return
            except OSError:
                assert self.proc.poll() is None, "toxiproxy-server exited"
                assert time.monotonic() < deadline, "toxiproxy-server did not start"
                time.sleep(0.05)

    def api(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            assert response.status < 300, f"toxiproxy {method} {path}: {response.status} {data!r}"
            try:
                return json.loads(data)
            except ValueError:
                return data.decode(errors="replace")  # /version is plain text
        finally:
            conn.close()

    def proxy(self, name, upstream):
        """A proxy to `upstream` ("host:port"); returns the address it listens on."""
        listen = f"127.0.0.1:{free_port()}"
        self.api("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return listen

    def enable(self, name, enabled):
        """A disabled proxy closes its listener and its connections."""
        self.api("POST", f"/proxies/{name}", {"enabled": enabled})

    def add(self, name, kind, stream="downstream", **attributes):
        """A toxic of `kind` on the bytes going to the client of the proxy
        (downstream: tern) or from it (upstream); named after its kind."""
        self.api("POST", f"/proxies/{name}/toxics",
                 {"name": kind, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes})

    def remove(self, name, kind):
        self.api("DELETE", f"/proxies/{name}/toxics/{kind}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

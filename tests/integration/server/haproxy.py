"""A real HAProxy (Debian's haproxy) for the tests to put in front of
tern or behind it: a config written from the test's frontend and backend
lines, run in the foreground on a free loopback port, killed at the end."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tern_server import free_port

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


class HAProxy:
    """haproxy -db -f CONFIG: `mode` ("tcp" or "http"), one frontend on
    self.port, one backend of `server_lines` ("server tern 127.0.0.1:8080
    send-proxy-v2"); `frontend_lines` for the frontend's own options
    ("option forwardfor")."""

    def __init__(self, workdir, mode, server_lines, frontend_lines=(), bind_options=""):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.config = self.workdir / "haproxy.cfg"
        self.log = self.workdir / "haproxy.log"
        lines = [
            "global",
            "  maxconn 1000",
            "defaults",
            f"  mode {mode}",
            "  timeout connect 5s",
            "  timeout client 30s",
            "  timeout server 30s",
            "frontend fe",
            f"  bind 127.0.0.1:{self.port} {bind_options}".rstrip(),
            *[f"  {line}" for line in frontend_lines],
            "  default_backend be",
            "backend be",
            *[f"  {line}" for line in server_lines],
        ]
        self.config.write_text("\n".join(lines) + "\n")
        check = subprocess.run([HAPROXY, "-c", "-f", str(self.config)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", str(self.config)], stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"haproxy exited:\n{self.log.read_text()}"
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"haproxy did not listen:\n{self.log.read_text()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

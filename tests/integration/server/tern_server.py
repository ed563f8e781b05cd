"""Runs the real tern binary: a temporary root, a generated TOML config, a
free port, and helpers to signal, reload and inspect it.

The binary comes from $TERN_BIN (default: build/debug/tern in this checkout).
$TERN_TEST_SCALE (default 1.0) shrinks the load tests for slow sanitizer
builds.
"""

import hashlib
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

from http_client import IO_TIMEOUT, HttpConn

REPO_ROOT = Path(__file__).resolve().parents[3]
TERN_BIN = Path(os.environ.get("TERN_BIN", REPO_ROOT / "build" / "debug" / "tern")).absolute()
SCALE = float(os.environ.get("TERN_TEST_SCALE", "1.0"))
# Sanitizer builds start and run several times slower.
START_TIMEOUT = 30.0


def scaled(n, minimum):
    """n scaled by TERN_TEST_SCALE, never below minimum."""
    return max(minimum, int(n * SCALE))


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def toml_value(value):
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


def toml_key(key):
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_value(key)


def is_table_array(value):
    """A non-empty list of dicts: TOML's [[name]] array of tables."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, dict) for v in value)


def to_toml(config):
    """A dict of scalars and one level of nested tables (two for
    static.mime) as TOML text; a top-level list of dicts becomes an array
    of tables ({"fastcgi": [{...}, {...}]} -> two [[fastcgi]] blocks), and
    a list of dicts inside one a nested array ({"server": [{"location":
    [...]}]} -> [[server]] then [[server.location]]); other dicts inside an
    array item are inline tables."""
    lines = []
    tables = []
    arrays = []
    for key, value in config.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif is_table_array(value):
            arrays.append((key, value))
        else:
            lines.append(f"{key} = {toml_value(value)}")
    while tables:
        name, table = tables.pop(0)
        lines.append(f"\n[{name}]")
        for key, value in table.items():
            if isinstance(value, dict):
                tables.append((f"{name}.{key}", value))
            else:
                lines.append(f"{key} = {toml_value(value)}")
    def array(name, items):
        for item in items:
            lines.append(f"\n[[{name}]]")
            nested = []
            for key, value in item.items():
                if is_table_array(value):
                    nested.append((f"{name}.{key}", value))
                else:
                    lines.append(f"{toml_key(key)} = {toml_value(value)}")
            for sub, sub_items in nested:
                array(sub, sub_items)

    for name, items in arrays:
        array(name, items)
    return "\n".join(lines) + "\n"


def merge(base, extra):
    out = dict(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def wait_until(predicate, timeout=10.0, interval=0.05):
    """predicate()'s first true value within `timeout` seconds, asking every
    `interval`; None if there was none."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def _ephemeral_ports():
    """The kernel's range for the local ports of outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


_EPHEMERAL = _ephemeral_ports()
# Ports are drawn by a generator of their own: a test that seeds `random`
# would otherwise give both halves of the suite the same draws.
_PORTS = random.Random()


def free_port(host="127.0.0.1"):
    """A TCP port free on host now, for a server a test starts next. It is
    drawn below the kernel's ephemeral range: a port from the range (what
    binding port 0 gives) may be taken, before the server binds it, by the
    local end of any connection made meanwhile, by this test or by one
    running beside it (a CA's port written into tern's config cannot be
    picked again). Only another test's draw can take this one."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low = 20000
    if _EPHEMERAL[0] - low >= 1000:
        for _ in range(100):
            port = _PORTS.randrange(low, _EPHEMERAL[0])
            with socket.socket(family) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class TernServer:
    """One tern process with its own document root and config file."""

    def __init__(self, workdir, root, config=None, host="127.0.0.1", args=(), env=None, preexec_fn=None,
                 tls=False, listen_flags=""):
        self.workdir = Path(workdir)
        self.host = host  # "127.0.0.1" or "::1"
        self.tls = tls  # the address is marked "tls" (the config needs a [tls] certificate)
        self.listen_flags = listen_flags  # more flags for the address: "h2c", "no-h2"
        # The client side of connect() on a TLS server: an ssl.SSLContext
        # (the test's CA trusted), or None for one that checks nothing.
        self.client_tls = None
        self.args = list(args)  # extra command-line flags
        self.env = env  # extra environment variables
        self.preexec_fn = preexec_fn  # run in the child before exec (limits)
        self.root = Path(root)
        self.config_path = self.workdir / "tern.toml"
        self.stderr_path = self.workdir / "tern.stderr"
        self.access_log_path = self.workdir / "access.log"
        self.extra = config or {}
        self.port = None
        self.proc = None
        self.exit_status = None

    # -- config --

    def config_dict(self, extra=None):
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        base = {
            "listen": [address + (" tls" if self.tls else "") + (" " + self.listen_flags if self.listen_flags else "")],
            "workers": 1,
            "static": {"root": str(self.root)},
            "log": {"level": "info"},
        }
        return merge(merge(base, self.extra), extra)

    def write_config(self, extra=None):
        """Writes the config (the start-time extras merged with extra)."""
        self.config_path.write_text(to_toml(self.config_dict(extra)))

    # -- lifecycle --

    def start(self):
        assert TERN_BIN.exists(), f"no server binary at {TERN_BIN} (build it or set TERN_BIN)"
        for _ in range(5):
            self.port = free_port(self.host)
            self.write_config()
            with open(self.stderr_path, "ab") as err:
                env = {**os.environ, **self.env} if self.env else None
                self.proc = subprocess.Popen([str(TERN_BIN), "-c", str(self.config_path), *self.args],
                                             stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                             cwd=self.workdir, env=env, preexec_fn=self.preexec_fn)
            if self._wait_listening():
                return self
            # Lost the race for the port to another process: try another one.
            self.proc.wait(timeout=START_TIMEOUT)
            if "cannot listen" not in self.stderr():
                break
        raise AssertionError(f"tern did not start; stderr:\n{self.stderr()}")

    def _wait_listening(self):
        """Whether tern came to listen on its port: its own socket, not
        another process's that took the port first (a connect alone would
        not tell them apart)."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self._owns_listener():
                return True
            time.sleep(0.02)
        self.proc.kill()
        raise AssertionError(f"tern did not listen within {START_TIMEOUT}s; stderr:\n{self.stderr()}")

    def _owns_listener(self):
        """Whether one of tern's descriptors is a socket listening on
        self.port (its network namespace's tcp and tcp6 tables, which may
        not be the test's: state 0A is LISTEN)."""
        listening = set()
        for table in (f"/proc/{self.proc.pid}/net/tcp", f"/proc/{self.proc.pid}/net/tcp6"):
            try:
                with open(table) as f:
                    next(f)
                    for line in f:
                        fields = line.split()
                        if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == self.port:
                            listening.add(fields[9])
            except OSError:
                continue
        if not listening:
            return False
        try:
            fds = os.listdir(f"/proc/{self.proc.pid}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{self.proc.pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in listening:
                return True
        return False

    def signal(self, signo):
        self.proc.send_signal(signo)

    def stop(self, timeout=IO_TIMEOUT):
        """SIGTERM, then waits; kills it if it does not exit. Returns the exit
        status (negative: killed by that signal)."""
        if self.proc is None:
            return self.exit_status
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        self.exit_status = self.proc.returncode
        return self.exit_status

    def wait_exit(self, timeout=IO_TIMEOUT):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stderr(self):
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def thread_stacks(self):
        """Every thread's stack (gdb), for the message of a test that waited
        in vain for the server to do something."""
        if self.proc is None or self.proc.poll() is not None:
            return "(the server is not running)"
        if shutil.which("gdb") is None:
            return "(no gdb here for the server's stacks)"
        try:
            out = subprocess.run(["gdb", "-p", str(self.proc.pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                                 capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            return "(gdb did not answer in 60 s)"
        return "\n".join(line for line in out.stdout.splitlines() if line.startswith(("Thread", "#")))

    def wait_for_log(self, needle, count=1, timeout=10.0):
        """Waits until stderr holds needle at least count times (the error
        log is flushed about once a second)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stderr().count(needle) >= count:
                return True
            time.sleep(0.05)
        return False

    def reload(self, extra=None):
        """Rewrites the config, sends SIGHUP and waits for the reload line."""
        before = self.stderr().count("configuration reloaded")
        self.write_config(extra)
        self.signal(signal.SIGHUP)
        assert self.wait_for_log("configuration reloaded", before + 1), \
            f"no reload logged after SIGHUP; stderr:\n{self.stderr()}"

    def open_files(self):
        """What each of the process's descriptors points at (readlink of
        /proc/PID/fd/N), deleted files marked " (deleted)"."""
        out = []
        fd_dir = f"/proc/{self.proc.pid}/fd"
        for name in os.listdir(fd_dir):
            try:
                out.append(os.readlink(f"{fd_dir}/{name}"))
            except OSError:
                pass
        return out

    def rss_kib(self, field="VmRSS"):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.proc.pid}/status")

    def runs_under(self, runtime):
        """True if the process has a sanitizer runtime mapped ("libtsan")."""
        with open(f"/proc/{self.proc.pid}/maps") as f:
            return runtime in f.read()

    # -- client helpers --

    def connect(self, source=None, timeout=IO_TIMEOUT, server_name=None):
        conn = HttpConn.open(self.port, source=source, timeout=timeout, host=self.host)
        if self.tls:
            context = self.client_tls
            if context is None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            conn.sock = context.wrap_socket(conn.sock, server_hostname=server_name)
        return conn

    def request(self, raw, method=None):
        """One request on a fresh connection; returns (response, conn)."""
        conn = self.connect()
        return conn.request(raw, method), conn

    def get(self, path, headers=(), method="GET", version="HTTP/1.1"):
        """One request on a fresh connection that is then closed."""
        with self.connect() as conn:
            return conn.get(path, headers, method, version)

    def url(self, path="/"):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{path}"

    def write_file(self, rel, data):
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return path


def link_into(server, source, name):
    """Hard-links (or copies) a file into the server's root."""
    target = server.root / name
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
    return target

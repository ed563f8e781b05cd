"""The servers under test: one document root, their configs, start, probe, stop.

Every server runs pinned to CPU 0 in its own process group, so that a Ctrl-C
typed at the harness does not reach it before the harness has read what it
needs, and so that stop() can end the whole group (nginx master and worker).
"""
import os
import signal
import socket
import subprocess
import tempfile
import time

from . import procstat

HOST = "127.0.0.1"
SERVER_CPU = "0"
SMALL_FILE, SMALL_SIZE = "1k.html", 1024
BIG_FILE, BIG_SIZE = "64m.bin", 64 << 20
HELLO_BODY = "Hello, world!\n"


def free_port():
    """A port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Workspace:
    """A temp dir holding the document root, the configs and the logs."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tern-bench-")
        self.docroot = os.path.join(self.dir, "www")
        os.mkdir(self.docroot)
        # nginx workers run as nobody: the root and every parent must be
        # searchable by all. mkdtemp makes 0700 dirs.
        for d in (self.dir, self.docroot):
            os.chmod(d, 0o755)
        self._check_parents()
        self._write_files()

    def _check_parents(self):
        d = os.path.dirname(self.dir)
        while d != "/":
            if not os.stat(d).st_mode & 0o001:
                raise SystemExit(f"bench: {d} is not searchable by others; nginx workers "
                                 "(user nobody) could not read the document root. "
                                 "Set TMPDIR to a world-searchable folder.")
            d = os.path.dirname(d)

    def _write_files(self):
        line = b"<p>tern benchmark: the same bytes from every server.</p>\n"
        small = (b"<!doctype html>\n" + line * 32)[:SMALL_SIZE - 1] + b"\n"
        self._write(SMALL_FILE, small)
        # A repeating 1 MiB block: content does not matter to sendfile.
        block = bytes(range(256)) * 4096
        self._write(BIG_FILE, block * (BIG_SIZE // len(block)))

    def _write(self, name, data):
        path = os.path.join(self.docroot, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)

    def path(self, name):
        return os.path.join(self.dir, name)


class Server:
    """One started server process (tree)."""

    def __init__(self, label, argv, port, log_path):
        self.label, self.port, self.log_path = label, port, log_path
        self.argv = ["taskset", "-c", SERVER_CPU, *argv]
        self._log = open(log_path, "wb")
        # taskset execs the server, so proc.pid is the server's own pid.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid

    def url(self, path):
        return f"http://{HOST}:{self.port}/{path}"

    def wait_ready(self, timeout=15.0):
        """Until the port accepts a connection; fail fast if the server died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with status {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                socket.create_connection((HOST, self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.label} did not listen on port {self.port} in {timeout} s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def cpu_seconds(self):
        return procstat.cpu_seconds(self.pid)

    def rss_kib(self):
        return procstat.rss_kib(self.pid)

    def stop(self):
        """SIGTERM the group, SIGKILL it if it is still there after 5 s."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # The group may outlive its leader (an nginx worker); make sure it is gone.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()


def tern_config(ws, port):
    path = ws.path(f"tern-{port}.toml")
    with open(path, "w") as f:
        f.write(f'''listen = ["{HOST}:{port}"]
workers = 1
# 10,000 idle connections plus the probes: above the default of 10,000.
max_connections = 20000
access_log = "off"
shutdown_timeout = "1s"

[static]
root = "{ws.docroot}"

[log]
level = "warn"
''')
    return path


def _nginx_has(module):
    """Whether this nginx build has a module that Debian's light builds may drop."""
    out = subprocess.run(["nginx", "-V"], capture_output=True, text=True, timeout=10).stderr
    return f"--without-{module}" not in out


def nginx_config(ws, port):
    """The config of BENCHMARKING.md, with every path it writes in the temp dir,
    so that it runs as root without touching /var."""
    tmp = ws.path(f"nginx-{port}")
    os.makedirs(tmp, exist_ok=True)
    temp_paths = [f"client_body_temp_path {tmp}/client_body;",
                  f"proxy_temp_path {tmp}/proxy;", f"fastcgi_temp_path {tmp}/fastcgi;"]
    for module, directive in (("http_uwsgi_module", "uwsgi"), ("http_scgi_module", "scgi")):
        if _nginx_has(module):
            temp_paths.append(f"{directive}_temp_path {tmp}/{directive};")
    temp_block = "\n    ".join(temp_paths)
    path = ws.path(f"nginx-{port}.conf")
    with open(path, "w") as f:
        f.write(f'''worker_processes 1;
worker_rlimit_nofile 65536;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    open_file_cache max=1000;
    types {{ text/html html; application/octet-stream bin; }}
    default_type application/octet-stream;
    {temp_block}
    server {{
        listen {HOST}:{port};
        root {ws.docroot};
        location = /hello {{ default_type "text/plain; charset=utf-8"; return 200 "Hello, world!\\n"; }}
    }}
}}
''')
    return path, f"{tmp}/error.log"


def start(kind, ws, bins):
    """Start one server of `kind` on a fresh port and wait until it listens.

    kind: tern | nginx | floor (1 KiB body) | hello (tern's hello_http) | floor-hello.
    bins: paths of the built binaries (tern, hello_http, floor_server)."""
    port = free_port()
    log = ws.path(f"{kind}-{port}.log")
    if kind == "tern":
        argv = [bins["tern"], "-c", tern_config(ws, port)]
    elif kind == "nginx":
        conf, errlog = nginx_config(ws, port)
        argv = ["nginx", "-c", conf, "-e", errlog, "-p", ws.dir, "-g", "daemon off;"]
    elif kind == "floor":
        argv = [bins["floor"], str(port), str(SMALL_SIZE)]
    elif kind == "floor-hello":
        argv = [bins["floor"], str(port), str(len(HELLO_BODY))]
    elif kind == "hello":
        argv = [bins["hello"], "--port", str(port), "--threads", "0"]
    else:
        raise ValueError(kind)
    server = Server(kind, argv, port, log)
    try:
        server.wait_ready()
    except Exception:
        server.stop()
        raise
    return server


def http_get(port, path, timeout=5.0):
    """One GET on a new connection: (status, body). Used to check each server
    serves what the others serve before anything is measured."""
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        return read_response(s)


def read_response(sock):
    """Read one HTTP/1.1 response with a Content-Length body from a socket."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the response header")
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(min(65536, length - len(body)))
        if not chunk:
            raise ConnectionError("connection closed inside the response body")
        body += chunk
    return status, body

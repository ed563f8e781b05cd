"""Runs a real php-fpm (Debian's php8.2-fpm) for the FastCGI tests: its own
generated config in a temporary folder, one static pool on a unix socket,
started in the foreground in its own session so that kill() can take the
master and its children down at once.

The binary comes from $TERN_PHP_FPM (default: /usr/sbin/php-fpm8.2, else
php-fpm8.2 on PATH). A missing php-fpm fails the tests instead of skipping
them: ./scripts/test installs php8.2-fpm.
"""

import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0

FCGI_VERSION_1 = 1
FCGI_GET_VALUES = 9
FCGI_GET_VALUES_RESULT = 10


def find_php_fpm():
    """The php-fpm binary, or None."""
    configured = os.environ.get("TERN_PHP_FPM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    if os.access("/usr/sbin/php-fpm8.2", os.X_OK):
        return "/usr/sbin/php-fpm8.2"
    return shutil.which("php-fpm8.2")


def _fcgi_record(rtype, request_id, content):
    return struct.pack(">BBHHBB", FCGI_VERSION_1, rtype, request_id, len(content), 0, 0) + content


def _fcgi_pair(name, value=b""):
    assert len(name) < 128 and len(value) < 128
    return bytes([len(name), len(value)]) + name + value


def fcgi_get_values(path, timeout=2.0, host="127.0.0.1"):
    """Sends an FCGI_GET_VALUES management record to the unix socket at path
    (or the TCP port on host, an int) and returns the raw content of the
    FCGI_GET_VALUES_RESULT (a php-fpm child answers it: proof that the pool
    accepts and speaks FastCGI)."""
    tcp = isinstance(path, int)
    with socket.socket(socket.AF_INET if tcp else socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect((host, path) if tcp else str(path))
        sock.sendall(_fcgi_record(FCGI_GET_VALUES, 0, _fcgi_pair(b"FCGI_MPXS_CONNS")))
        data = b""
        while len(data) < 8:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"php-fpm closed after {len(data)} bytes")
            data += chunk
        version, rtype, _, length, padding, _ = struct.unpack(">BBHHBB", data[:8])
        if version != FCGI_VERSION_1 or rtype != FCGI_GET_VALUES_RESULT:
            raise ConnectionError(f"unexpected FastCGI record type {rtype} (version {version})")
        while len(data) < 8 + length + padding:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("php-fpm closed inside its FCGI_GET_VALUES_RESULT")
            data += chunk
        return data[8:8 + length]


class PhpFpm:
    """One php-fpm master with one pool of `children` static workers on a
    unix socket in workdir.

        fpm = PhpFpm(tmp_path / "fpm").start()
        config = {"fastcgi": [{"match": r"\\.php$", "pass": fpm.pass_address}]}
        ...
        fpm.kill()      # SIGKILL to the master and every child
        fpm.restart()   # a fresh master on the same socket path
        fpm.stop()
    """

    def __init__(self, workdir=None, children=4, php_settings=None, tcp_port=None, tcp_host="127.0.0.1", env=None):
        self.binary = find_php_fpm()
        if os.environ.get("TERN_PHP_FPM"):
            assert self.binary, f"TERN_PHP_FPM={os.environ['TERN_PHP_FPM']} is not an executable"
        assert self.binary, (
            "php-fpm8.2 is not installed (no /usr/sbin/php-fpm8.2 and none on PATH): "
            "apt-get install php8.2-fpm (./scripts/test installs it) or set TERN_PHP_FPM")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir if workdir is not None else tempfile.mkdtemp(prefix="tern-fpm-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.children = children
        self.php_settings = dict(php_settings or {})
        self.config_path = self.workdir / "php-fpm.conf"
        self.log_path = self.workdir / "php-fpm.log"
        self.stderr_path = self.workdir / "php-fpm.stderr"
        self.pid_path = self.workdir / "php-fpm.pid"
        # A unix socket path holds at most 107 bytes: use a short folder of
        # our own when the test's folder is too deep.
        self._socket_dir = None
        socket_path = self.workdir / "php-fpm.sock"
        if len(os.fsencode(str(socket_path))) > 100:
            self._socket_dir = Path(tempfile.mkdtemp(prefix="tern-fpm-"))
            socket_path = self._socket_dir / "php-fpm.sock"
        self.socket_path = socket_path
        # With tcp_port, php-fpm listens on tcp_host:tcp_port instead.
        self.tcp_port = tcp_port
        self.tcp_host = tcp_host
        # Variables the pool's scripts see in $_SERVER (env[NAME] = value).
        self.env = dict(env or {})
        self.proc = None

    @property
    def pass_address(self):
        """The value for a [[fastcgi]] block's pass key."""
        return f"{self.tcp_host}:{self.tcp_port}" if self.tcp_port else f"unix:{self.socket_path}"

    @property
    def listen(self):
        return f"{self.tcp_host}:{self.tcp_port}" if self.tcp_port else str(self.socket_path)

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- config --

    def config_text(self):
        php = {
            "log_errors": "on",
            "display_errors": "off",
            "error_reporting": "32767",  # E_ALL
            "html_errors": "off",
            "output_buffering": "0",  # flush() reaches FastCGI at once
            "post_max_size": "256M",
            "upload_max_filesize": "256M",
            "memory_limit": "256M",
            "max_execution_time": "0",
            "expose_php": "off",
        }
        php.update(self.php_settings)
        lines = [
            "[global]",
            f"pid = {self.pid_path}",
            f"error_log = {self.log_path}",
            "log_level = notice",
            "daemonize = no",
            "process_control_timeout = 2s",
            "",
            "[tern]",
            f"listen = {self.listen}",
            "listen.mode = 0666",
            "listen.backlog = 1024",
            "pm = static",
            f"pm.max_children = {self.children}",
            "catch_workers_output = yes",
            "decorate_workers_output = no",
            "request_terminate_timeout = 300s",
            "clear_env = no",
            "security.limit_extensions = .php",
        ]
        lines += [f"php_admin_value[{k}] = {v}" for k, v in php.items()]
        lines += [f"env[{k}] = {v}" for k, v in self.env.items()]
        return "\n".join(lines) + "\n"

    # -- lifecycle --

    def start(self, timeout=START_TIMEOUT):
        """Starts php-fpm and waits until a child answers on the socket."""
        assert not self.running(), "php-fpm is already running"
        self.config_path.write_text(self.config_text())
        for stale in (self.socket_path, self.pid_path):
            try:
                stale.unlink()
            except FileNotFoundError:
                pass
        cmd = [self.binary, "-F", "-n", "-R", "-y", str(self.config_path), "-p", str(self.workdir)]
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         cwd=self.workdir, start_new_session=True)
        deadline = time.monotonic() + timeout
        last_error = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"php-fpm exited with {self.proc.returncode} at start "
                                     f"({' '.join(cmd)});\n{self.logs()}")
            if self.tcp_port or self.socket_path.exists():
                try:
                    fcgi_get_values(self.tcp_port or self.socket_path, host=self.tcp_host)
                    return self
                except OSError as e:
                    last_error = e
            time.sleep(0.02)
        self.kill()
        raise AssertionError(f"php-fpm did not answer on {self.listen} within {timeout}s "
                             f"(last error: {last_error});\n{self.logs()}")

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM (fast shutdown) to the master, waits, then SIGKILL to the
        whole process group. Returns the master's exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self._kill_group()
        self.proc.wait(timeout=timeout)
        return self.proc.returncode

    def kill(self):
        """SIGKILL to the master and its children (the children of a killed
        master live on, so the whole process group goes)."""
        if self.proc is None:
            return
        self._kill_group()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        self._wait_group_gone()

    def restart(self, timeout=START_TIMEOUT):
        self.stop()
        self.proc = None
        return self.start(timeout)

    def _kill_group(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # start_new_session: pgid == pid
        except (ProcessLookupError, PermissionError):
            pass

    def _wait_group_gone(self, timeout=STOP_TIMEOUT):
        """Waits until no process of the group is left (the children are
        reparented, so only /proc tells)."""
        pgid = self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._group_members(pgid):
                return True
            time.sleep(0.02)
        return False

    @staticmethod
    def _group_members(pgid):
        members = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            # fields[0] is the state, fields[2] the process group.
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry))
        return members

    def cleanup(self):
        """Stops it and removes the folders it made for itself."""
        self.stop()
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- inspection --

    def log(self):
        """php-fpm's error log (with catch_workers_output, what the children
        write to their stderr lands here too)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def logs(self):
        try:
            stderr = self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            stderr = ""
        return f"--- {self.log_path} ---\n{self.log()[-4000:]}\n--- {self.stderr_path} ---\n{stderr[-4000:]}"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()

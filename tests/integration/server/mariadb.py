"""Runs a real MariaDB (Debian's mariadb-server) for the users-application
tests: a data folder of its own made by mariadb-install-db, one mariadbd
started in the foreground in its own session (never the system service),
listening on a unix socket in a short folder under /tmp and on a free TCP
port on 127.0.0.1. Grant tables are in force (no --skip-grant-tables): root
gets in over the socket by unix_socket authentication (the tests run as
root), and a user with a password is made for 'localhost' (the socket) and
'127.0.0.1' (TCP), the way an application would connect.

    db = MariaDB(tmp_path / "mariadb").start()
    db.url_socket   # mysql://tern:PASS@localhost/tern?socket=/tmp/tern-my-XXXX/mysqld.sock
    db.url_tcp      # mysql://tern:PASS@127.0.0.1:PORT/tern
    db.create_database("t_1")        # another database the user may use
    db.url("t_1", tcp=True)
    db.query("SELECT 1", database="t_1")   # [("1",)], as root
    db.stop()       # clean shutdown (mariadb-admin, then SIGTERM, then SIGKILL)
    db.kill()       # SIGKILL: a crash, InnoDB recovers at the next start
    db.restart()    # same data, socket path and port
    db.cleanup()

The binaries come from $TERN_MARIADBD (default: /usr/sbin/mariadbd, else
mariadbd on PATH) and mariadb-install-db, mariadb and mariadb-admin on PATH
(or beside it). A missing MariaDB fails the tests instead of skipping them:
./scripts/test installs mariadb-server.
"""

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tern_server import free_port

START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
CLIENT_TIMEOUT = 30.0
SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the NUL


def find_mariadbd():
    """The mariadbd binary, or None."""
    configured = os.environ.get("TERN_MARIADBD")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    for candidate in ("/usr/sbin/mariadbd", "/usr/sbin/mysqld"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("mariadbd")


def _find_tool(name, beside):
    """A client tool: next to mariadbd's folder's ../bin, or on PATH."""
    for folder in (Path(beside).parent, Path(beside).parent.parent / "bin", Path("/usr/bin")):
        path = folder / name
        if os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name)


def sql_string(value):
    """A single-quoted SQL string literal."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_name(value):
    """A backquoted SQL identifier."""
    return "`" + str(value).replace("`", "``") + "`"


class MariaDB:
    """One mariadbd with its own data folder, a unix socket and a TCP port on
    127.0.0.1; a database and a password user ready for the application."""

    def __init__(self, workdir=None, database="tern", user="tern", password=None, port=None,
                 bind_address="127.0.0.1"):
        self.binary = find_mariadbd()
        if os.environ.get("TERN_MARIADBD"):
            assert self.binary, f"TERN_MARIADBD={os.environ['TERN_MARIADBD']} is not an executable"
        assert self.binary, (
            "mariadbd is not installed (no /usr/sbin/mariadbd and none on PATH): "
            "apt-get install mariadb-server (./scripts/test installs it) or set TERN_MARIADBD")
        tools = {name: _find_tool(name, self.binary)
                 for name in ("mariadb-install-db", "mariadb", "mariadb-admin")}
        missing = [name for name, path in tools.items() if path is None]
        assert not missing, (f"MariaDB tools missing: {', '.join(missing)} "
                             "(apt-get install mariadb-server mariadb-client)")
        self.install_db = tools["mariadb-install-db"]
        self.client = tools["mariadb"]
        self.admin = tools["mariadb-admin"]

        self._own_workdir = workdir is None
        self.workdir = Path(workdir if workdir is not None else tempfile.mkdtemp(prefix="tern-mariadb-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.datadir = self.workdir / "data"
        self.log_path = self.workdir / "mariadbd.err"
        self.stderr_path = self.workdir / "mariadbd.stderr"
        self.pid_path = self.workdir / "mariadbd.pid"
        # The socket lives in a short folder of our own: pytest's folders
        # can be deeper than a unix socket path may be.
        self._socket_dir = Path(tempfile.mkdtemp(prefix="tern-my-", dir="/tmp"))
        self.socket_path = self._socket_dir / "mysqld.sock"
        assert len(os.fsencode(str(self.socket_path))) <= SOCKET_PATH_MAX, self.socket_path

        self.database = database
        self.user = user
        # Letters and digits only: the password goes into a URL unescaped.
        self.password = password or "pw" + secrets.token_hex(12)
        self.port = port
        # Where TCP clients reach it (the cluster test: a bridge's address,
        # with the user allowed from that network too).
        self.bind_address = bind_address
        self.proc = None
        self._set_up = False

    # -- addresses --

    def url(self, database=None, tcp=False):
        """A store URL for the application's user: over TCP to 127.0.0.1 or
        over the unix socket ("localhost" with ?socket=)."""
        database = database or self.database
        if tcp:
            return f"mysql://{self.user}:{self.password}@{self.bind_address}:{self.port}/{database}"
        return f"mysql://{self.user}:{self.password}@localhost/{database}?socket={self.socket_path}"

    @property
    def url_socket(self):
        return self.url(tcp=False)

    @property
    def url_tcp(self):
        return self.url(tcp=True)

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    # -- lifecycle --

    def _install(self):
        """mariadb-install-db into an empty data folder (once)."""
        if (self.datadir / "mysql").is_dir():
            return
        self.datadir.mkdir(parents=True, exist_ok=True)
        cmd = [self.install_db, "--no-defaults", f"--datadir={self.datadir}", "--skip-test-db",
               "--auth-root-authentication-method=socket", "--skip-name-resolve"]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=START_TIMEOUT, cwd=self.workdir)
        assert proc.returncode == 0, (f"mariadb-install-db failed with {proc.returncode} ({' '.join(cmd)}):\n"
                                      f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")

    def command(self):
        cmd = [self.binary, "--no-defaults",
               f"--datadir={self.datadir}",
               f"--socket={self.socket_path}",
               f"--port={self.port}",
               f"--bind-address={self.bind_address}",
               f"--pid-file={self.pid_path}",
               f"--log-error={self.log_path}",
               "--skip-name-resolve",
               "--skip-log-bin",
               # What Debian's packaged config sets; --no-defaults drops it.
               "--character-set-server=utf8mb4",
               "--collation-server=utf8mb4_general_ci",
               # Small and quick to start; durability as a real server's.
               "--innodb-buffer-pool-size=32M",
               "--innodb-log-file-size=16M",
               "--max-connections=200",
               "--skip-performance-schema"]
        if os.geteuid() == 0:
            cmd.append("--user=root")
        return cmd

    def start(self, timeout=START_TIMEOUT):
        """Starts mariadbd (installing the data folder the first time) and
        waits until root can run a statement over the socket; the first
        time it also makes the application's database and user."""
        assert not self.running(), "mariadbd is already running"
        self._install()
        first = self.port is None
        for _ in range(5 if first else 1):
            if first:
                self.port = free_port()
            if self._launch(timeout):
                break
            # Lost the race for the port to another process: try another one.
            if not first or "Address already in use" not in self.logs():
                self._fail_start(timeout)
        else:
            self._fail_start(timeout)
        if not self._set_up:
            self._setup_user()
            self._set_up = True
        return self

    def _launch(self, timeout):
        for stale in (self.socket_path, self.pid_path):
            try:
                stale.unlink()
            except FileNotFoundError:
                pass
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         cwd=self.workdir, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.socket_path.exists() and self._ping():
                return True
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"mariadbd did not answer on {self.socket_path} within {timeout}s;\n{self.logs()}")

    def _fail_start(self, timeout):
        status = self.proc.returncode if self.proc is not None else None
        raise AssertionError(f"mariadbd exited with {status} at start ({' '.join(self.command())});\n"
                             f"{self.logs()}")

    def _ping(self):
        try:
            proc = subprocess.run(self._client_cmd() + ["-e", "SELECT 1"], capture_output=True,
                                  timeout=5, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return False
        return proc.returncode == 0

    def _setup_user(self):
        db, user, pw = sql_name(self.database), sql_string(self.user), sql_string(self.password)
        statements = [f"CREATE DATABASE IF NOT EXISTS {db}"]
        hosts = ["localhost", "127.0.0.1"]
        if self.bind_address != "127.0.0.1":
            hosts.append(self.bind_address.rsplit(".", 1)[0] + ".%")  # its /24
        for host in hosts:
            statements += [f"CREATE USER IF NOT EXISTS {user}@{sql_string(host)} IDENTIFIED BY {pw}",
                           f"GRANT ALL PRIVILEGES ON {db}.* TO {user}@{sql_string(host)}"]
        self.sql(";\n".join(statements) + ";")

    def stop(self, timeout=STOP_TIMEOUT):
        """A clean shutdown: mariadb-admin shutdown over the socket, then
        SIGTERM, then SIGKILL, each wait bounded. Returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                subprocess.run([self.admin, "--no-defaults", f"--socket={self.socket_path}", "-uroot",
                                f"--connect-timeout={int(timeout)}", "shutdown"],
                               capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self._kill_group()
                    self.proc.wait(timeout=timeout)
        return self.proc.returncode

    def kill(self):
        """SIGKILL, as in a crash: no clean shutdown, connections reset."""
        if self.proc is None:
            return
        self._kill_group()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass

    def restart(self, timeout=START_TIMEOUT):
        """Stops it if it runs and starts it again: same data, socket, port."""
        self.stop()
        return self.start(timeout)

    def _kill_group(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # start_new_session: pgid == pid
        except (ProcessLookupError, PermissionError):
            pass

    def cleanup(self):
        """Stops it and removes the folders it made for itself."""
        self.stop()
        shutil.rmtree(self._socket_dir, ignore_errors=True)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- SQL --

    def _client_cmd(self, database=None, user=None, password=None, tcp=False):
        cmd = [self.client, "--no-defaults", "--batch", "--raw", "--skip-column-names",
               f"--connect-timeout={int(CLIENT_TIMEOUT)}"]
        if tcp:
            cmd += ["--protocol=TCP", "--host=127.0.0.1", f"--port={self.port}"]
        else:
            cmd += ["--protocol=SOCKET", f"--socket={self.socket_path}"]
        cmd.append(f"--user={user or 'root'}")
        if password is not None:
            cmd.append(f"--password={password}")
        if database:
            cmd.append(f"--database={database}")
        return cmd

    def sql(self, text, database=None, user=None, password=None, tcp=False, check=True):
        """Runs statements with the mariadb client (as root over the socket
        unless user/password/tcp say otherwise); returns its stdout. With
        check=False returns the CompletedProcess instead."""
        proc = subprocess.run(self._client_cmd(database, user, password, tcp), input=text,
                              capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
        if not check:
            return proc
        assert proc.returncode == 0, f"mariadb client failed ({proc.returncode}) on {text!r}:\n{proc.stderr}"
        return proc.stdout

    def query(self, text, database=None, **kwargs):
        """Rows of a SELECT as tuples of strings ("NULL" for NULL)."""
        out = self.sql(text, database, **kwargs)
        return [tuple(line.split("\t")) for line in out.splitlines()]

    def sql_as_user(self, text, database=None, tcp=False, check=True):
        """Runs statements as the application's user, with its password."""
        return self.sql(text, database or self.database, user=self.user, password=self.password,
                        tcp=tcp, check=check)

    def create_database(self, name):
        """Makes (anew) a database that the application's user may use."""
        db, user = sql_name(name), sql_string(self.user)
        statements = [f"DROP DATABASE IF EXISTS {db}", f"CREATE DATABASE {db}"]
        statements += [f"GRANT ALL PRIVILEGES ON {db}.* TO {user}@{sql_string(host)}"
                       for host in ("localhost", "127.0.0.1")]
        self.sql(";\n".join(statements) + ";")
        return name

    def drop_database(self, name):
        self.sql(f"DROP DATABASE IF EXISTS {sql_name(name)};")

    # -- inspection --

    def log(self):
        """mariadbd's error log from its latest start."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(getattr(self, "_log_offset", 0))
                return f.read().decode(errors="replace")
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

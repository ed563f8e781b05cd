"""Running tern as an operator does: root given up once the ports are bound
(the credentials of every thread read from /proc), `tern -s` through the
pid file, what a service manager hears (sd_notify, on a socket of the
test's own where systemd would listen), the systemd unit as
systemd-analyze sees it, a binary upgrade under wrk and ab load, and
socket activation by systemd-socket-activate."""

import grp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_load import raise_fd_limit
from tern_server import REPO_ROOT, TERN_BIN, free_port, scaled, to_toml, wait_until

NOBODY = "nobody"
NOGROUP = grp.getgrgid(pwd.getpwnam(NOBODY).pw_gid).gr_name


def run_tern(*args, timeout=30):
    return subprocess.run([str(TERN_BIN), *args], capture_output=True, text=True, timeout=timeout)


def free_low_port():
    """A port below 1024 that nothing holds (only root may bind it)."""
    for port in range(700, 1000):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    pytest.skip("no free port below 1024")


def thread_credentials(pid):
    """{thread id: {field: value}} of Uid, Gid, Groups, the capability sets
    and NoNewPrivs, from /proc/PID/task/*/status."""
    fields = ("Name", "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapAmb", "NoNewPrivs")
    out = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        status = {}
        with open(f"/proc/{pid}/task/{task}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in fields:
                    status[key] = value.split()
        out[task] = status
    return out


@pytest.fixture
def shared_dir():
    """A directory under /tmp that every user may enter (pytest's own are
    root's alone), removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="tern-ops-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_started_as_root_every_thread_becomes_the_user(tmp_path, shared_dir):
    if os.geteuid() != 0:
        pytest.skip("giving root up needs a tern started as root")
    port = free_low_port()
    root = shared_dir / "www"
    root.mkdir(mode=0o755)
    (root / "index.html").write_text("hello from nobody\n")
    (root / "index.html").chmod(0o644)
    # Opened before root is given up: a log directory only root may enter,
    # and a pid file in a directory the user may write (so that it can
    # remove the file at exit).
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o700)
    run_dir = shared_dir / "run"
    run_dir.mkdir()
    os.chown(run_dir, pwd.getpwnam(NOBODY).pw_uid, -1)
    pid_file = run_dir / "tern.pid"
    config = tmp_path / "tern.toml"
    config.write_text(to_toml({
        "listen": [f"127.0.0.1:{port}"], "workers": 2, "user": NOBODY, "group": NOGROUP,
        "pid_file": str(pid_file), "access_log": str(logs / "access.log"),
        "static": {"root": str(root)}, "log": {"level": "info"},
    }))
    err_path = tmp_path / "tern.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([str(TERN_BIN), "-c", str(config)], stdout=err, stderr=err)
    try:
        assert wait_until(lambda: "privileges: now user" in err_path.read_text(), timeout=30), err_path.read_text()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"hello from nobody\n"), reply
        assert pid_file.read_text() == f"{proc.pid}\n"

        uid = pwd.getpwnam(NOBODY).pw_uid
        gid = grp.getgrnam(NOGROUP).gr_gid
        groups = sorted(os.getgrouplist(NOBODY, gid))
        threads = thread_credentials(proc.pid)
        assert len(threads) >= 3, threads  # the main loop, two I/O loops, the log's thread
        for task, status in threads.items():
            assert status["Uid"] == [str(uid)] * 4, (task, status)
            assert status["Gid"] == [str(gid)] * 4, (task, status)
            assert sorted(int(g) for g in status["Groups"]) == groups, (task, status)
            for caps in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
                assert int(status[caps][0], 16) == 0, (task, caps, status)
            assert status["NoNewPrivs"] == ["1"], (task, status)

        # The access log, opened by root, is written by the user.
        assert wait_until(lambda: (logs / "access.log").exists() and
                          "GET / " in (logs / "access.log").read_text()), "nothing in the access log"
        stderr = err_path.read_text()
        assert f"privileges: now user {NOBODY} (uid {uid}), group {NOGROUP} (gid {gid})" in stderr
        assert run_tern("-c", str(config), "-s", "quit").returncode == 0
        assert proc.wait(timeout=30) == 0, err_path.read_text()
        assert not pid_file.exists(), "the pid file outlived the process"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_started_as_root_without_user_warns_that_it_keeps_root(tern_factory):
    if os.geteuid() != 0:
        pytest.skip("needs a tern started as root")
    srv = tern_factory()
    assert srv.wait_for_log("privileges: running as root; set user"), srv.stderr()


@pytest.mark.parametrize("keys,key,message", [
    ({"user": "no-such-user-tern"}, "user", 'no user "no-such-user-tern"'),
    ({"user": NOBODY, "group": "no-such-group-tern"}, "group", 'no group "no-such-group-tern"'),
    ({"group": NOGROUP}, "group", "needs a user"),
    ({"pid_file": "run/tern.pid"}, "pid_file", "absolute"),
])
def test_config_mistakes_about_the_process_name_file_line_and_key(tmp_path, keys, key, message):
    config = tmp_path / "tern.toml"
    config.write_text(to_toml({"listen": ["127.0.0.1:8080"], **keys}))
    out = run_tern("-t", "-c", str(config))
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    line_no = next(i + 1 for i, text in enumerate(config.read_text().splitlines()) if text.startswith(key))
    assert lines[0].startswith(f"tern: {config}:{line_no}: {key}: "), lines[0]
    assert message in lines[0]


# -- tern -s -----------------------------------------------------------------------


def test_dash_s_signals_the_process_in_the_pid_file(tern_factory, tmp_path):
    pid_file = tmp_path / "tern.pid"
    srv = tern_factory({"pid_file": str(pid_file)})
    srv.write_file("a.txt", "alpha\n")
    # Written once the listeners are up, a moment after the first connect
    # can succeed (the kernel accepts into the backlog).
    deadline = time.monotonic() + 10
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.read_text() == f"{srv.proc.pid}\n"
    conf = str(srv.config_path)

    srv.write_config({"pid_file": str(pid_file), "limits": {"header_bytes": "1KiB"}})
    assert run_tern("-c", conf, "-s", "reload").returncode == 0
    assert srv.wait_for_log("configuration reloaded"), srv.stderr()
    assert srv.get("/a.txt", {"X-Padding": "p" * 4000}).status == 431

    assert run_tern("-c", conf, "-s", "reopen").returncode == 0
    assert srv.wait_for_log("log files reopened"), srv.stderr()

    # --pid-file beats the config's.
    assert run_tern("-c", conf, "--pid-file", str(tmp_path / "elsewhere.pid"), "-s", "stop").returncode == 1
    assert srv.proc.poll() is None
    assert run_tern("-c", conf, "-s", "stop").returncode == 0
    assert srv.wait_exit(timeout=30) == 0, srv.stderr()
    assert not pid_file.exists()


def test_dash_s_without_a_pid_file_is_a_usage_error(tmp_path):
    config = tmp_path / "tern.toml"
    config.write_text(to_toml({"listen": ["127.0.0.1:8080"]}))
    out = run_tern("-c", str(config), "-s", "reload")
    assert out.returncode == 2
    assert out.stderr.strip() == ("tern: -s reload: no pid file to read: set pid_file in the config "
                                  "or pass --pid-file")
    out = run_tern("-s", "restart")
    assert out.returncode == 2 and "restart" in out.stderr


def test_dash_s_refuses_a_stale_pid_file(tmp_path):
    pid_file = tmp_path / "tern.pid"
    # Missing.
    out = run_tern("--pid-file", str(pid_file), "-s", "stop")
    assert out.returncode == 1
    assert f"cannot read pid file {pid_file}" in out.stderr and "is tern running?" in out.stderr
    # A process that is not tern: left alone.
    other = subprocess.Popen(["sleep", "30"])
    try:
        pid_file.write_text(f"{other.pid}\n")
        out = run_tern("--pid-file", str(pid_file), "-s", "stop")
        assert out.returncode == 1
        assert f"process {other.pid} is sleep, not tern" in out.stderr
        time.sleep(0.2)
        assert other.poll() is None, "a process that is not tern was signalled"
    finally:
        other.kill()
        other.wait()
    # A process that is gone.
    pid_file.write_text(f"{other.pid}\n")
    out = run_tern("--pid-file", str(pid_file), "-s", "stop")
    assert out.returncode == 1 and f"no process {other.pid}" in out.stderr
    # Not a number.
    pid_file.write_text("tern\n")
    out = run_tern("--pid-file", str(pid_file), "-s", "stop")
    assert out.returncode == 1 and "not a process id" in out.stderr


# -- the service manager -----------------------------------------------------------


class NotifySocket:
    """Where systemd hears a Type=notify service: a datagram socket named
    by $NOTIFY_SOCKET. Each message is a dict of its KEY=VALUE lines."""

    def __init__(self, directory):
        self.path = str(directory / "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o777)

    def next(self, timeout=10.0):
        self.sock.settimeout(timeout)
        data = self.sock.recv(65536).decode()
        return dict(line.split("=", 1) for line in data.splitlines() if line)

    def wait_for(self, predicate, timeout=15.0):
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            try:
                message = self.next(max(deadline - time.monotonic(), 0.01))
            except TimeoutError:
                break
            seen.append(message)
            if predicate(message):
                return message
        raise AssertionError(f"no such message; heard {seen}")

    def close(self):
        self.sock.close()


def test_service_manager_hears_ready_status_reloading_and_stopping(tern_factory, shared_dir):
    notify = NotifySocket(shared_dir)
    try:
        srv = tern_factory(env={"NOTIFY_SOCKET": notify.path})
        ready = notify.wait_for(lambda m: "READY" in m)
        assert ready["READY"] == "1"
        assert ready["STATUS"] == f"0 connections open, 0 requests answered; listening on 127.0.0.1:{srv.port}", ready

        srv.write_file("a.txt", "alpha\n")
        with srv.connect() as conn:
            assert conn.get("/a.txt").status == 200
            # STATUS every few seconds says where the server stands.
            status = notify.wait_for(
                lambda m: m.get("STATUS", "").startswith("1 connection open, 1 request answered;"))
            assert set(status) == {"STATUS"}, status

        before = time.monotonic()
        srv.reload()
        reloading = notify.wait_for(lambda m: "RELOADING" in m)
        assert reloading["RELOADING"] == "1"
        # CLOCK_MONOTONIC, as time.monotonic() reads it.
        assert abs(int(reloading["MONOTONIC_USEC"]) / 1e6 - before) < 10, reloading
        assert notify.wait_for(lambda m: "READY" in m)["READY"] == "1"

        srv.signal(signal.SIGTERM)
        stopping = notify.wait_for(lambda m: "STOPPING" in m)
        assert stopping["STOPPING"] == "1" and stopping["STATUS"].startswith("stopping: "), stopping
        assert srv.wait_exit(timeout=30) == 0, srv.stderr()
    finally:
        notify.close()


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path):
    unit = (REPO_ROOT / "dist" / "systemd" / "tern.service").read_text()
    for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
                 "AmbientCapabilities=CAP_NET_BIND_SERVICE", "User=tern"):
        assert f"\n{line}\n" in unit, line
    # verify requires the programs it names to exist: the built binary
    # stands in for the installed one.
    copy = tmp_path / "tern.service"
    copy.write_text(unit.replace("/usr/sbin/tern", str(TERN_BIN)))
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing (./scripts/test installs systemd)"
    out = subprocess.run([analyze, "verify", "--man=no", str(copy)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out
    assert "tern.service" not in out.stdout + out.stderr, out


# -- listening sockets handed over: binary upgrade, socket activation --------------


class LoadRun:
    """wrk (keep-alive) and ab -c 200 (a connection per request) against
    `url` for `seconds`, checked for failures at the end."""

    def __init__(self, url, seconds):
        self.seconds = seconds
        self.wrk = subprocess.Popen(["wrk", "-t1", "-c50", f"-d{seconds}s", url],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.ab = subprocess.Popen(["ab", "-q", "-t", str(seconds), "-n", "10000000", "-c", "200", "-s", "30", url],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def assert_no_failure(self):
        wrk_out, _ = self.wrk.communicate(timeout=self.seconds + 60)
        ab_out, _ = self.ab.communicate(timeout=self.seconds + 60)
        assert self.wrk.returncode == 0, wrk_out
        assert "Socket errors" not in wrk_out and "Non-2xx" not in wrk_out, wrk_out
        assert int(re.search(r"(\d+) requests in", wrk_out).group(1)) > 1000, wrk_out
        assert self.ab.returncode == 0, ab_out
        assert re.search(r"^Failed requests:\s+0$", ab_out, re.M), ab_out
        assert "Non-2xx responses" not in ab_out, ab_out
        assert int(re.search(r"^Complete requests:\s+(\d+)$", ab_out, re.M).group(1)) > 1000, ab_out


def process_gone(pid):
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


class UpgradableTern:
    """A tern started from its own copy of the binary (which a test may
    replace, as a rebuild does), with a pid file."""

    def __init__(self, tmp_path, config=None):
        self.dir = tmp_path
        self.binary = tmp_path / "tern"
        shutil.copy(TERN_BIN, self.binary)
        self.pid_file = tmp_path / "tern.pid"
        self.port = free_port()
        root = tmp_path / "www"
        root.mkdir()
        (root / "page.html").write_text("<p>" + "x" * 500 + "</p>\n")
        self.config = tmp_path / "tern.toml"
        self.config.write_text(to_toml({
            "listen": [f"127.0.0.1:{self.port}"], "workers": 2, "pid_file": str(self.pid_file),
            "static": {"root": str(root)}, "log": {"level": "info"}, **(config or {})}))
        self.err_path = tmp_path / "tern.stderr"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([str(self.binary), "-c", str(self.config)], stdout=err, stderr=err)
        assert wait_until(lambda: self.pid_file.exists(), timeout=30), self.stderr()
        self.url = f"http://127.0.0.1:{self.port}/page.html"

    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def replace_binary(self, source):
        """A new file at the same path, as an install of a rebuild makes."""
        fresh = self.dir / "tern.new"
        shutil.copy(source, fresh)
        os.replace(fresh, self.binary)

    def pid(self):
        try:
            return int(self.pid_file.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def stop_all(self, *pids):
        for pid in pids:
            if pid and not process_gone(pid):
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.mark.parametrize("accept_mode", ["dispatch", "reuseport"])
def test_binary_upgrade_under_load_loses_no_request(tmp_path, accept_mode):
    if shutil.which("ab") is None or shutil.which("wrk") is None:
        pytest.skip("ab and wrk are installed by scripts/test")
    raise_fd_limit(1024)
    tern = UpgradableTern(tmp_path, {"accept_mode": accept_mode})
    old = tern.proc.pid
    new = None
    try:
        load = LoadRun(tern.url, seconds=scaled(8, 5))
        time.sleep(1.5)
        tern.replace_binary(TERN_BIN)
        os.kill(old, signal.SIGUSR2)
        oldbin = Path(str(tern.pid_file) + ".oldbin")
        assert wait_until(lambda: tern.pid() not in (None, old) and oldbin.exists(), timeout=30), tern.stderr()
        new = tern.pid()
        assert oldbin.read_text() == f"{old}\n"
        # The new process runs the new file; the old one the file it replaced.
        assert os.readlink(f"/proc/{new}/exe") == str(tern.binary)
        assert os.readlink(f"/proc/{old}/exe").endswith("(deleted)")
        sockets = 2 if accept_mode == "reuseport" else 1
        assert wait_until(lambda: f"took {sockets} of the {sockets} listening socket(s) handed over by process {old}"
                          in tern.stderr()), tern.stderr()
        time.sleep(1.0)  # both serve
        assert run_tern("--pid-file", str(oldbin), "-s", "quit").returncode == 0
        assert tern.proc.wait(timeout=30) == 0, tern.stderr()
        assert not oldbin.exists()
        load.assert_no_failure()
        # The new one serves on, and stops when told.
        with socket.create_connection(("127.0.0.1", tern.port), timeout=10) as s:
            s.sendall(b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        assert run_tern("-c", str(tern.config), "-s", "quit").returncode == 0
        assert wait_until(lambda: process_gone(new), timeout=30), tern.stderr()
        assert not tern.pid_file.exists()
    finally:
        tern.stop_all(new)


def test_binary_upgrade_to_a_binary_that_fails_keeps_the_old_one_serving(tmp_path):
    tern = UpgradableTern(tmp_path)
    old = tern.proc.pid
    try:
        broken = tmp_path / "broken"
        broken.write_text("#!/bin/sh\nexit 3\n")
        broken.chmod(0o755)
        tern.replace_binary(broken)
        os.kill(old, signal.SIGUSR2)
        assert wait_until(lambda: "exited with status 3; this one (pid" in tern.stderr(), timeout=30), tern.stderr()
        assert wait_until(lambda: tern.pid() == old), "the pid file was not moved back"
        assert not Path(str(tern.pid_file) + ".oldbin").exists()
        with socket.create_connection(("127.0.0.1", tern.port), timeout=10) as s:
            s.sendall(b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        assert run_tern("-c", str(tern.config), "-s", "stop").returncode == 0
        assert tern.proc.wait(timeout=30) == 0, tern.stderr()
    finally:
        tern.stop_all()


def test_socket_activation_serves_on_the_sockets_systemd_hands_over(tmp_path):
    activate = shutil.which("systemd-socket-activate")
    assert activate, "systemd-socket-activate is missing (./scripts/test installs systemd)"
    port = free_port()
    root = tmp_path / "www"
    root.mkdir()
    (root / "a.txt").write_text("activated\n")
    config = tmp_path / "tern.toml"
    config.write_text(to_toml({"listen": [f"127.0.0.1:{port}"], "workers": 2, "static": {"root": str(root)},
                               "log": {"level": "info"}}))
    err_path = tmp_path / "tern.stderr"
    with open(err_path, "wb") as err:
        # Binds the socket and execs tern with it as descriptor 3 (LISTEN_FDS=1).
        proc = subprocess.Popen([activate, "-l", f"127.0.0.1:{port}", str(TERN_BIN), "-c", str(config)],
                                stdout=err, stderr=err)
    try:
        assert wait_until(lambda: f"Listening on 127.0.0.1:{port}" in err_path.read_text()), err_path.read_text()
        # The first connection starts tern, which then accepts it from the
        # socket it was handed.
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"activated\n"), reply
        # Logged by the main thread as the loops begin to serve, through the
        # asynchronous error log: it may land just after the first reply.
        assert wait_until(lambda: "took 1 of the 1 listening socket(s) handed over by the service manager"
                          in err_path.read_text()), err_path.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, err_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

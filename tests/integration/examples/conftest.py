"""Fixtures for the examples' tests: each test starts the real example
program of this build (TERN_EXAMPLES_DIR) on a port the kernel picks,
reads the address from the line it prints when it listens, and stops it
with SIGTERM at the end, which each example handles: its loop ends and
what it made closes in order, so that it exits 0 and a sanitizer build's
leak check runs. An example that dies by itself (a crash, a sanitizer's
report), or does not stop cleanly, fails the test that started it."""

import os
import pathlib
import re
import select
import signal
import subprocess
import tempfile
import time

import pytest

EXAMPLES_DIR = pathlib.Path(os.environ.get("TERN_EXAMPLES_DIR", "build/release/examples"))
START_TIMEOUT = 20.0
LISTENING = re.compile(rb"listening on ([0-9.]+):(\d+)")


class Example:
    def __init__(self, name, args):
        binary = EXAMPLES_DIR / name
        assert binary.is_file(), f"no example at {binary}: build the examples or set TERN_EXAMPLES_DIR"
        # The address line comes on stdout; the log, to stderr, goes to a
        # file, which cannot fill up and stop the program as a pipe would.
        self.log = tempfile.TemporaryFile()
        # Under ASan, freed memory waits in a quarantine (256 MiB by
        # default) before it is reused: kept small, the process's RSS
        # says what the program holds, which the tests bound.
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "quarantine_size_mb=4"]))
        self.process = subprocess.Popen([str(binary), "--port", "0", *args],
                                        stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.host, self.port = self._read_address()

    def _read_address(self):
        deadline = time.monotonic() + START_TIMEOUT
        seen = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.1)
            if ready:
                line = self.process.stdout.readline()
                seen += line
                match = LISTENING.search(line)
                if match:
                    return match.group(1).decode(), int(match.group(2))
            if self.process.poll() is not None:
                break
        self.process.kill()
        self.process.wait()
        pytest.fail(f"{self.process.args[0]} did not start: {seen!r} {self.errors()}")

    def errors(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def rss_kib(self):
        for line in pathlib.Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def alive(self):
        return self.process.poll() is None

    def stop(self):
        """SIGTERM, once; fails if it had died before, or does not exit 0
        within 20 s of it."""
        if getattr(self, "stopped", False):
            return
        self.stopped = True
        died = self.process.poll()
        hung = False
        if died is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                hung = True
                self.process.kill()
                self.process.wait()
        errors = self.errors()
        name = self.process.args[0]
        assert died is None, f"{name} exited by itself ({died}): {errors[-4000:]}"
        assert "Sanitizer" not in errors and "runtime error" not in errors, errors[-4000:]
        assert not hung, f"{name} still running 20 s after SIGTERM: {errors[-4000:]}"
        assert self.process.returncode == 0, f"{name} stopped with {self.process.returncode}: {errors[-4000:]}"


@pytest.fixture
def example():
    """example(name, *args) starts one; all are stopped after the test."""
    started = []

    def start(name, *args):
        started.append(Example(name, [str(a) for a in args]))
        return started[-1]

    yield start
    for one in started:
        one.stop()

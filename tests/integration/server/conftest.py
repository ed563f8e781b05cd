"""Fixtures for the end-to-end tests: each test gets its own tern process
(real binary, temporary root, generated config, free port), stopped with
SIGTERM at the end and required to exit 0. Every blocking call has a
timeout, so a hung server fails a test instead of hanging the suite."""

import hashlib
import os

import pytest

from tern_server import TERN_BIN, TernServer

BIG_FILE_BYTES = 64 * 1024 * 1024


@pytest.fixture(scope="session", autouse=True)
def tern_binary():
    assert TERN_BIN.is_file(), f"no server binary at {TERN_BIN}: build tern_bin or set TERN_BIN"
    return TERN_BIN


@pytest.fixture
def tern_factory(tmp_path):
    """start(config=None) -> a running TernServer with its own root. At the
    end of the test each one still running gets SIGTERM and must exit 0."""
    servers = []

    def start(config=None, name=None, host="127.0.0.1", args=()):
        workdir = tmp_path / (name or f"server{len(servers)}")
        root = workdir / "www"
        root.mkdir(parents=True)
        server = TernServer(workdir, root, config, host=host, args=args)
        servers.append(server)
        return server.start()

    yield start
    failures = []
    for server in servers:
        if server.proc is not None and server.proc.poll() is None:
            status = server.stop()
            if status != 0:
                failures.append(f"tern exited {status} on SIGTERM; stderr:\n{server.stderr()[-4000:]}")
    assert not failures, "\n".join(failures)


@pytest.fixture
def server(tern_factory):
    """A server with the default config and an empty root."""
    return tern_factory()


@pytest.fixture(scope="session")
def big_file(tmp_path_factory):
    """(path, sha256) of a 64 MiB file of random bytes, made once."""
    path = tmp_path_factory.mktemp("big") / "big.bin"
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for _ in range(BIG_FILE_BYTES // (1 << 20)):
            chunk = os.urandom(1 << 20)
            digest.update(chunk)
            f.write(chunk)
    return path, digest.hexdigest()

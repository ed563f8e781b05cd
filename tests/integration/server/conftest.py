"""Fixtures for the end-to-end tests: each test gets its own tern process
(real binary, temporary root, generated config, free port), stopped with
SIGTERM at the end and required to exit 0. Every blocking call has a
timeout, so a hung server fails a test instead of hanging the suite.

MariaDB (for the users application's mysql store) is one real server for
the whole session, started on first use; each test that asks for
`mysql_db` gets a database of its own on it."""

import hashlib
import os

import pytest

from mariadb import MariaDB
from php_fpm import PhpFpm
from php_site import fastcgi_block, start_fastcgi_server
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

    def start(config=None, name=None, host="127.0.0.1", args=(), env=None, preexec_fn=None, tls=False,
              listen_flags=""):
        workdir = tmp_path / (name or f"server{len(servers)}")
        root = workdir / "www"
        root.mkdir(parents=True)
        server = TernServer(workdir, root, config, host=host, args=args, env=env, preexec_fn=preexec_fn,
                            tls=tls, listen_flags=listen_flags)
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


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory):
    """The session's MariaDB (mariadb.MariaDB), started the first time a
    test asks for it and stopped at the end of the session. Tests that stop
    or kill it need not restart it: `mysql_db` starts it again for the next
    test."""
    server = MariaDB(tmp_path_factory.mktemp("mariadb"))
    server.start()
    yield server
    server.cleanup()


class MysqlDatabase:
    """One test's database on the session's MariaDB: store URLs for the
    application's user, and SQL as root."""

    def __init__(self, server, name):
        self.server = server
        self.name = name

    @property
    def url_socket(self):
        return self.server.url(self.name, tcp=False)

    @property
    def url_tcp(self):
        return self.server.url(self.name, tcp=True)

    def query(self, text):
        return self.server.query(text, database=self.name)


_database_count = 0


@pytest.fixture
def mysql_db(mariadb_server):
    """A fresh, empty database for this test (running MariaDB, started
    again if an earlier test left it stopped), dropped at the end."""
    global _database_count
    _database_count += 1
    if not mariadb_server.running():
        mariadb_server.start()
    name = mariadb_server.create_database(f"t{os.getpid()}_{_database_count}")
    yield MysqlDatabase(mariadb_server, name)
    if not mariadb_server.running():
        mariadb_server.start()
    mariadb_server.drop_database(name)


@pytest.fixture
def fpm(tmp_path):
    """A running php-fpm with 8 children, stopped at the end of the test
    (after tern: fixtures that use it start tern later)."""
    server = PhpFpm(tmp_path / "fpm", children=8)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def php_factory(fpm, tern_factory):
    """start(fastcgi=None, config=None, env=None) -> a TernServer passing
    \\.php$ to the test's php-fpm; fastcgi holds extra keys for the
    [[fastcgi]] block, config extra top-level settings, env extra
    environment variables for tern."""

    def start(fastcgi=None, config=None, env=None):
        return start_fastcgi_server(tern_factory, [fastcgi_block(fpm.pass_address, **(fastcgi or {}))],
                                    config, env)

    return start


@pytest.fixture
def php(php_factory):
    return php_factory()

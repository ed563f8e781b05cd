"""The C++ MariaDB store tests (tests/auth/user_store_test.cc, which skip
without a server) run here against the session's real MariaDB, over the
unix socket and over TCP, so that CI never counts them as skipped."""

import os
import subprocess

import pytest

from tern_server import TERN_BIN

STORE_TEST = TERN_BIN.parent / "tests" / "auth_store_test"


@pytest.mark.parametrize("tcp", [False, True], ids=["socket", "tcp"])
def test_mariadb_user_store_suite_passes_against_a_real_server(mysql_db, tcp):
    assert STORE_TEST.is_file(), f"no {STORE_TEST}: build auth_store_test"
    url = mysql_db.url_tcp if tcp else mysql_db.url_socket
    env = dict(os.environ, TERN_MARIADB_URL=url)
    proc = subprocess.run([str(STORE_TEST), "--gtest_filter=Mariadb*"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "SKIPPED" not in proc.stdout, proc.stdout[-4000:]
    assert "[  PASSED  ]" in proc.stdout

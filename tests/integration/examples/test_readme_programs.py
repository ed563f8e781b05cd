"""README's complete programs ("The library in a few lines"), which the
build cuts out of README (readme_program_N), run and driven: the echo
server echoes, the HTTP responder answers /hello. They listen on the fixed
ports README gives them (7000, 8081), so each runs in a network namespace
of its own (unshare --net, with its own loopback), where no other program
holds those ports; the client runs in the same namespace."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

EXAMPLES_DIR = pathlib.Path(os.environ.get("TERN_EXAMPLES_DIR", "build/release/examples"))

# Runs inside the namespace: loopback up, the program started, then the
# check; the program is killed at the end (README's programs run until
# killed). Prints what it saw and exits non-zero on a mismatch.
DRIVER = r"""
import socket, subprocess, sys, time
program, port, request, expected = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), sys.argv[4].encode()
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
proc = subprocess.Popen([program], stderr=subprocess.PIPE)
try:
    deadline = time.monotonic() + 20
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"{program} did not listen on {port}: exit {proc.poll()}")
            time.sleep(0.05)
    with sock:
        sock.sendall(request)
        got = b""
        while expected not in got and len(got) < 65536:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    print(got.decode(errors="replace"))
    sys.exit(0 if expected in got else 1)
finally:
    proc.kill()
    proc.wait()
"""


def run_in_namespace(program, port, request, expected):
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("unshare (util-linux) and ip (iproute2) are needed: ./scripts/test installs them")
    binary = EXAMPLES_DIR / program
    assert binary.is_file(), f"no {binary}: build the examples or set TERN_EXAMPLES_DIR"
    result = subprocess.run(["unshare", "--net", "--", sys.executable, "-c", DRIVER, str(binary), str(port),
                             request, expected], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{program}: {result.stdout}\n{result.stderr}"
    return result.stdout


def test_readmes_echo_server_echoes_on_port_7000():
    payload = "tern " * 2000  # 10 KB: more than one read
    out = run_in_namespace("readme_program_1", 7000, payload, payload)
    assert payload in out


def test_readmes_http_responder_answers_hello_on_port_8081():
    out = run_in_namespace("readme_program_2", 8081, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
                           "Hello, world!\n")
    assert out.startswith("HTTP/1.1 200 OK")

"""Kernel TLS, on a kernel that has it. The host's kernel may have no TLS
(this one's does not), so the test boots Debian's kernel in QEMU (tests/vm:
software emulation, no KVM needed) over the host's files, read-only, and
runs ktls_guest.py there against this build's tern on both I/O backends:
files on every cipher the kernel takes, TLS 1.2 and 1.3, ranges, pipelining,
resumption by a ticket the kernel encrypted, the closing alert, a key update
(the connection ends, others go on), and the kernel's own count of the
connections that sent through it; with kernel_tls = false, none.

./scripts/test builds the machine (tests/vm/build into build/tools/vm) and
names it in $TERN_VM; it runs on the epoll pass of each build, as the guest
runs both backends itself."""

import json
import os
import subprocess

import pytest

from tern_server import REPO_ROOT, TERN_BIN
from test_tls import Pki

pytestmark = pytest.mark.skipif(os.environ.get("TERN_IO", "epoll") != "epoll",
                                reason="the machine runs both backends; on the epoll pass of each build")

GUEST = REPO_ROOT / "tests" / "integration" / "server" / "ktls_guest.py"
# Software emulation is slow, a sanitizer build slower still.
VM_TIMEOUT = 900


def machine():
    path = os.environ.get("TERN_VM") or str(REPO_ROOT / "build" / "tools" / "vm")
    if not (os.path.isfile(os.path.join(path, "vmlinuz")) and os.path.isfile(os.path.join(path, "initrd.gz"))):
        if os.environ.get("TERN_VM"):
            raise AssertionError(f"TERN_VM={path} holds no vmlinuz and initrd.gz")
        pytest.skip("the test machine is not built (./scripts/test builds it: tests/vm/build build/tools/vm)")
    return path


def boot(vm, work):
    """Boots the machine on `work` (its /run/work); the console's output."""
    command = [
        "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", "3072", "-smp", "2",
        "-nographic", "-no-reboot", "-kernel", f"{vm}/vmlinuz", "-initrd", f"{vm}/initrd.gz",
        "-append", "console=ttyS0 quiet panic=-1 random.trust_cpu=on",
        "-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
        "-virtfs", f"local,path={work},mount_tag=work,security_model=none,multidevs=remap",
    ]
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=VM_TIMEOUT)
    return (done.stdout + done.stderr).decode(errors="replace")


def test_kernel_tls_sends_files_tickets_and_alerts(tmp_path):
    vm = machine()
    pki = Pki(tmp_path / "pki")
    cert, key = pki.issue("a.test")
    work = tmp_path / "vm"
    work.mkdir()
    # The guest sees `work` at /run/work and every other path as the host
    # does, read-only.
    for path in (pki.ca, cert, key):
        (work / os.path.basename(path)).write_bytes(open(path, "rb").read())
    os.chmod(work / os.path.basename(key), 0o600)
    params = {
        "binary": str(TERN_BIN), "ca": "/run/work/ca.pem", "cert": f"/run/work/{os.path.basename(cert)}",
        "key": f"/run/work/{os.path.basename(key)}",
        "runs": [["epoll", True], ["io_uring", True], ["epoll, kernel_tls off", False]],
        "io": {"epoll": "epoll", "io_uring": "io_uring", "epoll, kernel_tls off": "epoll"},
    }
    (work / "params.json").write_text(json.dumps(params))
    run = work / "run"
    run.write_text("#!/bin/sh\n"
                   f"python3 {GUEST} /run/work/params.json /run/work/results.json > /run/work/guest.log 2>&1\n")
    run.chmod(0o755)

    console = boot(vm, work)
    log = (work / "guest.log").read_text(errors="replace") if (work / "guest.log").exists() else ""
    assert (work / "results.json").exists(), f"the guest wrote no results\nconsole:\n{console[-4000:]}\n{log[-4000:]}"
    results = json.loads((work / "results.json").read_text())
    failed = {name: r["detail"] for name, r in results.items() if not r["ok"]}
    assert not failed, "\n\n".join(f"{name}:\n{detail}" for name, detail in failed.items()) + "\n" + log[-3000:]
    # Every check ran: a run that stopped early leaves some out.
    for tag, kernel_tls in params["runs"]:
        names = [n for n in results if n.startswith(f"{tag}: ")]
        assert any("exits 0" in n for n in names), f"{tag}: the run did not end\n{log[-3000:]}"
        if kernel_tls:
            assert any("counted the connections" in n for n in names), names
            assert sum("files whole" in n for n in names) == 6, names
            assert any("key update" in n for n in names) and any("close_notify" in n for n in names), names

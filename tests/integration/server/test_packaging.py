"""What `cmake --install` and CPack make of the build this suite runs
against: the files and where they go, the man page, the configuration and
the logrotate snippet the package installs, libtern built into a program
out of tree (with CMake's find_package and with pkg-config) that then
serves, and the two Debian packages.

Once per build: on the epoll pass only (the files do not depend on the I/O
backend)."""

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tern_server import REPO_ROOT, TERN_BIN, free_port, to_toml

BUILD = TERN_BIN.parent
pytestmark = pytest.mark.skipif(os.environ.get("TERN_IO", "epoll") != "epoll",
                                reason="packaging checks run on the epoll pass of each build")

SERVER_FILES = {
    "usr/sbin/tern", "usr/share/man/man8/tern.8", "etc/tern/tern.toml", "etc/logrotate.d/tern",
    "usr/lib/systemd/system/tern.service", "usr/share/doc/tern/tern.toml.example",
    "usr/share/doc/tern/README.md", "usr/share/doc/tern/copyright",
}
DEV_FILES = {
    "usr/lib/cmake/tern/ternConfig.cmake", "usr/lib/cmake/tern/ternConfigVersion.cmake",
    "usr/lib/cmake/tern/ternTargets.cmake", "usr/lib/pkgconfig/tern.pc", "usr/share/doc/libtern-dev/copyright",
} | {f"usr/lib/libtern_{part}.a" for part in ("base", "net", "http", "http2", "files", "upstream", "fastcgi", "proxy", "tls")}


def run(cmd, timeout=300, **kwargs):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert out.returncode == 0, f"{cmd}:\n{out.stdout}\n{out.stderr}"
    return out


def cache_value(name):
    """A value of the build's CMakeCache.txt ("" when unset)."""
    for line in (BUILD / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return ""


def sanitizer_flags():
    """What the build compiled and linked libtern with, which a program
    linking it needs too."""
    return {"address": ["-fsanitize=address,undefined"], "thread": ["-fsanitize=thread"]}.get(
        cache_value("TERN_SANITIZE"), [])


def installed_files(root):
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture(scope="module")
def destdir(tmp_path_factory):
    """The build installed as a package installs it: prefix /usr, into a
    staging directory."""
    root = tmp_path_factory.mktemp("destdir")
    run(["cmake", "--install", str(BUILD), "--prefix", "/usr"], env={**os.environ, "DESTDIR": str(root)})
    return root


def test_install_puts_every_file_in_its_fhs_place(destdir):
    files = installed_files(destdir)
    headers = {f for f in files if f.startswith("usr/include/tern/")}
    rest = files - headers
    assert rest - {"usr/lib/cmake/tern/ternTargets-" + cache_value("CMAKE_BUILD_TYPE").lower() + ".cmake"} \
        == SERVER_FILES | DEV_FILES
    for header in ("net/event_loop.h", "net/tcp_server.h", "http/http_server.h", "tls/server_context.h",
                   "base/result.h"):
        assert f"usr/include/tern/{header}" in headers
    # Only the library's parts: the server's own headers stay out.
    assert not any(f.startswith(("usr/include/tern/server/", "usr/include/tern/auth/")) for f in headers)
    assert os.access(destdir / "usr/sbin/tern", os.X_OK)
    assert (destdir / "usr/share/doc/tern/copyright").read_text().startswith("MIT License")
    unit = (destdir / "usr/lib/systemd/system/tern.service").read_text()
    assert "\nExecStart=/usr/sbin/tern -c /etc/tern/tern.toml\n" in unit


def test_installed_man_page_renders_without_warnings(destdir):
    out = run(["groff", "-man", "-Tutf8", "-ww", str(destdir / "usr/share/man/man8/tern.8")])
    assert out.stderr == "", out.stderr
    text = re.sub(r".\x08", "", out.stdout)
    for section in ("NAME", "SYNOPSIS", "OPTIONS", "SIGNALS", "FILES", "EXIT STATUS"):
        assert f"\n{section}\n" in text
    assert "-s reload|reopen|stop|quit" in text


def test_installed_configuration_passes_tern_t(destdir, tmp_path):
    """The packaged configuration, with its paths moved under a temporary
    directory and the user one that exists here, is one tern accepts."""
    text = (destdir / "etc/tern/tern.toml").read_text()
    for path in ("/var/www/html", "/var/log/tern", "/run/tern"):
        (tmp_path / path.lstrip("/")).mkdir(parents=True)
        text = text.replace(path, str(tmp_path / path.lstrip("/")))
    text = text.replace('user = "tern"', 'user = "nobody"')
    config = tmp_path / "tern.toml"
    config.write_text(text)
    out = subprocess.run([str(destdir / "usr/sbin/tern"), "-t", "-c", str(config)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "is ok" in out.stdout


def test_installed_logrotate_snippet_parses(destdir, tmp_path):
    text = (destdir / "etc/logrotate.d/tern").read_text()
    assert "create 0640 tern adm" in text and "/usr/sbin/tern -s reopen -c /etc/tern/tern.toml" in text
    # The package's postinst makes the user tern; here it is nobody.
    snippet = tmp_path / "tern"
    snippet.write_text(text.replace(" tern adm", " nobody adm"))
    out = subprocess.run(["logrotate", "--debug", "--state", str(tmp_path / "state"), str(snippet)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "error" not in out.stderr.lower(), out.stderr
    assert "rotating pattern: /var/log/tern/*.log" in out.stderr, out.stderr


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """The build installed under a prefix of its own, to build against."""
    root = tmp_path_factory.mktemp("prefix")
    run(["cmake", "--install", str(BUILD), "--prefix", str(root)])
    return root


def serves_hello(program):
    port = free_port()
    proc = subprocess.Popen([str(program), "--port", str(port), "--threads", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the program did not listen"
                time.sleep(0.05)
        with sock:
            sock.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := sock.recv(4096):
                reply += chunk
        return reply
    finally:
        proc.kill()
        proc.wait()


def test_a_program_builds_out_of_tree_with_find_package(prefix, tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(REPO_ROOT / "examples" / "hello_http.cc", source)
    shutil.copy(REPO_ROOT / "examples" / "standalone" / "CMakeLists.txt", source)  # docs/library.md shows it
    flags = " ".join(sanitizer_flags())
    build = tmp_path / "build"
    run(["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}",
         f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={flags}"])
    run(["cmake", "--build", str(build)], timeout=600)
    reply = serves_hello(build / "hello_http")
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"Hello, world!\n"), reply


def test_a_program_builds_out_of_tree_with_pkg_config(prefix, tmp_path):
    env = {**os.environ, "PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}
    flags = run(["pkg-config", "--cflags", "--libs", "tern"], env=env).stdout.split()
    assert "-std=c++20" in flags
    program = tmp_path / "hello_http"
    run(["g++", "-o", str(program), str(REPO_ROOT / "examples" / "hello_http.cc"), *sanitizer_flags(), *flags],
        timeout=600)
    reply = serves_hello(program)
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"Hello, world!\n"), reply


def test_cpack_makes_the_server_and_library_packages(tmp_path):
    run(["cpack", "-G", "DEB", "-B", str(tmp_path)], cwd=BUILD, timeout=600)
    debs = {p.name: p for p in tmp_path.glob("*.deb")}
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    assert set(debs) == {f"tern_0.1.0_{arch}.deb", f"libtern-dev_0.1.0_{arch}.deb"}, debs

    def field(deb, name):
        return run(["dpkg-deb", "-f", str(deb), name]).stdout.strip()

    def contents(deb):
        listing = run(["dpkg-deb", "-c", str(deb)]).stdout.splitlines()
        return {line.split()[-1].lstrip("./") for line in listing if not line.startswith("d")}

    server = debs[f"tern_0.1.0_{arch}.deb"]
    assert field(server, "Package") == "tern" and field(server, "Section") == "httpd"
    depends = field(server, "Depends")
    for library in ("libssl3", "liburing2", "libc-ares2", "libsystemd0", "libsqlite3-0"):
        assert library in depends, depends
    assert "nghttp2" not in depends, depends  # HTTP/2 is tern's own
    assert "MIT license" in field(server, "Description")
    assert contents(server) == SERVER_FILES
    control = tmp_path / "control"
    run(["dpkg-deb", "-e", str(server), str(control)])
    assert set((control / "conffiles").read_text().split()) == {"/etc/tern/tern.toml", "/etc/logrotate.d/tern"}
    postinst = (control / "postinst").read_text()
    assert "adduser --system" in postinst and os.access(control / "postinst", os.X_OK)

    dev = debs[f"libtern-dev_0.1.0_{arch}.deb"]
    assert field(dev, "Package") == "libtern-dev" and field(dev, "Section") == "libdevel"
    for package in ("libspdlog-dev", "liburing-dev", "libc-ares-dev", "libssl-dev"):
        assert package in field(dev, "Depends")
    assert "nghttp2" not in field(dev, "Depends")
    files = contents(dev)
    assert DEV_FILES - files == set()
    assert "usr/include/tern/net/tcp_server.h" in files

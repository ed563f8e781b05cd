"""A cluster in network namespaces made by the test: a tern balancer in
front of two tern nodes, each with the users app and PHP (a php-fpm of its
own), sharing one MariaDB. Each tern runs in a namespace of its own with
one address, joined to the others by veth pairs on a bridge that also
holds MariaDB's address and the test's client.

Under load through the balancer a node is killed (SIGKILL) and started
again: no GET fails, the node is marked down by the passive and the active
checks and taken back once healthy, and a login made through one node is
valid on the other. Without the privilege to make namespaces the test
says so and skips."""

import ctypes
import os
import re
import subprocess
import threading
import time
import uuid

import pytest

from auth_api import SECRET, auth_config, json_body, login, me, register
from mariadb import MariaDB
from php_fpm import PhpFpm
from php_site import install_scripts
from tern_server import TERN_BIN, TernServer

CLONE_NEWNET = 0x40000000
PORT = 8080


def run(*argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


class Network:
    """A bridge in this namespace with `prefix`.1, and one namespace per
    node with `prefix`.N on a veth pair to it."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.bridge = f"tbr{tag}"
        self.prefix = f"10.{200 + int(tag[:2], 16) % 50}.{int(tag[2:4], 16)}"
        self.gateway = f"{self.prefix}.1"
        self.tag = tag
        self.namespaces = []
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")

    def add(self, name, host):
        ns = f"t{self.tag}{name}"
        outside, inside = f"v{self.tag}{name}", f"i{self.tag}{name}"
        run("ip", "netns", "add", ns)
        self.namespaces.append((ns, outside))
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        run("ip", "link", "set", inside, "netns", ns)
        run("ip", "link", "set", outside, "master", self.bridge, "up")
        run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{self.prefix}.{host}/24", "dev", inside)
        run("ip", "netns", "exec", ns, "ip", "link", "set", inside, "up")
        run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        return ns, f"{self.prefix}.{host}"

    def close(self):
        for ns, outside in self.namespaces:
            subprocess.run(["ip", "link", "del", outside], capture_output=True, timeout=30)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)


def enter(ns):
    """A preexec_fn that moves the child into network namespace `ns`."""
    def move():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        os.close(fd)
    return move


class NodeServer(TernServer):
    """A tern in a namespace, on a fixed port of its own address."""

    def __init__(self, workdir, root, config, ns, address):
        super().__init__(workdir, root, config, host=address, preexec_fn=enter(ns))

    def start(self):
        self.port = PORT
        self.write_config()
        with open(self.stderr_path, "ab") as err:
            self.proc = subprocess.Popen([str(TERN_BIN), "-c", str(self.config_path)],
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=self.workdir,
                                         preexec_fn=self.preexec_fn)
        assert self._wait_listening(), f"tern did not start; stderr:\n{self.stderr()}"
        return self


@pytest.fixture
def network():
    if os.environ.get("TERN_IO") == "io_uring":
        # Once per build: it checks the balancing across processes, which
        # the I/O backend does not change (test_proxy.py runs on both).
        pytest.skip("the cluster test runs on the epoll pass of each build")
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root: this test runs as uid %d" % os.geteuid())
    try:
        net = Network()
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        reason = e.stderr.decode(errors="replace").strip() if hasattr(e, "stderr") and e.stderr else str(e)
        pytest.skip(f"cannot make a bridge and network namespaces here: {reason}")
    try:
        yield net
    finally:
        net.close()


def wrk(url, seconds, connections=20):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "5s", url],
                         capture_output=True, text=True, timeout=seconds + 60)
    text = out.stdout + out.stderr
    requests = int(re.search(r"(\d+) requests in", text).group(1))
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    failures = (sum(int(x) for x in errors.groups()) if errors else 0) + (int(non2xx.group(1)) if non2xx else 0)
    return requests, failures, text


def test_a_cluster_loses_no_request_when_a_node_dies_and_comes_back(network, tmp_path):
    db = MariaDB(tmp_path / "mariadb", bind_address=network.gateway).start()
    nodes, fpms = [], []
    try:
        node_addresses = []
        for i in (1, 2):
            ns, address = network.add(f"n{i}", 10 + i)
            fpm = PhpFpm(tmp_path / f"fpm{i}", children=4).start()
            fpms.append(fpm)
            workdir = tmp_path / f"node{i}"
            root = workdir / "www"
            root.mkdir(parents=True)
            install_scripts(root)
            (root / "page.txt").write_text("static page\n")
            config = {"workers": 1, **auth_config(db.url(tcp=True), secret=SECRET),
                      "fastcgi": [{"match": r"\.php$", "pass": fpm.pass_address, "pool": 4}]}
            nodes.append(NodeServer(workdir, root, config, ns, address).start())
            node_addresses.append(address)
        lb_ns, lb_address = network.add("lb", 10)
        lb_dir = tmp_path / "balancer"
        (lb_dir / "www").mkdir(parents=True)
        servers = [{"address": f"{a}:{PORT}", "max_fails": 1, "fail_timeout": "2s"} for a in node_addresses]
        balancer = NodeServer(lb_dir, lb_dir / "www", {
            "workers": 1,
            "upstream": [{"name": "nodes", "servers": servers, "connect_timeout": "1s",
                          "health": {"path": "/page.txt", "interval": "300ms", "timeout": "500ms",
                                     "rise": 2, "fall": 2}}],
            "server": [{"location": [{"prefix": "/", "proxy": {"pass": "http://nodes", "read_timeout": "5s"}}]}],
        }, lb_ns, lb_address).start()
        assert balancer.get("/page.txt").body == b"static page\n"
        assert balancer.get("/hello.php").status == 200

        # A login through the balancer is valid on each node.
        assert register(balancer, "alice", "correct horse battery").status == 201
        # A node's first query opens its connection to MariaDB across the
        # bridge; until then it may answer 503 "try again shortly", as the
        # users app does whenever its database is out of reach.
        deadline = time.monotonic() + 20
        while True:
            resp = login(balancer, "alice", "correct horse battery")
            if resp.status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert resp.status == 200, resp
        cookie = resp.header("Set-Cookie").split(";", 1)[0]
        for node in nodes:
            deadline = time.monotonic() + 20
            while (resp := me(node, cookie=cookie)).status == 503 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert json_body(resp, 200)["username"] == "alice"

        # Load through the balancer while node 2 dies and comes back.
        results = {}
        load = threading.Thread(target=lambda: results.update(
            static=wrk(f"http://{lb_address}:{PORT}/page.txt", 8)))
        load.start()
        time.sleep(2)
        nodes[1].proc.kill()
        nodes[1].proc.wait()
        assert balancer.wait_for_log(f"nodes {node_addresses[1]}:{PORT}: health check failed 2 time(s)",
                                     timeout=10)
        time.sleep(1)
        nodes[1].start()
        assert balancer.wait_for_log("marked up", timeout=10)
        load.join()
        requests, failures, text = results["static"]
        assert requests > 1000, text
        assert failures == 0, text
        # The passive check saw it first: a request that found it dead went on.
        assert "trying the next server" in balancer.stderr()
        # PHP and the users app through the balancer after it all.
        with balancer.connect() as conn:
            for _ in range(20):
                resp = conn.get("/hello.php")
                assert resp.status == 200
            assert json_body(me(balancer, cookie=cookie), 200)["username"] == "alice"
        for node in nodes:
            assert json_body(me(node, cookie=cookie), 200)["username"] == "alice"
    finally:
        for node in nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.stop()
        if "balancer" in locals() and balancer.proc.poll() is None:
            balancer.stop()
        for fpm in fpms:
            fpm.stop()
        db.cleanup()

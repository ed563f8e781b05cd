"""Command line and config file: -t, errors as one line naming file, line
and key with exit status 2, flags overriding the file, startup failures."""

import os
import signal
import socket
import subprocess

import pytest

from tern_server import REPO_ROOT, TERN_BIN, TernServer, free_port

PREAMBLE = "# a comment line\n\n"  # errors below start on line 3

BAD_CONFIGS = [
    # (id, text after the preamble, key named in the message, line)
    ("unknown-top-level-key", 'workerz = 2\n', "workerz", 3),
    ("unknown-key-in-table", '[static]\nrooot = "www"\n', "static.rooot", 4),
    ("unknown-table", '[statik]\nroot = "www"\n', "statik", 3),
    ("string-for-integer", 'workers = "two"\n', "workers", 3),
    ("integer-out-of-range", 'workers = 0\n', "workers", 3),
    ("workers-word", 'workers = "many"\n', "workers", 3),
    ("relative-temp-dir", 'temp_dir = "tmp"\n', "temp_dir", 3),
    ("fastcgi-lower-case-method", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\nmethods = ["get"]\n',
     "fastcgi[0].methods", 6),
    ("fastcgi-buffering-not-bool", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\nrequest_buffering = 1\n',
     "fastcgi[0].request_buffering", 6),
    ("bad-body-buffer", '[limits]\nbody_buffer = "lots"\n', "limits.body_buffer", 4),
    ("string-for-bool", '[static]\nallow_symlinks_outside_root = "yes"\n', "static.allow_symlinks_outside_root", 4),
    ("integer-for-array", 'listen = 8080\n', "listen", 3),
    ("bad-duration-unit", '[timeouts]\nkeepalive = "10 parsecs"\n', "timeouts.keepalive", 4),
    ("bad-duration-word", 'shutdown_timeout = "soon"\n', "shutdown_timeout", 3),
    ("negative-duration", '[timeouts]\nheader = -5\n', "timeouts.header", 4),
    ("bad-size", '[limits]\nbody_bytes = "1XB"\n', "limits.body_bytes", 4),
    ("size-below-minimum", '[limits]\nheader_bytes = 10\n', "limits.header_bytes", 4),
    ("listen-without-port", 'listen = ["127.0.0.1"]\n', "listen", 3),
    ("listen-bad-address", 'listen = ["999.0.0.1:80"]\n', "listen", 3),
    ("listen-port-too-big", 'listen = ["127.0.0.1:99999"]\n', "listen", 3),
    ("listen-ipv6-without-brackets", 'listen = ["::1:80"]\n', "listen", 3),
    ("listen-bad-second-entry", 'listen = [\n  "127.0.0.1:80",\n  "nonsense",\n]\n', "listen", 5),
    ("empty-listen", 'listen = []\n', "listen", 3),
    ("bad-blocked-prefix", 'blocked = ["10.0.0.0/33"]\n', "blocked", 3),
    ("bad-choice", 'trigger = "sometimes"\n', "trigger", 3),
    ("bad-io-backend", 'io = "kqueue"\n', "io", 3),
    ("string-for-defer-accept", 'defer_accept = "yes"\n', "defer_accept", 3),
    ("bad-send-lowat", 'send_lowat = "a little"\n', "send_lowat", 3),
    ("string-for-tcp-nopush", 'tcp_nopush = "off"\n', "tcp_nopush", 3),
    ("bad-zero-copy", '[static]\nzero_copy = "splice"\n', "static.zero_copy", 4),
    ("bad-log-level", '[log]\nlevel = "loud"\n', "log.level", 4),
    ("index-with-slash", '[static]\nindex = ["a/b.html"]\n', "static.index", 4),
    ("non-string-mime", '[static.mime]\nmd = 5\n', "static.mime.md", 4),
    ("fastcgi-bad-regex", '[[fastcgi]]\nmatch = "(php"\npass = "127.0.0.1:9000"\n', "fastcgi[0].match", 4),
    ("fastcgi-bad-pass", '[[fastcgi]]\nmatch = "php$"\npass = "php-fpm"\n', "fastcgi[0].pass", 5),
    ("limit-without-rate", '[[limit]]\nname = "a"\n', "limit[0].rate", 3),
    ("limit-rate-per-hour", '[[limit]]\nname = "a"\nrate = "10r/h"\n', "limit[0].rate", 5),
    ("limit-delay-over-burst", '[[limit]]\nname = "a"\nrate = "1r/s"\nburst = 2\ndelay = 3\n', "limit[0].delay", 7),
    ("limit-unknown-variable", '[[limit]]\nname = "a"\nrate = "1r/s"\nkey = "$nope"\n', "limit[0].key", 6),
    ("limit-twice", '[[limit]]\nname = "a"\nrate = "1r/s"\n[[limit]]\nname = "a"\nrate = "2r/s"\n', "limit[1].name", 7),
    ("location-unknown-limit", '[[server]]\n[[server.location]]\nprefix = "/"\nlimit = ["x"]\n',
     "server[0].location[0].limit", 4),
    ("fastcgi-pass-name-bad-port", '[[fastcgi]]\nmatch = "php$"\npass = "php:99999"\n', "fastcgi[0].pass", 5),
    ("fastcgi-pass-name-no-port", '[[fastcgi]]\nmatch = "php$"\npass = "php-fpm.internal:"\n', "fastcgi[0].pass", 5),
    ("fastcgi-long-unix-path", '[[fastcgi]]\nmatch = "php$"\npass = "unix:/' + "x" * 120 + '"\n', "fastcgi[0].pass", 5),
    ("fastcgi-missing-pass", '[[fastcgi]]\nmatch = "php$"\n', "fastcgi[0].pass", 3),
    ("fastcgi-missing-match", '[[fastcgi]]\npass = "127.0.0.1:9000"\n', "fastcgi[0].match", 3),
    ("fastcgi-unknown-key", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\npoool = 4\n', "fastcgi[0].poool", 6),
    ("fastcgi-pool-zero", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\npool = 0\n', "fastcgi[0].pool", 6),
    ("fastcgi-second-block", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\n[[fastcgi]]\nmatch = "x"\npass = 9000\n', "fastcgi[1].pass", 8),
    ("upstream-without-name", '[[upstream]]\nservers = [{ address = "127.0.0.1:3000" }]\n', "upstream[0].name", 3),
    ("upstream-bad-address", '[[upstream]]\nname = "app"\nservers = [{ address = "app-host" }]\n',
     "upstream[0].servers[0].address", 5),
    ("upstream-without-servers", '[[upstream]]\nname = "app"\n', "upstream[0].servers", 3),
    ("upstream-bad-method", '[[upstream]]\nname = "app"\nmethod = "random"\nservers = [{ address = "127.0.0.1:1" }]\n',
     "upstream[0].method", 5),
    ("upstream-bad-hash", '[[upstream]]\nname = "app"\nmethod = "hash"\nhash = "$time"\nservers = [{ address = "127.0.0.1:1" }]\n',
     "upstream[0].hash", 6),
    ("upstream-zero-weight", '[[upstream]]\nname = "app"\nservers = [{ address = "127.0.0.1:1", weight = 0 }]\n',
     "upstream[0].servers[0].weight", 5),
    ("upstream-twice", '[[upstream]]\nname = "app"\nservers = [{ address = "127.0.0.1:1" }]\n[[upstream]]\nname = "app"\nservers = [{ address = "127.0.0.1:2" }]\n',
     "upstream[1].name", 7),
    ("upstream-bad-health-status", '[[upstream]]\nname = "app"\nservers = [{ address = "127.0.0.1:1" }]\nhealth = { status = "20x" }\n',
     "upstream[0].health.status", 6),
    ("upstream-health-interval-too-short", '[[upstream]]\nname = "app"\nservers = [{ address = "127.0.0.1:1" }]\nhealth = { interval = "1ms" }\n',
     "upstream[0].health.interval", 6),
    ("proxy-unknown-group", '[[server]]\n[[server.location]]\nprefix = "/"\nproxy = { pass = "http://nowhere" }\n',
     "server[0].location[0].proxy.pass", 6),
    ("proxy-tls-without-https", '[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "http://127.0.0.1:1", tls = { verify = false } }\n', "server[0].location[0].proxy.tls", 6),
    ("proxy-tls-ca-missing", '[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "https://127.0.0.1:1", tls = { ca = "/nonexistent/ca.pem" } }\n',
     "server[0].location[0].proxy.tls.ca", 6),
    ("proxy-tls-unix-without-name", '[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "https://unix:/run/app.sock" }\n', "server[0].location[0].proxy.pass", 6),
    ("proxy-path-in-regex-location", '[[server]]\n[[server.location]]\nregex = "^/a"\nproxy = { pass = "http://127.0.0.1:1/b" }\n',
     "server[0].location[0].proxy.pass", 6),
    ("proxy-unknown-key", '[[server]]\n[[server.location]]\nprefix = "/"\nproxy = { pass = "http://127.0.0.1:1", retries = 2 }\n',
     "server[0].location[0].proxy.retries", 6),
    ("cache-without-path", '[[cache]]\nname = "pages"\n', "cache[0].path", 3),
    ("cache-relative-path", '[[cache]]\nname = "pages"\npath = "var/cache"\n', "cache[0].path", 5),
    ("cache-name-twice", '[[cache]]\nname = "p"\npath = "/tmp/a"\n[[cache]]\nname = "p"\npath = "/tmp/b"\n',
     "cache[1].name", 7),
    ("cache-tiny-memory", '[[cache]]\nname = "p"\npath = "/tmp/a"\nmemory = "1KiB"\n', "cache[0].memory", 6),
    ("cache-names-no-zone", '[[server]]\n[[server.location]]\nprefix = "/"\nproxy = { pass = "http://127.0.0.1:1", cache = "none" }\n',
     "server[0].location[0].proxy.cache", 6),
    ("cache-valid-bad-status", '[[cache]]\nname = "p"\npath = "/tmp/a"\n[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "http://127.0.0.1:1", cache = { zone = "p", valid = { 100 = "1m" } } }\n',
     "server[0].location[0].proxy.cache.valid.100", 9),
    ("cache-unknown-variable", '[[cache]]\nname = "p"\npath = "/tmp/a"\n[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\n'
     'cache = { zone = "p", key = "$host$nonsense" }\n', "fastcgi[0].cache.key", 9),
    ("cache-use-stale-unknown", '[[cache]]\nname = "p"\npath = "/tmp/a"\n[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "http://127.0.0.1:1", cache = { zone = "p", use_stale = ["error", "http_503"] } }\n',
     "server[0].location[0].proxy.cache.use_stale", 9),
    ("cache-zero-lock-age", '[[cache]]\nname = "p"\npath = "/tmp/a"\n[[server]]\n[[server.location]]\nprefix = "/"\n'
     'proxy = { pass = "http://127.0.0.1:1", cache = { zone = "p", lock_age = "0s" } }\n',
     "server[0].location[0].proxy.cache.lock_age", 9),
    ("fastcgi-old-cache", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\ncache = true\n', "fastcgi[0].cache", 6),
    ("fastcgi-old-cache-ttl", '[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\ncache_ttl = "60s"\n',
     "fastcgi[0].cache_ttl", 6),
    ("auth-bad-store", '[auth]\nstore = "postgres://x"\n', "auth.store", 4),
    ("auth-short-secret", '[auth]\nsecret = "short"\n', "auth.secret", 4),
    ("auth-mysql-without-secret", '[auth]\nstore = "mysql://u:p@127.0.0.1:3306/db"\n', "auth.secret", 3),
    ("auth-unknown-key", '[auth]\nstorr = "sqlite:x.db"\n', "auth.storr", 4),
    ("auth-zero-ops", '[auth]\npassword_ops = 0\n', "auth.password_ops", 4),
    ("auth-tiny-memory", '[auth]\npassword_memory = 100\n', "auth.password_memory", 4),
    ("task-threads-zero", 'task_threads = 0\n', "task_threads", 3),
    ("fastcgi-not-array", '[fastcgi]\nmatch = "php$"\n', "fastcgi", 3),
    ("syntax-missing-bracket", '[static\nroot = "www"\n', "", 3),
    ("syntax-missing-value", 'workers =\n', "", 3),
    ("syntax-duplicate-key", 'workers = 1\nworkers = 2\n', "", 4),
]


def run_tern(*args, cwd=None, timeout=30):
    return subprocess.run([str(TERN_BIN), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.mark.parametrize("text,key,line", [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_fails_check_with_one_line_naming_file_line_and_key(tmp_path, text, key, line):
    (tmp_path / "www").mkdir()
    path = tmp_path / "bad.toml"
    path.write_text(PREAMBLE + text)
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"{path}:{line}:" in lines[0]
    assert key in lines[0]


def test_the_old_fastcgi_cache_settings_say_what_replaced_them(tmp_path):
    (tmp_path / "www").mkdir()
    for setting in ("cache = true", 'cache_size = "16MiB"', 'cache_ttl = "60s"'):
        path = tmp_path / "old.toml"
        path.write_text(PREAMBLE + f'[[fastcgi]]\nmatch = "php$"\npass = "127.0.0.1:9000"\n{setting}\n')
        proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
        assert proc.returncode == 2 and "[[cache]]" in proc.stderr, proc.stderr


def test_bad_config_stops_startup_with_status_2(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('workers = "two"\n')
    proc = run_tern("-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{path}:1:" in proc.stderr and "workers" in proc.stderr


def test_good_config_passes_check(tmp_path):
    (tmp_path / "www").mkdir()
    path = tmp_path / "good.toml"
    path.write_text(f'listen = ["127.0.0.1:{free_port()}"]\nworkers = 2\n[static]\nroot = "{tmp_path / "www"}"\n'
                    '[timeouts]\nkeepalive = "500ms"\n[limits]\nbody_bytes = "2MiB"\n')
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_shipped_example_config_passes_check():
    proc = run_tern("-t", "-c", "conf/tern.toml", cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr


def test_readme_sites_example_passes_check(tmp_path):
    """The worked example in README's "Sites and locations", with its roots
    made here, is a valid config."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("### Sites and locations"):]
    example = section[section.index("```toml\n") + 8:section.index("```\n", section.index("```toml\n") + 8)]
    assert "[[server.location]]" in example
    for name in ("example", "wiki"):
        (tmp_path / name).mkdir()
        example = example.replace(f'"/srv/{name}"', f'"{tmp_path / name}"')
    path = tmp_path / "sites.toml"
    path.write_text(example)
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "is ok" in proc.stdout


def readme_toml(after):
    """The first ```toml block of README.md after the text `after`."""
    readme = (REPO_ROOT / "README.md").read_text()
    rest = readme[readme.index(after):]
    start = rest.index("```toml\n") + 8
    return rest[start:rest.index("```\n", start)]


def test_readme_conf_d_example_passes_check_as_written(tmp_path):
    """"Splitting the config": the two files of the example, in a folder
    laid out as /etc/tern, with its variables in the environment."""
    example = readme_toml("**Splitting the config.**")
    main, site = example.split("# /etc/tern/conf.d/shop.toml\n")
    (tmp_path / "etc" / "conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "tern.toml").write_text(main)
    (tmp_path / "etc" / "conf.d" / "shop.toml").write_text(site)
    (tmp_path / "shop").mkdir()
    env = {**os.environ, "DB_PASSWORD": "pass", "TERN_SECRET": "s" * 32, "SHOP_ROOT": str(tmp_path / "shop")}
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(tmp_path / "etc" / "tern.toml")], capture_output=True,
                          text=True, timeout=30, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    # Without the secret's variable, the error names the file, line and key.
    del env["TERN_SECRET"]
    proc = subprocess.run([str(TERN_BIN), "-t", "-c", str(tmp_path / "etc" / "tern.toml")], capture_output=True,
                          text=True, timeout=30, cwd=tmp_path, env=env)
    assert proc.returncode == 2
    assert f"{tmp_path / 'etc' / 'tern.toml'}:5: auth.secret: ${{TERN_SECRET}} is not set" in proc.stderr, proc.stderr


def test_readme_compose_example_passes_check_as_written(tmp_path):
    """"Upstreams by name": an upstream and a php-fpm given by names that do
    not resolve here (nothing is asked at a check, and at start a name that
    does not resolve yet is a 502 until it does)."""
    (tmp_path / "www").mkdir()
    path = tmp_path / "compose.toml"
    path.write_text(readme_toml("**Upstreams by name.**"))
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_readme_rate_limit_example_passes_check_as_written(tmp_path):
    (tmp_path / "www").mkdir()
    path = tmp_path / "limits.toml"
    path.write_text(readme_toml("### Rate and connection limits"))
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_missing_document_root_fails_check(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(f'[static]\nroot = "{tmp_path / "nope"}"\n')
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr


@pytest.mark.parametrize("args", [
    ["--no-such-flag"],
    ["--workers", "0"],
    ["--workers", "many"],
    ["--listen", "nonsense"],
    ["--log-level", "loud"],
    ["--io", "kqueue"],
    ["-c", "/nonexistent/tern.toml"],
], ids=lambda a: " ".join(a))
def test_bad_flag_exits_2_with_one_line(tmp_path, args):
    proc = run_tern(*args, "-t", cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_version_flag_prints_version():
    proc = run_tern("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("tern ")
    assert "(malloc: " in proc.stdout  # and ", profile-guided" in such a build


def test_root_flag_overrides_the_config_file(tern_factory, tmp_path):
    flag_root = tmp_path / "from_flag"
    flag_root.mkdir()
    (flag_root / "which.txt").write_text("flag")
    srv = tern_factory(args=["--root", str(flag_root)])
    srv.write_file("which.txt", "config")
    assert srv.get("/which.txt").body == b"flag"


def test_listen_flag_overrides_the_config_file(tmp_path):
    flag_port = free_port()
    srv = TernServer(tmp_path, tmp_path, args=["--listen", f"127.0.0.1:{flag_port}"])
    srv.port = free_port()
    srv.write_config()
    (tmp_path / "a.txt").write_text("alpha")
    with open(srv.stderr_path, "wb") as err:
        srv.proc = subprocess.Popen([str(TERN_BIN), "-c", str(srv.config_path), *srv.args], stdout=err, stderr=err)
    try:
        config_port, srv.port = srv.port, flag_port
        assert srv._wait_listening(), srv.stderr()
        assert srv.get("/a.txt").body == b"alpha"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", config_port), timeout=5).close()
    finally:
        assert srv.stop() == 0, srv.stderr()


def backend_in_log(srv):
    """The I/O backend the startup line names ("listening on ... (1 I/O
    loop, io_uring, dispatch mode, ...)"), after any fallback. The line is
    written just after the listeners open: wait for it."""
    assert srv.wait_for_log("listening on"), srv.stderr()
    line = next(l for l in srv.stderr().splitlines() if "listening on" in l)
    return line.split("(", 1)[1].split(", ")[1]


@pytest.mark.parametrize("backend", ["epoll", "io_uring"])
@pytest.mark.parametrize("how", ["config", "flag", "environment"])
def test_the_io_backend_is_chosen_by_config_flag_or_environment(tern_factory, how, backend):
    other = "epoll" if backend == "io_uring" else "io_uring"
    if how == "config":
        srv = tern_factory(config={"io": backend}, env={"TERN_IO": other})
    elif how == "flag":  # the flag beats the file
        srv = tern_factory(config={"io": other}, args=["--io", backend])
    else:
        srv = tern_factory(env={"TERN_IO": backend})
    srv.write_file("a.txt", "alpha")
    assert srv.get("/a.txt").body == b"alpha"
    if backend == "io_uring" and "io_uring unavailable" in srv.stderr():
        # A kernel or sandbox without io_uring: epoll, said once.
        assert srv.stderr().count("io_uring unavailable") == 1
        assert backend_in_log(srv) == "epoll"
    else:
        assert backend_in_log(srv) == backend


def test_without_a_choice_the_backend_is_io_uring_where_the_kernel_offers_it(tern_factory):
    srv = tern_factory(env={"TERN_IO": ""})
    srv.write_file("a.txt", "alpha")
    assert srv.get("/a.txt").body == b"alpha"
    refused = [l for l in srv.stderr().splitlines() if "io_uring unavailable" in l]
    if refused:
        # Not asked for by name: a line of information, not a warning.
        assert len(refused) == 1 and " info " in refused[0], refused
        assert backend_in_log(srv) == "epoll"
    else:
        assert backend_in_log(srv) == "io_uring"


def test_port_in_use_fails_startup_with_a_message(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (tmp_path / "www").mkdir()
        proc = run_tern("--listen", f"127.0.0.1:{port}", "--root", str(tmp_path / "www"), cwd=tmp_path)
    assert proc.returncode != 0
    assert f"127.0.0.1:{port}" in proc.stderr


def test_ipv6_listen_address_serves(tern_factory):
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    srv = tern_factory(host="::1")
    srv.write_file("six.txt", b"six")
    with srv.connect() as conn:
        assert conn.get("/six.txt").body == b"six"


def test_a_temp_dir_that_cannot_take_files_fails_the_check(tmp_path):
    (tmp_path / "www").mkdir()
    path = tmp_path / "t.toml"
    path.write_text(f'temp_dir = "{tmp_path / "missing"}"\n[static]\nroot = "{tmp_path / "www"}"\n')
    proc = run_tern("-t", "-c", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc
    assert "temp_dir" in proc.stderr and "missing" in proc.stderr, proc.stderr


def test_a_conf_d_layout_with_secrets_from_the_environment_serves_and_reloads(tern_factory):
    """include = ["conf.d/*.toml"]: each site in a file of its own, its root
    from the environment; a file added later is served after SIGHUP, and a
    mistake in one is named by its own path (the running sites stay)."""
    srv = tern_factory({"include": ["conf.d/*.toml"], "server": [{"names": ["main.test"]}]},
                       env={"SHOP_ROOT": "shop"})
    conf_d = srv.workdir / "conf.d"
    conf_d.mkdir()
    (srv.workdir / "shop").mkdir()
    (srv.workdir / "shop" / "index.html").write_text("shop\n")
    (conf_d / "shop.toml").write_text(f'[[server]]\nnames = ["shop.test"]\nroot = "{srv.workdir}/${{SHOP_ROOT}}"\n')
    srv.reload()
    resp = srv.get("/", [("Host", "shop.test")])
    assert (resp.status, resp.body) == (200, b"shop\n")
    (conf_d / "broken.toml").write_text('[[server]]\nnames = ["b.test"]\nroot = "${BROKEN_ROOT}"\n')
    before = srv.stderr().count("keeping the running configuration")
    srv.signal(signal.SIGHUP)
    assert srv.wait_for_log("keeping the running configuration", before + 1)
    assert f"{conf_d}/broken.toml:3: server[0].root: ${{BROKEN_ROOT}} is not set" in srv.stderr(), srv.stderr()
    assert srv.get("/", [("Host", "shop.test")]).body == b"shop\n"

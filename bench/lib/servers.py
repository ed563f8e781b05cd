"""The servers under test: one document root, their configs, start, probe, stop.

Every server runs pinned to CPU 0 in its own process group, so that a Ctrl-C
typed at the harness does not reach it before the harness has read what it
needs, and so that stop() can end the whole group (nginx master and worker).
A PHP server (tern-php, nginx-php and their -cache forms) has a php-fpm of
its own, also on CPU 0: the server side of the PHP rows is server + php-fpm.
A proxy (tern-proxy, nginx-proxy) has a floor server of its own as its
upstream, on CPU 0 too.
"""
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

from . import procstat, tools

HOST = "127.0.0.1"
SERVER_CPU = "0"
SMALL_FILE, SMALL_SIZE = "1k.html", 1024
BIG_FILE, BIG_SIZE = "64m.bin", 64 << 20
# A site's many files (the files row): FILES_COUNT files of 0.5-16 KiB in
# files/, named f00000.html... (bench/files.lua asks for them at random).
FILES_DIR, FILES_COUNT = "files", 10_000
FILES_MIN, FILES_MAX = 512, 16 * 1024
HELLO_BODY = "Hello, world!\n"
PHP_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "php")
PHP_BODY = "hello\n"  # of bench/php/hello.php and slow_hello.php
# php-fpm children of each PHP server = tern's pool = nginx's upstream
# keepalive. One php-fpm per server: a kept-alive FastCGI connection keeps
# its php-fpm child, so a server holding idle connections (tern's pool) would
# starve another server sharing its php-fpm.
PHP_POOL = 4
# nginx's fastcgi_keep_conn (--nginx-keep-conn). Off: with it, nginx opens a
# connection per request in flight (no queue in front of its upstream), the
# extra ones wait in php-fpm's backlog while the children stay with idle kept-
# alive connections, and wrk times out (measured: p99 1.5 s, timeouts, with
# 4 children and 50 clients). Off is also what Debian's snippets configure.
NGINX_KEEP_CONN = False


def free_port():
    """A port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Workspace:
    """A temp dir holding the document root, the configs and the logs."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tern-bench-")
        self.docroot = os.path.join(self.dir, "www")
        self.phproot = os.path.join(self.dir, "php")  # bench/php/*.php
        os.mkdir(self.docroot)
        os.mkdir(self.phproot)
        # nginx workers run as nobody: the root and every parent must be
        # searchable by all. mkdtemp makes 0700 dirs.
        for d in (self.dir, self.docroot, self.phproot):
            os.chmod(d, 0o755)
        self._check_parents()
        self._write_files()
        for name in sorted(os.listdir(PHP_SOURCE)):
            if name.endswith(".php"):
                shutil.copy(os.path.join(PHP_SOURCE, name), self.phproot)

    def _check_parents(self):
        d = os.path.dirname(self.dir)
        while d != "/":
            if not os.stat(d).st_mode & 0o001:
                raise SystemExit(f"bench: {d} is not searchable by others; nginx workers "
                                 "(user nobody) could not read the document root. "
                                 "Set TMPDIR to a world-searchable folder.")
            d = os.path.dirname(d)

    def _write_files(self):
        line = b"<p>tern benchmark: the same bytes from every server.</p>\n"
        small = (b"<!doctype html>\n" + line * 32)[:SMALL_SIZE - 1] + b"\n"
        self._write(SMALL_FILE, small)
        # A repeating 1 MiB block: content does not matter to sendfile.
        block = bytes(range(256)) * 4096
        self._write(BIG_FILE, block * (BIG_SIZE // len(block)))
        os.mkdir(os.path.join(self.docroot, FILES_DIR))
        os.chmod(os.path.join(self.docroot, FILES_DIR), 0o755)
        rng = random.Random(20261124)  # the same sizes every run
        text = line * (FILES_MAX // len(line) + 1)
        for i in range(FILES_COUNT):
            self._write(files_path(i).lstrip("/"), text[:rng.randint(FILES_MIN, FILES_MAX)])

    def _write(self, name, data):
        path = os.path.join(self.docroot, name)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)

    def path(self, name):
        return os.path.join(self.dir, name)

    def cached_body_file(self):
        """A file of the 100 KiB body the -100k proxies cache (outside the
        document root): what the floor sends by sendfile in their row."""
        path = self.path("cached-100k.bin")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(b"a" * CACHED_PROXY_BIG_SIZE)
        return path

    def tls_files(self):
        """(certificate, key) every HTTPS server presents: one self-signed
        ECDSA P-256 certificate, made on first use."""
        cert, key = self.path("tls.pem"), self.path("tls.key")
        if not os.path.exists(cert):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:P-256", "-nodes", "-days", "30", "-keyout", key,
                            "-out", cert, "-subj", f"/CN={HOST}"], check=True, capture_output=True,
                           timeout=60)
            os.chmod(key, 0o600)
        return cert, key


def files_path(i):
    """The URL path of file i of the files row."""
    return f"/{FILES_DIR}/f{i:05d}.html"


class Server:
    """One started server process (tree). A php-fpm is one too, with a unix
    socket instead of a port; a PHP server has its php-fpm as `backend`."""

    def __init__(self, label, argv, port, log_path, config_path=None, unix_path=None):
        self.label, self.port, self.log_path = label, port, log_path
        self.config_path, self.unix_path = config_path, unix_path
        self.backend = None
        self.tls = False  # speaks HTTPS (a kind ending in TLS)
        self.h2c = False  # speaks HTTP/2 with prior knowledge (a kind ending in H2C)
        self.argv = ["taskset", "-c", SERVER_CPU, *argv]
        self._log = open(log_path, "wb")
        # taskset execs the server, so proc.pid is the server's own pid.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid

    def url(self, path):
        return f"{'https' if self.tls else 'http'}://{HOST}:{self.port}/{path}"

    def wait_ready(self, timeout=15.0):
        """Until the port (or unix socket) accepts a connection; fail fast if
        the server died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with status {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                self._connect().close()
                return
            except OSError:
                time.sleep(0.05)
        where = self.unix_path or f"port {self.port}"
        raise RuntimeError(f"{self.label} did not listen on {where} in {timeout} s:\n"
                           f"{self.log_tail()}")

    def _connect(self):
        if self.unix_path is None:
            return socket.create_connection((HOST, self.port), timeout=1)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(1)
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        return s

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def cpu_seconds(self):
        return procstat.cpu_seconds(self.pid)

    def rss_kib(self):
        return procstat.rss_kib(self.pid)

    def stop(self):
        """SIGTERM the group, SIGKILL it if it is still there after 5 s."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # The group may outlive its leader (an nginx worker); make sure it is gone.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()
        if self.backend is not None:
            self.backend.stop()


# tern's second I/O backend: a server kind ending in URING ("tern-uring",
# "hello-uring", "tern-php-uring") is that kind with io = "io_uring".
URING = "-uring"


def tern_config(ws, port, io="epoll", tls=False, extra="", name="tern", h2c=False, nopush=True):
    """tern serving the document root; `extra` adds tables (a proxy's);
    `nopush` False: tcp_nopush = false, as nginx's `tcp_nopush off`."""
    path = ws.path(f"{name}-{io}-{port}.toml")
    tls_block = ""
    if tls:
        cert, key = ws.tls_files()
        tls_block = f'[tls]\ncert = "{cert}"\nkey = "{key}"\n'
    with open(path, "w") as f:
        f.write(f'''listen = ["{HOST}:{port}{' tls' if tls else ''}{' h2c' if h2c else ''}"]
workers = 1
io = "{io}"
# 10,000 idle connections plus the probes: above the default of 10,000.
max_connections = 20000
access_log = "off"
shutdown_timeout = "1s"
{'' if nopush else 'tcp_nopush = false'}
[static]
root = "{ws.docroot}"

{tls_block}{extra}
[log]
level = "warn"
''')
    return path


# tern's metrics rows: the implicit site's root served by a [[server]] that
# also has an exact /metrics location, answering the metrics (on) or a 204
# (off): the same locations either way, so the rows differ by the counting.
METRICS_KINDS = {"tern-metrics": True, "tern-sites": False}


def metrics_site(on):
    answer = 'metrics = "prometheus"' if on else "return = 204"
    return f'''[[server]]
  [[server.location]]
  prefix = "/"
  [[server.location]]
  exact = "/metrics"
  {answer}
  allow = ["{HOST}/32"]
'''


# The limit rows: the metrics rows' site (its 204 at /metrics) with a
# [[limit]] on "/" whose rate no run reaches, so that every request is
# counted and none held: the cost of counting. nginx does the same with
# limit_req.
LIMIT_KINDS = {"tern-limit": "tern", "nginx-limit": "nginx"}
LIMIT_RATE = "1000000r/s"
# Counted by the millisecond (as nginx does): requests of one client within
# one millisecond are a burst, which must fit.
LIMIT_BURST = 100000


def limit_site():
    site = metrics_site(False).replace('prefix = "/"\n', 'prefix = "/"\n  limit = ["bench"]\n', 1)
    return site + f"""
[[limit]]
name = "bench"
key = "$remote_addr"
rate = "{LIMIT_RATE}"
burst = {LIMIT_BURST}
nodelay = true
"""


def nginx_limit_config(ws, port):
    return nginx_config(ws, port, server_block=f"root {ws.docroot};\n        location / {{ limit_req zone=bench burst={LIMIT_BURST} nodelay; }}",
                        http_extra=f"\n    limit_req_zone $binary_remote_addr zone=bench:10m rate={LIMIT_RATE};")


# The auth rows: the same site behind basic auth, the user "bench" with the
# password "bench" (htpasswd -nbB -C 5 bench bench). wrk's 100 connections
# come from one address at once: tern's checks per address are not the
# limit here.
AUTH_KINDS = {"tern-auth": "tern", "nginx-auth": "nginx"}
AUTH_LINE = "bench:$2y$05$ux04FFO4F2.b8Hkfi3vS2udDdG4V93bGe3y8E0IPcEEne36gXZM7C\n"
AUTH_FIELD = "Authorization: Basic YmVuY2g6YmVuY2g="


def auth_users(ws):
    path = ws.path("htpasswd")
    with open(path, "w") as f:
        f.write(AUTH_LINE)
    return path


def auth_site(ws):
    site = metrics_site(False)
    return site.replace("[[server]]\n", f'[[server]]\nauth_basic = {{ realm = "bench", users = "{auth_users(ws)}", attempts = 1000000 }}\n', 1)


def nginx_auth_config(ws, port):
    return nginx_config(ws, port, server_block=f'root {ws.docroot};\n        auth_basic "bench";\n'
                                               f"        auth_basic_user_file {auth_users(ws)};")


def tern_php_config(ws, port, fpm, cache, io="epoll"):
    """tern in front of its php-fpm, with the response cache or without."""
    path = ws.path(f"tern-php{'-cache' if cache else ''}-{io}-{port}.toml")
    cache_lines = 'cache = "php"\n' if cache else ""
    zone = f'\n[[cache]]\nname = "php"\npath = "{ws.path(f"tern-{io}-{port}")}/cache"\nmax_size = "16MiB"\n' if cache else ""
    with open(path, "w") as f:
        f.write(f'''listen = ["{HOST}:{port}"]
workers = 1
io = "{io}"
access_log = "off"
shutdown_timeout = "1s"

[static]
root = "{ws.phproot}"

[[fastcgi]]
match = '\\.php$'
pass = "unix:{fpm.unix_path}"
pool = {PHP_POOL}  # = php-fpm's pm.max_children (a child stays with its connection)
{cache_lines}
[log]
level = "warn"
{zone}''')
    return path


# Upstream connections a proxy may keep per worker: tern's connections,
# nginx's upstream keepalive (nginx opens more while all are busy; tern
# queues), both above the 1,000 client connections of proxy-1000.
PROXY_CONNECTIONS = 1024
# The fields both proxies add (nginx as production configs set it up; tern
# by default).
NGINX_PROXY_FIELDS = '''proxy_set_header Host $host;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;
            proxy_set_header Forwarded "for=$remote_addr;proto=$scheme;host=\\"$host\\"";
            proxy_set_header Via "1.1 nginx";'''


def tern_proxy_config(ws, port, upstream_port, io="epoll", cache=False):
    """tern as a reverse proxy in front of a floor server (or, for the
    websocket row, of the upgrade echo server); with `cache`, through a
    [[cache]] zone that keeps the floor's 200s (which say nothing of their
    lifetime) for 10 minutes, and tcp_nopush = false, as nginx's cache rows
    (see nginx_proxy_config): the head of a hit leaves at once on its own
    in both."""
    zone = ""
    cache_option = ""
    if cache:
        zone = (f'\n[[cache]]\nname = "pages"\npath = "{ws.path(f"tern-proxy-{io}-{port}")}/cache"\n'
                'max_size = "256MiB"\nmemory = "16MiB"\n')
        cache_option = ', cache = { zone = "pages", valid = { 200 = "10m" } }'
    return tern_config(ws, port, io, name="tern-proxy", nopush=not cache, extra=f'''
[[upstream]]
name = "floor"
connections = {PROXY_CONNECTIONS}
keepalive = {PROXY_CONNECTIONS}
servers = [{{ address = "{HOST}:{upstream_port}" }}]
{zone}
[[server]]
[[server.location]]
prefix = "/"
proxy = {{ pass = "http://floor"{cache_option} }}
''')


def nginx_proxy_config(ws, port, upstream_port, websocket=False, cache=False, cache_lock=False):
    """nginx as a reverse proxy in front of a floor server: HTTP/1.1 and
    keep-alive to it, the forwarding fields tern sends; for the websocket
    row, Upgrade relayed as nginx's documentation shows; with `cache`, a
    proxy_cache zone on the same disk as tern's, its key tern's default
    ($scheme$host$request_uri), 200s kept 10 minutes, and with `cache_lock`
    proxy_cache_lock (off by default in nginx, on in tern)."""
    http_extra = f'''
    upstream floor {{ server {HOST}:{upstream_port}; keepalive {PROXY_CONNECTIONS}; }}'''
    cache_lines = ""
    if cache:
        http_extra += (f"\n    proxy_cache_path {ws.path(f'nginx-{port}')}/proxy_cache levels=1:2 "
                       "keys_zone=pages:16m max_size=256m;")
        cache_lines = '''
            proxy_cache pages;
            proxy_cache_key $scheme$host$request_uri;
            proxy_cache_valid 200 10m;
            add_header X-Cache $upstream_cache_status;'''
        if cache_lock:
            cache_lines += "\n            proxy_cache_lock on;"
    connection = ('proxy_set_header Upgrade $http_upgrade;\n            '
                  'proxy_set_header Connection "upgrade";' if websocket else 'proxy_set_header Connection "";')
    server_block = f'''location / {{
            proxy_pass http://floor;
            proxy_http_version 1.1;
            {connection}
            {NGINX_PROXY_FIELDS}{cache_lines}
        }}'''
    # tcp_nopush off for the cache: with it on, each 100 KiB hit stalled about
    # 40 ms (a delayed ACK) before its last bytes left, and nginx answered
    # 2,400 requests a second at a twentieth of its CPU; off, 32,000.
    return nginx_config(ws, port, server_block, http_extra, nopush=not cache)


def php_fpm_config(ws, name):
    """(config path, socket path) of a php-fpm with PHP_POOL static children."""
    home = ws.path(f"php-fpm-{name}")
    os.makedirs(home, exist_ok=True)
    sock = os.path.join(home, "php.sock")
    if len(os.fsencode(sock)) > 100:  # sun_path holds 108 bytes
        raise SystemExit(f"bench: {sock} is too long for a unix socket; set TMPDIR to a "
                         "shorter folder")
    path = os.path.join(home, "php-fpm.conf")
    with open(path, "w") as f:
        f.write(f'''[global]
pid = {home}/php-fpm.pid
error_log = {home}/php-fpm.log
log_level = warning
daemonize = no

[bench]
listen = {sock}
; nginx's workers run as nobody.
listen.mode = 0666
listen.backlog = 1024
pm = static
pm.max_children = {PHP_POOL}
pm.max_requests = 0
clear_env = no
security.limit_extensions = .php
php_admin_value[expose_php] = off
php_admin_value[display_errors] = off
php_admin_value[log_errors] = on
''')
    return path, sock


def start_php_fpm(ws, name, binary):
    """php-fpm for the server `name`, without php.ini (-n) but with OPcache,
    as root (-R) if the harness is root; ready when its socket accepts."""
    conf, sock = php_fpm_config(ws, name)
    argv = [binary, "-F", "-n", "-R", "-d", "zend_extension=opcache", "-d", "opcache.enable=1",
            "-y", conf, "-p", os.path.dirname(conf)]
    fpm = Server(f"php-fpm ({name})", argv, None, ws.path(f"php-fpm-{name}.out"), conf, sock)
    try:
        fpm.wait_ready()
    except Exception:
        fpm.stop()
        raise
    return fpm


def _nginx_has(module):
    """Whether this nginx build has a module that Debian's light builds may drop."""
    out = subprocess.run(["nginx", "-V"], capture_output=True, text=True, timeout=10).stderr
    return f"--without-{module}" not in out


def nginx_config(ws, port, server_block=None, http_extra="", tls=False, h2c=False, nopush=True):
    """nginx's config for the benchmark, with every path it writes in the temp dir,
    so that it runs as root without touching /var. server_block: the inside
    of its server {} (default: the document root and /hello)."""
    tmp = ws.path(f"nginx-{port}")
    os.makedirs(tmp, exist_ok=True)
    temp_paths = [f"client_body_temp_path {tmp}/client_body;",
                  f"proxy_temp_path {tmp}/proxy;", f"fastcgi_temp_path {tmp}/fastcgi;"]
    for module, directive in (("http_uwsgi_module", "uwsgi"), ("http_scgi_module", "scgi")):
        if _nginx_has(module):
            temp_paths.append(f"{directive}_temp_path {tmp}/{directive};")
    temp_block = "\n    ".join(temp_paths)
    if server_block is None:
        server_block = (f"root {ws.docroot};\n        location = /hello {{ default_type "
                        '"text/plain; charset=utf-8"; return 200 "Hello, world!\\n"; }')
    listen = f"{HOST}:{port}" + (" http2" if h2c else "")
    if tls:
        cert, key = ws.tls_files()
        listen += f" ssl http2;\n        ssl_certificate {cert};\n        ssl_certificate_key {key}"
        listen += ";\n        ssl_protocols TLSv1.2 TLSv1.3;\n        ssl_session_cache shared:SSL:10m"
    path = ws.path(f"nginx-{port}.conf")
    with open(path, "w") as f:
        f.write(f'''worker_processes 1;
worker_rlimit_nofile 65536;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush {"on" if nopush else "off"};
    tcp_nodelay on;
    keepalive_requests 1000000;
    open_file_cache max=1000;
    types {{ text/html html; application/octet-stream bin; }}
    default_type application/octet-stream;
    {temp_block}{http_extra}
    server {{
        listen {listen};
        {server_block}
    }}
}}
''')
    return path, f"{tmp}/error.log"


def nginx_php_config(ws, port, fpm, cache):
    """nginx in front of its php-fpm: the usual PHP location, an upstream
    with keepalive PHP_POOL, and fastcgi_cache (which, like tern's cache,
    honours the script's Cache-Control max-age) when `cache`."""
    keep_conn = ("fastcgi_keep_conn on;" if NGINX_KEEP_CONN else
                 "# fastcgi_keep_conn off: see NGINX_KEEP_CONN in bench/lib/servers.py")
    http_extra = f'''
    upstream php_fpm {{ server unix:{fpm.unix_path}; keepalive {PHP_POOL}; }}'''
    cache_lines = ""
    if cache:
        http_extra += (f"\n    fastcgi_cache_path {ws.path(f'nginx-{port}')}/fastcgi_cache "
                       "keys_zone=php:1m max_size=16m;")
        cache_lines = '''
            fastcgi_cache php;
            fastcgi_cache_key $request_method$host$request_uri;
            add_header X-Cache $upstream_cache_status;'''
    server_block = f'''root {ws.phproot};
        location ~ \\.php$ {{
            # As tern does: a missing script is 404 without asking php-fpm.
            try_files $fastcgi_script_name =404;
            include {tools.FASTCGI_PARAMS};
            fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
            fastcgi_pass php_fpm;
            {keep_conn}{cache_lines}
        }}'''
    return nginx_config(ws, port, server_block, http_extra)


def h2o_config(ws, port, tls=False):
    """h2o doing the same work: one thread, no access log, the same root and
    types (its open-file cache is on by default). Started as root, it would
    switch to nobody, who cannot write in the temp dir: it stays root."""
    tmp = ws.path(f"h2o-{port}")
    os.makedirs(tmp, exist_ok=True)
    path = ws.path(f"h2o-{port}.conf")
    ssl_block = ""
    if tls:
        cert, key = ws.tls_files()
        ssl_block = f"\n  ssl:\n    certificate-file: {cert}\n    key-file: {key}\n    minimum-version: TLSv1.2"
    with open(path, "w") as f:
        f.write(f'''listen:
  host: {HOST}
  port: {port}{ssl_block}
num-threads: 1
max-connections: 20000
# Idle keep-alive connections stay (sparse-10k holds 9,900 for the whole
# run); h2o's default closes them after 10 s, the others keep them 60 s+.
http1-request-timeout: 300
{"user: root" if os.geteuid() == 0 else ""}
error-log: {tmp}/error.log
file.send-gzip: OFF
file.mime.settypes:
  text/html: .html
  application/octet-stream: .bin
hosts:
  default:
    paths:
      /:
        file.dir: {ws.docroot}
''')
    return path


def lighttpd_config(ws, port, tls=False):
    """lighttpd doing the same work: one process, no access log (mod_accesslog
    not loaded), sendfile, its stat cache, keep-alive for as many requests
    as it allows on a connection."""
    tmp = ws.path(f"lighttpd-{port}")
    os.makedirs(tmp, exist_ok=True)
    path = ws.path(f"lighttpd-{port}.conf")
    modules, ssl_lines = "", ""
    if tls:
        cert, key = ws.tls_files()
        modules = '"mod_openssl"'
        ssl_lines = (f'ssl.engine = "enable"\nssl.pemfile = "{cert}"\nssl.privkey = "{key}"\n'
                     'ssl.openssl.ssl-conf-cmd = ("MinProtocol" => "TLSv1.2")\n')
    with open(path, "w") as f:
        f.write(f'''server.modules = ({modules})
{ssl_lines}
server.document-root = "{ws.docroot}"
server.bind = "{HOST}"
server.port = {port}
server.pid-file = "{tmp}/lighttpd.pid"
server.errorlog = "{tmp}/error.log"
server.max-worker = 0
server.max-fds = 50000
server.max-connections = 20000
server.max-keep-alive-requests = 65535
server.max-keep-alive-idle = 300
server.network-backend = "sendfile"
server.stat-cache-engine = "simple"
mimetype.assign = (".html" => "text/html", ".bin" => "application/octet-stream")
''')
    return path


# The HTTPS form of a server kind ("tern-tls", "nginx-tls", "tern-tls-uring"):
# the same, on an address that speaks TLS with ws.tls_files() (and HTTP/2 by
# ALPN beside HTTP/1.1).
TLS = "-tls"
# The form that speaks HTTP/2 with prior knowledge on a plain address (h2c):
# beside HTTP/1.1 for tern, h2o and lighttpd; nginx's (listen ... http2)
# speaks only HTTP/2 there.
H2C = "-h2c"

# The peers tern is measured against, beside the floor: each the Debian
# package, configured for the same work.
PEERS = ("nginx", "h2o", "lighttpd")


# The proxies: kind -> server; the -ws ones in front of the upgrade echo server.
# The -cache ones keep the floor's responses in a response cache; the
# floor behind a -100k one answers 100 KiB.
PROXY_KINDS = {"tern-proxy": "tern", "nginx-proxy": "nginx", "tern-ws": "tern", "nginx-ws": "nginx",
               "tern-proxy-cache": "tern", "nginx-proxy-cache": "nginx",
               "tern-proxy-cache-100k": "tern", "nginx-proxy-cache-100k": "nginx"}
CACHED_PROXY_BIG_SIZE = 100 << 10


def proxy_body_size(kind):
    """The size of the floor's answer behind a proxy of `kind`."""
    return CACHED_PROXY_BIG_SIZE if kind.removesuffix(URING).endswith("-100k") else SMALL_SIZE

# The PHP servers: kind -> (server, response cache on).
PHP_KINDS = {"tern-php": ("tern", False), "tern-php-cache": ("tern", True),
             "nginx-php": ("nginx", False), "nginx-php-cache": ("nginx", True)}


def _command(kind, ws, bins, port, backend):
    """(argv, config path) of a server of `kind` listening on `port`;
    `backend`: its php-fpm or its upstream."""
    io = "epoll"
    if kind.endswith(URING):
        kind, io = kind[:-len(URING)], "io_uring"
    tls = kind.endswith(TLS)
    kind = kind.removesuffix(TLS)
    h2c = kind.endswith(H2C)
    kind = kind.removesuffix(H2C)
    fpm = backend
    if kind in PROXY_KINDS:
        cache = "-cache" in kind
        if PROXY_KINDS[kind] == "tern":
            conf = tern_proxy_config(ws, port, backend.port, io, cache=cache)
            return [bins["tern"], "-c", conf], conf
        conf, errlog = nginx_proxy_config(ws, port, backend.port, websocket=kind.endswith("-ws"), cache=cache)
    elif kind in PHP_KINDS:
        server, cache = PHP_KINDS[kind]
        if server == "tern":
            conf = tern_php_config(ws, port, fpm, cache, io)
            return [bins["tern"], "-c", conf], conf
        conf, errlog = nginx_php_config(ws, port, fpm, cache)
    elif kind == "nginx":
        conf, errlog = nginx_config(ws, port, tls=tls, h2c=h2c)
    elif kind == "tern":
        conf = tern_config(ws, port, io, tls, h2c=h2c)
        return [bins["tern"], "-c", conf], conf
    elif kind in AUTH_KINDS:
        if AUTH_KINDS[kind] == "tern":
            conf = tern_config(ws, port, io, extra=auth_site(ws), name=kind)
            return [bins["tern"], "-c", conf], conf
        conf, errlog = nginx_auth_config(ws, port)
    elif kind in LIMIT_KINDS:
        if LIMIT_KINDS[kind] == "tern":
            conf = tern_config(ws, port, io, extra=limit_site(), name=kind)
            return [bins["tern"], "-c", conf], conf
        conf, errlog = nginx_limit_config(ws, port)
    elif kind in METRICS_KINDS:
        conf = tern_config(ws, port, io, extra=metrics_site(METRICS_KINDS[kind]), name=kind)
        return [bins["tern"], "-c", conf], conf
    elif kind == "h2o":
        conf = h2o_config(ws, port, tls)
        return ["h2o", "-c", conf], conf
    elif kind == "lighttpd":
        conf = lighttpd_config(ws, port, tls)
        return ["lighttpd", "-D", "-f", conf], conf
    elif kind == "floor":
        return [bins["floor"], str(port), str(SMALL_SIZE)], None
    elif kind == "floor-hello":
        return [bins["floor"], str(port), str(len(HELLO_BODY))], None
    elif kind == "floor-file-100k":
        return [bins["floor"], str(port), "--file", ws.cached_body_file()], None
    elif kind == "hello":
        return [bins["hello"], "--port", str(port), "--threads", "0", "--io", io], None
    else:
        raise ValueError(kind)
    return ["nginx", "-c", conf, "-e", errlog, "-p", ws.dir, "-g", "daemon off;"], conf


def start_upstream(ws, name, argv_for_port, what):
    """An upstream of the proxy `name`: `what` ("floor", "upgrade echo"),
    started with argv_for_port(port) on a fresh port, ready when it listens."""
    port = free_port()
    upstream = Server(f"{what} (upstream of {name})", argv_for_port(port), port,
                      ws.path(f"{what.replace(' ', '-')}-{name}.out"))
    try:
        upstream.wait_ready()
    except Exception:
        upstream.stop()
        raise
    return upstream


def start(kind, ws, bins):
    """Start one server of `kind` on a fresh port and wait until it listens.

    kind: tern | nginx | h2o | lighttpd | floor (1 KiB body) | hello (tern's
    hello_http) | floor-hello | floor-file-100k (a file's 100 KiB by sendfile)
    | one of PHP_KINDS (started after a php-fpm of its own, its `backend`);
    tern's kinds + URING: the same on io_uring.
    bins: paths of the built binaries (tern, hello_http, floor_server, php-fpm)."""
    port = free_port()
    log = ws.path(f"{kind}-{port}.log")
    php = kind.removesuffix(URING) in PHP_KINDS
    proxy = kind.removesuffix(URING) in PROXY_KINDS
    fpm = None
    if php:
        fpm = start_php_fpm(ws, f"{kind}-{port}", bins["php-fpm"])
    elif proxy and kind.removesuffix(URING).endswith("-ws"):
        fpm = start_upstream(ws, f"{kind}-{port}", lambda p: [bins["echo"], str(p)], "upgrade echo")
    elif proxy:
        size = proxy_body_size(kind)
        fpm = start_upstream(ws, f"{kind}-{port}", lambda p: [bins["floor"], str(p), str(size)], "floor")
    try:
        argv, conf = _command(kind, ws, bins, port, fpm)
        server = Server(kind, argv, port, log, conf)
        server.tls = kind.removesuffix(URING).endswith(TLS)
        server.h2c = kind.removesuffix(URING).endswith(H2C)
    except BaseException:
        if fpm is not None:
            fpm.stop()
        raise
    server.backend = fpm
    try:
        server.wait_ready()
    except Exception:
        server.stop()
        raise
    return server


def http_get(port, path, timeout=5.0, tls=False):
    """One GET on a new connection: (status, body). Used to check each server
    serves what the others serve before anything is measured."""
    status, _, body = http_get_headers(port, path, timeout, tls)
    return status, body


def served_from_cache(headers):
    """Whether a response came from the server's cache: tern's Cache-Status
    (RFC 9211), nginx's $upstream_cache_status in X-Cache."""
    return headers.get("cache-status", "").startswith("tern; hit") or headers.get("x-cache") == "HIT"


def http_get_headers(port, path, timeout=5.0, tls=False, fields=()):
    """One GET on a new connection (over TLS, checking no certificate), with
    `fields` ("Name: value") beside Host: (status, {lower-case name:
    value}, body). Host names the port, as wrk's does: a response cache may
    key on it."""
    with socket.create_connection((HOST, port), timeout=timeout) as raw:
        s = raw
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            s = context.wrap_socket(raw)
        extra = "".join(f"{field}\r\n" for field in fields)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\n{extra}\r\n".encode())
        return read_response(s, with_headers=True)


def read_response(sock, with_headers=False):
    """Read one HTTP/1.1 response from a socket: (status, body), or (status,
    headers, body). The body has a Content-Length or is chunked (PHP's)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the response header")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    reader = _Reader(sock, rest)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _read_chunked(reader)
    else:
        body = reader.read(int(headers.get("content-length", 0)))
    return (status, headers, body) if with_headers else (status, body)


class _Reader:
    """Exact reads from a socket, starting with bytes already received."""

    def __init__(self, sock, data):
        self.sock, self.data = sock, data

    def read(self, n):
        while len(self.data) < n:
            chunk = self.sock.recv(min(65536, n - len(self.data)))
            if not chunk:
                raise ConnectionError("connection closed inside the response body")
            self.data += chunk
        out, self.data = self.data[:n], self.data[n:]
        return out

    def line(self):
        while b"\r\n" not in self.data:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("connection closed inside a chunked body")
            self.data += chunk
        out, _, self.data = self.data.partition(b"\r\n")
        return out


def _read_chunked(reader):
    body = b""
    while True:
        size = int(reader.line().split(b";")[0], 16)
        if size == 0:
            while reader.line():  # trailers, up to the empty line
                pass
            return body
        body += reader.read(size)
        reader.read(2)  # CRLF after the chunk

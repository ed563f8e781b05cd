"""What scripts/run works out from the arguments it passes on to tern: the
addresses it says it serves and the workers it sizes php-fpm for
(scripts/lib/run_args.sh; building and serving is left to scripts/run)."""

import os
import subprocess

import pytest

from tern_server import REPO_ROOT


def parse(*args):
    script = ('source scripts/lib/run_args.sh; parse_run_args "$@"; '
              'echo "own=$RUN_OWN_CONFIG"; echo "workers=$RUN_WORKERS"; printf "url=%s\\n" "${RUN_URLS[@]}"')
    out = subprocess.run(["bash", "-c", script, "run", *args], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=30, check=True).stdout
    lines = out.splitlines()
    return {"own": lines[0][4:], "workers": int(lines[1][8:]), "urls": [l[4:] for l in lines[2:]]}


def test_default_is_port_8080_and_a_worker_per_cpu():
    got = parse()
    assert got["urls"] == ["http://127.0.0.1:8080"]
    assert got["workers"] == len(os.sched_getaffinity(0)) or got["workers"] == os.cpu_count()
    assert got["own"] == ""


@pytest.mark.parametrize("args,urls", [
    (["--listen", "127.0.0.1:9000"], ["http://127.0.0.1:9000"]),
    (["--listen=0.0.0.0:80"], ["http://0.0.0.0:80"]),
    (["--listen", "[::1]:8443", "--listen", "*:8081"], ["http://[::1]:8443", "http://0.0.0.0:8081"]),
    (["--listen", "127.0.0.1:8443 tls"], ["https://127.0.0.1:8443"]),
], ids=["separate", "equals", "two", "tls"])
def test_listen_addresses_are_the_ones_announced(args, urls):
    assert parse(*args)["urls"] == urls


def test_workers_flag_sizes_php_fpm_and_a_config_of_ones_own_is_noticed():
    assert parse("--workers", "3")["workers"] == 3
    assert parse("--workers=5")["workers"] == 5
    assert parse("-c", "x.toml")["own"] == "1"

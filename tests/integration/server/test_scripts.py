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


def packages(array):
    """The Debian packages of an array in scripts/lib/common.sh."""
    out = subprocess.run(["bash", "-c", f'source scripts/lib/common.sh; printf "%s\\n" "${{{array}[@]}}"'],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True).stdout
    return set(out.split())


def test_readme_building_by_hand_names_what_the_scripts_install_to_build():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Building by hand", 1)[1].split("\n## ", 1)[0]
    command = section.split("```sh", 1)[1].split("```", 1)[0]
    install = command.split("cmake --preset", 1)[0].replace("\\\n", " ")
    named = set(install.split()) - {"sudo", "apt-get", "install"}
    # What scripts/run needs beyond building: python3 and openssl (the
    # demo's certificate), wrk (the profile-guided build's training run).
    needed = packages("BUILD_PACKAGES") - {"python3", "openssl", "wrk"}
    assert needed - named == set(), "README's Building by hand lacks these"
    # And nothing there that neither script installs.
    assert named - packages("BUILD_PACKAGES") - packages("TEST_PACKAGES") == set()

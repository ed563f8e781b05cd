"""What scripts/run works out from the arguments it passes on to tern: the
addresses it says it serves, the workers it sizes php-fpm for, and the
sizes of its demo config for the descriptor limit it finds
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


def demo_limits(workers, limit):
    script = ('source scripts/lib/run_args.sh; demo_limits "$1" "$2"; '
              'printf "%s\\n---\\n%s\\n" "$DEMO_TOP" "$DEMO_STATIC"')
    out = subprocess.run(["bash", "-c", script, "run", str(workers), str(limit)], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=30, check=True).stdout
    top, static = out.split("---\n")
    return top.strip(), static.strip()


@pytest.mark.parametrize("workers,limit", [(1, 1024), (2, 4096), (4, 20000), (2, 20000)])
def test_the_demo_config_fits_the_descriptor_limit_it_finds(tern_factory, workers, limit):
    """scripts/run's demo (two addresses, PHP with a pool of 4) sized by
    demo_limits starts without tern's warning that the descriptor limit is
    too low for its connections and caches."""
    import resource
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < limit:
        pytest.skip(f"the hard descriptor limit here is below {limit}")
    top, static = demo_limits(workers, limit)
    assert top.startswith("max_connections = ") and static.startswith("[static]\ncache_entries = ")
    connections = int(top.split("= ")[1])
    assert 100 <= connections < 10000
    config = {"workers": workers, "max_connections": connections,
              "static": {"cache_entries": int(static.split("= ")[1])},
              "fastcgi": [{"match": r"\.php$", "pass": "unix:/nonexistent/php.sock", "pool": 4}]}

    def lower_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    srv = tern_factory(config, preexec_fn=lower_limit)
    assert srv.get("/").status in (200, 403, 404)
    assert "descriptors: the limit" not in srv.stderr(), srv.stderr()


def test_the_demo_config_keeps_the_defaults_where_they_fit():
    assert demo_limits(2, 1 << 20) == ("", "")
    assert demo_limits(2, "unlimited") == ("", "")

"""The compose testnet (docker-compose.yml) and the image's entrypoint and health check, without a container engine.

Static checks of what each service may see and publish, and real runs of the scripts the image carries:
deploy/container/entrypoint.sh (file-descriptor limit, subcommand dispatch) and deploy/container/healthcheck.py
(what a container's health check probes). The running network is checked by `make compose-test`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
VALIDATORS = [f"validator-{i}" for i in range(4)]
RUNNERS = ["runner-0", "runner-1"]
ENTRYPOINT = ROOT / "deploy" / "container" / "entrypoint.sh"


def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


def volumes(svc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """target -> (source, mode) of a service's short-syntax volumes."""
    out = {}
    for v in svc.get("volumes", []):
        src, target, *mode = str(v).split(":")
        out[target] = (src, mode[0] if mode else "rw")
    return out


def test_four_validators_and_two_runners_from_one_genesis_service() -> None:
    services = compose()["services"]
    assert set(VALIDATORS + RUNNERS + ["genesis", "demo", "demo-http", "prometheus", "grafana"]) <= set(services)
    assert services["genesis"]["command"] == ["cowboy-compose", "genesis"]
    assert services["genesis"]["environment"]["TESTNET_VALIDATORS"] == "4"
    for name in VALIDATORS:
        assert services[name]["command"] == ["cowboy-compose", "validator"]
    for name in RUNNERS:
        assert services[name]["command"] == ["cowboy-compose", "runner"]
    homes = {volumes(services["genesis"])[f"/homes/{v}"][0] for v in VALIDATORS}
    assert len(homes) == 4  # one volume per validator home


def test_least_privilege_mounts_a_validator_home_only_in_its_validator_and_in_genesis() -> None:
    services = compose()["services"]
    homes = {f"{v}-home" for v in VALIDATORS}
    for name, svc in services.items():
        mounted = {src for src, _ in volumes(svc).values()}
        if name == "genesis":
            assert homes <= mounted
        elif name in VALIDATORS:
            assert mounted == {f"{name}-home"} and volumes(svc)["/data"] == (f"{name}-home", "rw")
        else:
            assert not mounted & homes, name  # runners, the demo, monitoring: no validator key in reach
    for name in RUNNERS:
        v = volumes(services[name])
        assert v["/faucet"] == ("faucet", "ro") and v["/public"] == ("public", "ro")
        assert v["/runner"] == (f"{name}-home", "rw")
    assert volumes(services["demo"]) == {"/faucet": ("faucet", "ro")}


def test_published_ports_bind_loopback_by_default_and_no_ulimits_or_depends_on_conditions() -> None:
    services = compose()["services"]
    for name, svc in services.items():
        for port in svc.get("ports", []):
            m = re.match(r"^\$\{COWBOY_PUBLISH_ADDR:-127\.0\.0\.1\}:\d+:\d+(/udp)?$", port)
            assert m, (name, port)
        assert "ulimits" not in svc, name  # fails outright where the host's hard limit is lower
        deps = svc.get("depends_on", [])
        assert isinstance(deps, list), name  # conditions are ignored by podman-compose 1.0.x: services wait
    for name in VALIDATORS + RUNNERS:
        assert services[name]["environment"]["COWBOY_NOFILE"] == "${COWBOY_NOFILE:-65536}"
    for i, name in enumerate(VALIDATORS):  # cowboy-node testnet --base-port 4000: RPC 4000+10i, QUIC +1
        assert services[name]["ports"] == [f"${{COWBOY_PUBLISH_ADDR:-127.0.0.1}}:{4000 + 10 * i}:{4000 + 10 * i}",
                                           f"${{COWBOY_PUBLISH_ADDR:-127.0.0.1}}:{4001 + 10 * i}:{4001 + 10 * i}/udp"]
    for name in ("runner-0", "runner-1"):
        i = int(name[-1])
        env = services[name]["environment"]
        assert env["RUNNER_VALIDATOR_RPC"] == f"http://validator-{i}:{4000 + 10 * i}"
        assert env["RUNNER_QUIC_ENDPOINT"] == f"validator-{i}:{4001 + 10 * i}"


def test_prometheus_scrapes_every_validator_and_runner_and_grafana_uses_that_prometheus() -> None:
    prom = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: [t for sc in j["static_configs"] for t in sc["targets"]] for j in prom["scrape_configs"]}
    assert jobs["cowboy-validators"] == [f"validator-{i}:{4003 + 10 * i}" for i in range(4)]
    assert jobs["cowboy-runners"] == [f"{r}:9465" for r in RUNNERS]
    services = compose()["services"]
    assert volumes(services["prometheus"])["/etc/prometheus"] == ("./deploy/prometheus", "ro")
    ds = yaml.safe_load((ROOT / "deploy" / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (source,) = ds["datasources"]
    assert source["url"] == "http://prometheus:9090"
    dash = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "cowboy-testnet.json").read_text())
    uids = {t["datasource"]["uid"] for p in dash["panels"] for t in p["targets"]}
    assert uids == {source["uid"]}
    titles = " ".join(p["title"] for p in dash["panels"]).lower()
    for topic in ("block interval", "finality", "view changes", "runners present", "job outcomes", "push latency",
                  "timer fires"):
        assert topic in titles, topic


# ---------------------------------------------------------------------------------------------
# deploy/container/entrypoint.sh


def _entrypoint(tmp_path: Path, *args: str, hard: int = 4096,
                want: str | None = None) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "bin" / "cowboy-node"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text('#!/bin/sh\necho "cowboy-node $* nofile=$(ulimit -Sn)"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}:/usr/bin:/bin"}
    if want is not None:
        env["COWBOY_NOFILE"] = want
    # The hard limit of the container, as the engine would set it; the entrypoint runs as an unprivileged user
    # there and cannot raise it (here: a lower hard limit in the shell that starts it).
    cmd = f'ulimit -Sn 256 && ulimit -Hn {hard} && exec bash "$0" "$@"'
    return subprocess.run(["bash", "-c", cmd, str(ENTRYPOINT), *args], capture_output=True, text=True,
                          timeout=30, env=env, check=False)


def test_entrypoint_raises_the_fd_limit_to_cowboy_nofile(tmp_path: Path) -> None:
    res = _entrypoint(tmp_path, "sh", "-c", "ulimit -Sn", want="2048")
    assert (res.returncode, res.stdout.strip(), res.stderr) == (0, "2048", "")


def test_entrypoint_degrades_to_the_hard_limit_and_says_so(tmp_path: Path) -> None:
    res = _entrypoint(tmp_path, "sh", "-c", "ulimit -Sn", hard=1024)  # default COWBOY_NOFILE=65536
    assert res.returncode == 0 and res.stdout.strip() == "1024"
    assert "file-descriptor limit is 1024, lower than COWBOY_NOFILE=65536" in res.stderr


def test_entrypoint_runs_cowboy_node_subcommands_and_other_programs(tmp_path: Path) -> None:
    assert _entrypoint(tmp_path, "init", "--home", "/data", want="512").stdout.strip() == \
        "cowboy-node init --home /data nofile=512"
    assert _entrypoint(tmp_path, want="512").stdout.strip() == "cowboy-node run --home /data nofile=512"
    assert _entrypoint(tmp_path, "echo", "hello").stdout.strip() == "hello"


@pytest.mark.parametrize("bad", ["abc", "10", "-5", "1e6"])
def test_entrypoint_refuses_a_malformed_cowboy_nofile(tmp_path: Path, bad: str) -> None:
    res = _entrypoint(tmp_path, "echo", "never", want=bad)
    assert res.returncode == 2 and "COWBOY_NOFILE must be a whole number >= 64" in res.stderr
    assert res.stdout == ""


# ---------------------------------------------------------------------------------------------
# deploy/container/healthcheck.py


def _healthcheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cowboy_healthcheck", ROOT / "deploy/container/healthcheck.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_healthcheck_probes_the_node_rpc_only_in_node_containers(tmp_path: Path) -> None:
    hc = _healthcheck()
    node = ["/usr/bin/python3", "/usr/local/bin/cowboy-node", "run", "--home", "/data"]
    runner = ["/usr/bin/python3", "/usr/local/bin/cowboy-runner", "run", "--home=/runner-x"]
    assert hc.program_and_home(node) == ("cowboy-node", "/data")
    assert hc.program_and_home(runner) == ("cowboy-runner", "/runner-x")  # probed with cowboy-runner status
    assert hc.program_and_home(["bash", "/usr/local/bin/cowboy-compose", "genesis"]) is None
    assert hc.program_and_home(["/usr/local/bin/cowboy-node", "init", "--home", "/data"]) is None
    proc = tmp_path / "cmdline"
    proc.write_bytes(b"\0".join(a.encode() for a in runner) + b"\0")
    assert hc.main_argv(proc) == runner
    (tmp_path / "config.toml").write_text('[rpc]\naddr = "0.0.0.0:4020"\n')
    assert hc.rpc_url(str(tmp_path)) == "http://127.0.0.1:4020/health"
    (tmp_path / "config.toml").write_text('[rpc]\naddr = "10.1.2.3:4000"\n')
    assert hc.rpc_url(str(tmp_path)) == "http://10.1.2.3:4000/health"


def test_healthcheck_of_a_runner_container_runs_cowboy_runner_status_not_an_http_probe(tmp_path: Path) -> None:
    # A fake /proc/1/cmdline of a runner, a stub cowboy-runner that records its arguments, and no node anywhere.
    record = tmp_path / "calls"
    stub = tmp_path / "bin" / "cowboy-runner"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> {record}\necho "sessions: 3 up"\n')
    stub.chmod(0o755)
    code = (
        "import sys, pathlib; sys.argv = ['x']; import importlib.util as u;"
        f"s = u.spec_from_file_location('h', {str(ROOT / 'deploy/container/healthcheck.py')!r});"
        "m = u.module_from_spec(s);"
        "s.loader.exec_module(m);"
        "m.main_argv = lambda: ['python3', '/usr/local/bin/cowboy-runner', 'run', '--home', '/runner'];"
        "sys.exit(m.main())"
    )
    env = dict(os.environ, PATH=f"{stub.parent}:{os.environ['PATH']}")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert record.read_text().split("\n")[0] == "status --home /runner"
    stub.write_text("#!/bin/sh\necho 'no session'\nexit 3\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env,
                         check=False)
    assert res.returncode == 1 and "no session" in res.stdout


# ---------------------------------------------------------------------------------------------
# deploy/compose/cowboy-compose.sh genesis, run for real (cowboy-node testnet) into a stand-in for the container's /


def _compose_script(root: Path, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = Path(sys.executable).parent  # this venv's cowboy-node
    return subprocess.run(["bash", str(ROOT / "deploy" / "compose" / "cowboy-compose.sh"), mode], capture_output=True,
                          text=True, timeout=120, check=False,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "COMPOSE_ROOT": str(root), **env})


def test_genesis_service_writes_one_home_per_volume_listening_on_all_interfaces(tmp_path: Path) -> None:
    for d in [*(f"homes/validator-{i}" for i in range(4)), "faucet", "public"]:
        (tmp_path / d).mkdir(parents=True)
    res = _compose_script(tmp_path, "genesis")
    assert res.returncode == 0, res.stdout + res.stderr
    genesis = (tmp_path / "homes" / "validator-0" / "genesis.json").read_bytes()
    summary = json.loads((tmp_path / "public" / "testnet.json").read_text())
    keys = [v["ed25519_public_key"] for v in summary["validators"]]
    for i in range(4):
        home = tmp_path / "homes" / f"validator-{i}"
        assert (home / "genesis.json").read_bytes() == genesis  # one genesis
        assert (home / ".compose-ready").exists() and (home / "keys" / "validator.key").exists()
        assert not (home / "faucet.key").exists()
        cfg = (home / "config.toml").read_text()
        listen = re.findall(r'^addr = "([^"]+)"', cfg, re.M)
        assert listen and all(a.startswith("0.0.0.0:") for a in listen), listen  # rpc, quic, metrics, p2p
        assert f'"0.0.0.0:{4000 + 10 * i}"' in cfg and f'"0.0.0.0:{4002 + 10 * i}"' in cfg
        peers = set(re.findall(r'"(0x[0-9a-f]{64})@(validator-\d):(\d+)"', cfg))
        assert peers == {(keys[j], f"validator-{j}", str(4002 + 10 * j)) for j in range(4) if j != i}
    assert oct((tmp_path / "faucet" / "faucet.key").stat().st_mode & 0o777) == "0o600"
    table = (tmp_path / "public" / "runner-validators.toml").read_text().splitlines()
    assert table == ["[validators]", *(f'"{keys[i]}" = "validator-{i}:{4001 + 10 * i}"' for i in range(4))]
    # A second run never regenerates the network.
    again = _compose_script(tmp_path, "genesis")
    assert again.returncode == 0 and "already generated" in again.stdout
    assert (tmp_path / "homes" / "validator-0" / "genesis.json").read_bytes() == genesis


def test_genesis_service_refuses_a_missing_validator_volume_and_a_validator_gives_up_naming_its_home(
        tmp_path: Path) -> None:
    for d in ["homes/validator-0", "faucet", "public"]:
        (tmp_path / d).mkdir(parents=True)
    res = _compose_script(tmp_path, "genesis")
    assert res.returncode == 1 and "homes/validator-1 is not mounted" in res.stderr
    res = _compose_script(tmp_path, "validator", COMPOSE_WAIT_S="1")
    assert res.returncode == 1
    assert f"gave up after 1s waiting for the genesis service to fill {tmp_path}/data" in res.stderr

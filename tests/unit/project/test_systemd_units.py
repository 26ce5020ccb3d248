"""deploy/systemd/ units: hardened, and accepted by ``systemd-analyze verify`` (where systemd-analyze exists).

The units start /opt/cowboy/venv/bin/...; verify checks that the command is executable, so the check runs on a
copy whose venv path is this checkout's .venv (nothing else changed). ``systemd-analyze security --offline``
scores the sandboxing: both units must stay at or below 2.0 ("OK"; an unhardened service scores 9.6).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNITS = {"cowboy-node.service": "cowboy-node", "cowboy-runner.service": "cowboy-runner"}
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze not installed (Debian: systemd)")
REQUIRED = {
    "NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
    "User": "cowboy", "Group": "cowboy", "CapabilityBoundingSet": "", "KillSignal": "SIGTERM",
}


def directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def _local_copy(tmp_path: Path, name: str, text: str | None = None) -> Path:
    venv = Path(sys.executable).parent.parent
    path = tmp_path / name
    path.write_text((text or (ROOT / "deploy" / "systemd" / name).read_text()).replace("/opt/cowboy/venv", str(venv)))
    return path


def _verify(path: Path) -> str:
    assert ANALYZE is not None
    res = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60, check=False)
    return (f"exit {res.returncode}\n" if res.returncode else "") + res.stdout + res.stderr


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_is_hardened_and_runs_the_daemon_as_a_dedicated_user(name: str) -> None:
    d = directives((ROOT / "deploy" / "systemd" / name).read_text())
    for key, value in REQUIRED.items():
        assert d.get(key) == [value], key
    (exec_start,) = d["ExecStart"]
    program, *args = exec_start.split()
    assert program == f"/opt/cowboy/venv/bin/{UNITS[name]}" and args[0] == "run" and args[1] == "--home"
    (rw,) = d["ReadWritePaths"]
    assert args[2] == rw  # writable: the home, and nothing else
    assert int(d["LimitNOFILE"][0]) >= 16384
    assert d["Restart"] == ["on-failure"]


@needs_analyze
@pytest.mark.parametrize("name", sorted(UNITS))
def test_systemd_analyze_verify_accepts_the_unit(name: str, tmp_path: Path) -> None:
    assert _verify(_local_copy(tmp_path, name)) == ""


@needs_analyze
def test_systemd_analyze_verify_reports_a_broken_unit(tmp_path: Path) -> None:
    text = (ROOT / "deploy" / "systemd" / "cowboy-node.service").read_text()
    assert "Unknown key" in _verify(_local_copy(tmp_path, "typo.service", text.replace("PrivateTmp=", "PrivateTemp=")))
    missing = text.replace("/opt/cowboy/venv/bin/cowboy-node", "/nonexistent/cowboy-node")
    assert "not executable" in _verify(_local_copy(tmp_path, "missing.service", missing))


@needs_analyze
@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_sandbox_exposure_is_ok(name: str, tmp_path: Path) -> None:
    assert ANALYZE is not None
    res = subprocess.run([ANALYZE, "security", "--offline=yes", str(_local_copy(tmp_path, name))],
                         capture_output=True, text=True, timeout=60, check=False)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", res.stdout + res.stderr)
    if m is None:
        pytest.skip(f"not applicable: this systemd-analyze has no offline security check: {res.stderr.strip()[:200]}")
    assert float(m.group(1)) <= 2.0, res.stdout[-3000:]


def test_the_custom_sandbox_drop_in_opens_what_bubblewrap_needs_and_nothing_else() -> None:
    # bwrap (cowboy_runner/executors/sandbox.py) unshares user/mount/pid/ipc/uts/net/cgroup, pivots into a new
    # root and sets up loopback over netlink; the base unit forbids all of that.
    base = directives((ROOT / "deploy" / "systemd" / "cowboy-runner.service").read_text())
    d = directives((ROOT / "deploy" / "systemd" / "cowboy-runner.service.d" / "custom-sandbox.conf").read_text())
    assert base["RestrictNamespaces"] == ["yes"]
    assert set(d["RestrictNamespaces"][0].split()) == {"user", "mnt", "pid", "ipc", "uts", "net", "cgroup"}
    assert "AF_NETLINK" in d["RestrictAddressFamilies"][0].split()
    assert d["SystemCallFilter"][0] == ""  # resets the base unit's deny list (~@privileged) before allowing
    allowed = d["SystemCallFilter"][1].split()
    assert {"@system-service", "@mount", "pivot_root", "unshare"} <= set(allowed)
    assert not set(d) - {"RestrictNamespaces", "RestrictAddressFamilies", "SystemCallFilter"}


@needs_analyze
def test_systemd_analyze_verify_accepts_the_unit_with_the_drop_in(tmp_path: Path) -> None:
    unit = _local_copy(tmp_path, "cowboy-runner.service")
    drop = unit.parent / "cowboy-runner.service.d"
    drop.mkdir()
    text = (ROOT / "deploy" / "systemd" / "cowboy-runner.service.d" / "custom-sandbox.conf").read_text()
    (drop / "custom-sandbox.conf").write_text(text)
    assert _verify(unit) == ""
    (drop / "custom-sandbox.conf").write_text(text.replace("RestrictNamespaces=", "RestrictNamespace="))
    assert "Unknown key" in _verify(unit)  # the drop-in is really read

"""The hashed lock files (``make lock``) cover pyproject.toml, and ``make install`` / the image use only them.

``requirements-dev.lock`` pins the runtime and test dependencies (what ``make install`` puts in .venv),
``requirements.lock`` the runtime ones (what the image installs). The checker below returns a list of problems;
it runs on the real files (must be empty) and on deliberately broken copies (must name the defect).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[3]
DEV_LOCK = ROOT / "requirements-dev.lock"
RUNTIME_LOCK = ROOT / "requirements.lock"
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})$")


@dataclass(frozen=True)
class Pin:
    """One ``name==version`` entry of a lock file with the sha256 hashes pip will accept for it."""

    name: str
    version: str
    hashes: frozenset[str]


def parse_lock(text: str) -> tuple[dict[str, Pin], list[str]]:
    """Pins by canonical name, and the problems of the file's syntax (anything not pinned ``==`` with hashes)."""
    pins: dict[str, Pin] = {}
    problems: list[str] = []
    logical: list[str] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.endswith("\\"):
            buf += line[:-1].strip() + " "
            continue
        logical.append((buf + line).strip())
        buf = ""
    if buf:
        logical.append(buf.strip())
    for entry in logical:
        head, *opts = entry.split()
        if head.startswith("-"):
            problems.append(f"option line {entry!r}: a lock holds only pinned requirements")
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", head)
        if not m:
            problems.append(f"{head!r} is not pinned with ==")
            continue
        name = canonicalize_name(m.group(1))
        hashes = frozenset(h.group(1) for o in opts if (h := HASH.match(o)))
        if not hashes or len(hashes) != len(opts):
            problems.append(f"{name}: every option must be a --hash=sha256:..., and at least one is needed")
        if name in pins:
            problems.append(f"{name}: pinned twice")
        pins[name] = Pin(name, m.group(2), hashes)
    return pins, problems


def declared(pyproject: dict[str, object], extras: tuple[str, ...]) -> list[Requirement]:
    """The requirements pyproject.toml declares: [project] dependencies plus the named optional extras."""
    project = pyproject["project"]
    assert isinstance(project, dict)
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def coverage_problems(reqs: list[Requirement], pins: dict[str, Pin]) -> list[str]:
    """Every declared requirement is pinned, at a version its specifier admits."""
    problems = []
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req.name}: declared in pyproject.toml but not in the lock (run `make lock`)")
        elif not req.specifier.contains(Version(pin.version), prereleases=True):
            problems.append(f"{req.name}: locked {pin.version} is outside pyproject.toml's {req.specifier}")
    return problems


def subset_problems(runtime: dict[str, Pin], dev: dict[str, Pin]) -> list[str]:
    """The image's runtime lock pins the same versions and hashes as the dev lock that the tests ran with."""
    problems = []
    for name, pin in runtime.items():
        other = dev.get(name)
        if other is None:
            problems.append(f"{name}: in requirements.lock but not in requirements-dev.lock")
        elif other.version != pin.version:
            problems.append(f"{name}: {pin.version} in requirements.lock, {other.version} in requirements-dev.lock")
        elif other.hashes != pin.hashes:
            problems.append(f"{name}: hashes differ between the two locks")
    return problems


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _lock(path: Path) -> dict[str, Pin]:
    pins, problems = parse_lock(path.read_text())
    assert problems == [], (path.name, problems)
    return pins


def test_dev_lock_pins_every_runtime_and_test_dependency_with_hashes() -> None:
    assert coverage_problems(declared(_pyproject(), ("test",)), _lock(DEV_LOCK)) == []


def test_runtime_lock_pins_every_runtime_dependency_and_agrees_with_the_dev_lock() -> None:
    runtime = _lock(RUNTIME_LOCK)
    assert coverage_problems(declared(_pyproject(), ()), runtime) == []
    assert subset_problems(runtime, _lock(DEV_LOCK)) == []
    assert "pytest" not in runtime and "mypy" not in runtime  # the image carries no test tools


def test_dev_lock_is_closed_under_the_dependencies_of_what_it_pins() -> None:
    # pip --require-hashes refuses a lock that misses a transitive dependency, but only at install time; the
    # installed packages' metadata says what each locked package needs. Checked for every locked package whose
    # installed version is the locked one (`make install` installs exactly those).
    pins = _lock(DEV_LOCK)
    checked = 0
    missing: list[str] = []
    for pin in pins.values():
        try:
            dist = metadata.distribution(pin.name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != pin.version:
            continue
        checked += 1
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if canonicalize_name(req.name) not in pins:
                missing.append(f"{pin.name} needs {req.name}")
    assert missing == []
    assert checked >= len(pins) // 2, "most locked packages should be installed at their locked version"


def test_lock_checks_catch_broken_locks() -> None:
    good = DEV_LOCK.read_text()
    pins, _ = parse_lock(good)
    reqs = declared(_pyproject(), ("test",))
    aiohttp = re.search(r"^aiohttp==\S+ \\\n(?:    --hash=\S+ \\\n)*    --hash=\S+\n", good, re.M)
    assert aiohttp is not None
    cases = {
        good.replace(aiohttp.group(0), ""): "aiohttp: declared in pyproject.toml but not in the lock",
        good.replace(f"aiohttp=={pins['aiohttp'].version}", "aiohttp==3.0.0"): "outside pyproject.toml's",
        good.replace(f"aiohttp=={pins['aiohttp'].version}", "aiohttp>=3.9"): "is not pinned with ==",
        good + "--extra-index-url https://example.invalid/simple\n": "option line",
        good + "six==1.16.0\n": "six: every option must be a --hash",
        good + aiohttp.group(0): "aiohttp: pinned twice",
    }
    for text, expected in cases.items():
        got, problems = parse_lock(text)
        problems += coverage_problems(reqs, got)
        assert any(expected in p for p in problems), (expected, problems)
    bumped = dict(pins, aiohttp=Pin("aiohttp", "0.1", pins["aiohttp"].hashes))
    assert subset_problems(pins, bumped) == [f"aiohttp: {pins['aiohttp'].version} in requirements.lock, "
                                             "0.1 in requirements-dev.lock"]
    assert subset_problems(pins, {k: v for k, v in pins.items() if k != "yarl"}) == [
        "yarl: in requirements.lock but not in requirements-dev.lock"]
    rehashed = dict(pins, yarl=Pin("yarl", pins["yarl"].version, frozenset({"0" * 64})))
    assert subset_problems(pins, rehashed) == ["yarl: hashes differ between the two locks"]


def test_make_install_and_the_image_install_only_from_the_locks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"pip install \$\(PIP_FLAGS\) --require-hashes -r \$\(DEV_LOCK\)", makefile)
    assert re.search(r"pip install \$\(PIP_FLAGS\) --no-deps -e \.", makefile)
    assert "pip-compile" in makefile and "--generate-hashes" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--require-hashes -r requirements.lock" in dockerfile
    assert re.search(r"pip install [^\n]*--no-deps [^\n]*\.", dockerfile)


def test_make_lock_resolves_the_dev_lock_first_then_constrains_the_runtime_lock_by_it() -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("GNU make not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run([make, "-n", "-C", str(ROOT), "lock", "LOCK_VENV=/nonexistent/lockvenv"],
                         capture_output=True, text=True, timeout=60, check=True, env=env).stdout
    dev = out.index("--extra test -o requirements-dev.lock pyproject.toml")
    runtime = out.index("-c requirements-dev.lock")
    assert dev < runtime and "-o requirements.lock pyproject.toml" in out[runtime:]
    assert "--generate-hashes" in out and "--upgrade" not in out
    assert "pip-tools==7.6.2" in out  # a pinned pip-tools, in its own venv
    upgraded = subprocess.run([make, "-n", "-C", str(ROOT), "lock", "UPGRADE=1", "LOCK_VENV=/nonexistent/lockvenv"],
                              capture_output=True, text=True, timeout=60, check=True, env=env).stdout
    assert upgraded.count("--upgrade") == 1  # only the dev lock resolves anew; the runtime lock follows it

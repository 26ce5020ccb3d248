"""Under .ci/run (COWBOY_CI=1) a skipped test fails unless it is opt-in by design or not applicable here
(tests/skip_policy.py, issue 35): run on a sample module in a separate pytest with the policy's hooks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skip_policy import CI_ENV, ci_failure

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = '''
import pytest

def test_missing_package():
    pytest.skip("bwrap not found (install the bubblewrap package)")

@pytest.mark.skipif(True, reason="no Chromium binary on PATH")
def test_missing_package_marker():
    pass

def test_opt_in():
    pytest.skip("opt-in: make test-sdk-e2e (COWBOY_SDK_E2E=1)")

@pytest.mark.skipif(True, reason="not applicable: compares with CPython's own Unicode 14.0.0 tables")
def test_not_applicable():
    pass

@pytest.mark.xfail(reason="an expected failure is not a skip")
def test_xfail():
    assert False

def test_passes():
    pass
'''


def _outcomes(tmp_path: Path, ci: str | None) -> dict[str, str]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != CI_ENV}
    if ci is not None:
        env[CI_ENV] = ci
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.skip_policy", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "-rA", "-q", "--rootdir", str(tmp_path), str(tmp_path / "test_sample.py")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    found = re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL)\b.*?::(test_\w+)", done.stdout, re.M)
    out = {name: kind for kind, name in found}
    skipped = len(re.findall(r"^SKIPPED ", done.stdout, re.M))
    out["_skipped"] = str(skipped)
    return out


def test_the_suite_uses_the_policy(pytestconfig: pytest.Config) -> None:
    import tests.skip_policy as policy
    conftest = next(p for p in pytestconfig.pluginmanager.get_plugins()
                    if getattr(p, "__file__", "").endswith(os.path.join("tests", "conftest.py")))
    assert conftest.pytest_runtest_makereport is policy.pytest_runtest_makereport
    assert conftest.pytest_make_collect_report is policy.pytest_make_collect_report


def test_in_ci_a_skip_for_something_missing_fails_and_by_design_skips_stay(tmp_path: Path) -> None:
    out = _outcomes(tmp_path, "1")
    assert out["test_missing_package"] == "FAILED"
    assert out["test_missing_package_marker"] == "ERROR"  # a skipif marker is evaluated in setup
    assert out["test_passes"] == "PASSED" and out["test_xfail"] == "XFAIL"
    assert out["_skipped"] == "2"  # opt-in and not applicable


def test_outside_ci_every_skip_is_a_skip(tmp_path: Path) -> None:
    out = _outcomes(tmp_path, None)
    assert "test_missing_package" not in out and "test_missing_package_marker" not in out
    assert out["_skipped"] == "4"


def test_the_failure_names_the_reason_and_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CI_ENV, "1")
    text = ci_failure("Skipped: bwrap not found")
    assert text is not None and "bwrap not found" in text and "tests/skip_policy.py" in text
    assert ci_failure("Skipped: opt-in: make e2e-faults (FAULTS_FULL=1)") is None
    assert ci_failure("Skipped: no container engine/image here: opt-in: make test-runner-ops") is None
    monkeypatch.delenv(CI_ENV)
    assert ci_failure("Skipped: bwrap not found") is None


def test_ci_run_installs_the_packages_then_tests_every_interpreter_and_the_suite_under_the_policy() -> None:
    text = (ROOT / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for package in ("prometheus", "bubblewrap", "chromium", "libleveldb-dev"):
        assert f" {package}\"" in text, package
    assert lines.index("export COWBOY_CI=1") < lines.index("make test-pythons") < lines.index("exec make test")


def test_make_test_pythons_builds_a_venv_per_interpreter_and_runs_the_pvm_tests_and_the_audit() -> None:
    import shutil
    make = shutil.which("make")
    assert make is not None  # .ci/run and every developer entry point are make targets
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run([make, "-n", "-C", str(ROOT), "test-pythons", "TEST_PYTHONS=3.98 3.99",
                          "PYTHON_3.98=/opt/py/python3.98", "PYTHON_3.99=/opt/py/python3.99"],
                         capture_output=True, text=True, timeout=60, check=True, env=env).stdout
    for v in ("3.98", "3.99"):
        assert f"/opt/py/python{v} -m venv .venv-{v}" in out
        assert f".venv-{v}/bin/python -m pip install --disable-pip-version-check -q --require-hashes" in out
    assert "tests/unit/execution/pvm/test_pvm_*.py tests/unit/execution/test_determinism*.py" in out
    assert "scripts/pvm_interpreter_audit.py --check" in out and ".venv-3.98/bin/python .venv-3.99/bin/python" in out

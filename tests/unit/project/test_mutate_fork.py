"""``scripts/mutate_fork.py`` (issue 31 §2, docs/testing.md "Runtime"): a mutant's pytest runs in a fork of a
server that preloaded the libraries and the tree's modules that do not import the mutated one. It must never hand
a child the unmutated module (a false survivor), never outlive a killed client, and never turn a missing server
into a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.unit.project.script_loader import SCRIPTS, load_script

fork = load_script("mutate_fork")

PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=", "tests/test_t.py"]


def _tree(tmp_path: Path, other: str = "from pkg.base import ONE\n") -> dict[str, str]:
    """pkg/target.py (mutated below), pkg/user.py (imports it), pkg/other.py and pkg/base.py (do not)."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "base.py").write_text("ONE = 1\n")
    (tmp_path / "pkg" / "target.py").write_text("from .base import ONE\n\n\ndef f():\n    return ONE\n")
    (tmp_path / "pkg" / "user.py").write_text("from . import target\n\n\ndef g():\n    return target.f() + 1\n")
    (tmp_path / "pkg" / "other.py").write_text(other)
    (tmp_path / "pkg2").mkdir()  # a package whose __init__ imports the target, and a leaf that does not
    (tmp_path / "pkg2" / "__init__.py").write_text("from pkg import target\n")
    (tmp_path / "pkg2" / "leaf.py").write_text("TWO = 2\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_t.py").write_text(
        "import os\nimport time\n\nfrom pkg import other, user\nfrom pkg2 import leaf\n\n\n"
        "def test_g():\n    assert user.g() == 2\n\n\n"
        "def test_wait():\n    if os.environ.get('T_WAIT'):\n"
        "        open(os.environ['T_WAIT'], 'w').write(str(os.getpid()))\n        time.sleep(120)\n")
    return dict(os.environ, PYTHONPATH=str(tmp_path))


def _script(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / "mutate_fork.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def _serve(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], Path]:
    sock = tmp_path / "s.sock"
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "mutate_fork.py"), "serve", str(sock),
                             str(tmp_path / "pre.json")], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc, sock


def _stop(proc: subprocess.Popen[str]) -> str:
    """Stop the server; its stderr."""
    proc.terminate()
    return proc.communicate(timeout=30)[1]


def test_the_mutated_module_and_its_importers_are_never_preloaded(tmp_path: Path) -> None:
    env = _tree(tmp_path)
    done = _script(tmp_path, env, "baseline", str(tmp_path / "pre.json"), "pkg/target.py", "--", *PYTEST)
    assert done.returncode == 0, done.stdout + done.stderr
    spec = json.loads((tmp_path / "pre.json").read_text())
    assert spec["target"] == "pkg.target"
    assert {"pkg.target", "pkg.user", "pkg2"} <= set(spec["fresh"])
    assert {"pkg", "pkg.base", "pkg.other", "pytest"} <= set(spec["preload"])
    # pkg2.leaf imports nothing, but importing it runs pkg2/__init__.py, which imports the target
    assert not {n for n in spec["preload"] if n in ("pkg.target", "pkg.user", "pkg2", "pkg2.leaf")
                or n.startswith(("tests", "conftest"))}


def test_dependents_follow_relative_and_submodule_imports() -> None:
    files = {"a": "a/__init__.py", "a.t": "a/t.py", "a.u": "a/u.py", "a.v": "a/v.py", "a.w": "a/w.py"}
    texts = {"a/__init__.py": "", "a/t.py": "X = 1\n", "a/u.py": "from . import t\n",
             "a/v.py": "def h():\n    from a.u import y\n", "a/w.py": "import json\n"}
    edges = {n: fork.imports_of(n, texts[f], f.endswith("__init__.py"), set(files)) for n, f in files.items()}
    assert edges["a.u"] == {"a", "a.t"}                      # `from . import t` is the submodule
    assert edges["a.v"] == {"a", "a.u"}                      # an import inside a function counts too
    assert edges["a.w"] == set()


def test_a_child_imports_the_mutated_file_from_disk_and_its_status_reaches_the_client(tmp_path: Path) -> None:
    env = _tree(tmp_path)
    assert _script(tmp_path, env, "baseline", str(tmp_path / "pre.json"), "pkg/target.py", "--",
                   *PYTEST).returncode == 0
    proc, sock = _serve(tmp_path, env)
    try:
        assert sock.exists()
        assert _script(tmp_path, env, "run", str(sock), "-", "--", *PYTEST).returncode == 0
        target = tmp_path / "pkg" / "target.py"
        original = target.read_text()
        target.write_text(original.replace("return ONE", "return ONE + 1"))  # the mutant
        killed = _script(tmp_path, env, "run", str(sock), "-", "--", *PYTEST)
        assert killed.returncode == 1 and "1 failed" in killed.stdout, killed.stdout + killed.stderr
        target.write_text(original)
        assert _script(tmp_path, env, "run", str(sock), "-", "--", *PYTEST).returncode == 0
    finally:
        _stop(proc)


def test_a_preload_that_imports_the_mutated_module_is_refused(tmp_path: Path) -> None:
    # other.py reaches the target by a dynamic import, which the text-based dependents cannot see
    env = _tree(tmp_path, other="import importlib\n\nimportlib.import_module('pkg.' + 'target')\n")
    assert _script(tmp_path, env, "baseline", str(tmp_path / "pre.json"), "pkg/target.py", "--",
                   *PYTEST).returncode == 0
    assert "pkg.other" in json.loads((tmp_path / "pre.json").read_text())["preload"]
    proc, sock = _serve(tmp_path, env)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 1 and not sock.exists()
    assert "refusing to serve" in err


def test_without_a_server_the_client_runs_the_tests_itself(tmp_path: Path) -> None:
    env = _tree(tmp_path)
    target = tmp_path / "pkg" / "target.py"
    target.write_text(target.read_text().replace("return ONE", "return ONE + 1"))
    done = _script(tmp_path, env, "run", str(tmp_path / "absent.sock"), "-", "--", *PYTEST)
    assert done.returncode == 1 and "1 failed" in done.stdout  # a real failure, not a connection error
    assert "unavailable" in done.stdout


def test_a_killed_client_takes_its_run_with_it(tmp_path: Path) -> None:
    env = _tree(tmp_path)
    assert _script(tmp_path, env, "baseline", str(tmp_path / "pre.json"), "pkg/target.py", "--",
                   *PYTEST).returncode == 0
    proc, sock = _serve(tmp_path, env)
    marker = tmp_path / "pid"
    try:
        client = subprocess.Popen([sys.executable, str(SCRIPTS / "mutate_fork.py"), "run", str(sock), "-", "--",
                                   *PYTEST], cwd=tmp_path, env=dict(env, T_WAIT=str(marker)),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60  # the test writes its pid, then sleeps 120 s: hold that state
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(marker.read_text())
        client.send_signal(signal.SIGKILL)  # as cosmic-ray does at its timeout
        client.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the run outlived its client")
    finally:
        _stop(proc)

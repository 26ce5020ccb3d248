"""``scripts/mutate_select.py`` (issue 31 §2, docs/testing.md "Runtime"): a mutant runs first against the tests that
call the function it mutates, under a time budget, and against the whole list only when those pass — so a
selection can make a kill sooner but never decides a survival."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.project.script_loader import SCRIPTS, load_script

sel = load_script("mutate_select")

SOURCE = '''TABLE = [1, 2]


def double(x):
    return 2 * x


@staticmethod
def neg(x):
    def inner(y):
        return -y
    return inner(x)


def unused(x):
    return x + 1


def spin(x):
    return x


BUILT = double(1)
'''


def test_changed_lines_are_numbered_in_the_original() -> None:
    a = "a\nb\nc\nd\n"
    assert sel.changed_lines(a, "a\nB\nc\nd\n") == {2}
    assert sel.changed_lines(a, "a\nc\nd\n") == {2}            # removed
    assert sel.changed_lines(a, "a\nb\nx\ny\nd\n") == {3}      # one line became two
    assert sel.changed_lines(a, a) == set()


def test_a_line_belongs_to_its_innermost_function_decorators_included() -> None:
    spans = sel.function_spans(SOURCE)
    assert sel.innermost(5, spans) == (4, 5)
    assert sel.innermost(8, spans) == (8, 12)                  # the decorator line
    assert sel.innermost(11, spans) == (10, 11)                # nested: the inner function
    assert sel.innermost(12, spans) == (8, 12)
    assert sel.innermost(1, spans) is None                     # module level


def test_selection_picks_the_callers_of_the_mutated_function_and_everything_for_module_code() -> None:
    doc = {"source": SOURCE, "order": ["t::a", "t::b", "t::c"],
           "tests": {"4": ["*"], "8": ["t::c", "t::a"], "10": ["t::b"]}}
    assert sel.selection(doc, SOURCE.replace("return -y", "return y")) == ["t::b"]
    assert sel.selection(doc, SOURCE.replace("return inner(x)", "return x")) == ["t::a", "t::c"]  # in order
    assert sel.selection(doc, SOURCE.replace("return x + 1", "return x + 2")) == []   # nobody calls it
    assert sel.selection(doc, SOURCE.replace("2 * x", "3 * x")) is None               # the import called it
    assert sel.selection(doc, SOURCE.replace("[1, 2]", "[1, 3]")) is None             # module level


def _package(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text(SOURCE.replace("@staticmethod\n", "# no decorator\n"))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_m.py").write_text(
        "from pkg.m import double, neg, spin\n\n\n"
        "def test_double():\n    assert double(2) == 4\n\n\n"
        "def test_neg():\n    assert neg(3) == -3\n\n\n"
        "def test_spin():\n    assert spin(1) == 1\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path), MUTATE_SELECT_SLACK_S="2")
    return tmp_path / "map.json", env


PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=", "tests/test_m.py"]


def _run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPTS / "mutate_select.py"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_recorded_map_names_each_functions_callers(tmp_path: Path) -> None:
    path, env = _package(tmp_path)
    done = _run(tmp_path, env, "record", str(path), "pkg/m.py", json.dumps(["tests/test_m.py"]), "--", *PYTEST)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(path.read_text())
    assert doc["order"] == ["tests/test_m.py::test_double", "tests/test_m.py::test_neg", "tests/test_m.py::test_spin"]
    assert doc["tests"]["9"] == ["tests/test_m.py::test_neg"]        # neg (line 8 is a comment here)
    assert doc["tests"]["10"] == ["tests/test_m.py::test_neg"]       # its inner function
    assert doc["tests"]["4"] == ["*"]                                # double: the import calls it
    assert "15" not in doc["tests"]                                  # unused: nobody
    assert set(doc["seconds"]) == set(doc["order"])


def test_a_killed_mutant_runs_only_its_selection_and_a_survivor_the_whole_list(tmp_path: Path) -> None:
    path, env = _package(tmp_path)
    assert _run(tmp_path, env, "record", str(path), "pkg/m.py", json.dumps(["tests/test_m.py"]), "--",
                *PYTEST).returncode == 0
    m = tmp_path / "pkg" / "m.py"
    original = m.read_text()
    m.write_text(original.replace("return -y", "return y"))
    killed = _run(tmp_path, env, "run", str(path), "--", *PYTEST)
    assert killed.returncode != 0
    assert "1 of 3 tests first" in killed.stdout and "1 failed" in killed.stdout
    assert "the whole list" not in killed.stdout
    m.write_text(original.replace("return x + 1", "return x + 2"))  # a function nobody calls
    survived = _run(tmp_path, env, "run", str(path), "--", *PYTEST)
    assert survived.returncode == 0
    assert "the whole list" in survived.stdout and "3 passed" in survived.stdout


def test_a_selection_over_its_budget_is_a_timeout_kill(tmp_path: Path) -> None:
    path, env = _package(tmp_path)
    assert _run(tmp_path, env, "record", str(path), "pkg/m.py", json.dumps(["tests/test_m.py"]), "--",
                *PYTEST).returncode == 0
    m = tmp_path / "pkg" / "m.py"
    m.write_text(m.read_text().replace("def spin(x):\n    return x", "def spin(x):\n    while True:\n        pass"))
    done = _run(tmp_path, env, "run", str(path), "--", *PYTEST)
    assert done.returncode == 3
    assert sel.TIMEOUT_MARKER in done.stdout


def test_mutate_counts_a_selection_timeout_in_the_timeout_column(tmp_path: Path) -> None:
    mutate = load_script("mutate")
    (tmp_path / "m.py").write_text("x = 1\n")
    module = mutate.Module("tiny", "m.py", ("t.py",))
    dump = "\n".join(json.dumps([{"mutations": [{"operator_name": "op", "occurrence": i, "start_pos": [1, 4]}]},
                                 {"worker_outcome": "normal", "test_outcome": "killed", "diff": "", "output": out}])
                     for i, out in enumerate([f"...\n{sel.TIMEOUT_MARKER}\n", "1 failed"]))
    r = mutate._summarize(module, tmp_path, dump, 1.0, 1.0, tmp_path, 120.0, 1)
    assert (r["mutants"], r["killed"], r["timeout"]) == (2, 2, 1)

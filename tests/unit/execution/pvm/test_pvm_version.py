"""genesis.json records the PVM version; a node refuses a version it does not implement, naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.chain.genesis import parse_genesis
from cowboy_node.cli import main as cli
from cowboy_node.execution.pvm import grammar, unicode_tables
from cowboy_node.execution.pvm.version import PINS, PVM_VERSION, SUPPORTED_PVM_VERSIONS
from tests.helpers import make_dev_genesis
from tests.unit.node_harness import make_node


def _doc() -> dict:  # type: ignore[type-arg]
    return json.loads(make_dev_genesis().genesis.raw)


def test_new_genesis_records_the_current_version() -> None:
    doc = _doc()
    assert doc["pvm_version"] == PVM_VERSION == 1
    assert parse_genesis(json.dumps(doc).encode()).pvm_version == 1


def test_absent_version_means_version_1() -> None:
    doc = _doc()
    del doc["pvm_version"]
    assert parse_genesis(json.dumps(doc).encode()).pvm_version == 1


@pytest.mark.parametrize(("value", "fragment"), [(2, "PVM version 2 is not implemented by this node"),
                                                 (0, "PVM version 0 is not implemented"),
                                                 ("1", "expected an integer"), (True, "expected an integer")])
def test_unimplemented_version_is_refused_naming_the_key(value: object, fragment: str) -> None:
    doc = _doc()
    doc["pvm_version"] = value
    with pytest.raises(ConfigError) as e:
        parse_genesis(json.dumps(doc).encode(), "genesis.json")
    assert e.value.key == "pvm_version" and fragment in str(e.value)
    assert str(e.value).startswith("genesis.json: pvm_version: ")


def test_version_1_pins_python_3_11_grammar_and_unicode_14() -> None:
    assert sorted(SUPPORTED_PVM_VERSIONS) == [1]
    assert PINS[1]["python_grammar"] == "3.11" and grammar.PYTHON_GRAMMAR == (3, 11)
    assert PINS[1]["unicode"] == unicode_tables.UNICODE_VERSION == "14.0.0"


def test_node_refuses_to_start_on_an_unimplemented_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    assert cli.main(["init", "--home", str(home), "--chain-id", "pvm-test-1"]) == 0
    genesis_path = home / "genesis.json"
    doc = json.loads(genesis_path.read_bytes())
    assert doc["pvm_version"] == 1  # init writes it
    doc["pvm_version"] = 7
    genesis_path.write_text(json.dumps(doc))
    capsys.readouterr()
    assert cli.main(["run", "--home", str(home)]) == 1
    err = capsys.readouterr().err
    assert "genesis.json: pvm_version: PVM version 7 is not implemented by this node (it implements [1])" in err


def test_status_reports_the_chains_pvm_version() -> None:
    assert make_node().api.status()["pvm_version"] == 1


# --- the interpreter a PVM version is validated on -------------------------------------------------------

def test_version_1_runs_on_cpython_3_11_3_12_and_3_13_and_refuses_others() -> None:
    from cowboy_node.execution.pvm.version import interpreter_refusal
    for validated in ((3, 11, 7), (3, 12, 1), (3, 13, 0)):
        assert interpreter_refusal(1, validated) is None, validated
    for other in ((3, 10, 13), (3, 14, 0)):
        why = interpreter_refusal(1, other)
        assert why is not None and "validated on CPython 3.11, 3.12, 3.13 only" in why
        assert f"runs Python {'.'.join(map(str, other))}" in why


def test_node_run_and_replay_refuse_an_unvalidated_interpreter_naming_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from cowboy_node.execution.pvm import version
    home = tmp_path / "home"
    assert cli.main(["init", "--home", str(home), "--chain-id", "pvm-test-2"]) == 0
    # a later startup check fails too, so that a run without the interpreter check stops at once (and fails
    # the message assertion) instead of starting a node
    cfg = home / "config.toml"
    cfg.write_text(cfg.read_text().replace('chain_id = "pvm-test-2"', 'chain_id = "other-chain"'))
    # pretend this interpreter's minor is not among the validated ones
    monkeypatch.setitem(version.VALIDATED_INTERPRETERS, 1, ((3, sys.version_info[1] + 1),))
    capsys.readouterr()
    assert cli.main(["run", "--home", str(home)]) == 1
    err = capsys.readouterr().err
    assert "genesis.json: pvm_version: PVM version 1 is validated on CPython" in err and "run the node on" in err
    assert cli.main(["replay", "--home", str(home)]) == 1
    assert "pvm_version: PVM version 1 is validated on CPython" in capsys.readouterr().err


def test_a_later_cpython_changes_a_builtin_that_the_pvm_pins() -> None:
    # Why the pins (pvm/canon.py) are needed: ``str.splitlines`` with a non-int ``keepends`` raises on 3.11 and
    # returns on 3.12+ in CPython itself; tests/unit/execution/pvm/test_pvm_canon.py checks the PVM refuses it on all.
    import subprocess
    import sys

    from tests.unit.execution.pvm.test_pvm_grammar import _other_pythons
    others = _other_pythons()
    if not others:
        pytest.skip("needs a CPython >= 3.12 (PATH or ~/.pyenv/versions) to compare with")
    code = "try:\n    'a\\nb'.splitlines(None)\n    print('returned')\nexcept TypeError:\n    print('raised')\n"
    outcome = {py: subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=60,
                                  check=True).stdout.strip() for py in [sys.executable, *others]}
    if sys.version_info[:2] == (3, 11):
        assert outcome[sys.executable] == "raised"
    assert {outcome[py] for py in others} == {"returned"}

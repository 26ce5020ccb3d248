"""A refused source's receipt must not depend on the interpreter (docs/pvm.md, "PVM versions").

CPython's parser reports a different *line* on 3.12/3.13 than on 3.11 for some invalid sources
(``scripts/pvm_grammar_fuzz.py``), and its messages are its own text; both would go into the receipt's
``error_code``/``error_message``, which are hashed into the receipts root, so two validators on different
Pythons would disagree. Refusals by the parser/compiler therefore carry line 0 and a fixed message.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from cowboy_node.execution.actors import actor_state as store
from cowboy_node.execution.actors.rejection import rejection_failure
from cowboy_node.execution.pvm import ActorRejected
from cowboy_node.types.receipt import STATUS_FAILED
from tests.unit.execution.actors.test_actors_helpers import make_env

# 3.11's parser puts this refusal on line 2, 3.12's and 3.13's on line 1 (found by the grammar fuzz).
LINE_DIFFERS = 'v = \n[f"'
FIXED = "syntax_error: the source is not valid Python 3.11 (the parser's line is not part of the receipt)"


@pytest.mark.parametrize("rule", ["syntax_error", "unsupported_construct"])
def test_parser_refusals_at_different_lines_give_the_same_receipt(rule: str) -> None:
    a = rejection_failure(ActorRejected(2, rule, "'[' was never closed"))
    b = rejection_failure(ActorRejected(1, rule, "unterminated f-string literal (detected at line 1)"))
    assert (a.code, str(a)) == (b.code, str(b)) == (
        f"actor_rejected:{rule}:0",
        f"{rule}: the source is not valid Python 3.11 (the parser's line is not part of the receipt)")


def test_the_nodes_own_checks_keep_their_line_and_message() -> None:
    f = rejection_failure(ActorRejected(5, "dunder_attribute", "attribute '__class__' is not allowed"))
    assert (f.code, str(f)) == ("actor_rejected:dunder_attribute:5",
                                   "line 5: dunder_attribute: attribute '__class__' is not allowed")


def test_a_source_whose_parser_line_differs_between_pythons_has_one_receipt() -> None:
    env = make_env()
    r, addr = env.deploy(LINE_DIFFERS)
    assert r.status == STATUS_FAILED
    assert (r.error_code, r.error_message) == ("actor_rejected:syntax_error:0", FIXED)
    assert store.get_actor(env.world, addr) is None


def _parser_line(python: str, source: str) -> int:
    code = "import ast, sys\ntry:\n    ast.parse(sys.stdin.read())\nexcept SyntaxError as e:\n    print(e.lineno)\n"
    out = subprocess.run([python, "-c", code], input=source, capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout)


def test_the_example_really_has_interpreter_dependent_lines() -> None:
    # Guards the example above: if CPython stopped disagreeing, the deploy test would prove nothing new.
    from tests.unit.execution.pvm.test_pvm_grammar import _other_pythons
    others = _other_pythons()
    if not others:
        pytest.skip("needs a CPython >= 3.12 (PATH or ~/.pyenv/versions) to compare with")
    assert _parser_line(sys.executable, LINE_DIFFERS) == 2
    assert {_parser_line(py, LINE_DIFFERS) for py in others} == {1}


def test_upgrade_self_to_unparsable_code_has_the_same_receipt_as_a_deploy() -> None:
    from tests.unit.execution.actors.test_sdk_host_functions import LIFECYCLE
    env = make_env()
    _, a = env.deploy(LIFECYCLE)
    r = env.call(a, "upgrade", LINE_DIFFERS.encode())
    assert r.error_code == "actor_rejected:syntax_error:0"
    # the suffix is the line of the *calling* actor's upgrade_self call: the node's own, deterministic
    assert r.error_message is not None and r.error_message.startswith(FIXED + " at line ")


def test_the_cli_shows_this_machines_parser_line_beside_a_line_0_receipt() -> None:
    from cowboy_node.cli.actor_commands import _parser_detail
    source = "def ok(p):\n    return p\n\ndef bad(p)\n    return p\n"
    detail = _parser_detail({"error_code": "actor_rejected:syntax_error:0"}, source)
    assert detail is not None and detail.startswith("line 4: syntax_error: ")
    assert _parser_detail({"error_code": "actor_rejected:import_not_allowed:1"}, "import os\n") is None
    assert _parser_detail({"error_code": "out_of_cycles"}, source) is None

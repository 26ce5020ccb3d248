"""Receipts say why a transaction failed: a deterministic, bounded ``error_message`` (docs/protocol.md §3.1)."""

from __future__ import annotations

from pathlib import Path

from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.types.receipt import MAX_ERROR_MESSAGE_BYTES, STATUS_FAILED
from cowboy_protocol.types.instructions import Transfer
from tests.helpers import ALICE_SK, make_tx, run_under_hash_seeds
from tests.unit.execution.actors.test_actors_helpers import make_env

ROOT = Path(__file__).resolve().parents[3]

NAME_ERROR = "def handler(payload):\n    x = 1\n    return foo\n"
SPIN = "def handler(payload):\n    n = 0\n    while True:\n        n += 1\n"
OBJECT_IN_MESSAGE = "class Thing:\n    pass\n\ndef handler(payload):\n    raise ValueError(Thing())\n"
LONG = "def handler(payload):\n    raise ValueError('é' * 5000)\n"


def test_a_name_error_is_reported_with_its_type_message_and_line() -> None:
    env = make_env()
    _, actor = env.deploy(NAME_ERROR)
    r = env.call(actor, "handler")
    assert r.status == STATUS_FAILED and r.error_code == "handler_error"
    assert r.error_message == "NameError: name 'foo' is not defined at line 3"


def test_out_of_cycles_names_the_line_the_actor_was_running() -> None:
    env = make_env()
    _, actor = env.deploy(SPIN)
    r = env.call(actor, "handler", cycles=200_000)
    assert r.error_code == "out_of_cycles"
    assert r.error_message is not None and r.error_message.startswith("cycles limit 200000 exceeded at line ")
    # The loop is lines 3-4; the charge that runs out is one of them, the same on every run.
    assert r.error_message.rsplit(" ", 1)[1] in {"3", "4"}


def test_an_object_in_an_exception_message_carries_no_memory_address() -> None:
    env = make_env()
    _, actor = env.deploy(OBJECT_IN_MESSAGE)
    r = env.call(actor, "handler")
    assert r.error_code == "handler_error" and r.error_message is not None
    assert r.error_message.startswith("ValueError: ") and r.error_message.endswith(" at line 5")
    assert "0x" not in r.error_message and "/" not in r.error_message


def test_a_huge_exception_message_is_truncated_to_the_fixed_bound() -> None:
    env = make_env()
    _, actor = env.deploy(LONG)
    r = env.call(actor, "handler")
    assert r.error_message is not None and r.error_message.endswith("...")
    assert len(r.error_message.encode("utf-8")) <= MAX_ERROR_MESSAGE_BYTES


def test_a_deploy_syntax_error_names_the_rule_without_the_parsers_line_or_text() -> None:
    env = make_env()
    r, _ = env.deploy("def handler(payload):\n    return (\n")
    assert r.error_code == "actor_rejected:syntax_error:0"
    assert r.error_message == ("syntax_error: the source is not valid Python 3.11 "
                               "(the parser's line is not part of the receipt)")


def test_a_transfer_failure_has_its_message() -> None:
    env = make_env()
    tx = make_tx(ALICE_SK, 0, Transfer(to=b"\x42" * 20, amount=10**30), cycles_limit=100_000, cells_limit=10_000)
    r = execute_transaction(env.world, tx, env.ctx)
    assert r.error_code == "insufficient_balance"
    assert r.error_message == "balance does not cover the amount plus the maximum fee"


_SCRIPT = """
from tests.unit.execution.actors.test_actors_helpers import make_env
from tests.unit.execution.test_receipt_messages import NAME_ERROR, OBJECT_IN_MESSAGE, SPIN
env = make_env()
for src, cycles in ((NAME_ERROR, 2_000_000), (SPIN, 200_000), (OBJECT_IN_MESSAGE, 2_000_000)):
    _, a = env.deploy(src)
    env.call(a, "handler", cycles=cycles)
print("".join(r.hash().hex() for r in env.receipts))
"""


def test_receipt_messages_do_not_depend_on_the_hash_seed() -> None:
    outs = {out.strip() for out in run_under_hash_seeds(_SCRIPT, ("0", "12345"))}
    assert len(outs) == 1

"""No transaction can stop the chain (issue: a JobSubmit halted block production in CIP-11 phases 0/1).

* An unexpected exception while a transaction's instruction runs fails that transaction with the typed
  receipt ``internal_error``: its writes and its effects on the block context are undone, it is still
  charged and its nonce used, the other transactions of the block are unaffected, and a follower that
  re-executes the block computes the same roots.
* An unexpected exception outside the instruction (the checks before it) leaves the candidate out of the
  block instead of failing the block.
* The producer survives an exception from ``produce_block`` and tries again at the next slot.
* The node logs every internal error with the transaction hash and counts it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import verify_and_prepare
from cowboy_node.crypto import bls
from cowboy_node.execution import transactions
from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.execution.system_state import get_account
from cowboy_node.node.node import Node
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.block import Round
from cowboy_node.types.presence import encode_presence
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Event
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_SK, BOB, FEE_RECIPIENT, hand_seeds_due, make_dev_genesis, transfer
from tests.unit.node_harness import BOB as HARNESS_BOB
from tests.unit.node_harness import Nonces, make_node

POISON = bytes.fromhex("dead") * 10
"""Transfers to this address hit the injected bug."""
POISON_AFTER_WRITES = bytes.fromhex("beef") * 10
"""Transfers to this address write state and touch the block context, then hit the bug."""


@pytest.fixture
def buggy_transfer(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Replace the Transfer executor by one that raises an unexpected exception for the poison recipients."""
    real = transactions.EXECUTORS[Transfer]

    def executor(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter, events: list[Event]) -> None:
        ins = tx.instruction
        assert isinstance(ins, Transfer)
        if ins.to == POISON:
            raise ValueError("seed must be 32 bytes")  # the shape of the phase-0 JobSubmit bug
        if ins.to == POISON_AFTER_WRITES:
            meter.charge_cycles(1000)
            world.set(b"half-written", b"x")
            ctx.jobs_assigned.append(b"\x01" * 32)
            ctx.jobs_finished.append(b"\x02" * 32)
            ctx.events.append("assigned")
            ctx.jobs_per_tx[tx.tx_hash()] = 1
            raise KeyError("bug after writes")
        real(world, tx, ctx, meter, events)

    monkeypatch.setitem(transactions.EXECUTORS, Transfer, executor)
    yield


class Net:
    """A producer chain and a follower that re-executes (verifies) every block."""

    def __init__(self) -> None:
        self.dev = make_dev_genesis()
        self.chain = Chain(MemoryStore(), self.dev.genesis)
        self.follower = Chain(MemoryStore(), self.dev.genesis)

    def block(self, txs: list[Transaction]) -> PreparedBlock:
        chain, key = self.chain, self.dev.validator_key
        rnd = Round(0, chain.height + 1)
        presence = encode_presence(frozenset(), registry_size(chain.world()))
        env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=FEE_RECIPIENT,
                            beacon=sign_beacon(bls.secret_key_from_bytes(key.bls_secret), chain.head.header.round),
                            presence_input=presence, round_=rnd,
                            consumed_seeds=hand_seeds_due(chain, bls.secret_key_from_bytes(key.bls_secret)))
        p = chain.build(txs, env=env, round_=rnd, proposer=ed25519.public_key_from_seed(key.ed25519_seed),
                        sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=False)
        chain.commit(p)
        self.follower.commit(verify_and_prepare(self.follower, p.block))
        assert self.follower.head.header.state_root == chain.head.header.state_root
        return p


def test_an_exception_in_an_instruction_fails_only_that_transaction(buggy_transfer: None) -> None:
    net = Net()
    world = net.chain.world()
    alice_before = get_account(world, ALICE).balance
    bob_before = get_account(world, BOB).balance
    bad = transfer(ALICE_SK, 0, POISON, 5)
    good = transfer(ALICE_SK, 1, BOB, 7)
    p = net.block([bad, good])
    assert p.block.transactions == (bad, good)
    r_bad, r_good = p.result.receipts
    assert (r_bad.status, r_bad.error_code) == (STATUS_FAILED, "internal_error")
    assert (r_good.status, r_good.error_code) == (STATUS_SUCCESS, None)
    assert [h for h, _ in p.result.internal_errors] == [bad.tx_hash()]
    assert "ValueError" in p.result.internal_errors[0][1]
    world = net.chain.world()
    assert get_account(world, POISON).balance == 0  # the failed transfer moved nothing
    assert get_account(world, BOB).balance == bob_before + 7
    # Charged like any failed transaction: both fees paid, both nonces used.
    assert get_account(world, ALICE).balance == alice_before - 7 - int(r_bad.fee_paid) - int(r_good.fee_paid)
    assert int(r_bad.fee_paid) > 0
    assert get_account(world, ALICE).nonce == 2


def test_an_internal_failure_undoes_its_writes_and_its_block_context_effects(buggy_transfer: None) -> None:
    net = Net()
    bad = transfer(ALICE_SK, 0, POISON_AFTER_WRITES, 5)
    p = net.block([bad, transfer(ALICE_SK, 1, BOB, 7)])
    assert p.result.receipts[0].error_code == "internal_error"
    assert p.result.receipts[0].cycles_used >= 1000  # what ran before the bug is still paid for
    assert net.chain.world().get(b"half-written") is None
    assert p.result.jobs_assigned == [] and p.result.jobs_finished == []  # nothing to push or cancel
    assert p.result.receipts[1].error_code is None


def test_an_exception_before_the_instruction_leaves_the_candidate_out(monkeypatch: pytest.MonkeyPatch) -> None:
    net = Net()
    bad = transfer(ALICE_SK, 0, POISON, 5)
    other = transfer(ALICE_SK, 0, BOB, 7)  # same nonce: included once the first is left out
    real = transactions.check_account

    def check_account(tx: Transaction, account: Any) -> None:
        if tx.tx_hash() == bad.tx_hash():
            raise RuntimeError("state decode bug")
        real(tx, account)

    monkeypatch.setattr(transactions, "check_account", check_account)
    p = net.block([bad, other])
    assert p.block.transactions == (other,)
    assert [(t, e.code) for t, e in p.result.rejected] == [(bad, "internal_error")]
    assert [h for h, _ in p.result.internal_errors] == [bad.tx_hash()]
    assert get_account(net.chain.world(), ALICE).nonce == 1


# -- the node -------------------------------------------------------------------------------------------------
def _run_until(node: Node, done: Callable[[], bool], limit_s: float = 30.0) -> None:
    """Run the node until ``done()`` holds (checked every 10 ms), failing after ``limit_s`` seconds."""
    async def main() -> None:
        task = asyncio.create_task(node.run())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        while not done():
            assert loop.time() < deadline, "the node did not get there in time"
            await asyncio.sleep(0.01)
        node.request_stop()
        await asyncio.wait_for(task, 10)

    asyncio.run(main())


def test_the_node_keeps_producing_logs_and_counts_an_internal_error(buggy_transfer: None,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    node = make_node(block_time_ms=50)
    nonces = Nonces()
    bad = nonces.tx(ALICE_SK, Transfer(POISON, 5))
    good = nonces.tx(ALICE_SK, Transfer(HARNESS_BOB, 7))
    node.api.submit_transaction(bad.to_bytes())
    node.api.submit_transaction(good.to_bytes())
    _run_until(node, lambda: node.chain.height >= 4)  # blocks kept coming after the failing transaction
    receipt = node.api.receipt(bad.tx_hash())
    assert receipt is not None and (receipt["status"], receipt["error_code"]) == ("failed", "internal_error")
    good_receipt = node.api.receipt(good.tx_hash())
    assert good_receipt is not None and good_receipt["status"] == "success"
    assert node.metrics.tx_internal_errors._value.get() == 1
    logged = [line for line in capsys.readouterr().out.splitlines() if "internal error" in line]
    assert len(logged) == 1 and bad.tx_hash().hex() in logged[0] and "ValueError" in logged[0], logged


def test_the_producer_survives_a_failing_block_and_retries_at_the_next_slot(monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    node = make_node(block_time_ms=50)
    real_build = node.chain.build
    calls = {"n": 0}

    def build(*args: Any, **kwargs: Any) -> PreparedBlock:
        calls["n"] += 1
        if calls["n"] in (2, 3):
            raise RuntimeError("end of block bug")
        return real_build(*args, **kwargs)

    monkeypatch.setattr(node.chain, "build", build)
    # Blocks, not seconds: a loaded machine runs fewer slots per second. Height 3 needs builds 1, 4 and 5.
    _run_until(node, lambda: node.chain.height >= 3)
    assert node.metrics.block_production_failures._value.get() == 2
    assert calls["n"] >= 5  # the two failing slots were retried at the next slots, and blocks came before and after
    out = capsys.readouterr()
    assert (out.out + out.err).count("block production failed") == 2

"""Per-transaction state transition: validity, charging, refunds, failures."""

from __future__ import annotations

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.block import begin_block, build_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.fees import TRANSFER_CYCLES, TX_BASE_CYCLES
from cowboy_node.execution.system_state import get_account, get_basefee_config, get_basefees, get_burned
from cowboy_node.execution.transactions import ACCOUNT_WRITE_CELLS, execute_transaction
from cowboy_node.execution.validity_errors import TxInvalid
from cowboy_node.types.account import account_key
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS
from cowboy_protocol.types.instructions import UpdateBasefeeConfig
from cowboy_protocol.types.params import BasefeeConfig
from tests.helpers import ALICE, ALICE_FUNDS, BOB, BOB_SK, CHAIN_ID, FEE_RECIPIENT, make_tx, transfer

BF = 100_000  # initial basefee for both resources


def _env(height: int = 1) -> BlockEnv:
    return BlockEnv(chain_id=CHAIN_ID, height=height, timestamp_ms=1, fee_recipient=FEE_RECIPIENT,
                    beacon=b"", parent_beacon=b"")


def test_transfer_moves_amount_charges_used_fee_and_bumps_nonce(chain: Chain) -> None:
    world = chain.world()
    ctx = begin_block(world, _env())
    tx = transfer(bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"), 0, BOB, 12345)
    r = execute_transaction(world, tx, ctx)
    assert r.status == STATUS_SUCCESS and r.error_code is None
    assert r.cycles_used == TX_BASE_CYCLES + TRANSFER_CYCLES
    # cells: tx body carried + sender account update + the two account writes of the transfer
    acct_write = len(account_key(ALICE)) + len(get_account(world, ALICE).encode())
    assert r.cells_used == len(tx.body()) + ACCOUNT_WRITE_CELLS + 2 * acct_write
    expected_fee = r.cycles_used * (BF + 1_000) + r.cells_used * (BF + 1_000)
    assert r.fee_paid == expected_fee
    assert get_account(world, ALICE).balance == ALICE_FUNDS - 12345 - expected_fee
    assert get_account(world, ALICE).nonce == 1
    assert get_account(world, BOB).balance == 12345
    assert ctx.tips == (r.cycles_used + r.cells_used) * 1_000
    assert ctx.burned == (r.cycles_used + r.cells_used) * BF
    # unused limits are not charged
    assert r.fee_paid < tx.max_fee()


def test_failed_transfer_reverts_writes_but_is_charged(chain: Chain) -> None:
    world = chain.world()
    ctx = begin_block(world, _env())
    tx = transfer(bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"),
                  0, BOB, ALICE_FUNDS)  # amount + max fee exceeds the balance
    r = execute_transaction(world, tx, ctx)
    assert r.status == STATUS_FAILED and r.error_code == "insufficient_balance"
    assert r.events == ()
    assert get_account(world, BOB).balance == 0
    assert get_account(world, ALICE).balance == ALICE_FUNDS - r.fee_paid
    assert get_account(world, ALICE).nonce == 1
    assert r.fee_paid > 0


def test_running_out_of_cells_charges_the_whole_cell_limit(chain: Chain) -> None:
    world = chain.world()
    ctx = begin_block(world, _env())
    sk = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
    probe = transfer(sk, 0, BOB, 1)
    limit = len(probe.body()) + ACCOUNT_WRITE_CELLS + 10  # covers intrinsic, not the account writes
    tx = transfer(sk, 0, BOB, 1, cells_limit=limit)
    r = execute_transaction(world, tx, ctx)
    assert r.error_code == "out_of_cells" and r.cells_used == limit
    assert get_account(world, BOB).balance == 0


@pytest.mark.parametrize("kwargs,code", [
    ({"chain_id": "other"}, "wrong_chain_id"),
    ({"nonce": 1}, "nonce_too_high"),
    ({"cycles_limit": 40_000_001}, "cycles_limit_too_high"),
    ({"cells_limit": 8_000_001}, "cells_limit_too_high"),
    ({"cycles_limit": 100}, "limits_below_intrinsic"),
    ({"max_fee": 99_999}, "fee_below_basefee"),
    ({"max_fee": 500, "tip": 1_000}, "priority_fee_above_max"),
])
def test_invalid_transactions_change_nothing(chain: Chain, kwargs: dict[str, object], code: str) -> None:
    from cowboy_protocol.types.instructions import Transfer
    from tests.helpers import ALICE_SK

    kwargs = dict(kwargs)
    nonce = int(kwargs.pop("nonce", 0))  # type: ignore[call-overload]
    tx = make_tx(ALICE_SK, nonce, Transfer(to=BOB, amount=1), **kwargs)  # type: ignore[arg-type]
    world = chain.world()
    ctx = begin_block(world, _env())
    with pytest.raises(TxInvalid) as e:
        execute_transaction(world, tx, ctx)
    assert e.value.code == code
    assert world.changes() == {}


def test_nonce_too_low_and_unaffordable_max_fee_are_invalid(chain: Chain) -> None:
    from tests.helpers import ALICE_SK

    world = chain.world()
    ctx = begin_block(world, _env())
    execute_transaction(world, transfer(ALICE_SK, 0, BOB, 1), ctx)
    with pytest.raises(TxInvalid) as e:
        execute_transaction(world, transfer(ALICE_SK, 0, BOB, 1), ctx)
    assert e.value.code == "nonce_too_low"
    # BOB holds 0: cannot afford the max fee
    with pytest.raises(TxInvalid) as e:
        execute_transaction(world, transfer(BOB_SK, 0, ALICE, 0), ctx)
    assert e.value.code == "insufficient_funds"


def test_bad_signature_is_invalid(chain: Chain) -> None:
    from dataclasses import replace

    from tests.helpers import ALICE_SK

    tx = transfer(ALICE_SK, 0, BOB, 1)
    forged = replace(tx, sender=BOB, _body=None)  # claims BOB, signed by ALICE
    world = chain.world()
    with pytest.raises(TxInvalid) as e:
        execute_transaction(world, forged, begin_block(world, _env()))
    assert e.value.code == "bad_signature"


def test_block_capacity_counts_used_cycles_plus_the_new_limit(chain: Chain) -> None:
    from tests.helpers import ALICE_SK

    world = chain.world()
    ctx = begin_block(world, _env())
    r = execute_transaction(world, transfer(ALICE_SK, 0, BOB, 1, cycles_limit=30_000_000), ctx)
    room = 40_000_000 - r.cycles_used
    with pytest.raises(TxInvalid) as e:
        execute_transaction(world, transfer(ALICE_SK, 1, BOB, 1, cycles_limit=room + 1), ctx)
    assert e.value.code == "block_full"
    assert execute_transaction(world, transfer(ALICE_SK, 1, BOB, 1, cycles_limit=room), ctx).status == 0


def test_basefee_config_update_requires_a_system_deployer(chain: Chain) -> None:
    from tests.helpers import ALICE_SK

    new = BasefeeConfig(min_basefee=20_000, initial_basefee=100_000)
    world = chain.world()
    ctx = begin_block(world, _env())
    # BOB is not a system deployer (fund him first so the tx is valid)
    execute_transaction(world, transfer(ALICE_SK, 0, BOB, 10**20), ctx)
    r = execute_transaction(world, make_tx(BOB_SK, 0, UpdateBasefeeConfig(new)), ctx)
    assert r.error_code == "unauthorized"
    assert get_basefee_config(world) == BasefeeConfig()
    r = execute_transaction(world, make_tx(ALICE_SK, 1, UpdateBasefeeConfig(new)), ctx)
    assert r.status == STATUS_SUCCESS
    assert get_basefee_config(world) == new


def test_end_of_block_credits_tips_burns_basefee_and_moves_basefees(chain: Chain) -> None:
    from tests.helpers import ALICE_SK

    world = chain.world()
    res = build_block(world, _env(), [transfer(ALICE_SK, 0, BOB, 5)])
    r = res.receipts[0]
    assert get_account(world, FEE_RECIPIENT).balance == (r.cycles_used + r.cells_used) * 1_000
    assert get_burned(world) == (r.cycles_used + r.cells_used) * BF
    # far below target: both basefees fall by ~1/96
    assert get_basefees(world) == (98_959, 98_959)
    # supply is conserved: balances + burned == genesis supply
    total = sum(get_account(world, a).balance for a in (ALICE, BOB, FEE_RECIPIENT))
    assert total + get_burned(world) == ALICE_FUNDS

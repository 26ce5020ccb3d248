"""Shared test helpers: deterministic keys, a dev genesis, signed transactions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.execution.jobs.dispatch import due_seed_rounds
from cowboy_node.node.devgenesis import DevGenesis, create_dev_genesis
from cowboy_node.types.block import ConsumedSeed, Round
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Instruction, Transfer
from cowboy_protocol.types.params import Cip11Flags
from cowboy_protocol.types.transaction import Transaction

CHAIN_ID = "cowboy-test-1"
ALICE_SK = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
BOB_SK = (2).to_bytes(32, "big")
FEE_SK = (3).to_bytes(32, "big")
ALICE = private_key_to_address(ALICE_SK)
BOB = private_key_to_address(BOB_SK)
FEE_RECIPIENT = private_key_to_address(FEE_SK)
ALICE_FUNDS = 10**24


def make_dev_genesis(flags: Cip11Flags | None = None, balances: dict[bytes, int] | None = None) -> DevGenesis:
    """Deterministic single-validator genesis funding ALICE."""
    return create_dev_genesis(
        chain_id=CHAIN_ID, balances=balances if balances is not None else {ALICE: ALICE_FUNDS},
        system_deployers=(ALICE,), fee_recipient=FEE_RECIPIENT, genesis_time_ms=1_700_000_000_000,
        cip11=flags or Cip11Flags.for_phase(2), entropy=bytes(range(96)))


def make_tx(sk: bytes, nonce: int, instruction: Instruction, *, chain_id: str = CHAIN_ID,
            cycles_limit: int = 50_000, cells_limit: int = 2_000, max_fee: int = 200_000,
            tip: int = 1_000) -> Transaction:
    """A signed transaction with sensible limits and fees (2× the initial basefee)."""
    return Transaction(
        chain_id=chain_id, nonce=nonce, sender=private_key_to_address(sk), instruction=instruction,
        cycles_limit=cycles_limit, cells_limit=cells_limit, max_fee_per_cycle=max_fee,
        max_priority_fee_per_cycle=tip, max_fee_per_cell=max_fee, max_priority_fee_per_cell=tip,
    ).signed(sk)


def transfer(sk: bytes, nonce: int, to: bytes, amount: int, **kw: int) -> Transaction:
    """A signed Transfer."""
    return make_tx(sk, nonce, Transfer(to=to, amount=amount), **kw)  # type: ignore[arg-type]


def hand_seeds_due(chain: Chain, secret: int) -> tuple[ConsumedSeed, ...]:
    """ConsumedSeedsV1 of the next block of a single-validator chain built by hand (view = height): the seed of
    every due pending-selection round already passed, i.e. the group signature over it (1-of-1 share)."""
    return tuple(ConsumedSeed(e, v, sign_beacon(secret, Round(e, v)))
                 for e, v in due_seed_rounds(chain.world(), chain.height))


REPO_ROOT = Path(__file__).resolve().parents[1]
"""The repository root (the working directory of the scripts :func:`run_under_hash_seeds` starts)."""


def run_under_hash_seeds(script: str, seeds: tuple[str, ...] = ("1", "2"), *, timeout: float = 120) -> list[str]:
    """Stdout of ``python -c script`` run once per ``PYTHONHASHSEED`` in ``seeds`` (DESIGN.md: two processes with
    different hash seeds must compute identical state roots); a failing script fails the test."""
    return [subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env={**os.environ, "PYTHONHASHSEED": seed},
                           capture_output=True, text=True, check=True, timeout=timeout).stdout for seed in seeds]

"""Shared helpers (no tests) for the Runner Registry tests: runner keys, a funded world, one-transaction execution."""

from __future__ import annotations

from cowboy_node.execution.system_state import get_account, set_runner_config
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Receipt
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Instruction
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import Capabilities, Rate, RateCard
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.helpers import make_tx
from tests.unit.eob_helpers import fund, make_ctx, make_world

SK_A, SK_B, SK_C, SK_D = ((n).to_bytes(32, "big") for n in (11, 12, 13, 14))
A, B, C, D = (private_key_to_address(sk) for sk in (SK_A, SK_B, SK_C, SK_D))
MIN_STAKE = 1_000
UNBONDING = 10
CFG = RunnerConfig(min_runner_stake=MIN_STAKE, unbonding_blocks=UNBONDING)
CAPS = Capabilities(job_kinds=(1,), regions=("eu",), http_domains=("example.com",), max_concurrent_jobs=4)
CARD = RateCard(((1, Rate(base_price=1000, price_per_unit=0)),))
FUNDS = 10**30
CYCLES_LIMIT = 100_000
CELLS_LIMIT = 5_000


def registry_world(cfg: RunnerConfig = CFG) -> WorldState:
    """An empty world with ``cfg`` stored and A..D funded."""
    world = make_world()
    set_runner_config(world, cfg)
    for who in (A, B, C, D):
        fund(world, who, FUNDS)
    return world


def run(world: WorldState, sk: bytes, ins: Instruction, height: int) -> Receipt:
    """Execute one transaction of ``sk`` (next nonce) in a block at ``height``."""
    sender = private_key_to_address(sk)
    tx = make_tx(sk, get_account(world, sender).nonce, ins, chain_id="t", cycles_limit=CYCLES_LIMIT,
                 cells_limit=CELLS_LIMIT)
    return execute_transaction(world, tx, make_ctx(height))


def register(world: WorldState, sk: bytes, height: int, stake: int = MIN_STAKE) -> Receipt:
    """RunnerRegister with the shared capabilities and rate card."""
    return run(world, sk, RunnerRegister(stake=stake, capabilities=CAPS, rate_card=CARD), height)

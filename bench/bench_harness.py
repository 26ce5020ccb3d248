"""Shared setup of the transport benchmarks (``push_latency.py``, ``runner_capacity.py``).

A node over a fresh in-memory dev chain funding a job submitter and ``K`` runner keys, runner registration by
real transactions, quiet logs (benchmarks print ONE JSON object on stdout, and the node logs to stdout), and
nearest-rank percentiles. Nothing here is protocol logic; it only wires existing node pieces together.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.node.assemble import assemble
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.node.node import Node
from cowboy_node.observability import NodeMetrics
from cowboy_node.observability.logging import configure_logging
from cowboy_node.state.memory import MemoryStore
from cowboy_node.transport.service import TransportConfig
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.transport.preimages import ValidatorKey as TransportValidatorKey
from cowboy_protocol.types.instructions import Instruction
from cowboy_protocol.types.params import ChainLimits, Cip11Flags
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from cowboy_protocol.types.transaction import Transaction

ROOT = Path(__file__).resolve().parents[1]
JOB_EXAMPLE = ROOT / "configs" / "examples" / "job-http.json"
"""The HTTP example job (M = 1, verification none)."""
CAPS_EXAMPLE = ROOT / "configs" / "examples" / "runner-capabilities.json"
"""The example runner capabilities and rate card (serves the HTTP example job)."""
CHAIN_ID = "cowboy-bench-1"
"""Chain id of every benchmark chain."""
SUBMITTER_SK = (0xB0B0).to_bytes(32, "big")
"""Key of the account that submits the jobs."""
SUBMITTER = private_key_to_address(SUBMITTER_SK)
"""Its address."""
FEE_SK = (0xFEE).to_bytes(32, "big")
STAKE = 10**18
"""The default min_runner_stake."""
CYCLES_LIMIT, CELLS_LIMIT = 5_000_000, 200_000
"""Generous limits for JobSubmit and RunnerRegister."""


def quiet_logs() -> None:
    """Only errors reach stdout (the benchmark's own output is one JSON object)."""
    configure_logging("console", "error")
    logging.getLogger().setLevel(logging.ERROR)


def runner_keys(n: int, base: int = 0x5000) -> list[bytes]:
    """``n`` deterministic secp256k1 runner private keys."""
    return [(base + i).to_bytes(32, "big") for i in range(n)]


def make_bench_node(runner_sks: Sequence[bytes], *, block_time_ms: int, phase: int = 2,
                    transport: Callable[..., Any] | None = None) -> Node:
    """A single-validator node over a fresh in-memory chain; runners stay floor-eligible for the whole run.
    ``transport``: a ``TransportService`` class (or subclass) built with the node on a free port, not started."""
    balances = {SUBMITTER: 10**24, **{private_key_to_address(sk): 10**21 for sk in runner_sks}}
    dev = create_dev_genesis(chain_id=CHAIN_ID, balances=balances, system_deployers=(SUBMITTER,),
                             fee_recipient=private_key_to_address(FEE_SK), genesis_time_ms=1_700_000_000_000,
                             cip11=Cip11Flags.for_phase(phase), limits=ChainLimits(heartbeat_timeout_blocks=10**7),
                             entropy=bytes(range(96)))
    metrics = NodeMetrics()
    seed = dev.validator_key.ed25519_seed
    factory = None if transport is None else (lambda link: transport(
        link, TransportValidatorKey(seed), validator_set_hash=link.genesis_snapshot().set_hash,
        config=TransportConfig(port=0), metrics=metrics))
    return assemble(Chain(MemoryStore(), dev.genesis), Mempool(MempoolConfig()), dev.validator_key,
                    block_time_ms=block_time_ms, metrics=metrics, transport=factory)


class Nonces:
    """Signs transactions with consecutive nonces per sender (starting at 0 on a fresh chain)."""

    def __init__(self) -> None:
        self.next: dict[bytes, int] = {}

    def take(self, sk: bytes) -> int:
        """The sender's next nonce (and reserve it)."""
        sender = private_key_to_address(sk)
        n = self.next.get(sender, 0)
        self.next[sender] = n + 1
        return n

    def tx(self, sk: bytes, ins: Instruction) -> Transaction:
        """A signed transaction with generous limits and fees at 2× the initial basefee."""
        return Transaction(chain_id=CHAIN_ID, nonce=self.take(sk), sender=private_key_to_address(sk),
                           instruction=ins, cycles_limit=CYCLES_LIMIT, cells_limit=CELLS_LIMIT,
                           max_fee_per_cycle=200_000, max_priority_fee_per_cycle=1_000, max_fee_per_cell=200_000,
                           max_priority_fee_per_cell=1_000).signed(sk)


async def register_runners(node: Node, runner_sks: Sequence[bytes], nonces: Nonces) -> None:
    """Register every runner with the example capabilities, producing blocks until all are included."""
    caps, card = runner_file_from_json(json.loads(CAPS_EXAMPLE.read_text()), require_rate_card=True)
    if card is None:
        raise ValueError(f"{CAPS_EXAMPLE} has no rate card")
    for sk in runner_sks:
        node.api.submit_transaction(nonces.tx(sk, RunnerRegister(STAKE, caps, card)).to_bytes())
    for _ in range(100):
        if len(node.mempool) == 0:
            return
        await node.produce_block()
    raise RuntimeError("runner registrations were not all included")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` in [0, 100] (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(seconds: Sequence[float]) -> dict[str, Any]:
    """count, p50, p99, min, max of durations given in seconds, reported in ms."""
    def ms(v: float | None) -> float | None:
        return None if v is None else round(v * 1000, 1)

    return {"count": len(seconds), "p50_ms": ms(percentile(seconds, 50)), "p99_ms": ms(percentile(seconds, 99)),
            "min_ms": ms(min(seconds) if seconds else None), "max_ms": ms(max(seconds) if seconds else None)}

"""Cost of §5.3 epoch-paired admission now that the node reads the valid snapshots from chain state.

Before ActivateValidatorSet the node's admission took the snapshots from memory (the genesis snapshot, read once,
plus a ``Reconfiguration`` handed to ``TransportLink.activate_validator_set``); now each Hello reads the epoch
pointer, the activation record(s) and the snapshot(s) at the head (``execution/validator_set.py::snapshots_at``).
This measures ``TransportLink.admission(runner, epoch, hash)`` per Hello, same run, three ways:

- ``memory_hook_baseline``: the previous path (in-memory reconfiguration, override hook), inside the window;
- ``chain_window``: the chain path with an activation, inside the window (two snapshots valid);
- ``chain_static``: the chain path on a genesis-only chain (one state read, the cached genesis snapshot).

Prints ONE JSON object. ``--validators`` sets |V| (default 16), ``--hellos`` the admissions per round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.validator_set import put_activation, put_snapshot
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.node.transport_link import TransportLink
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, private_key_to_public_key
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import EpochSnapshot
from cowboy_protocol.types.runner import Health, RunnerRecord
from cowboy_protocol.types.runner_json import runner_file_from_json

ROOT = Path(__file__).resolve().parents[1]
CAPS_EXAMPLE = ROOT / "configs" / "examples" / "runner-capabilities.json"
H = 1_000
"""Activation height; the measurements run at H + 1 (inside the default 160-block window)."""


class _Chain:
    def __init__(self, genesis: Any, world: WorldState, height: int) -> None:
        self.genesis, self._world, self.height = genesis, world, height

    def world(self) -> WorldState:
        return self._world


def _no_submit(tx_bytes: bytes) -> dict[str, object]:
    raise AssertionError("not used")


class _Node(TransportLink):
    def __init__(self, chain: _Chain, me: bytes) -> None:
        super().__init__(chain, threading.Lock(), me, submit=_no_submit)  # type: ignore[arg-type]


def _world(n_validators: int, runner_sks: list[bytes], activate: bool) -> tuple[Any, WorldState, tuple[bytes, ...]]:
    dev = create_dev_genesis(chain_id="cowboy-bench-1", balances={}, system_deployers=(), fee_recipient=bytes(20),
                             genesis_time_ms=1_700_000_000_000, entropy=bytes(range(96)))
    world = Chain(MemoryStore(), dev.genesis).world()
    keys = tuple(ed25519.public_key_from_seed(bytes([i + 1]) * 32) for i in range(n_validators))
    put_snapshot(world, 0, keys)
    caps, card = runner_file_from_json(json.loads(CAPS_EXAMPLE.read_text()), require_rate_card=True)
    for i, sk in enumerate(runner_sks):
        address = private_key_to_address(sk)
        store.put_runner(world, RunnerRecord(address, i, 10**18, caps, card, Health.HEALTHY, 0, 0, 10**9, 0, 0))
        store.append_active_runner(world, address)
    if activate:
        put_activation(world, keys[:-1], H)
    return dev.genesis, world, keys


def _per_hello_us(node: _Node, hellos: list[tuple[PubKey, int, bytes]], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for runner, epoch, vsh in hellos:
            node.admission(runner, epoch, vsh)
        out.append((time.perf_counter() - t) / len(hellos) * 1e6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--validators", type=int, default=16)
    ap.add_argument("--hellos", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    sks = [(0x5000 + i).to_bytes(32, "big") for i in range(64)]
    pubs = [PubKey.runner(private_key_to_public_key(sk, compressed=True)) for sk in sks]

    genesis, world, keys = _world(args.validators, sks, activate=True)
    old, new = EpochSnapshot(0, keys), EpochSnapshot(1, keys[:-1])
    hellos = [(pubs[i % len(pubs)], *((0, old.set_hash) if i % 2 else (1, new.set_hash))) for i in range(args.hellos)]
    chain_node = _Node(_Chain(genesis, world, H + 1), keys[0])
    assert [s.epoch for s in chain_node.valid_snapshots()] == [0, 1]

    g2, static_world, _ = _world(args.validators, sks, activate=False)
    static_node = _Node(_Chain(g2, static_world, H + 1), keys[0])
    static_hellos = [(p, 0, old.set_hash) for p, _, _ in hellos]

    g3, hook_world, _ = _world(args.validators, sks, activate=False)
    hook_node = _Node(_Chain(g3, hook_world, H + 1), keys[0])
    hook_node.activate_validator_set(new, H)  # the pre-change path: snapshots held in memory
    assert [s.epoch for s in hook_node.valid_snapshots()] == [0, 1]

    for node, hs in ((hook_node, hellos), (chain_node, hellos), (static_node, static_hellos)):
        _per_hello_us(node, hs, 1)  # warm-up
    results: dict[str, list[float]] = {"memory_hook_baseline": [], "chain_window": [], "chain_static": []}
    for _ in range(args.rounds):  # interleaved, so load from other processes hits all three alike
        results["memory_hook_baseline"] += _per_hello_us(hook_node, hellos, 1)
        results["chain_window"] += _per_hello_us(chain_node, hellos, 1)
        results["chain_static"] += _per_hello_us(static_node, static_hellos, 1)
    med = {k: statistics.median(v) for k, v in results.items()}
    print(json.dumps({
        "benchmark": "reconfig_admission",
        "params": {"validators": args.validators, "hellos_per_round": args.hellos, "rounds": args.rounds,
                   "runners": len(sks)},
        "us_per_hello_median": {k: round(v, 2) for k, v in med.items()},
        "us_per_hello_min": {k: round(min(v), 2) for k, v in results.items()},
        "ratio_chain_window_vs_memory_hook": round(med["chain_window"] / med["memory_hook_baseline"], 3),
        "ratio_chain_static_vs_memory_hook": round(med["chain_static"] / med["memory_hook_baseline"], 3),
    }))


if __name__ == "__main__":
    main()

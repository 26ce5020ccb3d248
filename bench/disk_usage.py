"""Disk bytes per block, with and without ``[storage] retain_blocks`` pruning (issue 34 §2; prints JSON).

In one run on this machine, four chains of a 4-validator network are built on LevelDB stores the way validators
commit them (every block executed and committed in one synced batch with its round seed, its finalization
certificate of real threshold signatures and its undo record):

- ``idle``: ``--idle-blocks`` empty blocks;
- ``load``: ``--load-blocks`` blocks of ``--txs`` transfers each (1,000 transfers/s at the 500 ms block time with the
  default 500), to ``--recipients`` distinct accounts;

each once as an archive (``retain_blocks = 0``, the baseline) and once pruned (``--retain`` blocks kept), the prune
step run after every commit in its own thread as the node's :class:`~cowboy_node.node.pruner.Pruner` does. Reported
per chain: bytes of live keys and values per block (what LevelDB must keep), on-disk bytes after a full compaction
(per block, and for the pruned chains at half and at the end of the run: steady state means they stay level), and
the commit time p50/p99 of the pruned chain beside the archive's (pruning must not stall production).

Usage: python bench/disk_usage.py [--idle-blocks 1000] [--load-blocks 200] [--txs 500] [--retain 100]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.consensus.simplex.types import Finalization, Proposal, finalize_message, seed_message
from cowboy_node.node.pruner import Pruner
from cowboy_node.observability.logging import configure_logging
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE_SK, transfer
from tests.unit.node.sync_chain import NET, group_sign, scheme


def _dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


def _live_bytes(store: LevelDBStore) -> int:
    return sum(len(k) + len(v) for k, v in store.iterate(b""))


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 2) if s else 0.0


def run_chain(path: Path, *, blocks: int, txs: int, recipients: int, retain: int) -> dict[str, Any]:
    """Build ``blocks`` blocks of ``txs`` transfers on a fresh LevelDB store at ``path``; measure its size."""
    store = LevelDBStore(path)
    chain = Chain(store, NET.genesis)
    forks = Forks(chain, ConsensusRecords(store))
    schemes = [scheme(NET, i) for i in range(4)]
    quorum = NET.genesis.threshold
    seed0 = NET.validator_keys[0].ed25519_seed
    proposer = ed25519.public_key_from_seed(seed0)
    pruner = Pruner(store, retain_blocks=retain, batch_blocks=64)
    store.compact()
    start_disk, start_live = _dir_bytes(path), _live_bytes(store)
    nonce = 0
    commit_ms: list[float] = []
    half: dict[str, int] = {}
    for v in range(1, blocks + 1):
        body: list[Transaction] = []
        for _ in range(txs):
            to = (0x10_0000 + nonce % recipients).to_bytes(20, "big")
            body.append(transfer(ALICE_SK, nonce, to, 1))
            nonce += 1
        parent = chain.head
        cand = forks.build(parent.hash(), Round(0, v), body, timestamp_ms=NET.genesis.genesis_time_ms + v * 500,
                           proposer=proposer, sign=lambda d: ed25519.sign(seed0, d),
                           fee_recipient=NET.genesis.validators[0].fee_recipient, presence=lambda w: b"\x01\x00")
        block = cand.prepared.block
        p = Proposal(Round(0, v), parent.header.round.view, parent.hash(), block.hash())
        seed = group_sign(schemes, quorum, seed_message(p.round))
        cert = Finalization(p, group_sign(schemes, quorum, finalize_message(p)), seed)
        t0 = time.perf_counter()
        forks.commit(block, seed=seed, certificate=cert, inspect=lambda prepared, env: None)
        commit_ms.append((time.perf_counter() - t0) * 1000)
        pruner.after_commit(chain.height)  # one step per commit, in the pruner's thread, as the node runs it
        if v == blocks // 2:
            pruner.wait()
            store.compact()
            half = {"height": v, "disk_bytes": _dir_bytes(path), "live_bytes": _live_bytes(store)}
    while True:  # the steps a step in flight made the last commits skip (the next blocks would run them)
        pruner.wait()
        step = pruner.after_commit(chain.height)
        if step is None or step.result().deleted_keys == 0:
            break
    pruner.close()
    store.compact()
    end_disk, end_live = _dir_bytes(path), _live_bytes(store)
    kept = blocks - chain.earliest_height() + 1 if retain else blocks + 1
    out = {
        "blocks": blocks, "txs_per_block": txs, "retain_blocks": retain, "earliest_retained_height":
            chain.earliest_height(), "blocks_kept": kept,
        "disk_bytes": end_disk, "live_bytes": end_live,
        "disk_bytes_per_block": round((end_disk - start_disk) / blocks, 1),
        "live_bytes_per_block": round((end_live - start_live) / blocks, 1),
        "live_bytes_per_kept_block_excl_state": None,
        "commit_ms": {"p50": _pct(commit_ms, 0.5), "p99": _pct(commit_ms, 0.99), "max": round(max(commit_ms), 2)},
        "at_half": half,
    }
    state = sum(len(k) + len(v) for k, v in store.iterate(b"s/")) + \
        sum(len(k) + len(v) for k, v in store.iterate(b"n/"))
    out["state_live_bytes"] = state
    out["live_bytes_per_kept_block_excl_state"] = round((end_live - state) / kept, 1)
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle-blocks", type=int, default=1000)
    ap.add_argument("--load-blocks", type=int, default=200)
    ap.add_argument("--txs", type=int, default=500, help="transfers per load block (1,000/s at 500 ms blocks)")
    ap.add_argument("--recipients", type=int, default=10_000)
    ap.add_argument("--retain", type=int, default=100)
    args = ap.parse_args()
    configure_logging("json", "warning")  # the pruner's debug lines would mix with the JSON report
    with tempfile.TemporaryDirectory(prefix="cowboy-disk-") as tmp:
        root = Path(tmp)
        results: dict[str, Any] = {}
        for name, blocks, txs in (("idle", args.idle_blocks, 0), ("load", args.load_blocks, args.txs)):
            archive = run_chain(root / f"{name}-archive", blocks=blocks, txs=txs, recipients=args.recipients,
                                retain=0)
            pruned = run_chain(root / f"{name}-pruned", blocks=blocks, txs=txs, recipients=args.recipients,
                               retain=args.retain)
            results[name] = {
                "archive": archive, "pruned": pruned,
                "pruned_disk_ratio": round(pruned["disk_bytes"] / archive["disk_bytes"], 3),
                "pruned_commit_p50_ratio": round(pruned["commit_ms"]["p50"] / max(archive["commit_ms"]["p50"], 1e-9),
                                                 2),
                "pruned_commit_p99_ratio": round(pruned["commit_ms"]["p99"] / max(archive["commit_ms"]["p99"], 1e-9),
                                                 2),
            }
    print(json.dumps({"bench": "disk_usage", "cpus": os.cpu_count(), **results}, indent=2))


if __name__ == "__main__":
    main()

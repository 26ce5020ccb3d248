"""Chain throughput benchmark (prints JSON).

Measures, in one run on this machine:
 - transfers per second admitted (decode + signature recovery + checks + mempool),
 - transfers per second executed and committed through blocks (build + one synced
   LevelDB batch per block, the producer's real code path), and the commit time per block,
 - state-root cost per write at 10^4, 10^5, 10^6 keys (bench/state_root.py),
 - baselines: raw LevelDB synced batch writes per second and secp256k1
   recoveries per second, measured in the same run.

Goals (issue: foundation): ≥ 2,000 transfers/s sustained through 1-second
blocks; state root ≤ 30 µs per write at 10^6 keys.

Usage: python bench/chain_throughput.py [--txs N] [--senders N] [--state-sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cowboy_node.types.block import Round

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import plyvel

from cowboy_node.chain.admission import admit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.crypto import bls
from cowboy_node.execution.system_state import get_account
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, recover_address, sign_recoverable
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction


def baseline_leveldb(path: str, n: int = 20_000, batch: int = 2_000) -> float:
    """Raw plyvel synced batch writes per second (32-byte keys, 64-byte values)."""
    db = plyvel.DB(path, create_if_missing=True)
    items = [(os.urandom(32), os.urandom(64)) for _ in range(n)]
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        with db.write_batch(transaction=True, sync=True) as wb:
            for k, v in items[i:i + batch]:
                wb.put(k, v)
    dt = time.perf_counter() - t0
    db.close()
    return n / dt


def baseline_recover(n: int = 3_000) -> float:
    """secp256k1 public-key recoveries per second (coincurve)."""
    sk = (12345).to_bytes(32, "big")
    sigs = [(keccak256(i.to_bytes(8, "big")), None) for i in range(n)]
    sigs = [(d, sign_recoverable(sk, d)) for d, _ in sigs]
    t0 = time.perf_counter()
    for d, s in sigs:
        recover_address(d, s)  # type: ignore[arg-type]
    return n / (time.perf_counter() - t0)


def _nonces(chain: Chain) -> Callable[[bytes], int]:
    world = chain.world()
    return lambda a: get_account(world, a).nonce


def chain_run(path: str, n_txs: int, n_senders: int) -> dict[str, float]:
    """Admit ``n_txs`` transfers and push them through 1-second-cadence blocks on LevelDB."""
    keys = [(i + 1000).to_bytes(32, "big") for i in range(n_senders)]
    addrs = [private_key_to_address(k) for k in keys]
    fee_recipient = private_key_to_address((999).to_bytes(32, "big"))
    dev = create_dev_genesis(chain_id="bench", balances={a: 10**24 for a in addrs}, system_deployers=(),
                             fee_recipient=fee_recipient, genesis_time_ms=1_700_000_000_000,
                             entropy=bytes(range(96)))
    chain = Chain(LevelDBStore(path), dev.genesis)
    per_sender = (n_txs + n_senders - 1) // n_senders
    txs = []
    for j in range(per_sender):
        for k, a in zip(keys, addrs, strict=True):
            if len(txs) < n_txs:
                txs.append(Transaction(chain_id="bench", nonce=j, sender=a,
                                       instruction=Transfer(to=bytes(19) + b"\x42", amount=1),
                                       cycles_limit=20_000, cells_limit=1_000, max_fee_per_cycle=200_000,
                                       max_priority_fee_per_cycle=10, max_fee_per_cell=200_000,
                                       max_priority_fee_per_cell=10).signed(k).to_bytes())
    pool = Mempool(MempoolConfig(max_txs=n_txs + 1, max_bytes=1 << 30, max_txs_per_sender=per_sender + 1,
                                 max_nonce_gap=per_sender + 1))
    t0 = time.perf_counter()
    for raw in txs:
        admit(raw, chain, pool)
    admit_s = time.perf_counter() - t0

    key = dev.validator_key
    secret = bls.secret_key_from_bytes(key.bls_secret)
    proposer = ed25519.public_key_from_seed(key.ed25519_seed)
    exec_s = commit_s = 0.0
    blocks = 0
    committed = 0
    commit_times = []
    while len(pool):
        ready = pool.ready(_nonces(chain), 10_000)
        rnd = Round(0, chain.height + 1)
        env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=fee_recipient,
                            beacon=sign_beacon(secret, chain.head.header.round), presence_input=b"\x01\x00")
        t1 = time.perf_counter()
        prepared = chain.build(ready, env=env, round_=rnd, proposer=proposer,
                               sign=lambda d: ed25519.sign(key.ed25519_seed, d), signatures_checked=True)
        t2 = time.perf_counter()
        chain.commit(prepared)
        t3 = time.perf_counter()
        pool.remove_committed(prepared.block.transactions, _nonces(chain))
        exec_s += t2 - t1
        commit_s += t3 - t2
        commit_times.append(t3 - t2)
        committed += len(prepared.block.transactions)
        blocks += 1
        if not prepared.block.transactions:
            break
    chain.close()
    return {
        "txs": committed,
        "blocks": blocks,
        "admission_tps": len(txs) / admit_s,
        "execute_commit_tps": committed / (exec_s + commit_s),
        "end_to_end_tps": committed / (admit_s + exec_s + commit_s),
        "avg_txs_per_block": committed / blocks,
        "commit_ms_per_block": 1000 * commit_s / blocks,
        "execute_ms_per_block": 1000 * exec_s / blocks,
        "max_commit_ms": 1000 * max(commit_times),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--txs", type=int, default=10_000)
    ap.add_argument("--senders", type=int, default=500)
    ap.add_argument("--state-sizes", default="10000,100000,1000000")
    args = ap.parse_args()
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        out["baseline_leveldb_synced_batch_writes_per_s"] = baseline_leveldb(os.path.join(d, "raw"))
        out["baseline_secp256k1_recoveries_per_s"] = baseline_recover()
        run = chain_run(os.path.join(d, "chain"), args.txs, args.senders)
        out["chain"] = run
        out["ratio_end_to_end_tps_to_recoveries"] = run["end_to_end_tps"] / out[  # type: ignore[operator]
            "baseline_secp256k1_recoveries_per_s"]
        out["goal_2000_tps_met"] = run["end_to_end_tps"] >= 2000
    sizes = [int(s) for s in args.state_sizes.split(",") if s]
    if sizes:
        from bench.state_root import measure

        out["state_root"] = {str(n): measure(n) for n in sizes}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

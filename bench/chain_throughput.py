"""Chain throughput benchmark (prints JSON).

Measures, in one run on this machine:
 - the old path, pool off (``chain``, the same-run baseline): transfers admitted in-process (decode + signature
   recovery + checks + mempool), then executed and committed through blocks (build + one synced LevelDB batch
   per block, the producer's real code path); end to end = transfers / (admission + execution + commit);
 - the new path (``pipelined``): a signature pool of ``--workers`` processes decodes, hashes and recovers the
   signers of ``--batch``-sized batches while this process admits what is ready and builds and commits blocks
   of ``candidate_limit`` candidates; end to end = transfers / wall time, first submission to last commit;
   ``same_block_hashes`` checks that both paths committed the same blocks;
 - for both, transfers per CPU second of this process (the pool's workers apart: ``worker_cpu_s``), and
   ``us_per_transfer``: this process's CPU µs per committed transfer by stage (admission, execution, commit, and
   "other": the pool's result thread unpickling, mempool order, block set-up);
 - with ``--base DIR`` (a worktree of a baseline commit), ``--rounds`` interleaved runs of both paths on the
   baseline's code (this script with ``PYTHONPATH=DIR``) and on this checkout's, in fresh processes: medians,
   ratios new ÷ baseline, and whether every run committed the same block hashes and state roots;
 - with ``--validators N`` (N > 1), transfers/s and proposal->finalization through a real N-validator loopback
   network (``bench/chain_throughput_network.py``), beside the single-validator figures;
 - state-root cost per write at 10^4, 10^5, 10^6 keys (bench/state_root.py);
 - baselines: raw LevelDB synced batch writes per second and secp256k1 recoveries per second, same run.

Goals (issue 20 item 5): >= 10,000 transfers/s end to end on this 2-core machine; >= 5,000 transfers/s on a
4-validator testnet with proposal->finalization p50 <= 250 ms (docs/performance.md, "Chain throughput").

Usage: python bench/chain_throughput.py [--txs N] [--senders N] [--workers N] [--batch N] [--inflight N]
       [--state-sizes 10000,100000,1000000] [--base DIR [--rounds N]]
       [--validators 4 [--net-txs N] [--net-block-ms MS] ...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import plyvel

from cowboy_node.chain.admission import admit
from cowboy_node.chain.candidates import candidate_limit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.chain.signature_pool import PreparedOrUndecodable, SignaturePool
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.crypto import bls
from cowboy_node.execution.system_state import get_account
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.state.leveldb import LevelDBStore
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, recover_address, sign_recoverable
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validation_errors import ValidationError

_REPO = str(Path(__file__).resolve().parents[1])


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
    digests = [keccak256(i.to_bytes(8, "big")) for i in range(n)]
    sigs = [(d, sign_recoverable(sk, d)) for d in digests]
    t0 = time.perf_counter()
    for d, s in sigs:
        recover_address(d, s)
    return n / (time.perf_counter() - t0)


def _nonces(chain: Chain) -> Callable[[bytes], int]:
    world = chain.world()
    return lambda a: get_account(world, a).nonce


class _Setup:
    """A fresh LevelDB chain funding ``n_senders`` accounts and ``n_txs`` signed transfers (round-robin nonces)."""

    def __init__(self, path: str, n_txs: int, n_senders: int) -> None:
        keys = [(i + 1000).to_bytes(32, "big") for i in range(n_senders)]
        addrs = [private_key_to_address(k) for k in keys]
        self.fee_recipient = private_key_to_address((999).to_bytes(32, "big"))
        self.dev = create_dev_genesis(chain_id="bench", balances={a: 10**24 for a in addrs}, system_deployers=(),
                                      fee_recipient=self.fee_recipient, genesis_time_ms=1_700_000_000_000,
                                      entropy=bytes(range(96)))
        self.chain = Chain(LevelDBStore(path), self.dev.genesis)
        per_sender = (n_txs + n_senders - 1) // n_senders
        self.txs: list[bytes] = []
        for j in range(per_sender):
            for k, a in zip(keys, addrs, strict=True):
                if len(self.txs) < n_txs:
                    self.txs.append(Transaction(
                        chain_id="bench", nonce=j, sender=a, instruction=Transfer(to=bytes(19) + b"\x42", amount=1),
                        cycles_limit=20_000, cells_limit=1_000, max_fee_per_cycle=200_000,
                        max_priority_fee_per_cycle=10, max_fee_per_cell=200_000,
                        max_priority_fee_per_cell=10).signed(k).to_bytes())
        self.pool = Mempool(MempoolConfig(max_txs=n_txs + 1, max_bytes=1 << 30, max_txs_per_sender=per_sender + 1,
                                          max_nonce_gap=per_sender + 1))
        key = self.dev.validator_key
        self._seed = key.ed25519_seed
        self._secret = bls.secret_key_from_bytes(key.bls_secret)
        self._proposer = ed25519.public_key_from_seed(key.ed25519_seed)
        self.exec_s = self.commit_s = 0.0
        self.exec_cpu_s = self.commit_cpu_s = 0.0  # this thread's CPU (the wall times include waiting for a core)
        self.blocks = self.committed = 0
        self.commit_times: list[float] = []
        self.block_hashes: list[bytes] = []
        self.state_roots: list[bytes] = []

    def block(self, candidates: int) -> int:
        """Build and commit one block from the pool (the producer's code path); returns its transaction count."""
        chain, pool = self.chain, self.pool
        ready = pool.ready(_nonces(chain), candidates)
        env = chain.env_for(timestamp_ms=chain.head.header.timestamp_ms + 1000, fee_recipient=self.fee_recipient,
                            beacon=sign_beacon(self._secret, chain.head.header.round), presence_input=b"\x01\x00")
        t1, c1 = time.perf_counter(), time.thread_time()
        prepared = chain.build(ready, env=env, round_=Round(0, chain.height + 1), proposer=self._proposer,
                               sign=lambda d: ed25519.sign(self._seed, d), signatures_checked=True)
        t2, c2 = time.perf_counter(), time.thread_time()
        chain.commit(prepared)
        t3, c3 = time.perf_counter(), time.thread_time()
        pool.remove_committed(prepared.block.transactions, _nonces(chain))
        self.exec_s += t2 - t1
        self.commit_s += t3 - t2
        self.exec_cpu_s += c2 - c1
        self.commit_cpu_s += c3 - c2
        self.commit_times.append(t3 - t2)
        self.committed += len(prepared.block.transactions)
        self.blocks += 1
        self.block_hashes.append(prepared.block.hash())
        self.state_roots.append(prepared.block.header.state_root)
        return len(prepared.block.transactions)

    def report(self, wall_s: float, admit_s: float, admitted: int, cpu_s: float,
               admit_cpu_s: float) -> dict[str, Any]:
        blocks = max(1, self.blocks)
        per = 1e6 / max(1, self.committed)
        stages = admit_cpu_s + self.exec_cpu_s + self.commit_cpu_s
        return {
            # CPU of this process per committed transfer, by stage (thread CPU of the admitting/building thread);
            # "other": the rest of the process (the pool's result thread unpickling, mempool order, block setup).
            "us_per_transfer": {"admission": admit_cpu_s * per, "execution": self.exec_cpu_s * per,
                                "commit": self.commit_cpu_s * per, "other": (cpu_s - stages) * per,
                                "process_cpu": cpu_s * per},
            "process_cpu_s": cpu_s,
            "end_to_end_tps_per_process_cpu_s": self.committed / cpu_s,
            "txs": self.committed,
            "blocks": self.blocks,
            "admission_tps": admitted / admit_s,
            "execute_commit_tps": self.committed / (self.exec_s + self.commit_s),
            "end_to_end_tps": self.committed / wall_s,
            "wall_s": wall_s,
            "avg_txs_per_block": self.committed / blocks,
            "commit_ms_per_block": 1000 * self.commit_s / blocks,
            "execute_ms_per_block": 1000 * self.exec_s / blocks,
            "max_commit_ms": 1000 * max(self.commit_times, default=0.0),
        }


def chain_run(path: str, n_txs: int, n_senders: int) -> tuple[dict[str, float], list[bytes]]:
    """The old path (pool off): admit every transfer in-process, then blocks of up to ``max_block_txs`` candidates.

    End to end = committed / (admission + execution + commit), all sequential in one process.
    """
    run = _Setup(path, n_txs, n_senders)
    chain, pool = run.chain, run.pool
    t0, c0, a0 = time.perf_counter(), time.process_time(), time.thread_time()
    for raw in run.txs:
        admit(raw, chain, pool)
    admit_s, admit_cpu = time.perf_counter() - t0, time.thread_time() - a0
    while len(pool) and run.block(chain.genesis.limits.max_block_txs):
        pass
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    chain.close()
    out = run.report(wall, admit_s, len(run.txs), cpu, admit_cpu)
    out["state_roots"] = [r.hex() for r in run.state_roots]
    return out, run.block_hashes


def pipelined_run(path: str, n_txs: int, n_senders: int, workers: int, batch: int,
                  inflight: int) -> tuple[dict[str, float], list[bytes]]:
    """The new path: signatures recovered by a :class:`SignaturePool` of ``workers`` processes in batches of
    ``batch`` (at most ``inflight`` queued) while this process admits what is recovered and builds and commits
    blocks of :func:`candidate_limit` candidates; a block is built once the pool holds that many (or nothing more
    is coming). End to end = committed / wall time from the first submission to the last commit.
    """
    run = _Setup(path, n_txs, n_senders)
    chain, pool = run.chain, run.pool
    sigs = SignaturePool(workers, max_inflight=inflight)
    t_start = time.perf_counter()
    sigs.warm_up()
    startup_s = time.perf_counter() - t_start
    fill = candidate_limit(chain, chain.genesis.limits.max_block_txs)
    batches = [run.txs[i:i + batch] for i in range(0, len(run.txs), batch)]
    queue: deque[tuple[list[bytes], Future[list[PreparedOrUndecodable]]]] = deque()
    nxt = 0
    admit_s = wait_s = admit_cpu = 0.0
    rejected = 0
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0, c0 = time.perf_counter(), time.process_time()

    def refill() -> None:
        nonlocal nxt
        while nxt < len(batches) and len(queue) < inflight:
            queue.append((batches[nxt], sigs.submit(batches[nxt])))
            nxt += 1

    refill()
    try:
        while queue or len(pool):
            # Admit what the workers have finished; wait for them only while the next block is not full yet.
            while queue and (queue[0][1].done() or len(pool) < fill):
                raws, fut = queue.popleft()
                tw = time.perf_counter()
                results = fut.result()
                ta, ca = time.perf_counter(), time.thread_time()
                refill()
                for raw, rec in zip(raws, results, strict=True):
                    try:
                        admit(raw, chain, pool, prepared=rec)
                    except ValidationError:
                        rejected += 1
                admit_s += time.perf_counter() - ta
                admit_cpu += time.thread_time() - ca
                wait_s += ta - tw
            if len(pool) and not run.block(fill):
                break
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        sigs.close()
        chain.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_cpu = (children.ru_utime + children.ru_stime) - (children0.ru_utime + children0.ru_stime)
    out = run.report(wall, admit_s, len(run.txs), cpu, admit_cpu)
    out["worker_cpu_s"] = worker_cpu  # includes the workers' start-up (imports)
    out.update({"workers": workers, "batch": batch, "inflight": inflight, "candidates_per_block": fill,
                "admission_main_process_s": admit_s, "waiting_for_workers_s": wait_s,
                "pool_startup_s": startup_s, "rejected": rejected})
    return out, run.block_hashes


def single_validator(args: argparse.Namespace) -> dict[str, Any]:
    """Both single-validator paths on fresh chains, with their block hashes (the part ``--base`` repeats)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        out["baseline_leveldb_synced_batch_writes_per_s"] = baseline_leveldb(os.path.join(d, "raw"))
        out["baseline_secp256k1_recoveries_per_s"] = baseline_recover()
        old, old_hashes = chain_run(os.path.join(d, "chain"), args.txs, args.senders)
        new, new_hashes = pipelined_run(os.path.join(d, "pipelined"), args.txs, args.senders, args.workers,
                                        args.batch, args.inflight)
        out["chain"] = old
        out["pipelined"] = new
        out["block_hashes"] = [h.hex() for h in old_hashes]
        out["same_transactions_committed"] = old["txs"] == new["txs"] == args.txs
        # The same blocks, byte for byte: the pool and the pipelining change when work is done, not the chain.
        out["same_block_hashes"] = old_hashes == new_hashes
        out["ratio_end_to_end_pipelined_to_pool_off"] = new["end_to_end_tps"] / old["end_to_end_tps"]
        out["ratio_end_to_end_tps_to_recoveries"] = (new["end_to_end_tps"]
                                                     / out["baseline_secp256k1_recoveries_per_s"])
        out["goal_2000_tps_met"] = new["end_to_end_tps"] >= 2000
        out["goal_10000_tps_met"] = new["end_to_end_tps"] >= 10_000
        out["load_average"] = os.getloadavg()
    return out


def _child(args: argparse.Namespace, pythonpath: str | None) -> dict[str, Any]:
    """:func:`single_validator` in a fresh process, on the code of ``pythonpath`` (None: this checkout)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    cmd = [sys.executable, str(Path(__file__).resolve()), "--single-json", "--txs", str(args.txs),
           "--senders", str(args.senders), "--workers", str(args.workers), "--batch", str(args.batch),
           "--inflight", str(args.inflight)]
    done = subprocess.run(cmd, env=env, cwd=pythonpath or _REPO, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


_AB_FIGURES = (("pipelined", "end_to_end_tps"), ("pipelined", "end_to_end_tps_per_process_cpu_s"),
               ("chain", "end_to_end_tps"), ("chain", "end_to_end_tps_per_process_cpu_s"))


def ab_runs(args: argparse.Namespace) -> dict[str, Any]:
    """``--rounds`` interleaved runs of the baseline checkout (``--base``) and this one, same script, fresh
    processes; medians, ratios new ÷ baseline, and whether both committed the same blocks and state roots."""
    base = str(Path(args.base).resolve())
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "new": []}
    for r in range(args.rounds):
        order = [("baseline", base), ("new", None)] if r % 2 == 0 else [("new", None), ("baseline", base)]
        for name, path in order:
            runs[name].append(_child(args, path))
    summary: dict[str, Any] = {"base": base, "rounds": args.rounds}
    for name, rs in runs.items():
        summary[name] = {f"{path}.{key}_median": statistics.median(x[path][key] for x in rs)
                         for path, key in _AB_FIGURES}
        summary[name]["pipelined.us_per_transfer_median"] = {
            k: statistics.median(x["pipelined"]["us_per_transfer"][k] for x in rs)
            for k in rs[0]["pipelined"]["us_per_transfer"]} if "us_per_transfer" in rs[0]["pipelined"] else None
        summary[name]["runs"] = [{f"{p}.{k}": x[p][k] for p, k in _AB_FIGURES} | {"load": x["load_average"]}
                                 for x in rs]
    for path, key in _AB_FIGURES:
        b = summary["baseline"][f"{path}.{key}_median"]
        summary[f"ratio_{path}.{key}_new_to_baseline"] = summary["new"][f"{path}.{key}_median"] / b
    every = [x for rs in runs.values() for x in rs]
    summary["same_block_hashes_as_baseline"] = all(x["block_hashes"] == every[0]["block_hashes"] for x in every)
    summary["same_state_roots_as_baseline"] = all(
        x[p]["state_roots"] == every[0]["chain"]["state_roots"] for x in every for p in ("chain",))
    summary["same_block_hashes_within_every_run"] = all(x["same_block_hashes"] for x in every)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--txs", type=int, default=10_000)
    ap.add_argument("--senders", type=int, default=500)
    ap.add_argument("--workers", type=int, default=1, help="signature pool processes of the new path")
    ap.add_argument("--batch", type=int, default=1000, help="transactions per signature-pool batch")
    ap.add_argument("--inflight", type=int, default=3, help="batches queued to the pool at most")
    ap.add_argument("--state-sizes", default="10000,100000,1000000")
    ap.add_argument("--base", default=None,
                    help="A/B: also run the single-validator paths on this checkout of a baseline commit (git "
                         "worktree add DIR COMMIT) and on this one, --rounds times interleaved, same script")
    ap.add_argument("--rounds", type=int, default=3, help="A/B rounds (each: baseline and new, fresh processes)")
    ap.add_argument("--single-json", action="store_true", help=argparse.SUPPRESS)  # an A/B child's run
    ap.add_argument("--validators", type=int, default=1,
                    help="N > 1: also drive a real N-validator loopback network (bench/chain_throughput_network.py)")
    ap.add_argument("--net-txs", type=int, default=6_000)
    ap.add_argument("--net-senders", type=int, default=200)
    ap.add_argument("--net-block-ms", type=int, default=500)
    ap.add_argument("--net-workers", type=int, default=0, help="[mempool] admission_workers of every validator")
    ap.add_argument("--net-concurrency", type=int, default=32, help="concurrent POST /submit lanes")
    ap.add_argument("--net-timeout", type=float, default=180.0, help="seconds for submission and inclusion")
    ap.add_argument("--poll-ms", type=int, default=20, help="/status poll interval of the finalization timing")
    ap.add_argument("--net-keep", action="store_true", help="keep the validator homes (and their logs)")
    args = ap.parse_args()
    if args.single_json:
        print(json.dumps(single_validator(args)))
        return
    out: dict[str, Any] = single_validator(args)
    # For the bench.* imports below. Appended, not prepended: an A/B child (--single-json, above) runs with
    # PYTHONPATH=<baseline checkout>, whose cowboy_* packages must win over this checkout's.
    if _REPO not in sys.path:
        sys.path.append(_REPO)
    if args.base:
        out["ab"] = ab_runs(args)
    if args.validators > 1:
        from bench.chain_throughput_network import network_run

        net = network_run(args)
        out["network"] = net
        single = out["pipelined"]["end_to_end_tps"]
        out["ratio_network_tps_to_single_validator"] = (net["transfers_per_s"] / single
                                                        if net.get("transfers_per_s") else None)
        out["load_average_after_network"] = os.getloadavg()
    sizes = [int(s) for s in args.state_sizes.split(",") if s]
    if sizes:
        from bench.state_root import measure

        out["state_root"] = {str(n): measure(n) for n in sizes}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

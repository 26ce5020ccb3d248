"""A follower's execution of the leader's block with and without its admission's signature marks (issue 20 item 5).

One producer builds a block of ``--txs`` transfers from ``--senders`` funded accounts. Two followers on their own
in-memory chains verify it (``Forks.verify``: header checks + ``execute_block``): the baseline checks every
signature (no marks, what every follower did before ``chain/signature_marks.py``); the other admitted the same
transactions first (``chain/admission.admit``, untimed) and skips the recovery of each. The two are run
alternately ``--reps`` times in this process (fresh ``Forks`` each time, nothing committed); medians, per block
and per transfer, and the ratio. Also the cost of one ``recover_signer`` in the same run (what a mark saves).
Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from cowboy_node.chain.admission import admit
from cowboy_node.chain.chain import Chain
from cowboy_node.chain.mempool import Mempool, MempoolConfig
from cowboy_node.consensus.forks import Forks
from cowboy_node.consensus.records import ConsensusRecords
from cowboy_node.execution.transfer_tx import recover_signer
from cowboy_node.node.devgenesis import DevGenesis, create_dev_genesis
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Block, Round
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction

CHAIN_ID = "bench"


def _setup(n_txs: int, n_senders: int) -> tuple[DevGenesis, list[Transaction]]:
    keys = [(i + 1).to_bytes(32, "big") for i in range(n_senders)]
    addrs = [private_key_to_address(k) for k in keys]
    dev = create_dev_genesis(chain_id=CHAIN_ID, balances={a: 10**24 for a in addrs}, system_deployers=(),
                             fee_recipient=bytes(20), genesis_time_ms=1_700_000_000_000, entropy=bytes(range(96)))
    txs = [Transaction(chain_id=CHAIN_ID, nonce=i // n_senders, sender=addrs[i % n_senders],
                       instruction=Transfer(to=addrs[(i + 1) % n_senders], amount=1), cycles_limit=50_000,
                       cells_limit=2_000, max_fee_per_cycle=200_000, max_priority_fee_per_cycle=1_000,
                       max_fee_per_cell=200_000, max_priority_fee_per_cell=1_000).signed(keys[i % n_senders])
           for i in range(n_txs)]
    return dev, txs


def _build(dev: DevGenesis, txs: list[Transaction]) -> Block:
    chain = Chain(MemoryStore(), dev.genesis)
    f = Forks(chain, ConsensusRecords(chain.store))
    seed = dev.validator_key.ed25519_seed
    c = f.build(chain.head.hash(), Round(0, 1), txs, timestamp_ms=chain.head.header.timestamp_ms + 1000,
                proposer=ed25519.public_key_from_seed(seed), sign=lambda d: ed25519.sign(seed, d),
                fee_recipient=bytes(20), presence=lambda w: b"\x01\x00")
    block = c.prepared.block
    if len(block.transactions) != len(txs):
        raise SystemExit(f"the block holds {len(block.transactions)} of {len(txs)} transfers (raise the limits)")
    return block


def _time_verify(chain: Chain, block: Block, pk: bytes, marks: Callable[[bytes], bool] | None) -> float:
    f = Forks(chain, ConsensusRecords(chain.store), signature_checked=marks)
    t = time.perf_counter()
    c = f.verify(block, leader_key=pk, max_timestamp_ms=block.header.timestamp_ms)
    dt = time.perf_counter() - t
    if c.prepared.result.state_root != block.header.state_root:
        raise SystemExit("state root differs")
    return dt


def run(n_txs: int, n_senders: int, reps: int) -> dict[str, Any]:
    dev, txs = _setup(n_txs, n_senders)
    block = _build(dev, txs)
    pk = ed25519.public_key_from_seed(dev.validator_key.ed25519_seed)
    plain = Chain(MemoryStore(), dev.genesis)
    marked = Chain(MemoryStore(), dev.genesis)
    pool = Mempool(MempoolConfig())
    for tx in txs:
        admit(tx.to_bytes(), marked, pool)
    base_s: list[float] = []
    new_s: list[float] = []
    _time_verify(plain, block, pk, None)  # warm both paths once
    _time_verify(marked, block, pk, pool.signature_marks.checked)
    for _ in range(reps):
        base_s.append(_time_verify(plain, block, pk, None))
        new_s.append(_time_verify(marked, block, pk, pool.signature_marks.checked))
    t = time.perf_counter()
    for tx in txs:
        recover_signer(tx)
    recover_us = (time.perf_counter() - t) / len(txs) * 1e6
    base, new = statistics.median(base_s), statistics.median(new_s)
    return {
        "txs_per_block": n_txs, "senders": n_senders, "reps": reps,
        "baseline_no_marks": {"ms_per_block": round(base * 1e3, 2), "us_per_tx": round(base / n_txs * 1e6, 1)},
        "with_marks": {"ms_per_block": round(new * 1e3, 2), "us_per_tx": round(new / n_txs * 1e6, 1)},
        "ratio_with_marks_over_baseline": round(new / base, 3),
        "saved_us_per_tx": round((base - new) / n_txs * 1e6, 1),
        "recover_signer_us": round(recover_us, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--txs", type=int, default=500)
    ap.add_argument("--senders", type=int, default=100)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    print(json.dumps(run(args.txs, args.senders, args.reps), indent=2))


if __name__ == "__main__":
    main()

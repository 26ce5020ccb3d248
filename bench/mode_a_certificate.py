"""CIP-11 Mode A certificate benchmark (prints JSON): block-space and verification cost of SubmitPresenceCertificate.

For t_hard receipts (default 11 and 51, the §8.4 examples k = 20 / k = 100), reports:

* ``tx_bytes``: the signed transaction carrying one certificate (what a runner puts in a block every
  ``PRESENCE_PROOF_TTL_BLOCKS`` at most), ``receipt_bytes`` one receipt entry, and
  ``block_bytes_at_5000_runners`` = 5,000 · tx_bytes / 60, the §8.4 steady-state block-space estimate;
* ``verify_ms``: execution of the certificate (``submit_presence_certificate``: prechecks, Sub(R), Ed25519) in a
  world with ``k`` validators, median over ``--reps``;
* ``baseline_ms``: t_hard bare Ed25519 verifications of 32-byte digests in the same run, and ``ratio`` =
  verify_ms / baseline_ms (the overhead of the §8.3 checks beyond the signatures themselves).

Usage: python bench/mode_a_certificate.py [--thresholds 11,51] [--reps 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.chain.chain import Chain
from cowboy_node.execution import validator_set as vs
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.presence_certificates import PresenceProof, proof_key, submit_presence_certificate
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import get_cip11_flags, set_cip11_flags, set_cip11_params
from cowboy_node.node.devgenesis import create_dev_genesis
from cowboy_node.state.memory import MemoryStore
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519, secp256k1
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.preimages import ValidatorKey, validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import subset
from cowboy_protocol.types.params import Cip11Flags, Cip11Params
from cowboy_protocol.types.presence_instructions import PresenceReceipt, SubmitPresenceCertificate
from cowboy_protocol.types.runner import Capabilities, Health, RateCard, RunnerRecord
from cowboy_protocol.types.transaction import Transaction

CHAIN = "bench-mode-a"
RUNNER_SK = (0x4242).to_bytes(32, "big")
RUNNER = secp256k1.private_key_to_address(RUNNER_SK)
H = 1_000


def _case(t_hard: int, reps: int) -> dict[str, float | int]:
    k = 2 * t_hard - 2  # the smallest k with t_hard = floor(k/2) + 1
    keys = [ValidatorKey(keccak256(b"bench-validator" + i.to_bytes(2, "big"))) for i in range(k)]
    peers = [key.pubkey.key for key in keys]
    dev = create_dev_genesis(chain_id=CHAIN, balances={RUNNER: 10**24}, system_deployers=(), fee_recipient=RUNNER,
                             genesis_time_ms=1, cip11=Cip11Flags.for_phase(2), entropy=bytes(range(96)))
    world = Chain(MemoryStore(), dev.genesis).world()
    vs.put_snapshot(world, 0, peers)
    set_cip11_params(world, Cip11Params(MIN_SUBSET=k, MAX_SUBSET=k, T_HARD=t_hard))
    set_cip11_flags(world, replace(get_cip11_flags(world), PRESENCE_HARD_EXCLUDE_ENABLED=True))
    store.append_active_runner(world, RUNNER)
    store.put_runner(world, RunnerRecord(address=RUNNER, index=0, stake=1, capabilities=Capabilities((0,), (), (), 1),
                                         rate_card=RateCard(()), health=Health.HEALTHY, registered_at=1,
                                         last_heartbeat=1, reputation_x1e9=0, active_jobs=0, unbonding_until=0))
    rpk = PubKey.runner(secp256k1.private_key_to_public_key(RUNNER_SK, compressed=True))
    sub = set(subset(rpk.key, peers, min_subset=k, max_subset=k))
    vsh = validator_set_hash(peers)
    receipts = tuple(PresenceReceipt.issue(CHAIN, key, rpk, 0, vsh, H, 7, True)
                     for key in keys if key.pubkey.key in sub)[:t_hard]
    ins = SubmitPresenceCertificate(RUNNER, receipts)
    tx = Transaction(chain_id=CHAIN, nonce=0, sender=RUNNER, instruction=ins, cycles_limit=10**7, cells_limit=10**6,
                     max_fee_per_cycle=1, max_priority_fee_per_cycle=1, max_fee_per_cell=1,
                     max_priority_fee_per_cell=1).signed(RUNNER_SK)
    ctx = begin_block(world, BlockEnv(chain_id=CHAIN, height=H, timestamp_ms=1, fee_recipient=RUNNER,
                                      beacon=b"\x11" * 48, parent_beacon=b"\x11" * 48, n_validators=k))
    times = []
    for _ in range(reps):
        cp = world.checkpoint()
        t0 = time.perf_counter()
        submit_presence_certificate(world, tx, ctx, Meter(10**7, 10**6), [])
        times.append(time.perf_counter() - t0)
        assert world.get(proof_key(RUNNER)) == PresenceProof(H, H + 60).encode()
        world.revert(cp)
    digests = [r.digest(CHAIN) for r in receipts]
    base = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for r, d in zip(receipts, digests, strict=True):
            ed25519.verify(r.validator_pubkey[1:], d, r.validator_signed)
        base.append(time.perf_counter() - t0)
    verify_ms, baseline_ms = statistics.median(times) * 1e3, statistics.median(base) * 1e3
    tx_bytes = len(tx.to_bytes())
    return {"t_hard": t_hard, "k": k, "receipt_bytes": len(encode(receipts[0].to_cbor())), "tx_bytes": tx_bytes,
            "block_bytes_at_5000_runners": round(5_000 * tx_bytes / 60), "verify_ms": round(verify_ms, 3),
            "baseline_ms": round(baseline_ms, 3), "ratio": round(verify_ms / baseline_ms, 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--thresholds", default="11,51")
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args()
    print(json.dumps({"bench": "mode_a_certificate",
                      "cases": [_case(int(t), a.reps) for t in a.thresholds.split(",")]}, indent=2))


if __name__ == "__main__":
    main()

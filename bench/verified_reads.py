"""Cost of a verified read on the client: µs per ``verify_read`` (certificate + state proof), beside its parts.

A real node (in memory, one validator) commits a few blocks; its ``/account`` answer with ``proof=true`` is
verified ``--n`` times by the client's ``cowboy_protocol.verified_reads.verify_read``. Same run, same answer:
the proof walk alone (``verify_proof``), the certificate alone (``verify_certified_header``: one pairing check
plus hashing the message to G1), and the node's own BLS ``verify`` of the same signature as the baseline the
certificate check is compared with. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_harness import make_bench_node, quiet_logs
from cowboy_node.consensus.simplex.types import Finalization, decode_message, finalize_message
from cowboy_node.crypto import bls
from cowboy_protocol.verified_reads import ACCOUNT_PREFIX, verify_certified_header, verify_proof, verify_read


def _us_per_call(fn: Callable[[], Any], n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return round((time.perf_counter() - t0) / n * 1e6, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="verifications per measurement")
    args = ap.parse_args()
    quiet_logs()
    node = make_bench_node([], block_time_ms=1000)
    for _ in range(3):
        asyncio.run(node.produce_block())
    address = node.fee_recipient
    doc = node.api.account_proof(address)
    group = node.chain.genesis.group_public_key
    key = ACCOUNT_PREFIX + address
    header = bytes.fromhex(doc["header"][2:])
    cert_bytes = bytes.fromhex(doc["certificate"][2:])
    cert = decode_message(cert_bytes)
    assert isinstance(cert, Finalization)
    root = bytes.fromhex(doc["state_root"][2:])
    message = finalize_message(cert.proposal)
    out = {
        "benchmark": "verified_reads", "params": {"n": args.n, "height": node.chain.height,
                                                  "proof_steps": len(doc["proof"]["steps"])},
        "verify_read_us": _us_per_call(lambda: verify_read(doc, group, key=key), args.n),
        "certificate_only_us": _us_per_call(lambda: verify_certified_header(header, cert_bytes, group), args.n),
        "proof_only_us": _us_per_call(lambda: verify_proof(root, doc["proof"]), args.n),
        "baseline_node_bls_verify_us": _us_per_call(lambda: bls.verify(group, message, cert.signature), args.n),
    }
    out["certificate_vs_node_bls_verify"] = round(out["certificate_only_us"] / out["baseline_node_bls_verify_us"], 3)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

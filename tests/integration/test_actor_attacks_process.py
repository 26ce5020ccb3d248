"""A real node under attack by actors: escape and denial-of-service vectors deployed and called through RPC.

Every vector of ``tests/vectors/pvm_escapes`` that is refused by the AST policy must be refused at deploy (a
failed receipt naming the rule and line); every vector that is halted at run time deploys, and calling it gives
a failed receipt with the halt's code while the sender still pays. Throughout, the node keeps producing blocks,
and a benign actor deployed afterwards still works.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import CallActor, DeployActor
from tests.helpers import make_tx
from tests.integration.nodeproc import NodeProcess
from tests.unit.execution.pvm.test_pvm_escapes import VECTORS, expectation

# One vector per family: hierarchy walk, introspection, format strings, imports, exponentiation, recursion,
# memory bombs, endless loops in Python and in C, halts swallowed by except/finally, hash-order probes.
CHOSEN = ("01_", "07_", "03_", "18_", "27_", "29_", "30_", "34_", "35_", "37_", "40_", "48_", "72_", "97_")
BENIGN = '''import pvm_host


def handler(payload):
    pvm_host.set_state(b"k", payload)
    return payload
'''
LIMITS = {"cycles_limit": 20_000_000, "cells_limit": 400_000, "max_fee": 200_000}


# Bounds on eventual states, not timings: a block of halting calls (up to 20 M cycles each) executes serially, and
# on a loaded host (load 15 on 2 cores) one such block took over a minute.
RECEIPT_BOUND_S = 300
LIVENESS_BOUND_S = 120


def _wait_receipt(node: NodeProcess, tx_hash: str, timeout: float = RECEIPT_BOUND_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = node.get(f"/tx/{tx_hash}/receipt")
        if "status" in out:
            return out
        time.sleep(0.05)
    raise AssertionError(f"no receipt for {tx_hash}")


def test_escape_vectors_fail_cleanly_and_the_node_keeps_producing_blocks(tmp_path: Path) -> None:
    vectors = [v for v in VECTORS if v.name.startswith(CHOSEN)]
    assert len(vectors) == len(CHOSEN)
    node = NodeProcess(tmp_path / "home")
    sk, sender = load_account_private_key(node.home / "keys" / "faucet.key")
    node.start()
    try:
        nonce = 0
        deploys: list[tuple[Path, str, bytes]] = []
        for path in vectors:
            source = path.read_text(encoding="utf-8")
            tx = make_tx(sk, nonce, DeployActor(source, b"", "", b""), chain_id="cowboy-it-1", **LIMITS)
            code, out = node.post_tx(tx.to_bytes())
            assert code == 200, (path.name, out)
            deploys.append((path, "0x" + tx.tx_hash().hex(), derive_actor_address(sender, b"", source)))
            nonce += 1
        calls: list[tuple[Path, str]] = []
        for path, tx_hash, address in deploys:
            kind, what = expectation(path)
            receipt = _wait_receipt(node, tx_hash)
            if kind == "rejected":
                assert receipt["status"] == "failed", (path.name, receipt)
                assert receipt["error_code"].startswith(f"actor_rejected:{what}:"), (path.name, receipt["error_code"])
                continue
            assert receipt["status"] == "success", (path.name, receipt)
            tx = make_tx(sk, nonce, CallActor(address, "handler", b"x" * 8), chain_id="cowboy-it-1", **LIMITS)
            code, out = node.post_tx(tx.to_bytes())
            assert code == 200, (path.name, out)
            calls.append((path, "0x" + tx.tx_hash().hex()))
            nonce += 1
        assert calls, "no halting vector was chosen"
        for path, tx_hash in calls:
            _, what = expectation(path)
            receipt = _wait_receipt(node, tx_hash)
            assert receipt["status"] == "failed" and receipt["error_code"] == what, (path.name, receipt)
            assert int(receipt["fee_paid"]) > 0, (path.name, receipt)

        # Blocks keep coming, and a benign actor still deploys and runs.
        before = node.get("/height")["height"]
        tx = make_tx(sk, nonce, DeployActor(BENIGN, b"", "", b""), chain_id="cowboy-it-1", **LIMITS)
        assert node.post_tx(tx.to_bytes())[0] == 200
        assert _wait_receipt(node, "0x" + tx.tx_hash().hex())["status"] == "success"
        benign = derive_actor_address(sender, b"", BENIGN)
        tx = make_tx(sk, nonce + 1, CallActor(benign, "handler", b"ok"), chain_id="cowboy-it-1", **LIMITS)
        assert node.post_tx(tx.to_bytes())[0] == 200
        assert _wait_receipt(node, "0x" + tx.tx_hash().hex())["status"] == "success"
        deadline = time.monotonic() + LIVENESS_BOUND_S
        while node.get("/height")["height"] < before + 5:
            assert time.monotonic() < deadline, "the node stopped producing blocks"
            time.sleep(0.05)
    finally:
        rc = node.terminate()
    assert rc == 0

"""Overload and kill -9 under load against a real node process (issue 22, "Load and soak").

* Past the mempool caps, clients get a stable error code (``mempool_full``), block cadence holds, and the pool
  drains afterwards: every accepted transaction is included.
* kill -9 while transactions are flowing, restart: nothing accepted and included before the kill is lost, the
  first new block comes within a few seconds of the restart, and the senders' next transactions are included
  (pooled ones kept by the mempool journal are re-admitted; one admitted after the journal's last per-block
  sync can be lost with the process, and its sender simply re-sends from its account nonce).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.integration.nodeproc import NodeProcess, wait_for

BLOCK_MS = 1000
POOL = 150
"""mempool.max_txs: small, so a burst of sends overflows it within one block time."""
SENDERS = 10
PER_SENDER = 30
"""Consecutive nonces per sender: SENDERS × PER_SENDER = 300 executable transactions, twice the pool."""
KEYS = [(0x0B0B00 + i).to_bytes(32, "big") for i in range(SENDERS)]
SINK = bytes(19) + b"\x42"



class Sender:
    """Signs min-tip transfers for one node."""

    def __init__(self, node: NodeProcess) -> None:
        self.node = node
        status = node.get("/status")
        self.chain_id = status["chain_id"]
        self.bf = status["basefee"]

    def send(self, sk: bytes, nonce: int, to: bytes = SINK, amount: int = 1) -> tuple[int, Any]:
        tx = Transaction(chain_id=self.chain_id, nonce=nonce, sender=private_key_to_address(sk),
                         instruction=Transfer(to=to, amount=amount), cycles_limit=50_000, cells_limit=2_000,
                         max_fee_per_cycle=4 * self.bf["cycle"], max_priority_fee_per_cycle=1,
                         max_fee_per_cell=4 * self.bf["cell"], max_priority_fee_per_cell=1).signed(sk)
        return self.node.post_tx(tx.to_bytes())


def _included(node: NodeProcess, tx_hash: str) -> bool:
    return "height" in node.get(f"/tx/{tx_hash}/receipt")


def _intervals_ms(node: NodeProcess, first: int, last: int) -> list[int]:
    stamps = [node.get(f"/block/{h}")["timestamp_ms"] for h in range(first, last + 1)]
    return [b - a for a, b in itertools.pairwise(stamps)]


def test_overload_refuses_with_a_stable_code_keeps_cadence_and_drains(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=BLOCK_MS)
    cfg = node.home / "config.toml"
    cfg.write_text(cfg.read_text().replace("max_txs = 10000", f"max_txs = {POOL}")
                   .replace("max_queued = 1024", f"max_queued = {POOL}"))
    faucet, _ = load_account_private_key(node.home / "keys" / "faucet.key")
    node.start()
    try:
        s = Sender(node)
        fund = [s.send(faucet, i, private_key_to_address(sk), 10**20)[1]["tx_hash"] for i, sk in enumerate(KEYS)]
        wait_for("funding", lambda: all(_included(node, h) for h in fund), 10)

        start = node.get("/height")["height"]
        accepted: list[str] = []
        refused: dict[str, int] = {}
        next_nonce = dict.fromkeys(range(SENDERS), 0)
        t0 = time.monotonic()
        for _ in range(PER_SENDER):  # round-robin over senders, as clients would
            for k in range(SENDERS):
                code, body = s.send(KEYS[k], next_nonce[k])
                if code == 200:
                    accepted.append(body["tx_hash"])
                    next_nonce[k] += 1
                else:
                    assert code == 400, body
                    refused[body["code"]] = refused.get(body["code"], 0) + 1
        burst_s = time.monotonic() - t0
        # The burst outran the blocks: the pool filled and the rest was refused with the stable code only.
        assert refused and set(refused) == {"mempool_full"}, (refused, burst_s)
        wait_for("the pool to drain", lambda: node.get("/status")["mempool"]["txs"] == 0, 15)
        assert all(_included(node, h) for h in accepted)
        end = node.get("/height")["height"]
        intervals = _intervals_ms(node, start, end)
        assert intervals and max(intervals) <= 2 * BLOCK_MS, intervals  # cadence held through the overload
    finally:
        rc = node.terminate()
    assert rc == 0


def test_kill_9_under_load_loses_nothing_and_restarts_within_seconds(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=250)
    faucet, _ = load_account_private_key(node.home / "keys" / "faucet.key")
    node.start()
    try:
        s = Sender(node)
        fund = [s.send(faucet, i, private_key_to_address(sk), 10**20)[1]["tx_hash"] for i, sk in enumerate(KEYS)]
        wait_for("funding", lambda: all(_included(node, h) for h in fund), 10)
        accepted: list[str] = []
        nonce = 0
        deadline = time.monotonic() + 2.0  # two seconds of steady load, then kill -9 in the middle of it
        while time.monotonic() < deadline:
            for sk in KEYS:
                code, body = s.send(sk, nonce)
                assert code == 200, body
                accepted.append(body["tx_hash"])
            nonce += 1
        included_before = [h for h in accepted if _included(node, h)]
        assert included_before
        height_before = node.get("/height")["height"]
        node.kill()
        node.start()
        # The bound only stops a hung test: a loaded host can take many seconds to start a process.
        wait_for("the first block after the restart", lambda: node.get("/height")["height"] > height_before, 60)
        assert all(_included(node, h) for h in included_before)  # nothing committed was lost
        # Each sender goes on from its account nonce (what the journal kept lands first): nothing is jammed.
        after = []
        for sk in KEYS:
            acct = node.get("/account/0x" + private_key_to_address(sk).hex())
            code, body = s.send(sk, acct["next_pending_nonce"])
            assert code == 200, body
            after.append(body["tx_hash"])
        wait_for("the senders' new txs included", lambda: all(_included(node, h) for h in after), 10)
    finally:
        rc = node.terminate()
    assert rc == 0

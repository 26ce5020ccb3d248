"""Crash test: SIGKILL the node at random moments while blocks and transactions flow.

After every restart the node must resume at or above the last height it
reported committed, keep every transaction it reported committed (same
height), and at the end a fresh replay from genesis must reproduce the state
root of every block.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

from cowboy_protocol.crypto.secp256k1 import private_key_to_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import Transfer
from cowboy_protocol.types.transaction import Transaction
from tests.integration.nodeproc import NodeProcess, cli

KILLS = 20


def _sender(node: NodeProcess, sk: bytes, stop: threading.Event, committed: dict[str, int]) -> None:
    """Send transfers and record those whose receipts the node reports."""
    me = private_key_to_address(sk)
    pending: list[str] = []
    while not stop.is_set():
        try:
            acct = node.get("/account/0x" + me.hex())
            status = node.get("/status")
            nonce = acct["next_pending_nonce"]
            bf = status["basefee"]
            for i in range(5):
                tx = Transaction(chain_id=status["chain_id"], nonce=nonce + i, sender=me,
                                 instruction=Transfer(to=bytes(19) + b"\x77", amount=1), cycles_limit=50_000,
                                 cells_limit=2_000, max_fee_per_cycle=2 * bf["cycle"], max_priority_fee_per_cycle=10,
                                 max_fee_per_cell=2 * bf["cell"], max_priority_fee_per_cell=10).signed(sk)
                code, body = node.post_tx(tx.to_bytes())
                if code == 200:
                    pending.append(body["tx_hash"])
            for h in list(pending):
                r = node.get(f"/tx/{h}/receipt")
                if "height" in r:
                    committed[h] = r["height"]
                    pending.remove(h)
        except (OSError, ValueError, KeyError):
            pass  # the node is being killed; keep trying until told to stop
        time.sleep(0.05)


def test_sigkill_at_random_moments_loses_nothing_committed(tmp_path: Path) -> None:
    rng = random.Random(1234)
    node = NodeProcess(tmp_path / "home", block_time_ms=150)
    sk, _ = load_account_private_key(node.home / "keys" / "faucet.key")
    committed: dict[str, int] = {}
    last_reported = 0
    for _ in range(KILLS):
        node.start()
        h = node.get("/height")["height"]
        assert h >= last_reported, f"resumed at {h}, below the last reported committed height {last_reported}"
        for tx_hash, height in list(committed.items()):
            r = node.get(f"/tx/{tx_hash}/receipt")
            assert r.get("height") == height, f"committed transaction {tx_hash} lost after restart"
        stop = threading.Event()
        t = threading.Thread(target=_sender, args=(node, sk, stop, committed), daemon=True)
        t.start()
        time.sleep(rng.uniform(0.2, 1.2))
        last_reported = max(last_reported, node.get("/height")["height"])
        node.kill()  # SIGKILL, no chance to clean up
        stop.set()
        t.join(timeout=10)
    node.start()
    assert node.get("/height")["height"] >= last_reported
    for tx_hash, height in committed.items():
        assert node.get(f"/tx/{tx_hash}/receipt").get("height") == height
    final = node.get("/status")
    assert node.terminate() == 0
    print(f"committed transactions: {len(committed)}, final height {final['height']}")
    assert len(committed) >= KILLS, "too few transactions were committed for the test to mean anything"
    replay = json.loads(cli("replay", "--home", str(node.home), timeout=300).stdout)
    assert replay["ok"] is True, replay
    assert replay["height"] >= final["height"]
    if replay["height"] == final["height"]:
        assert replay["state_root"] == final["state_root"]

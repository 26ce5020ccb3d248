"""Demo workload of the compose testnet (``cowboy-compose demo``): something to watch on the dashboard.

Deploys an actor, funds it so its timers can pay, arms its timer (it fires every DEMO_TIMER_BLOCKS blocks, each
fire counts itself in state ``ticks`` and re-arms), then every DEMO_INTERVAL_S seconds submits an HTTP job (GET
DEMO_URL, one runner) whose result comes back to the actor's ``on_result`` callback, and logs one line per settled
job:

    demo: job 3 settled ok=True body=b'{"price": 42}' (ticks=12)

Every transaction is signed with the testnet faucet key, shared with the runners' setup: each use holds an
exclusive flock on the key file, so no two users race for the same account nonce.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from cowboy_protocol.codec import decode

RPC = os.environ["DEMO_RPC"]
URL = os.environ.get("DEMO_URL", "http://demo-http:8080/price")
INTERVAL_S = float(os.environ.get("DEMO_INTERVAL_S", "20"))
TIMER_BLOCKS = int(os.environ.get("DEMO_TIMER_BLOCKS", "5"))
FAUCET = Path(os.environ.get("DEMO_FAUCET_KEY", "/faucet/faucet.key"))
SETTLE_S = 120.0

ACTOR = f'''import pvm_host


def arm(payload):
    pvm_host.schedule_timer(pvm_host.current_block() + {TIMER_BLOCKS}, b"tick")
    return b""


def handle_timer(payload):
    raw = pvm_host.get_state(b"ticks")
    pvm_host.set_state(b"ticks", str(int(raw) + 1 if raw else 1).encode())
    pvm_host.schedule_timer(pvm_host.current_block() + {TIMER_BLOCKS}, b"tick")
    return b""


def start(payload):
    job_id = pvm_host.submit_job(payload)
    pvm_host.set_state(b"job", job_id)
    return job_id


def on_result(payload):
    pvm_host.set_state(b"last", payload)
    return b""
'''


def log(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def faucet_tx(*args: str) -> Any:
    """``cowboy-node tx ARGS --key FAUCET --rpc RPC`` under the faucet lock; its JSON output."""
    with open(FAUCET, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = subprocess.run(["cowboy-node", "tx", *args, "--key", str(FAUCET), "--rpc", RPC],
                             capture_output=True, text=True, timeout=120, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"cowboy-node tx {args[0]} failed: {(out.stdout + out.stderr).strip()[-400:]}")
    return json.loads(out.stdout) if out.stdout.strip().startswith("{") else out.stdout


def state(actor: str, key: bytes) -> bytes | None:
    with urllib.request.urlopen(f"{RPC}/actor/{actor}/state?key=0x{key.hex()}", timeout=10) as r:
        value = json.loads(r.read())["value"]
    return None if value is None else bytes.fromhex(value[2:])


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "demo_actor.py"
        src.write_text(ACTOR)
        deployed = faucet_tx("deploy", "--source", str(src), "--timeout", "60")
    actor = deployed["address"]
    # Funded before its first timer is armed: a timer whose fee payer (the actor) cannot pay for a fire is
    # dropped unfired (cowboy_timers_self_destructed_total; the CowboyTimersFailingForLowFunds alert).
    faucet_tx("transfer", "--to", actor, "--amount", str(10**20), "--wait", "--timeout", "60")
    faucet_tx("call", "--actor", actor, "--handler", "arm", "--wait", "--timeout", "60")
    log(f"actor {actor} deployed and funded; timer every {TIMER_BLOCKS} blocks; jobs GET {URL}")
    n = 0
    while True:
        n += 1
        cid = f"demo-{n}"
        doc = {"job_type": {"kind": "http", "url": URL, "method": "GET"},
               "verification": {"mode": "none", "runners": 1, "threshold": 1},
               "max_price": "1000000", "timeout_blocks": 200,
               "callback": {"actor": actor, "handler": "on_result", "correlation_id": cid}}
        try:
            faucet_tx("call", "--actor", actor, "--handler", "start", "--payload",
                      "0x" + json.dumps(doc).encode().hex(), "--wait", "--timeout", "60")
            log(f"job {n} submitted")
            deadline = time.monotonic() + SETTLE_S
            while time.monotonic() < deadline:
                raw = state(actor, b"last")
                cb = decode(raw) if raw is not None else None
                if cb is not None and cb[4] == cid:
                    ticks = (state(actor, b"ticks") or b"0").decode()
                    log(f"job {n} settled ok={cb[1]} body={cb[2]!r} (ticks={ticks})")
                    break
                time.sleep(1)
            else:
                log(f"job {n} did not settle within {SETTLE_S:.0f}s")
        except Exception as e:  # keep the workload going; the reason is in the log
            log(f"job {n}: {e}")
        time.sleep(INTERVAL_S)


if __name__ == "__main__":
    sys.exit(main())

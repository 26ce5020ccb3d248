"""Runner jobs on a real 4-validator network: two real ``cowboy-runner`` processes configured with validator 0
only find the rest of their subset through ``GET /validators`` and hold a QUIC session with each of its three
members, an actor submits jobs through validator 1's RPC (the transaction reaches the leaders by peer
gossip), and both an M == 1 job (selected from the parent beacon R_{S-1}, CIP-11 §9.2 mode 0x00) and an M == 2
job (delayed selection from the seed of an absolute round, committed in a later block's ConsumedSeedsV1) settle:
the runners execute, their signed results are included, and the actor's callback stores the result on every
validator alike."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.types.presence import decode_presence
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto.secp256k1 import private_key_to_public_key
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.transport.subset import subset
from tests.e2e.netproc import Testnet
from tests.integration.nodeproc import cli
from tests.integration.runnerproc import ACTOR, BODY, HttpServer, RunnerProcess, runner_cli

pytestmark = pytest.mark.timeout(600)  # ~4 min on a loaded 2-core machine; a bound against hangs


class _ValidatorRpc:
    """What the runner/CLI helpers need of a node: its home (config.toml, keys/faucet.key) and RPC URL."""

    def __init__(self, net: Testnet, i: int) -> None:
        self.net, self.i = net, i
        v = net.validators[i]
        self.home, self.url = v.home, v.rpc_url
        faucet = self.home / "keys" / "faucet.key"
        if not faucet.exists():
            shutil.copy(net.out / "faucet.key", faucet)
            os.chmod(faucet, 0o600)

    def get(self, path: str) -> Any:
        status, body = self.net.get(self.i, path)
        assert status == 200, (path, status, body)
        return body


def _wait_all_sessions(runner: RunnerProcess, k: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(1 for x in runner.status().get("sessions", []) if x["connected"]) >= k:
            return
        time.sleep(0.3)
    raise AssertionError(f"runner never held {k} sessions: {runner.status()}")


def _outsider_marks_present(net: Testnet, runners: list[RunnerProcess], timeout: float = 40) -> None:
    """CIP-11 §8.2: n = 4 gives k = 3, so each runner has no session with one validator — the one outside its
    Sub(R). Once presence gossip flows, that validator's own proposals still mark the runner present."""
    keys = [bytes.fromhex(v.public_key.removeprefix("0x")) for v in net.validators]
    active = net.get(0, "/runners/active")[1]["runners"]
    index = {r["address"].lower(): i for i, r in enumerate(active)}
    wanted: dict[bytes, set[int]] = {}
    for r in runners:
        sk, _ = load_account_private_key(r.home / "keys" / "runner.key")
        sub = subset(private_key_to_public_key(sk, compressed=True), keys)
        (outsider,) = [k for k in keys if k not in sub]
        wanted.setdefault(outsider, set()).add(index[r.address.lower()])
    start = max(h for h in net.heights().values() if h is not None)
    seen: dict[bytes, set[int]] = {k: set() for k in wanted}
    h, deadline = start + 1, time.monotonic() + timeout
    while time.monotonic() < deadline and any(not wanted[k] <= seen[k] for k in wanted):
        b = net.block(0, h)
        if b is None:
            time.sleep(0.3)
            continue
        proposer = bytes.fromhex(b["proposer"][2:])
        if proposer in wanted and b["presence_input"] is not None:
            present = decode_presence(bytes.fromhex(b["presence_input"][2:]), len(active))
            seen[proposer] |= present & wanted[proposer]
        h += 1
    assert all(wanted[k] <= seen[k] for k in wanted), (wanted, seen)


def _submit(node: _ValidatorRpc, actor: str, url: str, verification: dict[str, Any], cid: str, *,
            timeout_blocks: int = 200) -> bytes:
    """The actor submits an HTTP job through ``node`` and returns its id."""
    doc = {"job_type": {"kind": "http", "url": url, "method": "GET"}, "verification": verification,
           "max_price": "1000000", "timeout_blocks": timeout_blocks,
           "callback": {"actor": actor, "handler": "on_result", "correlation_id": cid}}
    out = json.loads(cli("tx", "call", "--key", str(node.home / "keys" / "faucet.key"), "--actor", actor,
                         "--handler", "start", "--payload", "0x" + json.dumps(doc).encode().hex(), "--rpc", node.url,
                         "--wait", "--timeout", "60").stdout)
    assert out["receipt"]["status"] == "success", out
    return bytes.fromhex(out["result"][2:])


def _callback(node: _ValidatorRpc, actor: str, cid: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = node.get(f"/actor/{actor}/state?key=0x" + b"last".hex())["value"]
        if value is not None:
            cb = decode(bytes.fromhex(value[2:]))
            if cb[4] == cid:
                return cb
        time.sleep(0.3)
    raise AssertionError(f"the callback of job {cid} never arrived")


def test_m1_and_m2_jobs_settle_on_a_four_validator_network(tmp_path: Path) -> None:
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=False)
    runners: list[RunnerProcess] = []
    try:
        net.start()
        net.wait_heights(2, 45)
        v0, v1 = _ValidatorRpc(net, 0), _ValidatorRpc(net, 1)
        faucet = str(v1.home / "keys" / "faucet.key")
        for k in range(2):
            # Only validator 0's RPC and QUIC endpoint are configured: the runner learns the other members of
            # its Sub(R) from GET /validators (the validators announce their endpoints to each other).
            runner = RunnerProcess(tmp_path / f"runner-{k}", v0)  # type: ignore[arg-type]
            cli("tx", "transfer", "--key", faucet, "--to", runner.address, "--amount", str(10**20), "--rpc", v1.url,
                "--wait", "--timeout", "60")
            reg = runner_cli("register", "--home", str(runner.home), "--stake", str(10**18), check=False)
            assert reg.returncode == 0 and json.loads(reg.stdout)["status"] == "success", reg.stdout + reg.stderr
            runners.append(runner)
        src = tmp_path / "actor.py"
        src.write_text(ACTOR)
        actor = json.loads(cli("tx", "deploy", "--key", faucet, "--source", str(src), "--rpc", v1.url,
                               "--timeout", "60").stdout)["address"]
        cli("tx", "transfer", "--key", faucet, "--to", actor, "--amount", str(10**20), "--rpc", v1.url, "--wait",
            "--timeout", "60")
        with HttpServer() as server:
            for r in runners:
                r.start()
            for r in runners:
                r.wait_session()
            for r in runners:
                _wait_all_sessions(r, 3)
            _outsider_marks_present(net, runners)
            url = f"http://127.0.0.1:{server.port}/price"
            job1 = _submit(v1, actor, url, {"mode": "none", "runners": 1, "threshold": 1}, "m1")
            cb1 = _callback(v1, actor, "m1", 90)
            assert (cb1[0], cb1[1], cb1[2]) == (job1, True, BODY), cb1
            job2 = _submit(v1, actor, url, {"mode": "majority_vote", "runners": 2, "threshold": 2}, "m2")
            cb2 = _callback(v1, actor, "m2", 120)
            assert (cb2[0], cb2[1], cb2[2]) == (job2, True, BODY), cb2
            assert server.hits == 3  # one runner for the M == 1 job, both for the M == 2 job
        # Every validator holds the same settled jobs and callback state.
        top = min(h for h in net.heights().values() if h is not None)
        net.assert_agreement(top)
        for i in range(4):
            value = net.get(i, f"/actor/{actor}/state?key=0x" + b"last".hex())[1]["value"]
            assert decode(bytes.fromhex(value[2:]))[4] == "m2"
        consumed = [net.block(0, h) for h in range(1, top + 1)]
        assert any(b is not None and b["consumed_seeds"] for b in consumed), "no block consumed the M == 2 seed"
        # CIP-11 §10: kill -9 the runners' own validator (their RPC, and a session) while a runner executes a
        # job: the result still settles through another validator (result frame on another session, or the
        # rebroadcast through the RPC fallback the validators announced).
        with HttpServer() as slow:
            slow.delay_s = 4.0
            url = f"http://127.0.0.1:{slow.port}/price"
            job3 = _submit(v1, actor, url, {"mode": "none", "runners": 1, "threshold": 1}, "m1-kill")
            net.wait_for("a runner executing job 3", lambda: slow.hits >= 1, 60)
            net.kill(0)
            cb3 = _callback(v1, actor, "m1-kill", 120)
            assert (cb3[0], cb3[1], cb3[2]) == (job3, True, BODY), cb3
        top = min(h for i, h in net.heights([1, 2, 3]).items() if h is not None)
        net.assert_agreement(top, among=[1, 2, 3])
    finally:
        for r in runners:
            if r.proc is not None and r.proc.poll() is None:
                r.kill()
        net.close()

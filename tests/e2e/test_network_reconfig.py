"""CIP-11 §5.3 reconfiguration by governance on a real 4-validator network with a real runner (issue 16 item 7).

Four ``cowboy-node run`` processes and one ``cowboy-runner`` on loopback. Governance first sets OVERLAP_BLOCKS = 20
(a chain parameter, approved by three validators); the runner holds its k = 3 sessions of ``Sub_0(R)``. Then three
validators — including the one leaving — approve ``ActivateValidatorSet`` (0x48) with epoch 1 = the genesis set
minus X, where X is a member of ``Sub_0(R)`` other than the runner's RPC validator, active from h. Checked:

- every validator's ``/status`` and ``GET /validators`` publish the activation (h, cutoff h + 20);
- during the window the runner holds the union ``Sub_0(R) ∪ Sub_1(R)``: X under epoch 0, the three others under
  epoch 1 (|V_1| = 3 ⇒ k = 3);
- from the cutoff the runner holds exactly the three epoch-1 sessions, the X session ended with
  ``OverlapExpired`` (validator side) or was closed by the runner's re-plan, and it never offered hash(0) again (no
  ``WrongValidatorSet`` refusal in its log);
- blocks keep finalizing on all four validators, X included (consensus membership is unchanged).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.node.keys import load_validator_key
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.secp256k1 import private_key_to_public_key
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.transport.subset import subset
from cowboy_protocol.types.governance_instructions import GovernanceSetParam
from cowboy_protocol.types.instructions import Instruction, ValidatorApproved, approval_preimage
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet
from tests.e2e.netproc import Testnet
from tests.e2e.test_network_jobs import _ValidatorRpc, _wait_all_sessions
from tests.integration.nodeproc import BIN
from tests.integration.runnerproc import RunnerProcess

pytestmark = pytest.mark.timeout(300)

OVERLAP = 20


def _runner_cmd(*args: str) -> list[str]:
    exe = BIN / "cowboy-runner"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "cowboy_runner.cli", *args]


def _head(net: Testnet) -> int:
    return max(h for h in net.heights().values() if h is not None)


def _sessions(runner: RunnerProcess) -> set[tuple[str, int]]:
    """(validator key, subset_epoch) of the runner's authenticated sessions."""
    return {(s["validator"].lower(), int(s["subset_epoch"])) for s in runner.status().get("sessions", [])
            if s["connected"]}


def _governed(net: Testnet, ins: Instruction, approvers: list[int]) -> dict[str, Any]:
    """Submit ``ins`` wrapped in a ValidatorApproved with the approvals of ``approvers`` (signed here with their
    validator keys, as ``--approve-with`` does) from the faucet; the receipt once included."""
    st = net.status(1)
    nonce = int(net.get(1, "/params")[1]["governance"]["approval_nonce"])
    msg = approval_preimage(st["chain_id"], nonce, ins)
    approvals = tuple((i, ed25519.sign(load_validator_key(net.validators[i].home / "keys" / "validator.key")
                                       .ed25519_seed, msg)) for i in sorted(approvers))
    f = net.faucet
    if f.next_nonce is None:
        f.next_nonce = int(net.get(1, "/account/0x" + f.address.hex())[1]["next_pending_nonce"])
    bf = st["basefee"]
    tx = Transaction(chain_id=st["chain_id"], nonce=f.next_nonce, sender=f.address,
                     instruction=ValidatorApproved(ins, approvals), cycles_limit=400_000, cells_limit=20_000,
                     max_fee_per_cycle=4 * int(bf["cycle"]) + 10, max_priority_fee_per_cycle=10,
                     max_fee_per_cell=4 * int(bf["cell"]) + 10, max_priority_fee_per_cell=10).signed(f.sk)
    code, body = net.send_tx(1, tx.to_bytes())
    assert code == 200, body
    f.next_nonce += 1
    net.wait_included([str(body["tx_hash"])], 60)
    receipt: dict[str, Any] = net.wait_for("the receipt on validator 1", lambda: net.receipt(1, str(body["tx_hash"])),
                                           30, interval=0.2)
    return receipt


def test_governance_activation_rotates_the_runner_subset_through_the_overlap(tmp_path: Path) -> None:
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=False)
    runner: RunnerProcess | None = None
    try:
        net.start()
        net.wait_heights(2, 60)
        keys = [bytes.fromhex(v.public_key.removeprefix("0x")) for v in net.validators]
        r = _governed(net, GovernanceSetParam("OVERLAP_BLOCKS", OVERLAP, _head(net) + 10), [0, 2, 3])
        assert r["status"] == "success", r

        v0 = _ValidatorRpc(net, 0)
        runner = RunnerProcess(tmp_path / "runner", v0)  # type: ignore[arg-type]
        net.wait_included([net.transfer(1, bytes.fromhex(runner.address[2:]), 10**20)], 60)
        reg = subprocess.run(_runner_cmd("register", "--home", str(runner.home), "--stake", str(10**18)),
                             capture_output=True, text=True, timeout=90)
        assert reg.returncode == 0 and json.loads(reg.stdout)["status"] == "success", reg.stdout + reg.stderr
        runner.start()
        _wait_all_sessions(runner, 3, timeout=60)
        sk, _ = load_account_private_key(runner.home / "keys" / "runner.key")
        sub0 = subset(private_key_to_public_key(sk, compressed=True), keys)
        x = next(k for k in sub0 if k != keys[0])  # leaves; not the runner's RPC validator
        new = [k for k in keys if k != x]
        hexkey = {k: "0x" + k.hex() for k in keys}
        assert _sessions(runner) == {(hexkey[k], 0) for k in sub0}

        h = _head(net) + 8
        assert int(net.get(0, "/params")[1]["cip11_params"]["OVERLAP_BLOCKS"]) == OVERLAP  # active by now
        receipt = _governed(net, ActivateValidatorSet(tuple(new), h),
                            [keys.index(x), *[i for i in range(4) if keys[i] != x][:2]])
        assert receipt["status"] == "success", receipt
        for i in range(4):
            rc = net.status(i)["reconfiguration"]
            assert (rc["activation_height"], rc["overlap_blocks"], rc["cutoff_height"]) == (h, OVERLAP, h + OVERLAP)
            assert [v["ed25519_public_key"] for v in rc["new"]["validators"]] == [hexkey[k] for k in new]
        doc = net.get(0, "/validators")[1]
        assert doc["reconfiguration"]["activation_height"] == h and len(doc["validators"]) == 4

        # The window: the union, X still under epoch 0.
        union = {(hexkey[x], 0), *((hexkey[k], 1) for k in new)}
        net.wait_for("the runner holds Sub_0 ∪ Sub_1 during the window",
                     lambda: (_head(net) < h + OVERLAP - 2 and _sessions(runner) == union) or None, 30, interval=0.2)
        assert _head(net) < h + OVERLAP  # seen inside the window, not after
        in_window = net.get(0, "/validators")[1]
        assert {v["ed25519_public_key"]: v["in_snapshot"] for v in in_window["validators"]}[hexkey[x]] is False

        # The cutoff: only the epoch-1 sessions.
        net.wait_heights(h + OVERLAP + 4, 40)
        after = {(hexkey[k], 1) for k in new}
        net.wait_for("only Sub_1 after the cutoff", lambda: _sessions(runner) == after or None, 20, interval=0.2)
        log = runner.read_log()
        assert "OVERLAP_EXPIRED" in log or "closing a session the plan no longer holds" in log, log[-3000:]
        assert "WRONG_VALIDATOR_SET" not in log, log[-3000:]  # never offered hash(0) after the cutoff

        # Blocks keep finalizing everywhere, X included.
        net.wait_progress(4, 30)
        net.assert_agreement(min(x for x in net.heights().values() if x is not None))
    finally:
        if runner is not None and runner.proc is not None and runner.proc.poll() is None:
            runner.kill()
        net.close()

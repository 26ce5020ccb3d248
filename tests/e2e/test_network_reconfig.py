"""CIP-11 §5.3 reconfiguration by governance on a real 4-validator network with a real runner (issue 16 item 7).

Four ``cowboy-node run`` processes and one ``cowboy-runner`` on loopback. Governance first sets OVERLAP_BLOCKS = 40
(a chain parameter, approved by three validators); the runner holds its k = 3 sessions of ``Sub_0(R)``. Then three
validators — including the one leaving — approve ``ActivateValidatorSet`` (0x48) with epoch 1 = the genesis set
minus X, where X is a member of ``Sub_0(R)`` other than the runner's RPC validator, active from h. Checked:

- every validator's ``/status`` and ``GET /validators`` publish the activation (h, cutoff h + 40);
- during the window the runner holds the union ``Sub_0(R) ∪ Sub_1(R)``: X under epoch 0, the three others under
  epoch 1 (|V_1| = 3 ⇒ k = 3);
- from the cutoff the runner holds exactly the three epoch-1 sessions, the X session ended with
  ``OverlapExpired`` (validator side) or was closed by the runner's re-plan, and it never offered hash(0) again (no
  ``WrongValidatorSet`` refusal in its log);
- blocks keep finalizing on all four validators, X included (consensus membership is unchanged).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.cli.main import build_parser
from cowboy_protocol.crypto.secp256k1 import private_key_to_public_key
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.transport.subset import subset
from tests.e2e.netproc import Testnet
from tests.e2e.test_network_jobs import _ValidatorRpc, _wait_all_sessions
from tests.integration.nodeproc import BIN
from tests.integration.runnerproc import RunnerProcess

pytestmark = pytest.mark.timeout(900)  # a bound against hangs, sized for a loaded host

OVERLAP = 40
"""The window, in 500 ms blocks: the runner must open its epoch-1 sessions inside it, and the test must see them
there; 20 blocks (10 s) was too short on a host at load 15."""
LEAD = 24
"""Blocks (500 ms) between reading the head and a governed change's height: three approvals and the submission
must be included before it (an activation at least 2 blocks above its block)."""


def _runner_cmd(*args: str) -> list[str]:
    exe = BIN / "cowboy-runner"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "cowboy_runner.cli", *args]


def _head(net: Testnet) -> int:
    return max(h for h in net.heights().values() if h is not None)


def _reconfiguration(net: Testnet, i: int) -> dict[str, Any] | None:
    rc: dict[str, Any] | None = net.status(i).get("reconfiguration")
    return rc


def _sessions(runner: RunnerProcess) -> set[tuple[str, int]]:
    """(validator key, subset_epoch) of the runner's authenticated sessions."""
    return {(s["validator"].lower(), int(s["subset_epoch"])) for s in runner.status().get("sessions", [])
            if s["connected"]}


def _cowboy_node(*argv: str) -> tuple[int, str]:
    """Run the ``cowboy-node`` command line in this process (the real parser and command; no interpreter start-up,
    which takes seconds on a loaded machine and would eat the activation's lead; not ``main()``, which resets
    SIGPIPE for a console process): (exit code, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args = build_parser().parse_args(list(argv))
        rc: int = args.func(args)
    return rc, out.getvalue()


def _governed(net: Testnet, out: Path, argv: list[str], approvers: list[int]) -> dict[str, Any]:
    """``cowboy-node tx governance ARGV``: each of ``approvers`` approves with ``--approve-with`` (its own home and
    RPC), then the faucet submits the approval files with ``--approvals`` to validator 1 and waits; the receipt."""
    files = []
    for i in approvers:
        rc, approval = _cowboy_node("tx", "governance", *argv, "--rpc", net.validators[i].rpc_url,
                                    "--approve-with", str(net.validators[i].home / "keys" / "validator.key"))
        assert rc == 0, approval
        path = out / f"approval-{argv[0]}-{i}.json"
        path.write_text(approval)
        files.append(str(path))
    rc, done = _cowboy_node("tx", "governance", *argv, "--rpc", net.validators[1].rpc_url,
                            "--key", str(net.out / "faucet.key"), "--approvals", *files, "--timeout", "60")
    net.faucet.next_nonce = None  # the CLI sent from the faucet: the harness re-reads its nonce before its next tx
    assert rc == 0, done
    receipt: dict[str, Any] = json.loads(done)["receipt"]
    return receipt


def test_governance_activation_rotates_the_runner_subset_through_the_overlap(tmp_path: Path) -> None:
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=False)
    runner: RunnerProcess | None = None
    try:
        net.start()
        net.wait_heights(2, 60)
        keys = [bytes.fromhex(v.public_key.removeprefix("0x")) for v in net.validators]
        r = _governed(net, tmp_path, ["set-param", "OVERLAP_BLOCKS", str(OVERLAP), "--at-height",
                                      str(_head(net) + LEAD)], [0, 2, 3])
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

        net.wait_for("OVERLAP_BLOCKS active", lambda: int(net.get(0, "/params")[1]["cip11_params"]["OVERLAP_BLOCKS"])
                     == OVERLAP, 30)
        h = _head(net) + LEAD
        # Epoch 1 named by positions in GET /validators (genesis order), as an operator would.
        positions = [str(i) for i, k in enumerate(keys) if k != x]
        receipt = _governed(net, tmp_path, ["activate-validator-set", "--validators", *positions, "--at-height",
                                            str(h)], [keys.index(x), *[i for i in range(4) if keys[i] != x][:2]])
        assert receipt["status"] == "success", receipt
        for i in range(4):
            rc = net.wait_for(f"validator {i} publishes the activation", partial(_reconfiguration, net, i), 60,
                              interval=0.2)
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
        net.wait_heights(h + OVERLAP + 4, 180)
        after = {(hexkey[k], 1) for k in new}
        net.wait_for("only Sub_1 after the cutoff", lambda: _sessions(runner) == after or None, 60, interval=0.2)
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

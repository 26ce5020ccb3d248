"""Governance by the validator set on a real 4-validator network: the faucet (a system deployer) can no longer
change a CIP-11 parameter alone; three validators approve with ``--approve-with`` (each from its own home), any
account submits the approvals, and every validator then shows the change pending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.netproc import Testnet
from tests.integration.nodeproc import cli

pytestmark = pytest.mark.timeout(600)


def test_a_parameter_change_needs_two_thirds_of_the_validators(tmp_path: Path) -> None:
    net = Testnet.create(tmp_path, n=4, block_time_ms=500, proxied=False)
    try:
        net.start()
        net.wait_heights(2, 60)
        rpc = net.validators[1].rpc_url
        at = str(max(h for h in net.heights().values() if h is not None) + 400)
        args = ["tx", "governance", "set-param", "OVERLAP_BLOCKS", "200", "--at-height", at, "--rpc", rpc,
                "--timeout", "60"]
        alone = cli(*args, "--key", str(net.out / "faucet.key"), check=False)
        assert alone.returncode == 3, alone.stdout + alone.stderr
        assert json.loads(alone.stdout)["error"]["code"] == "validator_approval_required"
        files = []
        for i in (0, 2, 3):
            out = cli(*args[:7], "--rpc", net.validators[i].rpc_url, "--approve-with",
                      str(net.validators[i].home / "keys" / "validator.key"))
            path = tmp_path / f"approval-{i}.json"
            path.write_text(out.stdout)
            files.append(str(path))
        too_few = cli(*args, "--key", str(net.out / "faucet.key"), "--approvals", *files[:2], check=False)
        assert json.loads(too_few.stdout)["error"]["code"] == "insufficient_approvals", too_few.stdout
        done = cli(*args, "--key", str(net.out / "faucet.key"), "--approvals", *files, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        for i in range(4):
            gov = net.wait_for(f"validator {i} sees the change", lambda i=i: (lambda d: d if d["pending"] else None)(
                net.get(i, "/params")[1]["governance"]), 30)
            assert [(c["name"], c["value"]) for c in gov["pending"]] == [("OVERLAP_BLOCKS", 200)], gov
            assert (gov["approvals_needed"], gov["approval_nonce"]) == (3, 1)
    finally:
        net.close()

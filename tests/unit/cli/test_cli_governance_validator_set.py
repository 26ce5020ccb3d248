"""``cowboy-node tx governance activate-validator-set`` (ActivateValidatorSet, kind 0x48) against a live node.

The live node has one validator (the dev genesis), so its only possible set is the genesis one: the chain refuses
every activation there (``validator_set_unchanged`` / ``validator_not_in_consensus``), which is what the live tests
use to see the waiting rule and exit 3. A successful activation needs n > 1 validators and 2f+1 approvals:
``tests/e2e/test_network_reconfig.py`` drives it through this command on four validators.

What a validator signs is pinned by hand: ``"cowboy/governance-approval/v1" ‖ u16be(len chain_id) ‖ chain_id ‖
u64be(nonce) ‖ CBOR({0: 0x48, 1: [keys], 2: h})`` (docs/protocol.md, 0x47 row), never built by the encoder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cowboy_node.cli.main import build_parser
from cowboy_node.node.keys import write_validator_key
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet
from tests.helpers import ALICE, ALICE_FUNDS, ALICE_SK, BOB, BOB_SK, CHAIN_ID, make_dev_genesis
from tests.unit.node_harness import LiveNode, dev_live_node, run_cli, serving, write_keys

SEED = make_dev_genesis().validator_key.ed25519_seed
"""The live node's validator (dev genesis is deterministic)."""
GENESIS_KEY = ed25519.public_key_from_seed(SEED)
OTHER = bytes([0xAB]) * 32
"""A peer key that is no validator of this chain."""


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    with serving(dev_live_node({ALICE: ALICE_FUNDS, BOB: ALICE_FUNDS})) as n:
        yield n


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("keys")
    out = write_keys(d, {"alice": ALICE_SK, "bob": BOB_SK})
    out["validator"] = d / "validator.key"
    write_validator_key(out["validator"], make_dev_genesis().validator_key)
    return out


def _head(live: LiveNode) -> int:
    return live.node.chain.height


def _pending_nonce(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> int:
    rc, out, err = run_cli(["query", "account", "0x" + ALICE.hex(), "--rpc", live.url], capsys)
    assert rc == 0, err
    return int(out["next_pending_nonce"])


def _golden_inner(keys: list[bytes], height_cbor: str) -> bytes:
    """CBOR of ``{0: 0x48, 1: [bstr(32), ...], 2: h}`` by hand (fewer than 24 keys: array head 0x80 + n)."""
    return (bytes.fromhex("a3" "00" "1848" "01") + bytes([0x80 + len(keys)])
            + b"".join(b"\x58\x20" + k for k in keys) + bytes.fromhex("02" + height_cbor))


def _golden_preimage(chain_id: str, nonce: int, inner: bytes) -> bytes:
    """Domain, u16be length, chain id, u64be nonce, the inner instruction's CBOR."""
    cid = chain_id.encode()
    return b"cowboy/governance-approval/v1" + len(cid).to_bytes(2, "big") + cid + nonce.to_bytes(8, "big") + inner


def test_approval_signs_the_pinned_preimage_and_submits_wrapped(live: LiveNode, keys: dict[str, Path],
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path) -> None:
    rpc = ["--rpc", live.url]
    base = ["tx", "governance", "activate-validator-set", "--validators", "0", "--at-height", "1000000"]
    rc, doc, err = run_cli([*base, "--approve-with", str(keys["validator"]), *rpc], capsys)
    assert rc == 0, err
    nonce = doc["nonce"]
    rc, gov, err = run_cli(["query", "governance", *rpc], capsys)
    assert rc == 0 and gov["approval_nonce"] == nonce, err
    inner = _golden_inner([GENESIS_KEY], "1a000f4240")  # 10^6 = 0x000f4240
    golden = _golden_preimage(CHAIN_ID, nonce, inner)
    assert doc["instruction"] == "0x" + inner.hex()
    assert doc["validator"] == "0x" + GENESIS_KEY.hex() and doc["chain_id"] == CHAIN_ID
    assert ed25519.verify(GENESIS_KEY, golden, bytes.fromhex(doc["signature"][2:]))
    assert doc["approves"] == {"kind": "activate_validator_set", "peer_pubkeys": ["0x" + GENESIS_KEY.hex()],
                               "activation_height": 10**6}
    # The same change named by key instead of position is the same instruction: the approval fits it.
    path = tmp_path / "approval-0.json"
    path.write_text(json.dumps(doc))
    argv = ["tx", "governance", "activate-validator-set", "--validators", "0x" + GENESIS_KEY.hex(),
            "--at-height", str(_head(live) + 40), "--key", str(keys["bob"]), "--approvals", str(path), *rpc]
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and "--approvals" in err and "another instruction" in err  # another height: refused locally
    argv[6] = "1000000"
    rc, out, err = run_cli([*argv, "--timeout", "20"], capsys)
    # Wrapped in a ValidatorApproved from bob (any account), waited for; on one validator the genesis set is the
    # only set, so the inner rule refuses it: exit 3 with the chain's code.
    assert rc == 3, err
    assert out["kind"] == "validator_approved" and out["approvals"][0]["index"] == 0
    assert out["instruction"]["kind"] == "activate_validator_set"
    assert (out["receipt"]["status"], out["error"]["code"]) == ("failed", "validator_set_unchanged"), out


def test_refusals_wait_and_exit_3_with_the_chain_code(live: LiveNode, keys: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    h = str(_head(live) + 50)
    cases = [
        (["--validators", "0", "--key", str(keys["alice"])], "validator_set_unchanged"),
        (["--validators", "0x" + OTHER.hex(), "--key", str(keys["alice"])], "validator_not_in_consensus"),
        (["--validators", "0", "--key", str(keys["bob"])], "unauthorized"),
    ]
    for argv, code in cases:
        rc, out, err = run_cli(["tx", "governance", "activate-validator-set", *argv, "--at-height", h,
                                "--rpc", live.url, "--timeout", "20"], capsys)
        assert rc == 3, err
        assert (out["receipt"]["status"], out["error"]["code"]) == ("failed", code), argv
        assert out["kind"] == "activate_validator_set"


def test_no_wait_prints_the_hash(live: LiveNode, keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "governance", "activate-validator-set", "--validators", "0", "--at-height",
                            str(_head(live) + 50), "--key", str(keys["alice"]), "--no-wait", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert set(out) == {"kind", "peer_pubkeys", "activation_height", "tx_hash"}
    assert out["peer_pubkeys"] == ["0x" + GENESIS_KEY.hex()]


@pytest.mark.parametrize(("validators", "message"), [
    (["1"], "1 is not a validator position"),         # the chain has one validator: position 0
    (["0", "0x" + GENESIS_KEY.hex()], "listed twice"),  # the same validator by position and by key
])
def test_bad_validator_lists_are_usage_errors(validators: list[str], message: str, live: LiveNode,
                                              keys: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    before = _pending_nonce(live, capsys)
    rc, out, err = run_cli(["tx", "governance", "activate-validator-set", "--validators", *validators,
                            "--at-height", "999", "--key", str(keys["alice"]), "--rpc", live.url], capsys)
    assert (rc, out) == (2, None)
    assert "--validators" in err and message in err, err
    assert _pending_nonce(live, capsys) == before  # nothing was sent


def test_sign_only_with_keys_never_contacts_the_node(keys: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    k1, k2 = bytes([1]) * 32, bytes([2]) * 32
    args = build_parser().parse_args([
        "tx", "governance", "activate-validator-set", "--validators", "0x" + k1.hex(), k2.hex().upper(),
        "--at-height", "99", "--key", str(keys["alice"]), "--sign-only", "--nonce", "7", "--chain-id", "c",
        "--max-fee-per-cycle", "1", "--max-fee-per-cell", "1", "--rpc", "http://127.0.0.1:9"])
    assert args.func(args) == 0
    tx = Transaction.from_bytes(bytes.fromhex(capsys.readouterr().out.strip().removeprefix("0x")))
    assert (tx.instruction, tx.nonce, tx.chain_id, tx.sender) == (ActivateValidatorSet((k1, k2), 99), 7, "c", ALICE)


@pytest.mark.parametrize("argv", [
    ["--validators", "zz", "--at-height", "9"],                  # neither a key nor a position
    ["--validators", "0x" + "ab" * 31, "--at-height", "9"],      # 31-byte key
    ["--validators", "-1", "--at-height", "9"],
    ["--validators", "0", "--at-height", "-1"],
    ["--validators", "--at-height", "9"],                        # empty list
    ["--at-height", "9"],                                        # missing --validators
    ["--validators", "0"],                                       # missing --at-height
])
def test_bad_arguments_exit_2_naming_the_flag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "governance", "activate-validator-set", *argv, "--key", "k"], capsys)
    assert (rc, out) == (2, None)
    assert ("--validators" in err) or ("--at-height" in err), err

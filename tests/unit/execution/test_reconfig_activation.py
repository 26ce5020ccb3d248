"""CIP-11 §5.3/§5.4 reconfiguration by governance: ActivateValidatorSet (0x48) → ValidatorSetActivated(E+1, h).

Golden bytes are written by hand from the layouts in the module docstrings (RFC 8949 canonical CBOR), never by the
encoder under test. The validity helper is checked at the boundaries h − 1, h, h + OVERLAP − 1, h + OVERLAP.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from cowboy_node.execution import validator_set as vs
from cowboy_node.execution.system_state import get_cip11_params, set_cip11_params
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.execution.validator_governance import get_approval_nonce
from cowboy_node.execution.validator_set_activation import ACTIVATION_MIN_DELAY_BLOCKS
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Receipt
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.subset import valid_snapshots
from cowboy_protocol.types.instructions import (
    GOVERNED_KINDS,
    Instruction,
    ValidatorApproved,
    approval_preimage,
    instruction_from_cbor,
    instruction_to_cbor,
)
from cowboy_protocol.types.validation_errors import DecodeError
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet
from tests.helpers import BOB_SK, CHAIN_ID, make_tx
from tests.unit.execution.test_governance import NOW, Env
from tests.unit.execution.test_validator_governance import KEYS, SEEDS  # the same 4-validator set

K1, K2 = bytes([1]) * 32, bytes([2]) * 32
OVERLAP = 160


class _Env(Env):
    """The governance test world with four genesis validators (``ValidatorSetSnapshot(0)`` = KEYS)."""

    def __init__(self) -> None:
        super().__init__(0)
        vs.put_snapshot(self.world, 0, KEYS)

    def run_tx(self, sk: bytes, ins: Instruction | None) -> Receipt:
        if ins is None:
            return super().run_tx(sk, ins)
        n = self.nonces[sk]
        self.nonces[sk] += 1
        return execute_transaction(self.world, make_tx(sk, n, ins, cycles_limit=200_000), self.ctx)

    def approved(self, inner: ActivateValidatorSet, signers: tuple[int, ...] = (0, 1, 2)) -> Receipt:
        msg = approval_preimage(CHAIN_ID, get_approval_nonce(self.world), inner)
        return self.run(ValidatorApproved(inner, tuple((i, ed25519.sign(SEEDS[i], msg)) for i in signers)), BOB_SK)


def _refused(env: _Env, receipt: Receipt, code: str, before: dict[bytes, bytes | None]) -> None:
    """A failed receipt with ``code`` and no validator-set key written (bad input changes nothing)."""
    assert (receipt.status, receipt.error_code) == (STATUS_FAILED, code), receipt
    after = {k: v for k, v in env.world.changes().items() if k.startswith(b"sys/validator_set")}
    assert after == before


def _vs_changes(env: _Env) -> dict[bytes, bytes | None]:
    return {k: v for k, v in env.world.changes().items() if k.startswith(b"sys/validator_set")}


# -- wire form ---------------------------------------------------------------------------------------------------
GOLDEN = bytes.fromhex(
    "a3"                    # map(3)
    "00" "1848"             # 0: kind 0x48
    "01" "82"               # 1: array(2)
    "5820" + "01" * 32 +    #    bstr(32) K1
    "5820" + "02" * 32 +    #    bstr(32) K2
    "02" "1901f4"           # 2: activation_height 500
)


def test_instruction_golden_bytes_both_ways() -> None:
    ins = ActivateValidatorSet((K1, K2), 500)
    assert encode(instruction_to_cbor(ins)) == GOLDEN
    assert instruction_from_cbor(decode(GOLDEN)) == ins
    assert ActivateValidatorSet.KIND in GOVERNED_KINDS  # so a ValidatorApproved may wrap it


@pytest.mark.parametrize("doc", [
    {0: 0x48, 1: [], 2: 5},                       # empty set
    {0: 0x48, 1: [K1, K1], 2: 5},                 # duplicate key
    {0: 0x48, 1: [bytes(31)], 2: 5},              # short key
    {0: 0x48, 1: [K1] + [bytes([i]) * 32 for i in range(2, 66)], 2: 5},  # 65 keys
    {0: 0x48, 1: [K1], 2: -1},                    # negative height
    {0: 0x48, 1: [K1]},                           # missing field
])
def test_malformed_instruction_does_not_decode(doc: dict[int, object]) -> None:
    with pytest.raises(DecodeError):
        instruction_from_cbor(decode(encode(doc)))


# -- execution: approvals and refusals --------------------------------------------------------------------------
def test_an_approved_activation_writes_the_snapshot_the_record_and_the_event() -> None:
    env = _Env()
    h = NOW + 10
    r = env.approved(ActivateValidatorSet((KEYS[0], KEYS[2], KEYS[3]), h))
    assert (r.status, r.error_code) == (STATUS_SUCCESS, None), r
    # Golden state bytes (by hand): snapshot {0: 1, 1: [k0, k2, k3]}, record {0: 1, 1: h}, pointer 1.
    snap = bytes.fromhex("a2" "00" "01" "01" "83") + b"".join(b"\x58\x20" + KEYS[i] for i in (0, 2, 3))
    assert env.world.get(b"sys/validator_set/" + (1).to_bytes(8, "big")) == snap
    assert env.world.get(b"sys/validator_set_activation/" + (1).to_bytes(8, "big")) == bytes.fromhex(
        "a2" "00" "01" "01" "186e")  # h = 110 = 0x6e
    assert env.world.get(b"sys/validator_set_epoch") == b"\x01"
    ev = [e for e in r.events if e.topic == "validator_set.activated"]
    assert len(ev) == 1 and decode(ev[0].data) == {0: 1, 1: h, 2: keccak256(KEYS[0] + KEYS[2] + KEYS[3])}
    assert vs.newest_epoch(env.world) == 1 and vs.get_activation(env.world, 1) == vs.ValidatorSetActivation(1, h)


def test_sent_directly_on_a_multi_validator_chain_it_needs_approvals() -> None:
    env = _Env()
    before = _vs_changes(env)
    _refused(env, env.run(ActivateValidatorSet((KEYS[0], KEYS[1]), NOW + 10)), "validator_approval_required", before)
    _refused(env, env.approved(ActivateValidatorSet((KEYS[0], KEYS[1]), NOW + 10), (0, 1)), "insufficient_approvals",
             before)
    _refused(env, env.run(ActivateValidatorSet((KEYS[0], KEYS[1]), NOW + 10), BOB_SK), "unauthorized", before)


@pytest.mark.parametrize(("keys", "height", "code"), [
    ((KEYS[0], KEYS[1]), NOW + ACTIVATION_MIN_DELAY_BLOCKS - 1, "activation_too_soon"),
    ((KEYS[0], K1), NOW + 10, "validator_not_in_consensus"),       # a new identity: consensus membership
    ((KEYS[1], KEYS[0]), NOW + 10, "validator_set_not_canonical"),  # not in genesis order
    (KEYS, NOW + 10, "validator_set_unchanged"),                    # §5.4 MUST NOT emit
])
def test_refusals_change_nothing(keys: tuple[bytes, ...], height: int, code: str) -> None:
    env = _Env()
    before = _vs_changes(env)
    _refused(env, env.approved(ActivateValidatorSet(keys, height)), code, before)
    assert vs.newest_epoch(env.world) == 0


def test_the_minimum_delay_is_accepted_exactly() -> None:
    env = _Env()
    r = env.approved(ActivateValidatorSet((KEYS[0], KEYS[1]), NOW + ACTIVATION_MIN_DELAY_BLOCKS))
    assert r.status == STATUS_SUCCESS, r


def test_a_second_activation_waits_for_the_first_window_to_close() -> None:
    env = _Env()
    set_cip11_params(env.world, replace(get_cip11_params(env.world), OVERLAP_BLOCKS=5))
    h = NOW + 2
    assert env.approved(ActivateValidatorSet((KEYS[0], KEYS[1]), h)).status == STATUS_SUCCESS
    nxt = ActivateValidatorSet((KEYS[0], KEYS[1], KEYS[2]), h + 100)
    env.advance_to(h + 4)  # h + OVERLAP − 1: still in the window
    before = _vs_changes(env)
    _refused(env, env.approved(nxt), "reconfiguration_in_progress", before)
    env.advance_to(h + 5)  # the cutoff
    assert env.approved(nxt).status == STATUS_SUCCESS
    assert vs.newest_epoch(env.world) == 2
    # The same list as the newest (epoch 2) is unchanged; the genesis list again is a real change (epoch 3).
    env.advance_to(h + 100 + 5)
    before = _vs_changes(env)
    _refused(env, env.approved(ActivateValidatorSet((KEYS[0], KEYS[1], KEYS[2]), h + 200)), "validator_set_unchanged",
             before)
    assert env.approved(ActivateValidatorSet(KEYS, h + 200)).status == STATUS_SUCCESS


# -- the active / overlap helper at the boundaries ---------------------------------------------------------------
@pytest.mark.parametrize(("offset", "epochs"), [
    (-1, [0]),              # h − 1: E+1 not valid yet
    (0, [0, 1]),            # h: the window opens
    (OVERLAP - 1, [0, 1]),  # h + OVERLAP − 1: last block of the window
    (OVERLAP, [1]),         # h + OVERLAP: the cutoff, only E+1 ("no grace period")
])
def test_snapshots_at_the_window_boundaries(offset: int, epochs: list[int]) -> None:
    env = _Env()
    h = NOW + 10
    new = (KEYS[0], KEYS[2], KEYS[3])
    assert env.approved(ActivateValidatorSet(new, h)).status == STATUS_SUCCESS
    H = h + offset
    valid = vs.snapshots_at(env.world, H)  # governed OVERLAP_BLOCKS = 160 (default)
    assert [s.epoch for s in valid] == epochs
    assert vs.active_snapshot_at(env.world, H).epoch == max(epochs)
    assert vs.active_epoch_at(env.world, H) == (0 if offset < 0 else 1)
    old_hash, new_hash = keccak256(b"".join(KEYS)), keccak256(b"".join(new))
    # Epoch-paired lookup: each pair selects its own snapshot while valid; mixed pairs never select one.
    assert (vs.select_at(env.world, H, 0, old_hash) is not None) is (0 in epochs)
    assert (vs.select_at(env.world, H, 1, new_hash) is not None) is (1 in epochs)
    assert vs.select_at(env.world, H, 0, new_hash) is None and vs.select_at(env.world, H, 1, old_hash) is None
    rc = vs.reconfiguration_at(env.world, H)
    assert rc is not None and (rc.old.epoch, rc.new.epoch, rc.activation_height) == (0, 1, h)


def test_genesis_only_chain_has_one_snapshot_and_no_reconfiguration() -> None:
    env = _Env()
    assert [s.epoch for s in vs.snapshots_at(env.world, 10**9)] == [0]
    assert vs.reconfiguration_at(env.world, 10**9) is None


def test_the_record_decoder_refuses_other_bytes() -> None:
    with pytest.raises(DecodeError):
        vs.ValidatorSetActivation.decode(bytes.fromhex("a1" "00" "01"))


def test_published_reconfiguration_gives_the_same_snapshots_as_the_helper() -> None:
    # What /status publishes (reconfiguration_at, replayed by runners through valid_snapshots) and what admission
    # uses (snapshots_at) agree at every height across two activations.
    env = _Env()
    set_cip11_params(env.world, replace(get_cip11_params(env.world), OVERLAP_BLOCKS=5))
    h1 = NOW + 2
    assert env.approved(ActivateValidatorSet((KEYS[0], KEYS[1]), h1)).status == STATUS_SUCCESS
    env.advance_to(h1 + 5)
    h2 = h1 + 9
    assert env.approved(ActivateValidatorSet((KEYS[0], KEYS[1], KEYS[3]), h2)).status == STATUS_SUCCESS
    epochs = []
    for H in range(NOW, h2 + 8):
        rc = vs.reconfiguration_at(env.world, H)
        assert rc is not None
        replayed = valid_snapshots(vs.active_snapshot_at(env.world, H), rc, H, 5)
        assert replayed == vs.snapshots_at(env.world, H), H
        epochs.append([s.epoch for s in replayed])
    assert epochs[h1 - 1 - NOW] == [0] and epochs[h1 - NOW] == [0, 1] and epochs[h1 + 5 - NOW] == [1]
    assert epochs[h2 - 1 - NOW] == [1] and epochs[h2 - NOW] == [1, 2] and epochs[h2 + 5 - NOW] == [2]

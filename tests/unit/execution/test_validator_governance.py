"""Governance by the validator set (ValidatorApproved, 0x47): with more than one validator in
``ValidatorSetSnapshot(0)`` a governed instruction needs 2f + 1 validator approvals; one key cannot flip flags."""

from __future__ import annotations

import pytest

from cowboy_node.execution import governance as gov
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.execution.validator_governance import KEY_APPROVAL_NONCE, get_approval_nonce, quorum
from cowboy_node.execution.validator_set import put_snapshot
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Receipt
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.governance_instructions import GovernanceSetPhase
from cowboy_protocol.types.instructions import (
    APPROVAL_DOMAIN,
    Instruction,
    Transfer,
    ValidatorApproved,
    approval_preimage,
    instruction_from_cbor,
    instruction_to_cbor,
)
from cowboy_protocol.types.validation_errors import DecodeError
from tests.helpers import ALICE_SK, BOB_SK, CHAIN_ID, make_tx
from tests.unit.execution.test_governance import NOW, Env, _refused

SEEDS = [bytes([0x30 + i]) * 32 for i in range(4)]
KEYS = tuple(ed25519.public_key_from_seed(s) for s in SEEDS)


class _Env(Env):
    """The governance test world, with room for the approvals' signature checks in each transaction."""

    def run_tx(self, sk: bytes, ins: Instruction | None) -> Receipt:
        if ins is None:
            return super().run_tx(sk, ins)
        n = self.nonces[sk]
        self.nonces[sk] += 1
        return execute_transaction(self.world, make_tx(sk, n, ins, cycles_limit=200_000), self.ctx)


def _four_validators() -> Env:
    env = _Env(0)
    put_snapshot(env.world, 0, KEYS)  # the chain's snapshot now holds four validators
    return env


def _approved(inner: GovernanceSetPhase, signers: list[int], *, nonce: int = 0, chain_id: str = CHAIN_ID,
              seeds: list[bytes] = SEEDS) -> ValidatorApproved:
    msg = approval_preimage(chain_id, nonce, inner)
    return ValidatorApproved(inner, tuple((i, ed25519.sign(seeds[i], msg)) for i in signers))


def test_golden_preimage_and_wire_bytes() -> None:
    inner = GovernanceSetPhase(2, 100)
    # {0: 0x45, 1: 2, 2: 100} = a3 00 1845 01 02 02 1864 (RFC 8949, by hand)
    assert approval_preimage("c", 5, inner) == APPROVAL_DOMAIN + bytes.fromhex(
        "0001" "63" "0000000000000005" "a3" "00" "1845" "01" "02" "02" "1864")
    sig = bytes(range(64))
    wire = encode(instruction_to_cbor(ValidatorApproved(inner, ((0, sig),))))
    assert wire == bytes.fromhex("a3" "00" "1847" "01" "a3001845" "0102" "021864" "02" "81" "82" "00" "5840") + sig
    assert instruction_from_cbor(decode(wire)) == ValidatorApproved(inner, ((0, sig),))


@pytest.mark.parametrize("doc", [
    {0: 0x47, 1: instruction_to_cbor(Transfer(bytes(20), 1)), 2: [[0, bytes(64)]]},        # not governed
    {0: 0x47, 1: instruction_to_cbor(GovernanceSetPhase(1, 9)), 2: []},                      # no approval
    {0: 0x47, 1: instruction_to_cbor(GovernanceSetPhase(1, 9)), 2: [[1, bytes(64)], [0, bytes(64)]]},  # order
    {0: 0x47, 1: instruction_to_cbor(GovernanceSetPhase(1, 9)), 2: [[0, bytes(63)]]},        # short signature
    {0: 0x47, 1: {0: 0x47, 1: instruction_to_cbor(GovernanceSetPhase(1, 9)), 2: [[0, bytes(64)]]},
     2: [[0, bytes(64)]]},                                                                     # nested
])
def test_malformed_approvals_do_not_decode(doc: dict[int, object]) -> None:
    with pytest.raises(DecodeError):
        instruction_from_cbor(decode(encode(doc)))


def test_one_key_can_no_longer_flip_a_flag_on_a_multi_validator_chain() -> None:
    env = _four_validators()
    _refused(env, GovernanceSetPhase(1, NOW + 5), "validator_approval_required")
    assert gov.get_pending(env.world) == []


def test_a_quorum_of_approvals_schedules_the_change_once() -> None:
    env = _four_validators()
    assert quorum(4) == 3
    ins = _approved(GovernanceSetPhase(1, NOW + 5), [0, 2, 3])
    r = env.run(ins, BOB_SK)  # any account may carry the approvals
    assert (r.status, r.error_code) == (STATUS_SUCCESS, None), r
    assert [(c.name, c.value) for c in gov.get_pending(env.world)] == [(gov.PHASE, 1)]
    assert get_approval_nonce(env.world) == 1
    assert any(e.topic == "governance.approved" for e in r.events)
    _refused(env, ins, "bad_approval", BOB_SK)  # replayed: the approvals signed nonce 0


@pytest.mark.parametrize(("signers", "code", "tweak"), [
    ([0, 1], "insufficient_approvals", None),
    ([0, 1, 2], "bad_approval", "other_chain"),
    ([0, 1, 2], "bad_approval", "stranger"),
    ([0, 1, 2], "bad_approval", "next_nonce"),
])
def test_bad_or_missing_approvals_change_nothing(signers: list[int], code: str, tweak: str | None) -> None:
    env = _four_validators()
    seeds = list(SEEDS)
    if tweak == "stranger":
        seeds[1] = bytes([0x77]) * 32  # not validator 1's key
    ins = _approved(GovernanceSetPhase(1, NOW + 5), signers, seeds=seeds,
                    chain_id="other-chain" if tweak == "other_chain" else CHAIN_ID,
                    nonce=1 if tweak == "next_nonce" else 0)
    _refused(env, ins, code, BOB_SK)
    assert gov.get_pending(env.world) == [] and env.world.get(KEY_APPROVAL_NONCE) is None


def test_an_approved_change_that_breaks_its_own_rules_fails_whole_and_keeps_the_nonce() -> None:
    env = _four_validators()
    r = env.run(_approved(GovernanceSetPhase(1, NOW), [0, 1, 2]), BOB_SK)  # activation not in the future
    assert (r.status, r.error_code) == (STATUS_FAILED, "activation_not_future")
    assert get_approval_nonce(env.world) == 0 and gov.get_pending(env.world) == []


def test_with_one_validator_the_system_deployer_still_governs_directly() -> None:
    env = Env(0)
    r = env.run(GovernanceSetPhase(1, NOW + 5), ALICE_SK)
    assert (r.status, r.error_code) == (STATUS_SUCCESS, None)

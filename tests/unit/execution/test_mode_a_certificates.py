"""CIP-11 Mode A (§8.3–§8.4): SubmitPresenceCertificate verification, metering, refusals and the §16 replay tests.

Worlds are a genesis chain state with a hand-written ``ValidatorSetSnapshot(0)`` of 21 Ed25519 keys, governed
``MIN_SUBSET = MAX_SUBSET = 20`` (so ``effective_k = 20 = K_HARD_MIN``) and ``T_HARD = 11`` (= floor(20/2) + 1): the
smallest setting in which the §8.4 guard holds. One of the 21 validators is outside the runner's ``Sub(R)``.
Every refusal is a failed, charged receipt with its code and nothing but the sender's account changed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.execution import fees
from cowboy_node.execution import presence_certificates as pc
from cowboy_node.execution import validator_set as vs
from cowboy_node.execution.block import begin_block
from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.system_state import get_account, get_cip11_flags, set_cip11_flags, set_cip11_params
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.account import account_key
from cowboy_node.types.receipt import STATUS_FAILED, STATUS_SUCCESS, Receipt
from cowboy_protocol.codec import decode
from cowboy_protocol.crypto import secp256k1
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.transport.preimages import ValidatorKey, validator_set_hash
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import subset
from cowboy_protocol.types.instructions import Instruction
from cowboy_protocol.types.params import Cip11Flags, Cip11Params
from cowboy_protocol.types.presence_instructions import PresenceReceipt, SubmitPresenceCertificate
from cowboy_protocol.types.runner_instructions import RunnerRegister
from cowboy_protocol.types.runner_json import runner_file_from_json
from tests.helpers import ALICE, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx

EXAMPLES = Path(__file__).resolve().parents[3] / "configs" / "examples"
SEEDS = [keccak256(b"mode-a-validator" + bytes([i])) for i in range(21)]
VKEYS = [ValidatorKey(s) for s in SEEDS]
PEERS = tuple(k.pubkey.key for k in VKEYS)
VSH0 = validator_set_hash(PEERS)
RUNNER_SKS = [(0x2000 + i).to_bytes(32, "big") for i in range(3)]
RUNNERS = [secp256k1.private_key_to_address(sk) for sk in RUNNER_SKS]
GUARD_PARAMS = Cip11Params(MIN_SUBSET=20, MAX_SUBSET=20, T_HARD=11)
H0 = 100
BEACON = b"\x11" * 48
LIMITS = {"cycles_limit": 1_000_000, "cells_limit": 60_000}


def runner_pk(sk: bytes) -> PubKey:
    """Scheme 0x01 key of a runner secret."""
    return PubKey.runner(secp256k1.private_key_to_public_key(sk, compressed=True))


def sub_of(sk: bytes, peers: tuple[bytes, ...] = PEERS, params: Cip11Params = GUARD_PARAMS) -> list[int]:
    """Indices (into ``peers``) of the validators in ``Sub(R)`` of runner ``sk``."""
    chosen = subset(runner_pk(sk).key, peers, min_subset=params.MIN_SUBSET, max_subset=params.MAX_SUBSET)
    return [i for i, p in enumerate(peers) if p in chosen]


class World:
    """A genesis world at height H0 with the 21-validator snapshot, Mode A requested, three registered runners."""

    def __init__(self, *, params: Cip11Params = GUARD_PARAMS, hard_exclude: bool = True, phase: int = 2) -> None:
        balances = {ALICE: 10**24, **{a: 10**21 for a in RUNNERS}}
        self.chain = Chain(MemoryStore(), make_dev_genesis(Cip11Flags.for_phase(phase), balances=balances).genesis)
        self.world: WorldState = self.chain.world()
        vs.put_snapshot(self.world, 0, PEERS)
        set_cip11_params(self.world, params)
        set_cip11_flags(self.world, replace(get_cip11_flags(self.world), PRESENCE_HARD_EXCLUDE_ENABLED=hard_exclude))
        self.height = H0
        self.nonces = dict.fromkeys(RUNNER_SKS, 0)
        self.ctx = self.new_ctx()
        caps, card = runner_file_from_json(json.loads((EXAMPLES / "runner-capabilities.json").read_text()),
                                           require_rate_card=True)
        assert card is not None
        for sk in RUNNER_SKS:
            assert self.run(sk, RunnerRegister(10**18, caps, card)).status == STATUS_SUCCESS

    def env(self, height: int | None = None) -> BlockEnv:
        return BlockEnv(chain_id=CHAIN_ID, height=self.height if height is None else height, timestamp_ms=1,
                        fee_recipient=FEE_RECIPIENT, beacon=BEACON, parent_beacon=BEACON, n_validators=len(PEERS))

    def new_ctx(self) -> BlockContext:
        return begin_block(self.world, self.env())

    def at(self, height: int) -> None:
        """Continue at ``height`` (the tests need only the height; no End of Block runs)."""
        self.height = height
        self.ctx = self.new_ctx()

    def run(self, sk: bytes, ins: Instruction, **limits: int) -> Receipt:
        n = self.nonces[sk]
        self.nonces[sk] += 1
        return execute_transaction(self.world, make_tx(sk, n, ins, **{**LIMITS, **limits}), self.ctx)


def receipt(v: int, *, sk: bytes = RUNNER_SKS[0], height: int = H0, epoch: int = 0, vsh: bytes = VSH0,
            nonce: int = 7, accepting: bool = True, chain_id: str = CHAIN_ID,
            key: ValidatorKey | None = None) -> PresenceReceipt:
    """Receipt of validator ``v`` (index into VKEYS, or ``key``) for runner ``sk``."""
    return PresenceReceipt.issue(chain_id, key or VKEYS[v], runner_pk(sk), epoch, vsh, height, nonce, accepting)


def cert(receipts: list[PresenceReceipt], sk: bytes = RUNNER_SKS[0]) -> SubmitPresenceCertificate:
    return SubmitPresenceCertificate(secp256k1.private_key_to_address(sk), tuple(receipts))


def good(sk: bytes = RUNNER_SKS[0], n: int = 11, height: int = H0, **kw: object) -> list[PresenceReceipt]:
    """``n`` receipts from ``n`` distinct validators of ``Sub(R)``."""
    return [receipt(v, sk=sk, height=height, **kw) for v in sub_of(sk)[:n]]  # type: ignore[arg-type]


def outside(sk: bytes = RUNNER_SKS[0]) -> int:
    """The one validator of the 21 that is not in ``Sub(R)``."""
    [v] = [i for i in range(len(PEERS)) if i not in sub_of(sk)]
    return v


def accepted(w: World, receipts: list[PresenceReceipt], sk: bytes = RUNNER_SKS[0]) -> Receipt:
    r = w.run(sk, cert(receipts, sk))
    assert (r.status, r.error_code) == (STATUS_SUCCESS, None), r
    return r


def refused(w: World, ins: Instruction, code: str, sk: bytes = RUNNER_SKS[0]) -> Receipt:
    """Run ``ins``; a failed receipt with ``code`` and only the sender's account changed (bad input changes nothing)."""
    sender = secp256k1.private_key_to_address(sk)
    before = dict(w.world.changes())
    balance = get_account(w.world, sender).balance
    r = w.run(sk, ins)
    assert (r.status, r.error_code) == (STATUS_FAILED, code), r
    assert r.events == () and r.fee_paid > 0
    assert get_account(w.world, sender).balance == balance - r.fee_paid
    after = w.world.changes()
    assert {k for k in after.keys() | before.keys() if before.get(k) != after.get(k)} == {account_key(sender)}
    return r


def proof(w: World, sk: bytes = RUNNER_SKS[0]) -> pc.PresenceProof | None:
    return pc.get_proof(w.world, secp256k1.private_key_to_address(sk))


# -- state encoding ----------------------------------------------------------------------------------------------
def test_proof_state_golden_bytes() -> None:
    # {0: 1000, 1: 1060}: a2 | 00 19 03e8 | 01 19 0424 — by hand from RFC 8949 (uint16 head 0x19)
    assert pc.PresenceProof(1000, 1060).encode() == bytes.fromhex("a2001903e8011904 24".replace(" ", ""))
    assert pc.PresenceProof.decode(bytes.fromhex("a2001903e801190424")) == pc.PresenceProof(1000, 1060)
    assert pc.proof_key(b"\xab" * 20) == b"sys/presence_proof/" + b"\xab" * 20


# -- acceptance --------------------------------------------------------------------------------------------------
def test_t_hard_distinct_receipts_set_anchor_and_proven_until_and_meter_per_receipt() -> None:
    w = World()
    receipts = good(height=H0 - 5)
    receipts[3] = receipt(sub_of(RUNNER_SKS[0])[3], height=H0 - 2)  # the anchor is the greatest counted height
    r = accepted(w, receipts)
    assert proof(w) == pc.PresenceProof(H0 - 2, H0 - 2 + 60)
    [ev] = r.events
    assert (ev.emitter, ev.topic) == (pc.RUNNER_REGISTRY, pc.TOPIC_CERTIFIED)
    assert decode(ev.data) == {0: RUNNERS[0], 1: H0 - 2, 2: H0 + 58, 3: 11}
    # §8.3 metering: base + per-receipt precheck + one Ed25519 attempt per counted receipt (plus the tx base)
    assert r.cycles_used == fees.TX_BASE_CYCLES + 20_000 + 11 * 1_000 + 11 * 5_000


def test_precheck_rejections_are_charged_but_never_reach_a_signature_verification() -> None:
    w = World()
    receipts = [*good(), receipt(outside()), receipt(sub_of(RUNNER_SKS[0])[12], accepting=False)]
    r = accepted(w, receipts)
    assert r.cycles_used == fees.TX_BASE_CYCLES + 20_000 + 13 * 1_000 + 11 * 5_000


def test_a_verification_is_never_attempted_without_the_cycles_to_pay_for_it() -> None:
    w = World()
    before = dict(w.world.changes())
    # enough for base, prechecks and 10 verifications only
    r = w.run(RUNNER_SKS[0], cert(good()), cycles_limit=fees.TX_BASE_CYCLES + 20_000 + 11 * 1_000 + 10 * 5_000 + 4_999)
    assert (r.status, r.error_code) == (STATUS_FAILED, "out_of_cycles")
    assert proof(w) is None
    changed = {k for k in w.world.changes().keys() | before.keys() if before.get(k) != w.world.changes().get(k)}
    assert changed == {account_key(RUNNERS[0])}


def test_receipt_order_does_not_change_the_outcome() -> None:
    a, b = World(), World()
    receipts = [*good(height=H0 - 3), receipt(sub_of(RUNNER_SKS[0])[0], height=H0 - 1)]
    accepted(a, receipts)
    accepted(b, list(reversed(receipts)))
    assert proof(a) == proof(b) == pc.PresenceProof(H0 - 1, H0 + 59)


def test_shadow_below_the_guard_certificates_are_accepted_but_nothing_is_excluded() -> None:
    w = World(params=Cip11Params(T_HARD=11))  # default subset bounds: effective_k = 6 < K_HARD_MIN
    assert not pc.mode_a_active(w.world, w.ctx.flags, H0)
    # Sub(R) is now 6 validators: a certificate can never reach t_hard = 11 distinct receipts
    six = sub_of(RUNNER_SKS[0], params=Cip11Params())
    assert len(six) == 6
    refused(w, cert([receipt(v) for v in six]), pc.E_TOO_FEW)


# -- refusals (each: typed code, nothing changed) ----------------------------------------------------------------
def test_mode_a_off_by_default_refuses_certificates() -> None:
    w = World(hard_exclude=False)
    assert Cip11Flags().PRESENCE_HARD_EXCLUDE_ENABLED is False
    refused(w, cert(good()), pc.E_MODE_A_DISABLED)


def test_too_few_receipts() -> None:
    refused(World(), cert(good(n=10)), pc.E_TOO_FEW)


def test_duplicate_receipts_of_one_validator_count_once() -> None:
    w = World()
    receipts = good(n=10)
    receipts.append(receipt(sub_of(RUNNER_SKS[0])[0], nonce=8))  # same raw peer_pubkey, other nonce
    refused(w, cert(receipts), pc.R_DUPLICATE)


def test_foreign_epoch_receipts() -> None:
    w = World()
    receipts = [*good(n=10), receipt(sub_of(RUNNER_SKS[0])[10], epoch=1)]
    refused(w, cert(receipts), pc.R_FOREIGN_EPOCH)
    receipts[-1] = receipt(sub_of(RUNNER_SKS[0])[10], vsh=b"\x00" * 32)
    refused(w, cert(receipts), pc.R_FOREIGN_EPOCH)


@pytest.mark.parametrize("make,code", [
    (lambda: receipt(sub_of(RUNNER_SKS[0])[10], height=H0 - 31), pc.R_STALE),
    (lambda: receipt(sub_of(RUNNER_SKS[0])[10], height=H0 + 1), pc.R_FUTURE),
    (lambda: receipt(sub_of(RUNNER_SKS[0])[10], accepting=False), pc.R_NOT_ACCEPTING),
    (lambda: receipt(outside()), pc.R_NOT_IN_SUBSET),
    (lambda: receipt(0, key=ValidatorKey(b"\x99" * 32)), pc.R_UNKNOWN_VALIDATOR),
    (lambda: receipt(sub_of(RUNNER_SKS[0])[10], chain_id="other-chain"), pc.R_BAD_SIGNATURE),
    (lambda: replace(receipt(sub_of(RUNNER_SKS[0])[10]), nonce_echo=8), pc.R_BAD_SIGNATURE),
    (lambda: replace(receipt(sub_of(RUNNER_SKS[0])[10]), validator_pubkey=b"\x01" + PEERS[0]), pc.R_MALFORMED),
    (lambda: replace(receipt(sub_of(RUNNER_SKS[0])[10]), validator_signed=b"\x00" * 63), pc.R_MALFORMED),
    (lambda: receipt(sub_of(RUNNER_SKS[0])[10], sk=RUNNER_SKS[1]), pc.R_RUNNER_KEY),
])
def test_each_receipt_defect_is_not_counted_and_names_the_refusal(make, code) -> None:  # type: ignore[no-untyped-def]
    w = World()
    assert code in pc.REFUSAL_CODES
    refused(w, cert([*good(n=10), make()]), code)
    # the same ten plus one more good receipt are accepted: the defect, not the rest, was the reason
    accepted(w, [*good(n=10), make(), receipt(sub_of(RUNNER_SKS[0])[11])])


def test_sender_must_be_the_runner_and_the_runner_registered() -> None:
    w = World()
    refused(w, cert(good(), sk=RUNNER_SKS[0]), pc.E_SENDER_NOT_RUNNER, sk=RUNNER_SKS[1])
    stranger = (0x3000).to_bytes(32, "big")
    w2 = World()
    w2.nonces[stranger] = 0
    from cowboy_node.execution.system_state import put_account
    from cowboy_node.types.account import Account
    put_account(w2.world, secp256k1.private_key_to_address(stranger), Account(10**21, 0))
    receipts = [receipt(v, sk=stranger) for v in sub_of(stranger)[:11]]
    refused(w2, cert(receipts, sk=stranger), pc.E_RUNNER_NOT_REGISTERED, sk=stranger)


def test_forged_higher_receipt_cannot_suppress_a_lower_valid_one() -> None:
    w = World()
    receipts = good(height=H0 - 4)
    forged = replace(receipt(sub_of(RUNNER_SKS[0])[0], height=H0), validator_signed=b"\x01" * 64)
    r = accepted(w, [*receipts, forged])
    assert proof(w) == pc.PresenceProof(H0 - 4, H0 + 56)  # the forged height never became the anchor
    assert r.cycles_used == fees.TX_BASE_CYCLES + 20_000 + 12 * 1_000 + 12 * 5_000  # it cost its attempt


# -- CIP-11 §16 replay property tests -----------------------------------------------------------------------------
def test_replay_stale_receipt_cannot_extend_presence_proven_until() -> None:
    w = World()
    receipts = good(height=H0)
    accepted(w, receipts)
    assert proof(w) == pc.PresenceProof(H0, H0 + 60)
    # The runner goes offline; past RECEIPT_FRESHNESS_BLOCKS its old receipts are stale and cannot re-certify it.
    w.at(H0 + 31)
    refused(w, cert(receipts), pc.R_STALE)
    # A replay within freshness fails on the anchor instead: presence never extends past H0 + TTL.
    w.at(H0 + 30)
    refused(w, cert(receipts), pc.E_ANCHOR_NOT_NEWER)
    assert proof(w) == pc.PresenceProof(H0, H0 + 60)


def test_replay_anchor_is_strictly_monotonic() -> None:
    w = World()
    accepted(w, good(height=H0 - 2))
    w.at(H0 + 1)
    refused(w, cert(good(height=H0 - 2, nonce=99)), pc.E_ANCHOR_NOT_NEWER)  # equal anchor, fresh nonces
    refused(w, cert(good(height=H0 - 3)), pc.E_ANCHOR_NOT_NEWER)  # older anchor
    accepted(w, good(height=H0 - 1))  # strictly newer
    assert proof(w) == pc.PresenceProof(H0 - 1, H0 + 59)


def test_replay_signed_preimage_binds_subset_epoch_and_validator_set_hash() -> None:
    """During an E → E+1 overlap both (0, VSH0) and (1, VSH1) are valid: a receipt signed under one pair and
    relabelled with the other passes every signature-free check and fails the signature."""
    w = World()
    peers1 = PEERS[1:]  # E+1 drops validator 0
    vs.put_activation(w.world, peers1, H0)
    w.at(H0)  # inside the window [H0, H0 + OVERLAP_BLOCKS)
    vsh1 = validator_set_hash(peers1)
    both = [i for i in sub_of(RUNNER_SKS[0]) if PEERS[i] in subset(runner_pk(RUNNER_SKS[0]).key, peers1,
                                                                      min_subset=20, max_subset=20)]
    v = both[0]
    relabelled = replace(receipt(v), subset_epoch=1, validator_set_hash=vsh1)
    others = [receipt(i) for i in both[1:11]]
    refused(w, cert([*others, relabelled]), pc.R_BAD_SIGNATURE)
    accepted(w, [*others, receipt(v, epoch=1, vsh=vsh1)])


def test_replay_receipt_whose_epoch_pair_does_not_match_the_valid_snapshots_is_rejected() -> None:
    w = World()
    peers1 = PEERS[1:]
    vsh1 = validator_set_hash(peers1)
    act = H0 + 10
    vs.put_activation(w.world, peers1, act)
    overlap = 160
    sk = RUNNER_SKS[0]
    sub1 = set(subset(runner_pk(sk).key, peers1, min_subset=20, max_subset=20))
    in_both = [i for i in sub_of(sk) if PEERS[i] in sub1]
    # before activation: epoch 1 is not valid yet
    refused(w, cert([receipt(i, epoch=1, vsh=vsh1) for i in in_both[:11]]), pc.R_FOREIGN_EPOCH)
    # mixed pair (epoch 0 with E+1's hash) inside the window: never a cross-product
    w.at(act)
    refused(w, cert([receipt(i, height=act, epoch=0, vsh=vsh1) for i in in_both[:11]]), pc.R_FOREIGN_EPOCH)
    # past the cutoff: epoch-0 receipts are foreign, epoch-1 receipts count
    w.at(act + overlap)
    refused(w, cert([receipt(i, height=act + overlap) for i in in_both[:11]]), pc.R_FOREIGN_EPOCH)
    accepted(w, [receipt(i, height=act + overlap, epoch=1, vsh=vsh1) for i in in_both[:11]])


def test_overlap_validator_signing_under_both_epochs_counts_once_keeping_the_greatest_height() -> None:
    w = World()
    peers1 = PEERS[1:]
    vsh1 = validator_set_hash(peers1)
    vs.put_activation(w.world, peers1, H0)
    w.at(H0 + 5)
    sk = RUNNER_SKS[0]
    sub1 = set(subset(runner_pk(sk).key, peers1, min_subset=20, max_subset=20))
    in_both = [i for i in sub_of(sk) if PEERS[i] in sub1]
    nine = [receipt(i, height=H0) for i in in_both[:9]]
    v = in_both[9]
    twice = [receipt(v, height=H0 + 1), receipt(v, height=H0 + 5, epoch=1, vsh=vsh1)]
    refused(w, cert(nine + twice), pc.R_DUPLICATE)  # 11 receipts, 9 + 1 validators: one short of t_hard
    accepted(w, [*nine, *twice, receipt(in_both[10], height=H0)])
    assert proof(w) == pc.PresenceProof(H0 + 5, H0 + 65)  # the greatest height of the double-signer


def test_mode_a_guard_needs_k_hard_min_and_an_honest_majority_threshold() -> None:
    w = World()
    flags = w.ctx.flags
    assert pc.mode_a_active(w.world, flags, H0)
    set_cip11_params(w.world, replace(GUARD_PARAMS, T_HARD=10))  # t_hard < floor(20/2) + 1
    assert not pc.mode_a_active(w.world, flags, H0)
    set_cip11_params(w.world, replace(GUARD_PARAMS, MIN_SUBSET=19, MAX_SUBSET=19, T_HARD=11))  # k = 19 < 20
    assert not pc.mode_a_active(w.world, flags, H0)
    set_cip11_params(w.world, GUARD_PARAMS)
    assert not pc.mode_a_active(w.world, replace(flags, PRESENCE_HARD_EXCLUDE_ENABLED=False), H0)
    assert not pc.mode_a_active(w.world, replace(flags, CIP11_PRESENT_FIRST_ENABLED=False), H0)

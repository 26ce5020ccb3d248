"""CIP-11 Mode A (§8.3–§8.4): ``SubmitPresenceCertificate`` verification, the presence-proof state, and the
Mode-A derivation of ``PresenceInput(H)`` from parent state.

Verification follows §8.3's normative evaluation order: charge ``PRESENCE_CERT_BASE_CYCLES``; for every receipt
charge ``PRESENCE_RECEIPT_PRECHECK_CYCLES`` and run the signature-free checks (scheme tags and lengths, the
runner key, ``accepting_new``, freshness, the epoch-paired snapshot, ``Sub_epoch(runner)``); bucket the survivors
by raw validator ``peer_pubkey``; per bucket, in descending ``block_height``, charge
``PRESENCE_RECEIPT_ED25519_VERIFY_CYCLES`` before each Ed25519 attempt and keep the first (greatest) valid one;
then count, check ``t_hard`` and the strictly-newer anchor, and write.

A refused certificate changes no state (the transaction fails: its fee is charged, its writes are reverted). The
refusal code is the reason of the first receipt, in submission order, that did not count (``duplicate_receipt``,
``foreign_epoch``, ``stale_receipt``, ...) when receipts were dropped, else ``too_few_receipts``; the message gives
the count of every reason. Certificate-level refusals have their own codes (see ``E_*``).

State (golden bytes in docs/protocol.md §8.5): ``sys/presence_proof/`` ‖ runner(20) →
``{0: presence_anchor u64, 1: presence_proven_until u64}``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs.selection import mode_a_effective
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.runners import registry_state as runner_store
from cowboy_node.execution.system_state import RUNNER_REGISTRY, get_cip11_params
from cowboy_node.execution.validator_set import get_snapshot, snapshots_at
from cowboy_node.execution.validity_errors import TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.transport.enums import Scheme
from cowboy_protocol.transport.preimages import presence_receipt_digest
from cowboy_protocol.transport.protocol_errors import SignatureError
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.subset import EpochSnapshot, select_snapshot, subset
from cowboy_protocol.types.fields import decode_map, expect_uint
from cowboy_protocol.types.params import Cip11Flags, Cip11Params
from cowboy_protocol.types.presence_instructions import PresenceReceipt, SubmitPresenceCertificate
from cowboy_protocol.types.runner import Health
from cowboy_protocol.types.transaction import Transaction

PRESENCE_CERT_BASE_CYCLES = 20_000
"""CIP-11 §13: charged before any receipt is looked at."""
PRESENCE_RECEIPT_PRECHECK_CYCLES = 1_000
"""CIP-11 §13: charged for every submitted receipt entry, before its checks."""
PRESENCE_RECEIPT_ED25519_VERIFY_CYCLES = 5_000
"""CIP-11 §13: charged immediately before each Ed25519 attempt, success or failure (the chain's verify cost)."""
PROOF_PREFIX = b"sys/presence_proof/"
"""State key prefix of a runner's presence proof (``‖ address``)."""
TOPIC_CERTIFIED = "runner.presence_certified"
"""Emitted by the runner registry; data ``{0: runner, 1: presence_anchor, 2: presence_proven_until,
3: counted receipts}``."""

# Certificate-level refusals.
E_MODE_A_DISABLED = "mode_a_disabled"
"""``PRESENCE_HARD_EXCLUDE_ENABLED`` is off (the default): Mode A certificates are not accepted at all."""
E_SENDER_NOT_RUNNER = "sender_not_runner"
"""The transaction signer (§8.3 ``runner_signed``) is not the certificate's runner."""
E_RUNNER_NOT_REGISTERED = "runner_not_registered"
"""The runner address resolves to no live RunnerRegistration."""
E_TOO_FEW = "too_few_receipts"
"""Fewer than ``t_hard`` distinct valid receipts, none of them dropped by a check."""
E_ANCHOR_NOT_NEWER = "anchor_not_newer"
"""``max(counted block_height)`` is not above the runner's current ``presence_anchor`` (§8.3 anti-replay)."""

# Receipt-level reasons (a receipt that fails one is not counted; the first one also names a refusal).
R_MALFORMED = "malformed_receipt"
"""Wrong scheme tag or length of a key, hash or signature."""
R_RUNNER_KEY = "runner_key_mismatch"
"""``runner_pubkey`` differs from the first receipt's, or its address is not the runner's."""
R_NOT_ACCEPTING = "not_accepting"
"""``accepting_new`` is false (§6.4)."""
R_FUTURE = "future_receipt"
"""``block_height`` above the executing block's height."""
R_STALE = "stale_receipt"
"""Older than ``RECEIPT_FRESHNESS_BLOCKS``."""
R_FOREIGN_EPOCH = "foreign_epoch"
"""``(subset_epoch, validator_set_hash)`` selects no snapshot valid at this height (§5.3 epoch-paired)."""
R_UNKNOWN_VALIDATOR = "unknown_validator"
"""The validator key is not in the selected snapshot."""
R_NOT_IN_SUBSET = "not_in_subset"
"""The validator is in the snapshot but not in ``Sub_epoch(runner)``."""
R_BAD_SIGNATURE = "bad_signature"
"""``validator_signed`` does not verify (this also covers a receipt signed for another chain_id)."""
R_DUPLICATE = "duplicate_receipt"
"""Another valid receipt of the same raw ``peer_pubkey`` with a greater (or equal, earlier) height counted."""

REFUSAL_CODES = (E_MODE_A_DISABLED, E_SENDER_NOT_RUNNER, E_RUNNER_NOT_REGISTERED, E_TOO_FEW, E_ANCHOR_NOT_NEWER,
                 R_MALFORMED, R_RUNNER_KEY, R_NOT_ACCEPTING, R_FUTURE, R_STALE, R_FOREIGN_EPOCH,
                 R_UNKNOWN_VALIDATOR, R_NOT_IN_SUBSET, R_BAD_SIGNATURE, R_DUPLICATE)
"""Every code a refused certificate's receipt can carry (the node's metric labels)."""


@dataclass(frozen=True, slots=True)
class PresenceProof:
    """A runner's Mode-A presence state (CIP-11 §8.3)."""

    presence_anchor: int
    """Greatest counted receipt ``block_height`` of the last accepted certificate (strictly increasing)."""
    presence_proven_until: int
    """``presence_anchor + PRESENCE_PROOF_TTL_BLOCKS``: the last height at which the runner counts as present."""

    def encode(self) -> bytes:
        """Canonical bytes ``{0: presence_anchor, 1: presence_proven_until}``."""
        return encode({0: self.presence_anchor, 1: self.presence_proven_until})

    @classmethod
    def decode(cls, raw: bytes) -> PresenceProof:
        """Inverse of :meth:`encode`."""
        m = decode_map(raw, frozenset({0, 1}), "PresenceProof")
        return cls(expect_uint(m[0], "PresenceProof.presence_anchor"),
                   expect_uint(m[1], "PresenceProof.presence_proven_until"))


def proof_key(runner: bytes) -> bytes:
    """State key of ``runner``'s presence proof."""
    return PROOF_PREFIX + runner


def get_proof(world: WorldState, runner: bytes) -> PresenceProof | None:
    """The runner's presence proof, or None (never certified)."""
    raw = world.get(proof_key(runner))
    return None if raw is None else PresenceProof.decode(raw)


def valid_receipt_snapshots(world: WorldState, height: int) -> tuple[EpochSnapshot, ...]:
    """The snapshots whose ``(subset_epoch, validator_set_hash)`` a receipt may carry at ``height`` (§5.3): epoch E;
    E and E+1 during an OVERLAP_BLOCKS window; E+1 alone from the cutoff on (``validator_set.snapshots_at``).
    Empty when the state has no snapshot at all (no receipt can then count)."""
    if get_snapshot(world, 0) is None:
        return ()
    return snapshots_at(world, height)


def mode_a_active(world: WorldState, flags: Cip11Flags, height: int, params: Cip11Params | None = None) -> bool:
    """Mode A hard exclusion applies to block ``height`` (read from its parent state): present-first selection on,
    ``PRESENCE_HARD_EXCLUDE_ENABLED`` set, and the §8.4 guard true for the active snapshot (``effective_k ≥
    K_HARD_MIN`` and ``T_HARD ≥ floor(effective_k/2) + 1``). Below the guard nothing is excluded."""
    if not (flags.CIP11_PRESENT_FIRST_ENABLED and flags.PRESENCE_HARD_EXCLUDE_ENABLED):
        return False
    snaps = valid_receipt_snapshots(world, height)
    if not snaps:
        return False
    p = get_cip11_params(world) if params is None else params
    return mode_a_effective(flags, len(snaps[-1].validators), p.T_HARD, min_subset=p.MIN_SUBSET,
                            max_subset=p.MAX_SUBSET, k_hard_min=p.K_HARD_MIN)


def derive_presence(world: WorldState, height: int) -> frozenset[int]:
    """Mode A ``PresenceInput(H)`` (§8.3 point 3, §17): registry indices of the runners of the parent registry
    with ``presence_proven_until ≥ H``. ``world`` is the parent state (read before any transaction of H)."""
    out = set()
    for rec in runner_store.runners_in_index_order(world):
        proof = get_proof(world, rec.address)
        if proof is not None and proof.presence_proven_until >= height:
            out.add(rec.index)
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Candidate:
    position: int
    receipt: PresenceReceipt
    peer_pubkey: bytes


class _Derived:
    """Values every receipt of one certificate shares, computed once (they depend on the runner key and the
    snapshot only): the parsed runner key and its address, and ``Sub_epoch(R)`` per snapshot."""

    __slots__ = ("keys", "subsets")

    def __init__(self) -> None:
        self.keys: dict[bytes, tuple[PubKey, bytes] | None] = {}
        self.subsets: dict[tuple[bytes, int], frozenset[bytes]] = {}

    def runner_key(self, wire: bytes) -> tuple[PubKey, bytes] | None:
        if wire not in self.keys:
            try:
                k = PubKey.from_bytes(wire)
                self.keys[wire] = (k, k.address()) if k.scheme is Scheme.SECP256K1 else None
            except SignatureError:
                self.keys[wire] = None
        return self.keys[wire]

    def parsed(self, wire: bytes) -> PubKey:
        """The runner key of a receipt that passed the precheck."""
        entry = self.keys[wire]
        assert entry is not None
        return entry[0]

    def subset(self, runner_key: bytes, snap: EpochSnapshot, params: Cip11Params) -> frozenset[bytes]:
        key = (runner_key, snap.epoch)
        if key not in self.subsets:
            self.subsets[key] = frozenset(subset(runner_key, snap.validators, min_subset=params.MIN_SUBSET,
                                                 max_subset=params.MAX_SUBSET))
        return self.subsets[key]


def _precheck(r: PresenceReceipt, runner: bytes, runner_key: bytes | None, height: int, params: Cip11Params,
              snapshots: tuple[EpochSnapshot, ...], derived: _Derived) -> tuple[str | None, bytes]:
    """Signature-free checks of one receipt: (reason or None, raw runner key it carries)."""
    parsed = derived.runner_key(r.runner_pubkey)
    try:
        vk = PubKey.from_bytes(r.validator_pubkey)
    except SignatureError:
        return R_MALFORMED, b""
    if (parsed is None or vk.scheme is not Scheme.ED25519 or len(r.validator_set_hash) != 32
            or len(r.validator_signed) != Scheme.ED25519.signature_length):
        return R_MALFORMED, b""
    rk, address = parsed
    if (runner_key is not None and rk.key != runner_key) or address != runner:
        return R_RUNNER_KEY, rk.key
    if not r.accepting_new:
        return R_NOT_ACCEPTING, rk.key
    if r.block_height > height:
        return R_FUTURE, rk.key
    if height - r.block_height > params.RECEIPT_FRESHNESS_BLOCKS:
        return R_STALE, rk.key
    snap = select_snapshot(snapshots, r.subset_epoch, r.validator_set_hash)
    if snap is None:
        return R_FOREIGN_EPOCH, rk.key
    if vk.key not in snap.validators:
        return R_UNKNOWN_VALIDATOR, rk.key
    if vk.key not in derived.subset(rk.key, snap, params):
        return R_NOT_IN_SUBSET, rk.key
    return None, rk.key


def submit_presence_certificate(world: WorldState, tx: Transaction, ctx: BlockContext, meter: Meter,
                                events: list[Event]) -> None:
    """SubmitPresenceCertificate (0x33): verify per CIP-11 §8.3 and set the runner's presence proof."""
    ins = tx.instruction
    assert isinstance(ins, SubmitPresenceCertificate)
    if not ctx.flags.PRESENCE_HARD_EXCLUDE_ENABLED:
        raise TxFailed(E_MODE_A_DISABLED, "Mode A presence certificates are off (PRESENCE_HARD_EXCLUDE_ENABLED)")
    meter.charge_cycles(PRESENCE_CERT_BASE_CYCLES)
    if tx.sender != ins.runner:
        raise TxFailed(E_SENDER_NOT_RUNNER, "a presence certificate must be signed by its runner")
    rec = runner_store.get_runner(world, ins.runner)
    if rec is None or rec.health == Health.DEREGISTERED:
        raise TxFailed(E_RUNNER_NOT_REGISTERED, "the certificate's runner is not registered")
    height = ctx.env.height
    params = get_cip11_params(world)
    snapshots = valid_receipt_snapshots(world, height)
    dropped: dict[int, str] = {}
    buckets: dict[bytes, list[_Candidate]] = {}
    runner_key: bytes | None = None
    derived = _Derived()
    for pos, r in enumerate(ins.receipts):
        meter.charge_cycles(PRESENCE_RECEIPT_PRECHECK_CYCLES)
        reason, rk = _precheck(r, ins.runner, runner_key, height, params, snapshots, derived)
        if reason is not None:
            dropped[pos] = reason
            continue
        runner_key = rk  # "every receipt MUST carry the same runner_pubkey": the first valid one fixes it
        peer = r.validator_pubkey[1:]
        buckets.setdefault(peer, []).append(_Candidate(pos, r, peer))
    retained: list[_Candidate] = []
    for peer in sorted(buckets):  # order of verification never changes the outcome; sorted keeps it fixed
        # greatest block_height first (ties: submission order); a forged higher one only costs its attempt
        found = False
        for c in sorted(buckets[peer], key=lambda c: (-c.receipt.block_height, c.position)):
            if found:
                dropped[c.position] = R_DUPLICATE
                continue
            meter.charge_cycles(PRESENCE_RECEIPT_ED25519_VERIFY_CYCLES)
            r = c.receipt
            # the keys were validated by the precheck: build the digest from them, not by re-parsing (curve check)
            digest = presence_receipt_digest(ctx.env.chain_id, derived.parsed(r.runner_pubkey),
                                             PubKey.validator(peer), r.subset_epoch, r.validator_set_hash,
                                             r.block_height, r.nonce_echo, r.accepting_new)
            if ed25519.verify(peer, digest, r.validator_signed):
                retained.append(c)
                found = True
            else:
                dropped[c.position] = R_BAD_SIGNATURE
    t_hard = max(1, params.T_HARD)
    if len(retained) < t_hard:
        counts = Counter(dropped.values())
        detail = ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
        code = dropped[min(dropped)] if dropped else E_TOO_FEW
        raise TxFailed(code, f"{len(retained)} distinct valid receipts, t_hard is {t_hard}"
                             + (f" (not counted: {detail})" if detail else ""))
    anchor = max(c.receipt.block_height for c in retained)
    current = get_proof(world, ins.runner)
    if current is not None and anchor <= current.presence_anchor:
        raise TxFailed(E_ANCHOR_NOT_NEWER, f"anchor {anchor} is not above the current anchor "
                                           f"{current.presence_anchor}")
    proof = PresenceProof(anchor, anchor + params.PRESENCE_PROOF_TTL_BLOCKS)
    key, value = proof_key(ins.runner), proof.encode()
    meter.charge_cells(len(key) + len(value))
    world.set(key, value)
    events.append(Event(RUNNER_REGISTRY, TOPIC_CERTIFIED,
                        encode({0: ins.runner, 1: anchor, 2: proof.presence_proven_until, 3: len(retained)})))

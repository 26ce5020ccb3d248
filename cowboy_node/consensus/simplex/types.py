"""Simplex wire messages: proposals, votes, certificates, fetch requests (deterministic CBOR, integer keys).

Every message is a map whose key 0 is its kind (a fixed byte table, append only)::

    Proposal       {0: round {0: epoch, 1: view}, 1: parent_view, 2: parent (32 B), 3: payload (32 B)}
    Notarize       {0: 1, 1: Proposal, 2: signer, 3: vote partial (48 B), 4: seed partial (48 B)}
    Nullify        {0: 2, 1: round,    2: signer, 3: vote partial,        4: seed partial}
    Finalize       {0: 3, 1: Proposal, 2: signer, 3: vote partial,        4: seed partial}
    Notarization   {0: 4, 1: Proposal, 2: signature (48 B), 3: seed (48 B)}
    Nullification  {0: 5, 1: round,    2: signature,        3: seed}
    Finalization   {0: 6, 1: Proposal, 2: signature,        3: seed}
    Fetch          {0: 7, 1: epoch, 2: [view, ...] (1..64 views, strictly increasing)}

``signer`` is the 0-based index of the validator in the static set. The vote partial signs
:func:`notarize_message` / :func:`nullify_message` / :func:`finalize_message`; the seed partial signs
:func:`cowboy_node.types.seed.round_message` of the round (the block beacon's message), so the recovered
seed of a round is the same whichever certificate revealed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any

from cowboy_node.types.block import Round
from cowboy_node.types.seed import round_message
from cowboy_protocol.codec import CodecError, decode, encode
from cowboy_protocol.types.fields import expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

__all__ = [
    "DIGEST_LEN",
    "KIND",
    "MAX_FETCH_VIEWS",
    "SIG_LEN",
    "Certificate",
    "Fetch",
    "Finalization",
    "Finalize",
    "Message",
    "Notarization",
    "Notarize",
    "Nullification",
    "Nullify",
    "Proposal",
    "Vote",
    "decode_message",
    "encode_message",
    "finalize_message",
    "notarize_message",
    "nullify_message",
    "seed_message",
]

DIGEST_LEN = 32
"""Bytes of a block digest (proposal parent and payload)."""
SIG_LEN = 48
"""Bytes of a compressed G1 signature (BLS12-381 MinSig)."""
MAX_SIGNER = 0xFFFF
"""Largest validator index a vote may carry."""
MAX_FETCH_VIEWS = 64
"""Most views one Fetch may ask for."""
NAMESPACE = b"cowboy-simplex-v1:"
"""Domain prefix of every vote message."""


@dataclass(frozen=True, slots=True)
class Proposal:
    """A block proposed for ``round``, extending the block ``parent`` certified at ``parent_view``."""

    round: Round
    """The (epoch, view) it is proposed in."""
    parent_view: int
    """The view of the parent's notarization (every view in between is nullified)."""
    parent: bytes
    """32-byte digest of the parent block (view 0: the genesis digest)."""
    payload: bytes
    """32-byte digest of the proposed block (opaque to the engine)."""

    def to_cbor(self) -> dict[int, Any]:
        return {0: self.round.to_cbor(), 1: self.parent_view, 2: self.parent, 3: self.payload}

    @classmethod
    def from_cbor(cls, value: object) -> Proposal:
        m = expect_map(value, frozenset({0, 1, 2, 3}), "proposal")
        p = cls(Round.from_cbor(m[0]), expect_uint(m[1], "proposal.parent_view"),
                expect_bytes(m[2], "proposal.parent", DIGEST_LEN), expect_bytes(m[3], "proposal.payload", DIGEST_LEN))
        if p.parent_view >= p.round.view:
            raise DecodeError("proposal.parent_view: must be below the proposal's view", field="proposal.parent_view")
        return p


def notarize_message(p: Proposal) -> bytes:
    """Bytes a notarize vote's partial signs."""
    return NAMESPACE + b"notarize:" + encode(p.to_cbor())


def finalize_message(p: Proposal) -> bytes:
    """Bytes a finalize vote's partial signs."""
    return NAMESPACE + b"finalize:" + encode(p.to_cbor())


def nullify_message(r: Round) -> bytes:
    """Bytes a nullify vote's partial signs."""
    return NAMESPACE + b"nullify:" + encode(r.to_cbor())


def seed_message(r: Round) -> bytes:
    """Bytes every vote's seed partial signs (the block beacon's message)."""
    return round_message(r)


@dataclass(frozen=True, slots=True)
class Notarize:
    """A validator's vote that the proposal is valid (the leader's own notarize is the proposal)."""

    proposal: Proposal
    """What is voted on."""
    signer: int
    """0-based index of the voting validator in the static set."""
    signature: bytes
    """48-byte BLS partial over the vote message."""
    seed: bytes
    """48-byte BLS partial over the round's seed message."""
    KIND = 1

    @property
    def round(self) -> Round:
        return self.proposal.round

    def vote_message(self) -> bytes:
        return notarize_message(self.proposal)


@dataclass(frozen=True, slots=True)
class Nullify:
    """A validator's vote to skip ``round`` (leader or notarization timeout, or a bad proposal)."""

    round: Round
    """The round voted away."""
    signer: int
    """0-based index of the voting validator in the static set."""
    signature: bytes
    """48-byte BLS partial over the vote message."""
    seed: bytes
    """48-byte BLS partial over the round's seed message."""
    KIND = 2

    def vote_message(self) -> bytes:
        return nullify_message(self.round)


@dataclass(frozen=True, slots=True)
class Finalize:
    """A validator's vote, after a notarization it did not nullify, to finalize the proposal."""

    proposal: Proposal
    """What is voted on."""
    signer: int
    """0-based index of the voting validator in the static set."""
    signature: bytes
    """48-byte BLS partial over the vote message."""
    seed: bytes
    """48-byte BLS partial over the round's seed message."""
    KIND = 3

    @property
    def round(self) -> Round:
        return self.proposal.round

    def vote_message(self) -> bytes:
        return finalize_message(self.proposal)


@dataclass(frozen=True, slots=True)
class Notarization:
    """A quorum of notarize votes for one proposal."""

    proposal: Proposal
    """What is voted on."""
    signature: bytes
    """48-byte threshold signature recovered from a quorum of vote partials."""
    seed: bytes
    """48-byte threshold seed of the round (the same whichever certificate revealed it)."""
    KIND = 4

    @property
    def round(self) -> Round:
        return self.proposal.round

    def vote_message(self) -> bytes:
        return notarize_message(self.proposal)


@dataclass(frozen=True, slots=True)
class Nullification:
    """A quorum of nullify votes for one round."""

    round: Round
    """The round voted away."""
    signature: bytes
    """48-byte threshold signature recovered from a quorum of vote partials."""
    seed: bytes
    """48-byte threshold seed of the round (the same whichever certificate revealed it)."""
    KIND = 5

    def vote_message(self) -> bytes:
        return nullify_message(self.round)


@dataclass(frozen=True, slots=True)
class Finalization:
    """A quorum of finalize votes for one proposal: the block and its ancestors are final."""

    proposal: Proposal
    """What is voted on."""
    signature: bytes
    """48-byte threshold signature recovered from a quorum of vote partials."""
    seed: bytes
    """48-byte threshold seed of the round (the same whichever certificate revealed it)."""
    KIND = 6

    @property
    def round(self) -> Round:
        return self.proposal.round

    def vote_message(self) -> bytes:
        return finalize_message(self.proposal)


@dataclass(frozen=True, slots=True)
class Fetch:
    """Ask a peer for the certificates it holds for ``views`` of ``epoch``."""

    epoch: int
    """Epoch of the views asked for."""
    views: tuple[int, ...]
    """1..MAX_FETCH_VIEWS views, strictly increasing."""
    KIND = 7


Vote = Notarize | Nullify | Finalize
Certificate = Notarization | Nullification | Finalization
Message = Notarize | Nullify | Finalize | Notarization | Nullification | Finalization | Fetch

KIND: dict[int, type[Message]] = {c.KIND: c for c in (Notarize, Nullify, Finalize, Notarization, Nullification,
                                                       Finalization, Fetch)}
"""Kind byte → message class (append only)."""


def _subject(m: Message) -> Any:
    if isinstance(m, Nullify | Nullification):
        return m.round.to_cbor()
    assert not isinstance(m, Fetch)
    return m.proposal.to_cbor()


def to_cbor(m: Message) -> dict[int, Any]:
    """The canonical map of a message."""
    if isinstance(m, Fetch):
        return {0: Fetch.KIND, 1: m.epoch, 2: list(m.views)}
    if isinstance(m, Notarize | Nullify | Finalize):
        return {0: m.KIND, 1: _subject(m), 2: m.signer, 3: m.signature, 4: m.seed}
    return {0: m.KIND, 1: _subject(m), 2: m.signature, 3: m.seed}


def encode_message(m: Message) -> bytes:
    """Deterministic CBOR bytes of a message."""
    return encode(to_cbor(m))


def from_cbor(value: object) -> Message:
    """Strict decode of a message map (exact key set per kind, exact lengths)."""
    if not isinstance(value, dict) or 0 not in value:
        raise DecodeError("simplex message: expected a map with a kind", field="kind")
    kind = expect_uint(value[0], "kind")
    cls = KIND.get(kind)
    if cls is None:
        raise DecodeError(f"simplex message: unknown kind {kind}", field="kind")
    if cls is Fetch:
        m = expect_map(value, frozenset({0, 1, 2}), "fetch")
        views = m[2]
        if not isinstance(views, list) or not 1 <= len(views) <= MAX_FETCH_VIEWS:
            raise DecodeError(f"fetch.views: expected 1..{MAX_FETCH_VIEWS} views", field="fetch.views")
        vs = tuple(expect_uint(v, "fetch.views") for v in views)
        if any(a >= b for a, b in pairwise(vs)):
            raise DecodeError("fetch.views: must be strictly increasing", field="fetch.views")
        return Fetch(expect_uint(m[1], "fetch.epoch"), vs)
    if cls in (Notarize, Nullify, Finalize):
        m = expect_map(value, frozenset({0, 1, 2, 3, 4}), "vote")
        signer = expect_uint(m[2], "vote.signer", MAX_SIGNER)
        sig, seed = expect_bytes(m[3], "vote.signature", SIG_LEN), expect_bytes(m[4], "vote.seed", SIG_LEN)
        if cls is Nullify:
            return Nullify(Round.from_cbor(m[1]), signer, sig, seed)
        return (Notarize if cls is Notarize else Finalize)(Proposal.from_cbor(m[1]), signer, sig, seed)
    m = expect_map(value, frozenset({0, 1, 2, 3}), "certificate")
    sig, seed = expect_bytes(m[2], "certificate.signature", SIG_LEN), expect_bytes(m[3], "certificate.seed", SIG_LEN)
    if cls is Nullification:
        return Nullification(Round.from_cbor(m[1]), sig, seed)
    return (Notarization if cls is Notarization else Finalization)(Proposal.from_cbor(m[1]), sig, seed)


_CERTIFICATE_HEAD = 0xA4
"""The first byte of every certificate's encoding (a map of four entries; votes have five, a fetch three)."""


def decode_message(data: bytes) -> Message:
    """Strict decode of :func:`encode_message` bytes; :class:`DecodeError` on anything else.

    Certificates are decoded once per distinct bytes (:func:`_decode_certificate`): every peer relays each
    certificate it assembles or receives, so a validator gets ``n − 1`` byte-identical copies of each (the group
    signature is unique) — decoding them all was a tenth of a view's CPU at n = 100."""
    if data[:1] == bytes([_CERTIFICATE_HEAD]):
        return _decode_certificate(bytes(data))
    return _decode(data)


@lru_cache(maxsize=256)
def _decode_certificate(data: bytes) -> Message:
    """:func:`_decode` memoised (bounded; a message is immutable, so one decoded copy is shared). Bytes that do
    not decode raise every time (exceptions are not cached)."""
    return _decode(data)


def _decode(data: bytes) -> Message:
    try:
        value = decode(data)
    except CodecError as e:
        raise DecodeError(f"simplex message: {e}", field="message") from None
    return from_cbor(value)

"""Mode-B presence gossip between validators (CIP-11 §8.2), sans-I/O.

With several validators a runner keeps sessions with only the ``k`` validators of its ``Sub(R)``, so no single
proposer sees every present runner first-hand. Each validator therefore announces its local presence (§7.4)
to the others after every block it commits, and a proposer writes the union of its own view and the fresh
announcements into the ``PresenceInput`` of its block. Execution only ever reads the committed bytes (§7.2),
so gossip never affects determinism; it is best-effort and fail-open: with no gossip the proposer still
proposes a valid block from its own view.

Wire (channel :data:`CH_PRESENCE` of the validator peer layer; deterministic CBOR, golden in
``docs/protocol.md``)::

    PresenceAnnouncement = {0: validator_pubkey (32-byte Ed25519), 1: height (u64), 2: registry_size (u32),
                            3: presence (PresenceInputV1 bytes over registry_size), 4: signature (64 bytes)}

``signature`` is Ed25519 by ``validator_pubkey`` over ``PRESENCE_DOMAIN ‖ genesis_hash (32) ‖ canonical CBOR of
fields 0–3``: an announcement cannot be replayed onto another chain or re-attributed, and a relay could
forward it unchanged (this implementation only sends its own).

Acceptance rules (:meth:`PresenceGossip.receive`; each refusal has a stable reason and a metric):

- the announcer is in the validator-set snapshot and is the authenticated peer that sent it
  (``not_a_validator``, ``wrong_sender``); the signature verifies (``bad_signature``);
- sizes are bounded: the presence bytes decode strictly over ``registry_size`` ≤ :data:`MAX_REGISTRY`
  (``malformed``);
- heights only move forward per validator (``stale``: equal or older than the last accepted — replays and
  reordering change nothing) and may be at most :data:`MAX_HEIGHT_AHEAD` above our head (``from_the_future``);
- an announcement expires :data:`GOSSIP_TTL_BLOCKS` blocks after its height: the proposer ignores it then.

The byzantine bound is the one §8.2 states for Mode B: a validator can make a proposer mark runners present
that are not (a wasted first push, healed by the ack timeout) or stay silent (the runner stays in the
fallback pool); it can never make a floor-eligible runner ineligible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cowboy_node.p2p.announcer import AnnouncementRefused, check_announcer, check_signature
from cowboy_node.types.presence import decode_presence, encode_presence
from cowboy_protocol.codec import encode
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.fields import decode_map, expect_bytes, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

CH_PRESENCE = 4
"""Peer-layer channel of presence announcements (0–3 are consensus, blocks, transactions, sync)."""
PRESENCE_DOMAIN = b"cowboy/presence-gossip/v1"
"""Signature domain of an announcement."""
GOSSIP_TTL_BLOCKS = 4
"""An announcement counts for proposals on parents up to this many blocks above its height."""
MAX_HEIGHT_AHEAD = 8
"""Announcements further above our head than this are refused (a lagging node catches up first)."""
MAX_REGISTRY = 1 << 20
"""Largest registry basis an announcement may use (a 128 KiB bitmap)."""
REFUSALS = ("malformed", "not_a_validator", "wrong_sender", "bad_signature", "stale", "from_the_future")
"""Stable refusal reasons (metric label values)."""


class GossipRefused(AnnouncementRefused):
    """A presence announcement was not accepted; ``reason`` is one of :data:`REFUSALS`."""


@dataclass(frozen=True, slots=True)
class PresenceAnnouncement:
    """One validator's local presence at one height."""

    validator_pubkey: bytes
    """The announcer's raw 32-byte Ed25519 peer_pubkey (as in the validator-set snapshot)."""
    height: int
    """The announcer's committed head when it made the announcement."""
    registry_size: int
    """|registry(height)|: the index basis of ``presence``."""
    presence: bytes
    """PresenceInputV1 bytes of the announcer's local presence over ``registry_size``."""
    signature: bytes
    """Ed25519 signature (see the module docstring)."""

    def _fields(self) -> dict[int, object]:
        return {0: self.validator_pubkey, 1: self.height, 2: self.registry_size, 3: self.presence}

    def encode(self) -> bytes:
        """Canonical bytes of the announcement."""
        return encode({**self._fields(), 4: self.signature})

    @staticmethod
    def decode(data: bytes) -> PresenceAnnouncement:
        """Strict inverse of :meth:`encode` (:class:`DecodeError` on anything else)."""
        m = decode_map(data, frozenset({0, 1, 2, 3, 4}), "PresenceAnnouncement")
        return PresenceAnnouncement(
            expect_bytes(m[0], "PresenceAnnouncement.validator_pubkey", 32),
            expect_uint(m[1], "PresenceAnnouncement.height"),
            expect_uint(m[2], "PresenceAnnouncement.registry_size", MAX_REGISTRY),
            expect_bytes(m[3], "PresenceAnnouncement.presence", max_len=6 + (MAX_REGISTRY + 7) // 8),
            expect_bytes(m[4], "PresenceAnnouncement.signature", 64))

    def preimage(self, genesis_hash: bytes) -> bytes:
        """The signed bytes."""
        return PRESENCE_DOMAIN + genesis_hash + encode(self._fields())

    def present(self) -> frozenset[int]:
        """The announced registry indices (strict decode)."""
        return decode_presence(self.presence, self.registry_size)


def make_announcement(seed: bytes, genesis_hash: bytes, height: int, registry_size: int,
                      present: frozenset[int]) -> PresenceAnnouncement:
    """Sign this validator's local presence at ``height``."""
    unsigned = PresenceAnnouncement(ed25519.public_key_from_seed(seed), height, registry_size,
                                    encode_presence(present, registry_size), bytes(64))
    return PresenceAnnouncement(unsigned.validator_pubkey, height, registry_size, unsigned.presence,
                                ed25519.sign(seed, unsigned.preimage(genesis_hash)))


class PresenceGossip:
    """The freshest accepted announcement of each other validator, and the union a proposer uses."""

    def __init__(self, genesis_hash: bytes, validators: tuple[bytes, ...], me: bytes, *,
                 on_refused: Callable[[str], None] | None = None) -> None:
        self._genesis_hash = genesis_hash
        self._index = {k: i for i, k in enumerate(validators)}
        self._me = me
        self._latest: dict[bytes, tuple[int, frozenset[int]]] = {}
        self._on_refused = on_refused

    def receive(self, sender: int, data: bytes, head_height: int) -> PresenceAnnouncement:
        """Check and keep an announcement from authenticated peer ``sender`` (a snapshot index); raises
        :class:`GossipRefused` (and reports the reason) when it is not accepted."""
        try:
            return self._receive(sender, data, head_height)
        except GossipRefused as e:
            if self._on_refused is not None:
                self._on_refused(e.reason)
            raise

    def _receive(self, sender: int, data: bytes, head_height: int) -> PresenceAnnouncement:
        try:
            a = PresenceAnnouncement.decode(data)
            present = a.present()
        except DecodeError as e:
            raise GossipRefused("malformed", str(e)) from None
        check_announcer(self._index, self._me, a.validator_pubkey, sender, GossipRefused)
        if a.height > head_height + MAX_HEIGHT_AHEAD:
            raise GossipRefused("from_the_future", f"height {a.height} is beyond head {head_height} + "
                                                   f"{MAX_HEIGHT_AHEAD}")
        last = self._latest.get(a.validator_pubkey)
        if last is not None and a.height <= last[0]:
            raise GossipRefused("stale", f"height {a.height} is not above the last accepted {last[0]}")
        check_signature(a.validator_pubkey, a.preimage(self._genesis_hash), a.signature, GossipRefused)
        self._latest[a.validator_pubkey] = (a.height, present)
        return a

    def union(self, parent_height: int, registry_size: int) -> frozenset[int]:
        """Indices announced by other validators at heights ≥ ``parent_height − GOSSIP_TTL_BLOCKS``, restricted
        to the parent's registry basis (the registry only appends, so an older basis names the same runners)."""
        floor = parent_height - GOSSIP_TTL_BLOCKS
        out: set[int] = set()
        for height, present in self._latest.values():
            if height >= floor:
                out.update(i for i in present if i < registry_size)
        return frozenset(out)

    def fresh(self, parent_height: int) -> Mapping[bytes, int]:
        """Announcers still counted at ``parent_height`` → their announcement height (for status/metrics)."""
        floor = parent_height - GOSSIP_TTL_BLOCKS
        return {k: h for k, (h, _) in self._latest.items() if h >= floor}

"""Evidence of validators breaking the protocol, kept durably for operators (slashing is out of scope).

Each report the engine makes (:class:`~cowboy_node.consensus.simplex.engine.Faulty`) is stored under
``C/e/ ‖ seq_be8`` in the node's store, newest at the highest sequence number; only the newest
:data:`EVIDENCE_KEPT` are kept. A record is deterministic CBOR ``{0: signer, 1: [epoch, view], 2: reason,
3: at_ms, 4: [vote, ...]}`` where each vote is the consensus message encoding (``docs/protocol.md``):
for conflicting votes, the two votes with verified partial signatures, which anyone holding the genesis file
can check against the signer's share public key. ``at_ms`` is this node's wall clock when it saw the fault.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cowboy_node.consensus.simplex.types import Finalize, Notarize, Nullify, Vote, decode_message, encode_message
from cowboy_node.state.kv_store import StateStore
from cowboy_node.types.block import Round
from cowboy_protocol.codec import encode
from cowboy_protocol.types.fields import decode_map, expect_uint
from cowboy_protocol.types.validation_errors import DecodeError

EVIDENCE_KEPT = 256
"""Records kept; older ones are deleted as new ones arrive."""
MAX_REASON = 200
"""Longest stored reason (engine reasons are short fixed strings)."""

_PREFIX = b"C/e/"
_BE8 = struct.Struct(">Q")


@dataclass(frozen=True, slots=True)
class Evidence:
    """One report of a validator breaking the protocol."""

    signer: int
    """Index (in the genesis validator list) of the validator reported."""
    round: Round
    """Round of the offending message."""
    reason: str
    """What was wrong (e.g. ``conflicting notarize votes``, ``bad finalize signature``)."""
    at_ms: int
    """This node's wall-clock time (ms since the Unix epoch) when it saw the fault."""
    votes: tuple[Vote, ...] = ()
    """The conflicting votes, both verified (empty when only this node can attest the fault)."""

    def encode(self) -> bytes:
        """The stored record (see the module docstring)."""
        return encode({0: self.signer, 1: [self.round.epoch, self.round.view], 2: self.reason[:MAX_REASON],
                       3: self.at_ms, 4: [encode_message(v) for v in self.votes]})

    @staticmethod
    def decode(raw: bytes) -> Evidence:
        """Inverse of :meth:`encode`; :class:`DecodeError` on anything else."""
        m = decode_map(raw, frozenset({0, 1, 2, 3, 4}), "Evidence")
        rnd, reason, votes_raw = m[1], m[2], m[4]
        if not (isinstance(rnd, list) and len(rnd) == 2) or not isinstance(reason, str) \
                or not isinstance(votes_raw, list):
            raise DecodeError("Evidence: malformed round, reason or votes")
        votes: list[Vote] = []
        for v in votes_raw:
            msg = decode_message(v) if isinstance(v, bytes) else None
            if not isinstance(msg, Notarize | Nullify | Finalize):
                raise DecodeError("Evidence: a vote entry is not an encoded vote")
            votes.append(msg)
        return Evidence(expect_uint(m[0], "Evidence.signer"),
                        Round(expect_uint(rnd[0], "Evidence.epoch"), expect_uint(rnd[1], "Evidence.view")),
                        reason, expect_uint(m[3], "Evidence.at_ms"), tuple(votes))

    def to_json(self, seq: int) -> dict[str, Any]:
        """The ``GET /consensus/evidence`` entry."""
        return {"seq": seq, "signer": self.signer, "epoch": self.round.epoch, "view": self.round.view,
                "reason": self.reason, "at_ms": self.at_ms,
                "votes": ["0x" + encode_message(v).hex() for v in self.votes]}


class EvidenceStore:
    """The bounded, durable list of :class:`Evidence` in a node's store."""

    def __init__(self, store: StateStore, *, keep: int = EVIDENCE_KEPT) -> None:
        if keep < 1:
            raise ValueError("keep must be positive")
        self._store = store
        self._keep = keep
        last = self.latest(1)
        self._next = last[0][0] + 1 if last else 0
        self.count = len(self.latest(keep))
        """Records currently kept."""

    def add(self, evidence: Evidence) -> int:
        """Store ``evidence``; returns its sequence number. Conflicting votes are synced (transferable proof,
        rare); other reports are not (an OS crash may lose the newest of them)."""
        seq = self._next
        ops: list[tuple[bytes, bytes | None]] = [(_PREFIX + _BE8.pack(seq), evidence.encode())]
        if seq >= self._keep:
            ops.append((_PREFIX + _BE8.pack(seq - self._keep), None))
        self._store.write_batch(ops, sync=bool(evidence.votes))
        self._next = seq + 1
        self.count = min(self.count + 1, self._keep)
        return seq

    def latest(self, limit: int) -> Sequence[tuple[int, Evidence]]:
        """Up to ``limit`` newest records, oldest first, with their sequence numbers (undecodable ones skipped:
        the store is this node's own, so a bad record means damage, not an attack)."""
        rows = list(itertools.islice(self._store.iterate(_PREFIX, reverse=True), max(limit, 0)))
        out: list[tuple[int, Evidence]] = []
        for key, raw in reversed(rows):
            try:
                out.append((int(_BE8.unpack(key[len(_PREFIX):])[0]), Evidence.decode(raw)))
            except (DecodeError, struct.error):
                continue
        return out

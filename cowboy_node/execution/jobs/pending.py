"""``PendingSelectionV1`` and its two storage keys (CIP-11 §9.2 "Pending-selection storage").

A job with M > 1 runners is not assigned in its submission block S: S records a pending selection bound to
the absolute future seed round ``r_seed`` and the block-S ``candidates_snapshot_root``, and a later block H
assigns it once that seed is committed.

Record (canonical CBOR map, keys in declaration order from 0; the field list is the project's reading of
CIP-11, whose struct block was lost)::

    {0: version (1), 1: job_id (32 bytes), 2: submitted_at (S), 3: submit_epoch, 4: submit_view (r_submit),
     5: seed_epoch, 6: seed_view (r_seed), 7: candidates_snapshot_root (32 bytes), 8: runners (M ≥ 2),
     9: submitter (20 bytes), 10: job_kind (§9.4 byte)}

Keys under the Job Dispatcher namespace ``actor/<0x…02>/kv/system:`` (project choice)::

    pending_by_job_key          = ns ‖ "pending/" ‖ job_id                                 → record bytes
    pending_due_round_index_key = ns ‖ "pending_due/" ‖ seed_epoch_be8 ‖ seed_view_be8
                                     ‖ submitted_at_be8 ‖ job_id                            → 0x01

The due index is ordered lexicographically, so one round's records are the range under
``pending_due_round_prefix(seed_epoch, seed_view)``, already ascending by (submitted_at, job_id); records
are still processed through :func:`order_due` so storage iteration order cannot matter.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cowboy_node.execution.system_state import JOB_DISPATCHER
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, HASH_LEN, U32_MAX, expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.runner import JOB_KIND_NAMES
from cowboy_protocol.types.validation_errors import DecodeError

PENDING_VERSION = 1
"""Version field of PendingSelectionV1."""
DISPATCHER_NS = b"actor/" + JOB_DISPATCHER + b"/kv/system:"
"""Namespace of the Job Dispatcher's system state."""
PENDING_BY_JOB_PREFIX = DISPATCHER_NS + b"pending/"
"""Prefix of ``pending_by_job_key``."""
PENDING_DUE_PREFIX = DISPATCHER_NS + b"pending_due/"
"""Prefix of ``pending_due_round_index_key``."""
PENDING_DUE_VALUE = b"\x01"
"""Value stored under a due-index key (a marker; the key carries everything)."""

_BE8x2 = struct.Struct(">QQ")
_BE8x3 = struct.Struct(">QQQ")


@dataclass(frozen=True, slots=True)
class PendingSelectionV1:
    """A committed M > 1 selection waiting for the threshold seed of its round ``r_seed``."""

    job_id: bytes
    """The job (32 bytes)."""
    submitted_at: int
    """S: height of the block that included the JobSubmit (also T, the snapshot block)."""
    submit_epoch: int
    """Epoch of r_submit, the round in which block S was proposed."""
    submit_view: int
    """View of r_submit."""
    seed_epoch: int
    """Epoch of r_seed = advance_round(r_submit, SELECTION_SEED_DELAY_VIEWS)."""
    seed_view: int
    """View of r_seed."""
    candidates_snapshot_root: bytes
    """Root over the block-S candidate snapshot (32 bytes), re-derived and compared at assignment."""
    runners: int
    """Committee size M (≥ 2: M == 1 is selected immediately and never pending)."""
    submitter: bytes
    """Submitting account or actor (20 bytes): the MRU key owner."""
    job_kind: int
    """CIP-11 §9.4 job kind byte: the MRU key's second half."""
    version: int = PENDING_VERSION
    """Record version (1)."""

    def __post_init__(self) -> None:
        """Construction obeys the decoder's rules, so every record built in memory encodes to decodable bytes."""
        _checked_fields(self.to_cbor())

    def to_cbor(self) -> dict[int, Any]:
        """Canonical map."""
        return {0: self.version, 1: self.job_id, 2: self.submitted_at, 3: self.submit_epoch, 4: self.submit_view,
                5: self.seed_epoch, 6: self.seed_view, 7: self.candidates_snapshot_root, 8: self.runners,
                9: self.submitter, 10: self.job_kind}

    def encode(self) -> bytes:
        """Canonical CBOR bytes."""
        return encode(self.to_cbor())

    @classmethod
    def from_cbor(cls, value: object) -> PendingSelectionV1:
        """Strict decode of the canonical map."""
        return cls(**_checked_fields(value))

    @classmethod
    def decode(cls, raw: bytes) -> PendingSelectionV1:
        """Decode canonical bytes (the codec rejects non-canonical encodings)."""
        return cls.from_cbor(decode(raw))

    def due_key(self) -> bytes:
        """This record's ``pending_due_round_index_key``."""
        return pending_due_round_index_key(self.seed_epoch, self.seed_view, self.submitted_at, self.job_id)


def _checked_fields(value: object) -> dict[str, Any]:
    """Constructor arguments of a valid record map; DecodeError naming the first bad field otherwise."""
    m = expect_map(value, frozenset(range(11)), "pending_selection")
    if expect_uint(m[0], "pending_selection.version") != PENDING_VERSION:
        raise DecodeError("pending_selection: unknown version", field="version")
    runners = expect_uint(m[8], "pending_selection.runners", U32_MAX)
    if runners < 2:
        raise DecodeError("pending_selection.runners: a pending selection has M ≥ 2", field="runners")
    kind = expect_uint(m[10], "pending_selection.job_kind", 0xFF)
    if kind not in JOB_KIND_NAMES:
        raise DecodeError(f"pending_selection.job_kind: unknown job kind {kind}", field="job_kind")
    out: dict[str, Any] = {
        "job_id": expect_bytes(m[1], "pending_selection.job_id", HASH_LEN),
        "candidates_snapshot_root": expect_bytes(m[7], "pending_selection.candidates_snapshot_root", HASH_LEN),
        "submitter": expect_bytes(m[9], "pending_selection.submitter", ADDRESS_LEN),
        "runners": runners, "job_kind": kind,
    }
    for k, name in ((2, "submitted_at"), (3, "submit_epoch"), (4, "submit_view"), (5, "seed_epoch"),
                    (6, "seed_view")):
        out[name] = expect_uint(m[k], f"pending_selection.{name}")
    return out


def _job_id(job_id: bytes) -> bytes:
    if len(job_id) != HASH_LEN:
        raise ValueError("job_id must be 32 bytes")
    return job_id


def pending_by_job_key(job_id: bytes) -> bytes:
    """Direct-lookup key of the pending record of ``job_id``."""
    return PENDING_BY_JOB_PREFIX + _job_id(job_id)


def pending_due_round_prefix(seed_epoch: int, seed_view: int) -> bytes:
    """Prefix of every due-index key of seed round (seed_epoch, seed_view)."""
    return PENDING_DUE_PREFIX + _BE8x2.pack(seed_epoch, seed_view)


def pending_due_round_index_key(seed_epoch: int, seed_view: int, submitted_at: int, job_id: bytes) -> bytes:
    """Lexicographic due-index key: prefix ‖ seed_epoch_be8 ‖ seed_view_be8 ‖ submitted_at_be8 ‖ job_id."""
    return PENDING_DUE_PREFIX + _BE8x3.pack(seed_epoch, seed_view, submitted_at) + _job_id(job_id)


def parse_pending_due_key(key: bytes) -> tuple[int, int, int, bytes]:
    """(seed_epoch, seed_view, submitted_at, job_id) of a due-index key; DecodeError if it is not one."""
    n = len(PENDING_DUE_PREFIX)
    if not key.startswith(PENDING_DUE_PREFIX) or len(key) != n + 24 + HASH_LEN:
        raise DecodeError("not a pending due-index key", field="pending_due_key")
    epoch, view, submitted_at = _BE8x3.unpack_from(key, n)
    return epoch, view, submitted_at, key[n + 24:]


def order_due(records: Iterable[PendingSelectionV1]) -> list[PendingSelectionV1]:
    """Records in CIP-11 processing order: ascending (submitted_at, job_id), job_id compared bytewise."""
    return sorted(records, key=lambda r: (r.submitted_at, r.job_id))

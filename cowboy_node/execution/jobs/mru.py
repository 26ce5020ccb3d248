"""MRU record of the job dispatcher (CIP-11 §9.3–§9.4): the runner a submitter last got a verified result from.

Key (project choice under the Job Dispatcher namespace): ``actor/<0x…02>/kv/system:mru/ ‖ submitter20 ‖
job_kind_u8``. Value: canonical CBOR ``{0: runner address (20 bytes), 1: set_at_block}``.

Read path: the record applies at height H iff it exists and ``H − set_at_block ≤ MRU_TTL_BLOCKS``
(saturating: a record "from the future" counts as fresh); expired records are ignored, not deleted (lazy).
Write path (Result Verifier, not here): the first consensus-matching runner in committee order.
"""

from __future__ import annotations

from cowboy_node.execution.jobs.pending import DISPATCHER_NS
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, expect_bytes, expect_map, expect_uint
from cowboy_protocol.types.runner import JOB_KIND_NAMES

MRU_PREFIX = DISPATCHER_NS + b"mru/"
"""Prefix of every MRU key."""


def mru_key(submitter: bytes, job_kind: int) -> bytes:
    """State key of the MRU record of (submitter, job_kind)."""
    if len(submitter) != ADDRESS_LEN:
        raise ValueError("submitter must be 20 bytes")
    if job_kind not in JOB_KIND_NAMES:
        raise ValueError(f"unknown job kind {job_kind}")
    return MRU_PREFIX + submitter + bytes([job_kind])


def encode_mru(runner: bytes, set_at_block: int) -> bytes:
    """Canonical value ``{0: runner, 1: set_at_block}``."""
    if len(runner) != ADDRESS_LEN:
        raise ValueError("runner must be 20 bytes")
    return encode({0: runner, 1: expect_uint(set_at_block, "mru.set_at_block")})


def decode_mru(raw: bytes) -> tuple[bytes, int]:
    """(runner, set_at_block) of a stored value; DecodeError if it is not canonical."""
    m = expect_map(decode(raw), frozenset({0, 1}), "mru")
    return expect_bytes(m[0], "mru.runner", ADDRESS_LEN), expect_uint(m[1], "mru.set_at_block")


def lookup_mru(raw_or_none: bytes | None, height: int, ttl: int) -> bytes | None:
    """The MRU runner if a record exists and is within ``ttl`` blocks of ``height`` (saturating), else None."""
    if raw_or_none is None:
        return None
    runner, set_at = decode_mru(raw_or_none)
    return runner if max(height - set_at, 0) <= ttl else None

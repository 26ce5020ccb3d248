"""Runner-selection seeds (CIP-11 §9.2; CIP-2 v2 while CIP-11 selection is off).

* ``canonical_seed_bytes(R) = beacon_hash_v1(R) = keccak256("cowboy-beacon-v1:" ‖ epoch_be8 ‖ view_be8 ‖
  scheme_id (0x01, BLS12-381 MinSig) ‖ sig_len_be2 (0x0030) ‖ sig48)``. The field list is CIP-11's; the
  domain string was lost from the seed text (project choice, defined once in ``types/seed.py``).
* v3 (``CIP11_PRESENT_FIRST_ENABLED``): ``keccak256("cowboy-runner-select-v3:" ‖ mode_u8 ‖
  canonical_seed_bytes ‖ job_id ‖ submitted_at_le8)``, mode 0x00 for M == 1 (parent beacon R_{S-1}) and 0x01
  for M > 1 (the threshold seed of r_seed).
* v2 (CIP-2 path): ``keccak256("cowboy-runner-select-v2:" ‖ parent_beacon_bytes ‖ job_id ‖ submitted_at_le8)``,
  no mode byte; the beacon bytes are the same 32-byte canonical_seed_bytes (project choice).
* Timeout re-selection (project choice): ``keccak256(seed ‖ "retry" ‖ attempt_le8)`` from the job's
  original selection seed, attempt counting from 1.
"""

from __future__ import annotations

import struct

from cowboy_node.types import seed
from cowboy_node.types.block import Round
from cowboy_node.types.seed import BEACON_HASH_DOMAIN as BEACON_HASH_DOMAIN
from cowboy_node.types.seed import SCHEME_MINSIG as SCHEME_MINSIG
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import HASH_LEN, U64_MAX

MINSIG_SIGNATURE_LEN = 48
"""Length of a MinSig seed signature."""
SELECT_V3_DOMAIN = b"cowboy-runner-select-v3:"
"""CIP-11 selection domain."""
SELECT_V2_DOMAIN = b"cowboy-runner-select-v2:"
"""CIP-2 selection domain (used while CIP-11 selection is inactive)."""
RETRY_TAG = b"retry"
"""Tag of timeout re-selection seeds (project choice)."""
MODE_IMMEDIATE = 0x00
"""v3 mode byte: M == 1, immediate selection in block S from the parent beacon."""
MODE_DELAYED = 0x01
"""v3 mode byte: M > 1, delayed selection from the threshold seed of r_seed."""

_LE8 = struct.Struct("<Q")


def _u64(value: int, name: str) -> int:
    if not 0 <= value <= U64_MAX:
        raise ValueError(f"{name} out of u64 range")
    return value


def _hash32(value: bytes, name: str) -> bytes:
    if len(value) != HASH_LEN:
        raise ValueError(f"{name} must be {HASH_LEN} bytes")
    return value


def beacon_hash_v1(epoch: int, view: int, signature48: bytes) -> bytes:
    """``canonical_seed_bytes`` of the MinSig seed of Round(epoch, view) (lengths and ranges checked)."""
    if len(signature48) != MINSIG_SIGNATURE_LEN:
        raise ValueError(f"seed signature must be {MINSIG_SIGNATURE_LEN} bytes")
    return seed.beacon_hash_v1(Round(_u64(epoch, "epoch"), _u64(view, "view")), signature48)


def selection_seed_v3(mode: int, seed_bytes32: bytes, job_id: bytes, submitted_at: int) -> bytes:
    """CIP-11 v3 selection seed; ``seed_bytes32`` is ``canonical_seed_bytes`` of R."""
    if mode not in (MODE_IMMEDIATE, MODE_DELAYED):
        raise ValueError(f"unknown selection mode {mode}")
    return keccak256(SELECT_V3_DOMAIN + bytes([mode]) + _hash32(seed_bytes32, "seed_bytes32")
                     + _hash32(job_id, "job_id") + _LE8.pack(_u64(submitted_at, "submitted_at")))


def mode_for(m: int) -> int:
    """v3 mode byte for a committee of ``m`` runners."""
    if m < 1:
        raise ValueError("committee size must be at least 1")
    return MODE_IMMEDIATE if m == 1 else MODE_DELAYED


def selection_seed_v2(seed_bytes32: bytes, job_id: bytes, submitted_at: int) -> bytes:
    """CIP-2 v2 selection seed (the path while ``CIP11_PRESENT_FIRST_ENABLED`` is false); ``seed_bytes32`` is
    ``canonical_seed_bytes`` of the parent beacon, ``beacon_hash_v1(parent round, parent beacon)``."""
    return keccak256(SELECT_V2_DOMAIN + _hash32(seed_bytes32, "seed_bytes32") + _hash32(job_id, "job_id")
                     + _LE8.pack(_u64(submitted_at, "submitted_at")))


def reselection_seed(seed: bytes, attempt: int) -> bytes:
    """Seed of timeout re-selection number ``attempt`` (≥ 1), derived from the original selection seed."""
    if attempt < 1:
        raise ValueError("re-selection attempts count from 1")
    return keccak256(_hash32(seed, "seed") + RETRY_TAG + _LE8.pack(_u64(attempt, "attempt")))


def advance_round(epoch: int, view: int, k: int) -> tuple[int, int]:
    """``advance_round(Round(epoch, view), k)`` for this node's single-epoch schedule: (epoch, view + k).

    The general mapping (carrying across epoch boundaries) is owned by consensus (CIP-11 §9.2); this node
    runs one static epoch, so the view simply advances. Raises ValueError if the view would leave u64.
    """
    _u64(epoch, "epoch")
    if k < 0:
        raise ValueError("k must be non-negative")
    return epoch, _u64(_u64(view, "view") + k, "view + k")

"""Resource limits of one actor call (consensus-critical: see ``docs/pvm.md``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Hard limits; exceeding one halts the call with the matching :class:`PvmError` code."""

    #: Nested actor frames (functions and lambdas); deeper -> ``recursion_limit``.
    max_recursion_depth: int = 64
    #: Largest integer (in bits, sign excluded) an operation may produce -> ``int_too_large``.
    max_int_bits: int = 4096
    #: Largest payload accepted by ``call_handler`` -> ``payload_too_large``.
    max_payload_bytes: int = 1 << 20
    #: Largest value a handler may return -> ``payload_too_large``.
    max_return_bytes: int = 1 << 20
    #: Most items a bulk operation may produce (list/tuple/dict/...) -> ``memory_limit``.
    max_collection_items: int = 1_000_000
    #: Longest str/bytes/bytearray an operation may produce (bytes or code points) -> ``memory_limit``.
    max_bytes_object: int = 16 << 20
    #: Longest accepted actor source, in UTF-8 bytes (deploy time).
    max_source_bytes: int = 256 << 10
    #: Deepest container nesting that may be compared, hashed, printed or serialized
    #: -> ``recursion_limit``; also the deepest accepted AST (deploy time, x2).
    max_nesting_depth: int = 64

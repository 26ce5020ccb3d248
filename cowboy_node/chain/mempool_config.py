"""The mempool's limits and its refusal error (:mod:`cowboy_node.chain.mempool` says how each is enforced)."""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_protocol.types.validation_errors import ValidationError


class MempoolError(ValidationError):
    """A transaction was refused by the pool; ``code`` is one of the stable codes in the module docstring."""


@dataclass(frozen=True)
class MempoolConfig:
    """Pool limits (see the module docstring for how each is enforced)."""

    max_txs: int = 10_000
    """Most transactions held (pending and queued)."""
    max_bytes: int = 32 * 1024 * 1024
    """Most total body bytes held."""
    max_txs_per_sender: int = 64
    """Most transactions held per sender (pending and queued)."""
    max_nonce_gap: int = 64
    """Highest admissible nonce is ``account_nonce + max_nonce_gap``."""
    replacement_bump_percent: int = 10
    """Minimum increase, in percent, of every fee field for a same-nonce replacement."""
    max_queued: int = 1_024
    """Most queued (nonce-gapped) transactions held in total."""
    max_queued_per_sender: int = 16
    """Most queued transactions held per sender."""
    queued_lifetime_s: float = 600.0
    """Seconds a transaction may stay queued (from its arrival) before :meth:`Mempool.expire` drops it."""

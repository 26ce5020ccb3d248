"""Which transactions this process has already admitted, so a follower need not recover their signers again.

A follower executing the leader's block would otherwise run ``check_signature`` (one secp256k1 recovery, about
50 µs) for every transaction, although it admitted most of them from gossip or RPC moments before and ran the
same check then (``chain/admission.py``: :func:`check_signature`, or :func:`check_recovered` over the same
:func:`recover_signer` result computed by a worker). :class:`SignatureMarks` remembers the transaction hashes of
those admissions; ``execution/block.py`` :func:`execute_block` skips the check for a transaction whose hash is
marked.

Why that is sound:

- The key is the transaction hash, ``keccak256`` of the full signed body (the signature is the body's key 10),
  and a decoded transaction's fields are a function of its canonical body; so a marked hash means the very same
  bytes passed the very same predicate (which reads nothing but those bytes). A transaction differing in any
  byte (e.g. the same sender and nonce under another signature) has another hash and is checked in full.
- Marks are recorded only by :func:`~cowboy_node.chain.admission.admit` in this process, after the signature
  check passed and the transaction was pooled; nothing received from the network records one.
- The mark only skips a check known to pass, so executing a block gives the same outcome with or without marks.

Bounded: at most ``capacity`` hashes (the oldest recorded is forgotten first). Recorded on the event loop and
read from the block-builder thread: each operation is one call on an ``OrderedDict`` (atomic under the GIL).
"""

from __future__ import annotations

from collections import OrderedDict


class SignatureMarks:
    """A bounded set of transaction hashes whose signature this process checked and found valid."""

    __slots__ = ("_marks", "capacity")

    def __init__(self, capacity: int) -> None:
        """Remember at most ``capacity`` hashes (≥ 0; 0 remembers none)."""
        if capacity < 0:
            raise ValueError(f"capacity must be ≥ 0, got {capacity}")
        self.capacity = capacity
        """Most hashes held."""
        self._marks: OrderedDict[bytes, None] = OrderedDict()

    def record(self, tx_hash: bytes) -> None:
        """Note that the transaction with this hash passed ``check_signature`` here (call only after it did)."""
        marks = self._marks
        if tx_hash in marks:
            marks.move_to_end(tx_hash)
            return
        marks[tx_hash] = None
        if len(marks) > self.capacity:
            marks.popitem(last=False)

    def checked(self, tx_hash: bytes) -> bool:
        """Whether the transaction with this hash passed the signature check here (and is still remembered)."""
        return tx_hash in self._marks

    def __len__(self) -> int:
        """Hashes held."""
        return len(self._marks)

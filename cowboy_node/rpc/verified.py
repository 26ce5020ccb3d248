"""Verified reads on the node side: the proof of a read, its head header and that header's certificate.

``GET /state/proof`` always carries them; ``GET /account/{a}?proof=true`` and
``GET /actor/{a}/state?key=…&proof=true`` add them to the usual answer. The proof, the header and the
certificate are captured under the node's state lock, so they describe one committed head: the header's
``state_root`` is the root the proof is against and the certificate (stored in the head's commit batch,
``consensus/records.py``) finalizes that header. The client checks all three against the genesis group key
(``cowboy_protocol/verified_reads.py``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from cowboy_node.types.block import BlockHeader

__all__ = ["VerifiedFacade", "certified_fields"]


def certified_fields(header: BlockHeader, certificate: bytes | None) -> dict[str, Any]:
    """``{"header", "certificate", "state_root"}`` of a verified read (hex; ``certificate`` null when the head is
    final only through a descendant that is not committed yet: a retry gets one)."""
    return {"header": "0x" + header.encode().hex(),
            "certificate": None if certificate is None else "0x" + bytes(certificate).hex(),
            "state_root": "0x" + header.state_root.hex()}


@runtime_checkable
class VerifiedFacade(Protocol):
    """Reads with proofs (``Node`` implements them); run in a worker thread, as they take the state lock."""

    def account_proof(self, address: bytes) -> dict[str, Any]:
        """:meth:`~cowboy_node.rpc.facade.NodeFacade.account` plus ``proof`` of the account's state key and
        :func:`certified_fields`, all of one head."""
        ...

    def actor_state_proof(self, address: bytes, key: bytes) -> dict[str, Any] | None:
        """:meth:`~cowboy_node.rpc.facade.NodeFacade.actor_state` plus ``proof`` of the entry's state key and
        :func:`certified_fields`; None if no actor."""
        ...

"""The one read the network page needs per block (``rpc/ui_snapshot.py``): a block's transactions with their
receipts, from one decode of the block and one of its receipts.

Reading them through ``transaction(hash)`` and ``receipt(hash)`` decodes the whole block and all its receipts
once per transaction: quadratic in the block's size. Kept apart from :class:`~cowboy_node.rpc.facade.NodeFacade`
like the runner and job queries: a facade without it still serves the page, with block headers only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cowboy_node.chain.chain import Chain


class UiQueries:
    """:meth:`block_activity` over the node's ``chain`` (composed into ``node/api.py``'s ``NodeApi``)."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        """The node's chain (committed blocks and receipts)."""

    def block_activity(self, height: int, limit: int) -> dict[str, Any] | None:
        """Block ``height``'s header JSON (``to_json``), ``tx_count``, and its first ``limit`` transactions as
        ``{"hash", "kind", "sender", "instruction", "status", "error_code", "events"}`` (receipt fields; status
        and events are null when the receipts are missing); None above the head or for a missing block."""
        if height > self.chain.height:
            return None
        block = self.chain.blocks.block(height)
        if block is None:
            return None
        receipts = self.chain.blocks.receipts(height) or []
        txs = []
        for i, tx in enumerate(block.transactions[:limit]):
            tx_json = tx.to_json()
            receipt = receipts[i].to_json() if i < len(receipts) else {}
            txs.append({"hash": tx_json["hash"], "kind": tx_json["instruction"].get("kind"),
                        "sender": tx_json["sender"], "instruction": tx_json["instruction"],
                        "status": receipt.get("status"), "error_code": receipt.get("error_code"),
                        "events": receipt.get("events")})
        return {"header": block.header.to_json(), "tx_count": len(block.transactions), "transactions": txs}

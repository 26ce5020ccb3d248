"""``GET /tx/{hash}`` and ``GET /tx/{hash}/receipt`` for a hash this node does not hold: ``404 not_found`` or
``410 pruned`` (issue 34 §2).

A pruning node (``[storage] retain_blocks``) deletes a block's ``T/<tx hash>`` index entries with the block, and a
node that joined from a snapshot never had those of the blocks below it: once anything is gone (the earliest
retained height ``E`` is above 0) an unknown hash may be a transaction committed below ``E`` or one that never
existed, and this node cannot tell them apart. It keeps no index of pruned transactions on purpose: one entry per
transaction ever committed (about 46 bytes) would grow without bound, which is what pruning is for. So:

- a hash that is committed (in a retained block), pending or evicted answers as usual;
- an unknown hash on a node that has pruned (``E > 0``) answers ``410 pruned`` with ``earliest_retained_height``
  and a message saying it may also never have existed (an archive node, or ``GET /block/{h}`` for a height the
  client noted at submission, gives the certain answer);
- an unknown hash on an archive node (``E = 0``) answers ``404 not_found``: it never was committed here.

A receipt for a transaction the node knows (pending, evicted) but has no receipt for stays ``404``: it is not
committed yet, whatever was pruned. See docs/api.md, "Pruned transactions".
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cowboy_node.rpc.facade import RpcError


@runtime_checkable
class RetentionFacade(Protocol):
    """A facade that says what it still stores (``[storage] retain_blocks``, or a node joined from a snapshot)."""

    def earliest_retained_height(self) -> int:
        """The lowest height whose block, receipts and transaction index are still stored (0: nothing pruned)."""
        ...


def unknown_tx_error(facade: object, tx_hash: bytes, what: str) -> RpcError:
    """The error for a transaction hash ``facade`` holds nothing of: 410 ``pruned`` once the node has pruned (or
    joined from a snapshot), else 404 ``not_found``. ``what``: "transaction" or "receipt"."""
    earliest = facade.earliest_retained_height() if isinstance(facade, RetentionFacade) else 0
    name = f"0x{tx_hash.hex()}"
    if earliest > 0:
        return RpcError(410, "pruned", f"no {what} for {name} in the retained blocks (heights {earliest} and up): it "
                                       f"may have been committed below {earliest} and pruned, or never existed "
                                       "(this node keeps no index of pruned transactions; ask an archive node)",
                        details={"earliest_retained_height": earliest})
    if what == "receipt":
        return RpcError(404, "not_found", f"no receipt for transaction {name} (unknown or not committed)")
    return RpcError(404, "not_found", f"unknown transaction {name}")


__all__ = ["RetentionFacade", "unknown_tx_error"]

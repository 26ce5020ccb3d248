"""Block bodies the application holds by hash: own proposals, peers' proposals, answers to requests."""

from __future__ import annotations

import collections
from collections.abc import Callable

from cowboy_node.consensus.service.ports import Signal
from cowboy_node.types.block import Block

BODY_CACHE = 512
"""Block bodies kept by hash (proposals seen, answers to requests)."""
BODY_CACHE_BYTES = 256 * 1024 * 1024
"""Encoded bytes of peer-sent bodies kept at most (a peer may send blocks up to the message cap: the count alone
would let one faulty validator fill gigabytes)."""


class BodyCache:
    """Bodies by hash, bounded by :data:`BODY_CACHE` bodies and :data:`BODY_CACHE_BYTES` peer-sent bytes, and the
    flags of the bodies someone waits for."""

    def __init__(self) -> None:
        self.blocks: collections.OrderedDict[bytes, Block] = collections.OrderedDict()
        """The bodies, oldest first."""
        self.sizes: dict[bytes, int] = {}
        """Encoded size of each cached body received from a peer (``BODY_CACHE_BYTES`` bounds their sum)."""
        self.bytes = 0
        """Sum of :attr:`sizes`."""
        self.waiters: dict[bytes, Signal] = {}
        """Raised when the body of that hash arrives (a request for it is out)."""

    def get(self, digest: bytes) -> Block | None:
        """The cached body of ``digest``, if any."""
        return self.blocks.get(digest)

    def waiter(self, digest: bytes, new: Callable[[], Signal]) -> Signal:
        """The flag raised when the body of ``digest`` arrives (``new`` makes it, the first time it is asked)."""
        waiter = self.waiters.get(digest)
        if waiter is None:
            waiter = self.waiters[digest] = new()
        return waiter

    def remember(self, block: Block, size: int = 0) -> None:
        """Cache ``block`` (``size``: its encoded bytes when a peer sent it), evicting the oldest beyond
        ``BODY_CACHE`` bodies or ``BODY_CACHE_BYTES`` bytes (the newest one always stays)."""
        digest = block.hash()
        self.bytes += size - self.sizes.pop(digest, 0)
        if size:
            self.sizes[digest] = size
        self.blocks[digest] = block
        self.blocks.move_to_end(digest)
        while len(self.blocks) > 1 and (len(self.blocks) > BODY_CACHE or self.bytes > BODY_CACHE_BYTES):
            old, _ = self.blocks.popitem(last=False)
            self.bytes -= self.sizes.pop(old, 0)
        waiter = self.waiters.pop(digest, None)
        if waiter is not None:
            waiter.set()


__all__ = ["BODY_CACHE", "BODY_CACHE_BYTES", "BodyCache"]

"""What consensus keeps in the node's store besides blocks: round seeds and finalization certificates.

Keys (prefix ``C/``, beside the chain's ``B/``, ``H/`` … of :mod:`cowboy_node.chain.blockstore`):

- ``C/s/ ‖ epoch_be8 ‖ view_be8`` → 48-byte seed of that round, for every round whose seed this validator
  saw revealed (notarized, nullified and finalized rounds alike): the proposer reads them for ConsumedSeedsV1
  (CIP-11 §9.2) and for the parent beacon R_{S−1} of the next block.
- ``C/f/ ‖ height_be8`` → the encoded :class:`~cowboy_node.consensus.simplex.types.Finalization` of the block
  at that height, stored only when the certificate finalizes that very block (its ancestors are final through
  it); syncing peers are served runs of blocks ending at such a height.
- ``C/p/ ‖ block hash`` → an encoded block this validator proposed and has not committed yet, written (synced)
  before its proposal vote is journaled: after a crash the journaled vote names a block whose body must still
  exist here (deleted in the block's commit batch).
"""

from __future__ import annotations

import struct

from cowboy_node.consensus.simplex.types import Finalization, decode_message, encode_message
from cowboy_node.state.kv_store import StateStore, WriteOp
from cowboy_node.types.block import Round

_SEED = b"C/s/"
_FIN = b"C/f/"
_PROP = b"C/p/"
_BE8 = struct.Struct(">Q")
_BE8x2 = struct.Struct(">QQ")


def seed_op(r: Round, seed: bytes) -> WriteOp:
    """The write that records ``seed`` as round ``r``'s."""
    return _SEED + _BE8x2.pack(r.epoch, r.view), bytes(seed)


def finalization_op(height: int, cert: Finalization) -> WriteOp:
    """The write that stores ``cert`` as the certificate of the block at ``height``."""
    return _FIN + _BE8.pack(height), encode_message(cert)


def drop_proposal_op(digest: bytes) -> WriteOp:
    """The write that forgets this validator's kept proposal ``digest`` (a no-op when there is none)."""
    return _PROP + digest, None


class ConsensusRecords:
    """Reads of the seeds and certificates kept in ``store`` (writes go through the chain's commit batch, or
    :meth:`put_seed` for rounds without a block)."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._seeds: dict[Round, bytes] = {}

    def seed(self, r: Round) -> bytes | None:
        """The seed of round ``r``, if this validator has seen it."""
        s = self._seeds.get(r)
        if s is None:
            s = self._store.get(_SEED + _BE8x2.pack(r.epoch, r.view))
            if s is not None:
                self._seeds[r] = s
        return s

    def put_seed(self, r: Round, seed: bytes) -> None:
        """Record a revealed seed (an unsynced write: a seed lost in an OS crash is fetched again with its
        round's certificate)."""
        if self._seeds.get(r) == seed:
            return
        self._seeds[r] = bytes(seed)
        if len(self._seeds) > 4096:
            self._seeds.pop(next(iter(self._seeds)))
        self._store.write_batch([seed_op(r, seed)], sync=False)

    def finalization(self, height: int) -> Finalization | None:
        """The certificate stored for the block at ``height`` (None when it was final through a descendant)."""
        raw = self._store.get(_FIN + _BE8.pack(height))
        if raw is None:
            return None
        cert = decode_message(raw)
        return cert if isinstance(cert, Finalization) else None

    def next_certified(self, height: int, up_to: int) -> tuple[int, Finalization] | None:
        """The lowest height in ``[height, up_to]`` with its own stored certificate."""
        for key, raw in self._store.iterate(_FIN, start=_FIN + _BE8.pack(height)):
            h = int(_BE8.unpack(key[len(_FIN):])[0])
            if h > up_to:
                return None
            cert = decode_message(raw)
            if isinstance(cert, Finalization):
                return h, cert
        return None

    def finalization_bytes(self, height: int) -> bytes | None:
        """The stored (encoded) certificate of the block at ``height``, not decoded: served to peers as is."""
        return self._store.get(_FIN + _BE8.pack(height))

    def certified_heights(self, height: int, up_to: int) -> list[int]:
        """Heights in ``[height, up_to]`` with their own stored certificate, ascending (nothing decoded)."""
        out: list[int] = []
        for key, _ in self._store.iterate(_FIN, start=_FIN + _BE8.pack(height)):
            h = int(_BE8.unpack(key[len(_FIN):])[0])
            if h > up_to:
                break
            out.append(h)
        return out

    def next_certified_bytes(self, height: int, up_to: int) -> tuple[int, bytes] | None:
        """The lowest height in ``[height, up_to]`` with its own stored certificate, and its stored bytes."""
        for key, raw in self._store.iterate(_FIN, start=_FIN + _BE8.pack(height)):
            h = int(_BE8.unpack(key[len(_FIN):])[0])
            return (h, raw) if h <= up_to else None
        return None

    def put_proposal(self, digest: bytes, block: bytes) -> None:
        """Keep this validator's proposal ``block`` durably (synced) before its proposal vote is journaled."""
        self._store.write_batch([(_PROP + digest, bytes(block))], sync=True)

    def proposals(self) -> list[bytes]:
        """The encoded blocks kept by :meth:`put_proposal` and not yet dropped."""
        return [raw for _, raw in self._store.iterate(_PROP)]

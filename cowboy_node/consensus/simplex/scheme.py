"""The signing scheme of the engine: BLS12-381 threshold (MinSig) partials, quorum certificates, round seeds.

Every vote carries two partial signatures under the signer's share: one over the vote's message and one over
the round (:func:`~cowboy_node.consensus.simplex.types.seed_message`). ``quorum`` partials recover a certificate
signature, which verifies under the group public key like a plain BLS signature; the recovered seed is the
unique group signature over the round, whichever quorum or certificate revealed it.

Assembling a certificate is optimistic (:meth:`ThresholdScheme.recover_pair`): the certificate signature and the
seed are interpolated from ``quorum`` partials without checking them one by one, and accepted when both verify
under the group public key — the same check a certificate received from a peer passes, so an assembled
certificate is exactly as valid as a received one. Both are checked with one pairing product (a random linear
combination, coefficient hashed from everything checked). Only when that fails are the partials checked: one
aggregated pairing check of a quorum's partials, bisected on failure to name the bad signers
(:mod:`cowboy_node.consensus.batch_verify`, as commonware's batcher) — about ``2·log2(quorum)`` checks per bad
signer instead of one per partial. Per certificate that is one pairing check instead of two batched checks of the
partials (each with a G2 multi-exponentiation) — the largest CPU cost of a view on an idle 4-validator network
(``docs/performance.md``). A seed already verified (the notarization revealed it) is reused when the
finalization of the same round is assembled: only its signature is interpolated and checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cowboy_node.consensus.batch_verify import bad_partials
from cowboy_node.consensus.pair_check import check_one, check_two, interpolate_one, interpolate_pair
from cowboy_node.crypto import bls, threshold

__all__ = ["Scheme", "ThresholdScheme", "quorum_size"]


def quorum_size(n: int) -> int:
    """``2f + 1`` for ``n = 3f + 1`` validators (in general ``n − f`` with ``f = ⌊(n − 1)/3⌋``)."""
    if n < 1:
        raise ValueError("need at least one validator")
    return n - (n - 1) // 3


class Scheme(Protocol):
    """What the engine needs from a signing scheme (signers are 0-based validator indices)."""

    @property
    def n(self) -> int: ...

    @property
    def quorum(self) -> int: ...

    def sign(self, message: bytes) -> bytes:
        """This validator's partial over ``message``."""
        ...

    def verify(self, signer: int, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is ``signer``'s partial over ``message``; never raises."""
        ...

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        """Verify the partials, recover the certificate from good ones: (signature or None, bad signers)."""
        ...

    def verify_certificate(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is the group signature over ``message``; never raises."""
        ...

    def verify_pair(self, signer: int, message: bytes, signature: bytes, seed_message: bytes, seed: bytes) -> bool:
        """Whether both are ``signer``'s partials (over ``message`` and over ``seed_message``); never raises."""
        ...

    def recover_pair(self, message: bytes, partials: Sequence[tuple[int, bytes]], seed_message: bytes,
                     seed_partials: Sequence[tuple[int, bytes]]) -> tuple[bytes, bytes] | None:
        """The certificate signature over ``message`` and the seed, each recovered from a quorum of the signers
        present in both lists, when both verify as group signatures; None otherwise (the caller then checks the
        partials with :meth:`recover` to find the bad ones). Never raises."""
        ...


class ThresholdScheme:
    """BLS12-381 threshold scheme over a dealt key (:func:`cowboy_node.crypto.threshold.deal`).

    ``share_public_keys[i]`` is validator ``i``'s share key (share index ``i + 1``); ``share`` is this
    validator's share (None for an observer that only verifies).
    """

    def __init__(self, group_public_key: bytes, share_public_keys: Sequence[bytes], quorum: int,
                 share: threshold.Share | None = None) -> None:
        if not bls.key_validate(group_public_key):
            raise ValueError("group public key fails KeyValidate")
        for i, pk in enumerate(share_public_keys):
            if not bls.key_validate(pk):
                raise ValueError(f"share public key {i} fails KeyValidate")
        if not 1 <= quorum <= len(share_public_keys):
            raise ValueError("quorum must be in [1, n]")
        self._group = bytes(group_public_key)
        self._pks = tuple(bytes(pk) for pk in share_public_keys)
        self._by_index = {i + 1: pk for i, pk in enumerate(self._pks)}
        self._quorum = quorum
        self._share = share
        self._verified: dict[tuple[int, bytes, bytes], bool] = {}
        self._own: dict[bytes, bytes] = {}
        """Message → this validator's partial over it (BLS signing is deterministic: the same bytes each time)."""
        self._group_sigs: dict[bytes, bytes] = {}
        """Message → its group signature, once verified (a recovered seed is reused, not interpolated again)."""
        self._group_point = bls.decode_g2(self._group)
        self._pk_points = tuple(bls.decode_g2(pk) for pk in self._pks)
        self._pk_by_signer = dict(enumerate(self._pk_points))

    def public_parts(self) -> tuple[bytes, tuple[bytes, ...], int]:
        """``(group_public_key, share_public_keys, quorum)``: what a verify-only copy is built from (in another
        process; the share never leaves this one)."""
        return self._group, self._pks, self._quorum

    @classmethod
    def from_dealing(cls, dealing: threshold.Dealing, me: int | None) -> ThresholdScheme:
        """The scheme of validator ``me`` (0-based; None: verify only) in ``dealing``."""
        return cls(dealing.group_public_key, dealing.share_public_keys, dealing.threshold,
                   None if me is None else dealing.shares[me])

    @property
    def n(self) -> int:
        return len(self._pks)

    @property
    def quorum(self) -> int:
        return self._quorum

    def sign(self, message: bytes) -> bytes:
        if self._share is None:
            raise RuntimeError("this scheme holds no share")
        sig = self._own.get(bytes(message))
        if sig is None:  # a round's seed partial goes into its notarize, finalize and nullify: signed once
            sig = threshold.partial_sign(self._share, message)
            self._own[bytes(message)] = sig
            if len(self._own) > 64:
                self._own.pop(next(iter(self._own)))
        self._remember((self._share.index - 1, bytes(message), sig), True)  # own partials need no pairing
        return sig

    def _remember(self, key: tuple[int, bytes, bytes], ok: bool) -> None:
        self._verified[key] = ok
        if len(self._verified) > 4096:
            self._verified.pop(next(iter(self._verified)))

    def verify(self, signer: int, message: bytes, signature: bytes) -> bool:
        if not 0 <= signer < len(self._pks):
            return False
        key = (signer, message, signature)
        hit = self._verified.get(key)
        if hit is None:
            hit = threshold.verify_partial(self._pks[signer], message, signature)
            self._remember(key, hit)
        return hit

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        known = [(i, p) for i, p in partials if self._verified.get((i, bytes(message), bytes(p))) is True]
        if len({i for i, _ in known}) >= self._quorum and len(known) == len({i for i, _ in known}):
            return threshold.recover([(i + 1, p) for i, p in known], self._quorum), frozenset()
        bad: set[int] = set()
        by_signer: dict[int, bytes] = {}
        for i, p in partials:
            if not 0 <= i < len(self._pks):
                bad.add(i)
            elif by_signer.setdefault(i, bytes(p)) != bytes(p):
                bad.add(i)  # two different partials of one signer
        candidates = sorted(i for i in by_signer if i not in bad)
        good: list[int] = []
        while len(good) < self._quorum and len(good) + len(candidates) >= self._quorum:
            take, candidates = candidates[:self._quorum - len(good)], candidates[self._quorum - len(good):]
            unknown = [i for i in take if self._verified.get((i, bytes(message), by_signer[i])) is not True]
            # one aggregated pairing check of the batch; bisection names the bad signers if it fails
            found = bad_partials(self._pk_by_signer, bytes(message), [(i, by_signer[i]) for i in unknown])
            for i in unknown:
                self._remember((i, bytes(message), by_signer[i]), i not in found)
            bad |= found
            good += [i for i in take if i not in found]
        if len(good) < self._quorum:
            return None, frozenset(bad)
        return threshold.recover([(i + 1, by_signer[i]) for i in good], self._quorum), frozenset(bad)

    def verify_certificate(self, message: bytes, signature: bytes) -> bool:
        if self._group_sigs.get(bytes(message)) == bytes(signature):
            return True
        ok = bls.verify(self._group, message, signature)
        if ok:
            self._remember_group(bytes(message), bytes(signature))
        return ok

    def _remember_group(self, message: bytes, signature: bytes) -> None:
        self._group_sigs[message] = signature
        if len(self._group_sigs) > 256:
            self._group_sigs.pop(next(iter(self._group_sigs)))

    def verify_pair(self, signer: int, message: bytes, signature: bytes, seed_message: bytes, seed: bytes) -> bool:
        if not 0 <= signer < len(self._pks):
            return False
        k1, k2 = (signer, bytes(message), bytes(signature)), (signer, bytes(seed_message), bytes(seed))
        if self._verified.get(k1) is True and self._verified.get(k2) is True:
            return True
        try:
            ok = check_two(self._pk_points[signer], bytes(message), bls.decode_g1(signature),
                            bytes(seed_message), bls.decode_g1(seed))
        except Exception:  # undecodable points
            ok = False
        if ok:
            self._remember(k1, True)
            self._remember(k2, True)
            return True
        return self.verify(signer, message, signature) and self.verify(signer, seed_message, seed)

    def recover_pair(self, message: bytes, partials: Sequence[tuple[int, bytes]], seed_message: bytes,
                     seed_partials: Sequence[tuple[int, bytes]]) -> tuple[bytes, bytes] | None:
        sigs, seeds = dict(partials), dict(seed_partials)
        if len(sigs) != len(partials) or len(seeds) != len(seed_partials):
            return None  # a signer twice: leave it to the checked path
        chosen = sorted(i for i in sigs if i in seeds and 0 <= i < len(self._pks))[:self._quorum]
        if len(chosen) < self._quorum:
            return None
        known_seed = self._group_sigs.get(bytes(seed_message))
        try:
            if known_seed is not None:  # the round's seed is already verified: only the signature to recover
                sig_bytes, seed_bytes = interpolate_one([(i + 1, sigs[i]) for i in chosen]), known_seed
                ok = check_one(self._group_point, bytes(message), bls.decode_g1(sig_bytes))
            else:
                sig_bytes, seed_bytes = interpolate_pair([(i + 1, sigs[i], seeds[i]) for i in chosen])
                # strict decoding of the results (subgroup, not the identity), then both group signatures at once
                ok = check_two(self._group_point, bytes(message), bls.decode_g1(sig_bytes), bytes(seed_message),
                               bls.decode_g1(seed_bytes))
        except Exception:  # undecodable partials, identity results: the checked path names the culprits
            return None
        if not ok:
            return None
        self._remember_group(bytes(message), sig_bytes)
        self._remember_group(bytes(seed_message), seed_bytes)
        return sig_bytes, seed_bytes

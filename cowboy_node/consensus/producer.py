"""The single-validator proposer: a block every ``block_time_ms``, built off the event loop, signed, committed.

With one validator the engine's round is fixed by the height (``expected_round``), the beacon is this
validator's own BLS signature over it, and a block is final once committed. The loop keeps the cadence and
never dies: an exception from one attempt is reported through ``on_error`` and the next slot tries again.
What happens around a committed block (mempool, transport, metrics) is the caller's, through the
:class:`ProducedBlock` it gets back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.consensus.beacon import sign_beacon
from cowboy_node.consensus.header import expected_round
from cowboy_node.execution.context import BlockEnv, Observe
from cowboy_node.execution.runners.store import registry_size
from cowboy_node.execution.system_state import get_cip11_flags
from cowboy_node.types.presence import encode_presence
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.types.transaction import Transaction

T = TypeVar("T")

Inspect = Callable[[PreparedBlock, BlockEnv], T]
"""Runs in the builder thread under the state lock after a block is built and before it is committed (the
chain's head is still the parent): what the caller wants to know about the block against its parent state."""


@dataclass(frozen=True, slots=True)
class ProducedBlock(Generic[T]):
    """A block this validator built and committed."""

    prepared: PreparedBlock
    """The committed block and its execution result."""
    inspected: T
    """What the caller's :data:`Inspect` returned for it."""
    execution_s: float
    """Seconds from the start of the build to the end of execution (End of Block included)."""
    commit_s: float
    """Seconds the synced commit batch took."""


class BlockProducer:
    """Proposes, signs and commits this validator's blocks (single-validator topology)."""

    def __init__(self, chain: Chain, *, ed25519_seed: bytes, bls_secret: int, fee_recipient: bytes,
                 block_time_ms: int, tree_lock: threading.Lock,
                 local_presence: Callable[[], frozenset[int]]) -> None:
        self.chain = chain
        self.block_time_ms = block_time_ms
        """Target interval between two blocks."""
        self._ed_seed = ed25519_seed
        self._ed_pub = ed25519.public_key_from_seed(ed25519_seed)
        self._bls_secret = bls_secret
        self._fee_recipient = fee_recipient
        self._tree_lock = tree_lock
        self._local_presence = local_presence
        self._stop = asyncio.Event()
        self.stopping = False
        """Set once a stop was asked: the block in progress finishes, no new one starts."""
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="block-builder")

    def close(self) -> None:
        """Release the builder thread (for a producer whose :meth:`run` was never started)."""
        self._executor.shutdown(wait=True)

    def request_stop(self) -> None:
        """Stop after the block in progress."""
        self.stopping = True
        self._stop.set()

    async def run(self, produce: Callable[[], Awaitable[None]], on_error: Callable[[Exception], None]) -> None:
        """Call ``produce`` every ``block_time_ms`` until stopped; an exception goes to ``on_error`` and the next
        slot tries again. Falling behind does not cause a burst: the next slot is at least now."""
        interval = self.block_time_ms / 1000
        next_at = time.monotonic() + interval
        try:
            while not self.stopping:
                delay = next_at - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), delay)
                if self.stopping:
                    break
                try:
                    await produce()
                except Exception as e:  # nothing may stop the producer (see the module docstring)
                    on_error(e)
                next_at = max(next_at + interval, time.monotonic())
        finally:
            self.close()

    def next_env(self, timestamp_ms: int) -> BlockEnv:
        """Environment of the next block: its round, this validator's beacon for it, the local presence (CIP-11
        §7.4, encoded over |registry(H−1)| whenever the field is required or shadowed) and the due seeds."""
        chain = self.chain
        parent = chain.head.header
        round_ = expected_round(parent.height + 1)
        parent_world = chain.world()
        flags = get_cip11_flags(parent_world)
        presence = (encode_presence(self._local_presence(), registry_size(parent_world))
                    if flags.CIP11_PRESENT_FIRST_ENABLED or flags.CIP11_PRESENCE_SHADOW_ENABLED else None)
        return chain.env_for(timestamp_ms=max(timestamp_ms, parent.timestamp_ms + 1),
                             fee_recipient=self._fee_recipient, beacon=sign_beacon(self._bls_secret, round_),
                             presence_input=presence, round_=round_, consumed_seeds=chain.seeds_due())

    async def produce(self, candidates: list[Transaction], *, observe: Observe | None,
                      inspect: Inspect[T]) -> ProducedBlock[T]:
        """Build the next block from ``candidates`` in the builder thread, sign it, commit it (one synced batch)."""
        chain = self.chain
        env = self.next_env(int(time.time() * 1000))
        round_ = expected_round(env.height)
        t0 = time.perf_counter()

        def build() -> tuple[PreparedBlock, T]:
            with self._tree_lock:
                built = chain.build(candidates, env=env, round_=round_, proposer=self._ed_pub,
                                    sign=lambda d: ed25519.sign(self._ed_seed, d), signatures_checked=True,
                                    observe=observe)
                return built, inspect(built, env)

        prepared, inspected = await asyncio.get_running_loop().run_in_executor(self._executor, build)
        t1 = time.perf_counter()
        with self._tree_lock:
            chain.commit(prepared)
        t2 = time.perf_counter()
        return ProducedBlock(prepared, inspected, execution_s=t1 - t0, commit_s=t2 - t1)

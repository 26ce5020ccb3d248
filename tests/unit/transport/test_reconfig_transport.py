"""§5.3/§6.2 reconfiguration driven by the chain: an executed ActivateValidatorSet (0x48) is what the validator's
transport admits against and expires sessions by — no local hook.

The chain is a four-validator genesis world (``ValidatorSetSnapshot(0)`` = KEYS) in which the validator set
approves ``ValidatorSetActivated(1, h)`` with E+1 = (KEYS[0], KEYS[1], KEYS[2]) — KEYS[3] leaves the runner-facing
set — and OVERLAP_BLOCKS = 5. The node under test is a :class:`TransportLink` over that world whose head height
the test moves (the consensus side is not involved: this is what a node reads at its committed head).
Expected verdicts come from ``Sub(R)`` of each listed snapshot, computed here with the subset function.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from cowboy_node.chain.genesis import Genesis
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import get_cip11_params, set_cip11_params
from cowboy_node.node.transport_link import TransportLink
from cowboy_node.state.world import WorldState
from cowboy_node.transport.service import TransportService, _RunnerConnection
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, private_key_to_public_key
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.preimages import RunnerKey as SessionKey
from cowboy_protocol.transport.preimages import ValidatorKey
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import Authenticated, Event
from cowboy_protocol.transport.subset import EpochSnapshot, subset
from cowboy_protocol.types.runner import Health, RunnerRecord
from cowboy_protocol.types.validator_set_instructions import ActivateValidatorSet
from tests.unit.execution.test_governance import NOW
from tests.unit.execution.test_reconfig_activation import KEYS, SEEDS, _Env
from tests.unit.node_harness import example_caps
from tests.unit.transport.test_transport_service_sansio import FakeConn

OVERLAP = 5
H = NOW + 10
"""Activation height of epoch 1."""
NEW = (KEYS[0], KEYS[1], KEYS[2])
OLD_SNAP, NEW_SNAP = EpochSnapshot(0, KEYS), EpochSnapshot(1, NEW)
E, E1 = (0, keccak256(b"".join(KEYS))), (1, keccak256(b"".join(NEW)))
RUNNER_SKS = [(0x3000 + i).to_bytes(32, "big") for i in range(12)]


class _Chain:
    """What TransportLink reads of a chain: genesis, the committed height and the state at it."""

    def __init__(self, genesis: Genesis, world: WorldState) -> None:
        self.genesis, self._world, self.height = genesis, world, NOW

    def world(self) -> WorldState:
        return self._world


def _no_submit(tx_bytes: bytes) -> dict[str, object]:
    raise AssertionError("not used")


class _Node(TransportLink):
    def __init__(self, chain: _Chain, me: int) -> None:
        super().__init__(chain, threading.Lock(), KEYS[me], submit=_no_submit)  # type: ignore[arg-type]

    def forward_transaction(self, tx_bytes: bytes) -> None:
        raise AssertionError("not used")


def _chain() -> _Chain:
    """The four-validator world with runners registered and epoch 1 approved for height H."""
    env = _Env()
    set_cip11_params(env.world, replace(get_cip11_params(env.world), OVERLAP_BLOCKS=OVERLAP))
    caps, card = example_caps()
    for i, sk in enumerate(RUNNER_SKS):
        address = private_key_to_address(sk)
        store.put_runner(env.world, RunnerRecord(address, i, 10**18, caps, card, Health.HEALTHY, 0, 0, 10**9, 0, 0))
        store.append_active_runner(env.world, address)
    r = env.approved(ActivateValidatorSet(NEW, H))
    assert r.status == 0, r
    return _Chain(env.chain.genesis, env.world)


def _runner(sk: bytes) -> bytes:
    return private_key_to_public_key(sk, compressed=True)


def _expected(me: bytes, sk: bytes, pair: tuple[int, bytes], valid_epochs: list[int]) -> GoodbyeReason | None:
    """The §6.2 verdict from the rule's text: the pair must name a valid snapshot (else WrongValidatorSet), and
    this validator must be in that snapshot's Sub(R) (else NotInSubset)."""
    snap = {0: OLD_SNAP, 1: NEW_SNAP}[pair[0]]
    if pair[0] not in valid_epochs or snap.set_hash != pair[1]:
        return GoodbyeReason.WRONG_VALIDATOR_SET
    return None if me in subset(_runner(sk), snap.validators) else GoodbyeReason.NOT_IN_SUBSET


@pytest.mark.parametrize(("offset", "valid_epochs"), [(-1, [0]), (0, [0, 1]), (OVERLAP - 1, [0, 1]), (OVERLAP, [1])],
                         ids=["h-1", "h", "h+OVERLAP-1", "h+OVERLAP"])
@pytest.mark.parametrize("me", [0, 3], ids=["stays", "leaves"])
def test_admission_matrix_follows_the_chain(offset: int, valid_epochs: list[int], me: int) -> None:
    chain = _chain()
    node = _Node(chain, me)
    chain.height = H + offset
    assert [s.epoch for s in node.valid_snapshots()] == valid_epochs
    seen: set[Any] = set()
    for sk in RUNNER_SKS:
        for pair in (E, E1, (0, E1[1]), (1, E[1])):  # hash E, hash E+1, and both mixed pairs
            got = node.admission(PubKey.runner(_runner(sk)), *pair)
            want = _expected(KEYS[me], sk, pair, valid_epochs)
            assert (None if got.ok else got.reason) is want, (sk.hex()[-2:], pair[0], offset)
            seen.add(want)
    # The fixture reaches every verdict the window allows (so each branch above is exercised); a validator that
    # left the set admits nobody from the cutoff on.
    assert GoodbyeReason.WRONG_VALIDATOR_SET in seen
    assert (None in seen) is not (me == 3 and valid_epochs == [1])
    if me == 3 or valid_epochs == [0]:
        assert GoodbyeReason.NOT_IN_SUBSET in seen


def test_status_and_validators_publish_the_chain_activation() -> None:
    chain = _chain()
    node = _Node(chain, 0)
    rc = node.reconfiguration()
    assert rc is not None and (rc.old, rc.new, rc.activation_height) == (OLD_SNAP, NEW_SNAP, H)
    assert node.newest_snapshot() == OLD_SNAP  # before h
    chain.height = H
    assert node.newest_snapshot() == NEW_SNAP
    chain.height = H + OVERLAP
    assert node.newest_snapshot() == NEW_SNAP and node.reconfiguration() == rc  # still published: the newest


class _Pipe:
    """A runner session over an in-memory connection to the service (as the sansio tests' Pipe)."""

    def __init__(self, service: TransportService, node: _Node, sk: bytes, snap: EpochSnapshot) -> None:
        self.fake = FakeConn()
        self.handler = _RunnerConnection(service, self.fake)  # type: ignore[arg-type]
        self.handler.on_open(self.fake)  # type: ignore[arg-type]
        self.runner = RunnerSession(chain_id=node.chain_id, key=SessionKey(sk), expected_validator=PubKey.validator(
            node._ed_pub), validator_set=snap.validators, subset_epoch=snap.epoch,
            channel_binding=self.fake.channel_binding, challenge_nonce=secrets.token_bytes(32))
        self.events: list[Event] = []
        self.runner.start(time.monotonic(), node.chain.height)
        while True:
            out, back = self.runner.take_outbound(), self.fake.sent
            self.fake.sent = []
            if not out and not back:
                break
            for frame in out:
                if not self.fake.closed:
                    self.handler.on_frame(frame)
            for frame in back:
                self.events += self.runner.receive(frame, time.monotonic())

    @property
    def authenticated(self) -> bool:
        return any(isinstance(e, Authenticated) for e in self.events)


class _Metrics:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def transport_event(self, kind: str, label: str) -> None:
        self.events.append((kind, label))

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


def test_cutoff_closes_epoch_e_sessions_with_overlap_expired_and_refuses_hash_e_after() -> None:
    chain = _chain()
    node = _Node(chain, 0)  # KEYS[0] is in every runner's Sub_1 (|E+1| = 3, k = 3)
    metrics = _Metrics()
    service = TransportService(node, ValidatorKey(SEEDS[0]), validator_set_hash=E[1],
                               metrics=metrics)
    in_e = [sk for sk in RUNNER_SKS if KEYS[0] in subset(_runner(sk), KEYS)]
    assert len(in_e) >= 2
    chain.height = H
    old_a, old_b = _Pipe(service, node, in_e[0], OLD_SNAP), _Pipe(service, node, in_e[1], OLD_SNAP)
    new = _Pipe(service, node, RUNNER_SKS[-1], NEW_SNAP)
    assert old_a.authenticated and old_b.authenticated and new.authenticated  # both epochs during the window
    chain.height = H + OVERLAP - 1
    service.on_block_committed((), ())
    assert not old_a.fake.closed and not new.fake.closed  # the last block of the window keeps them
    chain.height = H + OVERLAP
    service.on_block_committed((), ())  # the cutoff block commits
    for p in (old_a, old_b):
        assert p.fake.closed and p.fake.goodbye is not None
        assert p.fake.goodbye.reason is GoodbyeReason.OVERLAP_EXPIRED
    assert not new.fake.closed
    late = _Pipe(service, node, in_e[0], OLD_SNAP)  # must not come back under hash(E)
    assert not late.authenticated and late.fake.goodbye is not None
    assert late.fake.goodbye.reason is GoodbyeReason.WRONG_VALIDATOR_SET
    assert ("handshake", "wrong_validator_set") in metrics.events  # the refusal is counted
    assert _Pipe(service, node, in_e[0], NEW_SNAP).authenticated  # under E+1 it is admitted

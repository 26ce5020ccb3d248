"""The per-block §5.3/§5.2 re-check of live sessions (``TransportService._recheck_epochs``) keeps its verdicts
when the service remembers which inputs a session was last found valid under: a change of the valid snapshots,
of MIN_SUBSET or of MAX_SUBSET at a later block still closes the sessions it invalidates, and a block that
changes none of them keeps every session.

The link is a fake whose snapshots and governed constants the test sets; expected verdicts come from ``Sub(R)``
computed here with the subset function.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

from cowboy_node.transport.service import TransportService, _RunnerConnection
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, private_key_to_public_key
from cowboy_protocol.transport.enums import GoodbyeReason
from cowboy_protocol.transport.preimages import RunnerKey, ValidatorKey
from cowboy_protocol.transport.pubkeys import PubKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import Authenticated, Event
from cowboy_protocol.transport.subset import EpochSnapshot, subset
from cowboy_protocol.transport.validator_session import Admission
from cowboy_protocol.types.params import Cip11Params
from tests.unit.transport.test_transport_service_sansio import FakeConn

CHAIN = "cowboy-test"
ME = ValidatorKey(bytes(range(1, 33)))
OTHERS = tuple(bytes([0xA0 + i]) * 32 for i in range(19))
SNAP0 = EpochSnapshot(0, (ME.pubkey.key, *OTHERS))  # 20 validators: k = 6 under the §13 defaults
RUNNER_SKS = [(0x4100 + i).to_bytes(32, "big") for i in range(40)]


def _pub(sk: bytes) -> bytes:
    return private_key_to_public_key(sk, compressed=True)


class _Link:
    """NodeLink with test-set snapshots and CIP-11 constants."""

    chain_id = CHAIN

    def __init__(self) -> None:
        self.height = 10
        self.snapshots: tuple[EpochSnapshot, ...] = (SNAP0,)
        self.params = Cip11Params()
        self.index = {private_key_to_address(sk): i for i, sk in enumerate(RUNNER_SKS)}

    def head_height(self) -> int:
        return self.height

    def cip11_params(self) -> Cip11Params:
        return self.params

    def valid_snapshots(self) -> tuple[EpochSnapshot, ...]:
        return tuple(EpochSnapshot(s.epoch, s.validators) for s in self.snapshots)  # fresh objects every block

    def admission(self, runner: PubKey, subset_epoch: int | None = None, offered_hash: bytes | None = None) -> Any:
        address = runner.address()
        return Admission(True, runner_index=self.index[address], address=address)

    def runner_health(self, addresses: list[bytes]) -> list[Any]:
        from cowboy_protocol.types.runner import Health

        return [Health.HEALTHY for _ in addresses]

    def assignment_for(self, job_id: bytes) -> None:
        return None


def _connect(service: TransportService, link: _Link, sk: bytes) -> FakeConn:
    fake = FakeConn()
    handler = _RunnerConnection(service, fake)  # type: ignore[arg-type]
    handler.on_open(fake)  # type: ignore[arg-type]
    runner = RunnerSession(chain_id=CHAIN, key=RunnerKey(sk), expected_validator=ME.pubkey,
                           validator_set=SNAP0.validators, subset_epoch=0, channel_binding=fake.channel_binding,
                           challenge_nonce=secrets.token_bytes(32))
    events: list[Event] = []
    runner.start(0.0, link.height)
    for _ in range(4):
        for frame in runner.take_outbound():
            handler.on_frame(frame)
        back, fake.sent = fake.sent, []
        for frame in back:
            events += runner.receive(frame, 0.0)
    assert any(isinstance(e, Authenticated) for e in events)
    return fake


def _world(params: Cip11Params | None = None) -> tuple[_Link, TransportService, dict[bytes, FakeConn]]:
    link = _Link()
    link.params = params or link.params
    service = TransportService(link, ME, validator_set_hash=SNAP0.set_hash)  # type: ignore[arg-type]
    p = link.params
    mine = [sk for sk in RUNNER_SKS
            if ME.pubkey.key in subset(_pub(sk), SNAP0.validators, min_subset=p.MIN_SUBSET, max_subset=p.MAX_SUBSET)]
    return link, service, {sk: _connect(service, link, sk) for sk in mine}


def _commit(link: _Link, service: TransportService) -> None:
    link.height += 1
    service.on_block_committed((), ())


def test_unchanged_inputs_keep_every_session_over_many_blocks() -> None:
    link, service, conns = _world()
    assert len(conns) >= 4
    for _ in range(5):
        _commit(link, service)
    assert not any(f.closed for f in conns.values())


def test_max_subset_change_after_cached_blocks_closes_who_left_the_subset() -> None:
    link, service, conns = _world()
    _commit(link, service)
    _commit(link, service)  # verdicts remembered under the defaults
    link.params = replace(link.params, MAX_SUBSET=2)
    _commit(link, service)
    for sk, fake in conns.items():
        inside = ME.pubkey.key in subset(_pub(sk), SNAP0.validators, max_subset=2)
        assert fake.closed is not inside
        if not inside:
            assert fake.goodbye is not None and fake.goodbye.reason is GoodbyeReason.NOT_IN_SUBSET
    assert any(f.closed for f in conns.values()) and not all(f.closed for f in conns.values())


def test_min_subset_change_is_an_input_too() -> None:
    # k = 8 (MIN_SUBSET = 8) when the sessions open; MIN_SUBSET = 4 alone brings k back to 6 at a later block.
    link, service, conns = _world(replace(Cip11Params(), MIN_SUBSET=8, MAX_SUBSET=8))
    _commit(link, service)
    _commit(link, service)
    assert not any(f.closed for f in conns.values())
    link.params = replace(link.params, MIN_SUBSET=4)
    _commit(link, service)
    for sk, fake in conns.items():
        assert fake.closed is not (ME.pubkey.key in subset(_pub(sk), SNAP0.validators, min_subset=4, max_subset=8))
    assert any(f.closed for f in conns.values())


def test_snapshot_change_after_cached_blocks_closes_sessions_of_the_expired_epoch() -> None:
    link, service, conns = _world()
    _commit(link, service)
    _commit(link, service)
    link.snapshots = (EpochSnapshot(1, SNAP0.validators[:3]),)  # epoch 0 no longer valid at the head
    _commit(link, service)
    for fake in conns.values():
        assert fake.closed and fake.goodbye is not None
        assert fake.goodbye.reason is GoodbyeReason.OVERLAP_EXPIRED

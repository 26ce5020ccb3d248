"""Mode A from the wire to the chain: eleven real ValidatorSessions of the runner's Sub(R) answer its pings with
PresenceReceipts, the runner's certifier assembles a SubmitPresenceCertificate from what its sessions verified,
and execution accepts it — then the runner is the only one selectable (CIP-11 §8.3, docs/protocol.md §8.5)."""

from __future__ import annotations

from cowboy_node.execution.block import start_block
from cowboy_protocol.crypto import secp256k1
from cowboy_protocol.transport.frames import encode_frame
from cowboy_protocol.transport.framing import FrameDecoder
from cowboy_protocol.transport.preimages import RunnerKey
from cowboy_protocol.transport.runner_session import RunnerSession
from cowboy_protocol.transport.session import PresenceReceiptReceived, SessionBase
from cowboy_protocol.transport.validator_session import Admission, ValidatorSession
from cowboy_runner.presence_certificates import PresenceCertifier
from tests.helpers import CHAIN_ID
from tests.unit.execution.jobs.test_mode_a_selection import _env
from tests.unit.execution.test_mode_a_certificates import (
    H0,
    PEERS,
    RUNNER_SKS,
    RUNNERS,
    VKEYS,
    VSH0,
    World,
    accepted,
    pc,
    sub_of,
)


def _move(src: SessionBase, dst: SessionBase) -> list[object]:
    data = b"".join(encode_frame(f) for f in src.take_outbound())
    events: list[object] = []
    for f in FrameDecoder().feed(data):
        events += dst.receive(f, 0.0)
    return events


def test_receipts_issued_by_validator_sessions_certify_the_runner_on_chain() -> None:
    w = World()
    sk = RUNNER_SKS[0]
    key = RunnerKey(sk)
    certifier = PresenceCertifier(RUNNERS[0])
    for i, v in enumerate(sub_of(sk)[:11]):
        val = ValidatorSession(chain_id=CHAIN_ID, key=VKEYS[v], validator_set_hash=VSH0, subset_epoch=0,
                               channel_binding=bytes([i]) * 32, challenge_nonce=b"\x01" * 32,
                               admit=lambda _pk: Admission(True, None, 0, RUNNERS[0]), height=lambda: H0, now=0.0)
        run = RunnerSession(chain_id=CHAIN_ID, key=key, expected_validator=VKEYS[v].pubkey, validator_set=PEERS,
                            subset_epoch=0, channel_binding=bytes([i]) * 32, challenge_nonce=b"\x02" * 32)
        run.start(0.0, H0)
        _move(run, val)
        _move(val, run)
        _move(run, val)
        run.request_presence_receipts()
        run.ping(0.0, H0)
        _move(run, val)
        for ev in _move(val, run):
            if isinstance(ev, PresenceReceiptReceived):
                certifier.add(ev.receipt)
    cert = certifier.next_certificate(H0, t_hard=11, freshness=30, ttl=60)
    assert cert is not None and len(cert.receipts) == 11
    accepted(w, list(cert.receipts), sk=sk)
    assert pc.get_proof(w.world, RUNNERS[0]) == pc.PresenceProof(H0, H0 + 60)
    assert secp256k1.private_key_to_address(sk) == RUNNERS[0]
    ctx = start_block(w.world, _env(H0 + 1, None))
    assert ctx.hard_exclude and len(ctx.present) == 1

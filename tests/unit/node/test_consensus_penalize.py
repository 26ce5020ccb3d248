"""A peer the engine proves faulty (a certificate that does not verify, conflicting votes) is backed off by the peer
layer: the service calls ``Network.penalize`` with the fault's bounded label (issue 30 §2)."""

from __future__ import annotations

import hashlib

from cowboy_node.consensus.simplex.types import Notarization, Proposal, encode_message
from cowboy_node.consensus.sync_messages import CH_CONSENSUS
from cowboy_node.types.block import Round
from tests.unit.node.test_consensus_preverify import _service


def test_a_bad_certificate_gets_its_sender_penalized_and_counted() -> None:
    svc, net = _service(0)
    svc.start_engine()
    p = Proposal(Round(0, 3), 0, svc.chain.head.hash(), hashlib.sha256(b"junk").digest())
    junk = Notarization(p, bytes(48), bytes(48))  # not even a curve point
    svc.on_peer_message(2, CH_CONSENSUS, encode_message(junk))
    assert net.penalized == [(2, "bad_certificate")]
    assert svc.metrics.consensus_faults.labels(reason="bad_certificate")._value.get() == 1

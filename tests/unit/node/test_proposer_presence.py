"""CIP-11 §8.1/§7.2: the proposer marks present only runners registered as of the parent block.

"PresenceInput(H) is … decoded once before executing block H, against the parent-block (H−1) registry index"
and "every bit at a position ≥ |registry(H−1)| MUST be 0". A validator's live sessions can include a runner
registered after the parent (its transport follows the newest head, and Simplex builds on older notarized
parents), so the proposer (``ValidatorGossip.presence_input``) drops every index at or beyond |registry(H−1)|.
"""

from __future__ import annotations

from cowboy_node.execution.runners.registry_state import registry_size
from cowboy_node.types.presence import decode_presence
from cowboy_protocol.types.runner_instructions import RunnerRegister
from tests.unit.node_harness import RUNNER_SKS, STAKE, Nonces, example_caps, make_node, produce


def ahead() -> frozenset[int]:
    """Sessions with three runners, and one more index than any registry here: what a transport following a
    newer head than the block's parent reports."""
    return frozenset({0, 1, 2, 3})


def test_proposer_marks_only_runners_registered_as_of_the_parent() -> None:
    node = make_node(phase=2, local_presence=ahead)
    caps, card = example_caps()
    n = Nonces()
    produce(node, [n.tx(sk, RunnerRegister(STAKE, caps, card)) for sk in RUNNER_SKS[:2]])
    parent = node.chain.world()
    assert registry_size(parent) == 2
    raw = node.gossip.presence_input(parent)
    assert raw is not None and decode_presence(raw, 2) == frozenset({0, 1})
    # The block the node produces on that parent carries exactly that set and is valid.
    produce(node, [])
    header = node.chain.head.header
    assert header.presence_input is not None and decode_presence(header.presence_input, 2) == frozenset({0, 1})

"""CIP-11 selection rules exercised at the dispatcher level (not only in the pure draw functions).

* §7.3 membership-steering bound with a simulated validator set: in multi-validator Mode B a job with
  M > 1 draws its membership by VRF over the full floor-eligible set (presence only routes delivery), while
  M == 1 jobs, and every job under one validator, stay present-first.
* §9.3–§9.4 MRU: written by the Result Verifier on a verified result as ``{first consensus-matching runner
  in committee order, current_block_height}``; read at the assignment block H with
  ``H − set_at_block ≤ MRU_TTL_BLOCKS (1,280)``; multiplier ``MRU_WEIGHT_MULTIPLIER (4)`` at global
  iteration 0 only, and only while CIP-11 selection is active.

Expected committees come from the pinned draw (``draw_committee_weighted``, itself pinned against a literal
reference walk in ``test_selection_draw.py``) fed with the pools the spec prescribes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.jobs import dispatch, draw
from cowboy_node.execution.jobs.mru import encode_mru, mru_key
from cowboy_node.execution.jobs.selection import membership_over_full_set, select_committee
from cowboy_node.execution.jobs.weights import base_weights
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.jobspec import JobSpecV1, derive_job_id
from cowboy_protocol.types.jobspec_json import parse_job_request_json
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, RunnerConfig
from cowboy_protocol.types.runner import RunnerRecord
from tests.helpers import ALICE, ALICE_SK
from tests.unit.execution.jobs.test_jobs_e2e import RUNNER_SKS, RUNNERS, _net, _request
from tests.unit.execution.jobs.test_selection_support import hashed_runners

EXAMPLES = Path(__file__).resolve().parents[4] / "configs" / "examples"
SUBMITTER = b"\x5a" * 20
HEIGHT = 5_000
MRU_TTL_BLOCKS = 1_280          # CIP-11 §13
MRU_WEIGHT_MULTIPLIER = 4       # CIP-11 §13
RUNNERS_8 = sorted(hashed_runners(8), key=lambda r: r.address)
PRESENT = frozenset({RUNNERS_8[1].index, RUNNERS_8[4].index, RUNNERS_8[6].index})


def _spec() -> JobSpecV1:
    doc = json.loads((EXAMPLES / "job-http.json").read_text())
    return parse_job_request_json(doc).to_spec(b"\x01" * 32, SUBMITTER, HEIGHT)


def _world() -> WorldState:
    st = MemoryStore()
    return WorldState(st, StateTree(st, b"n/"), data_prefix=b"s/")


def _ctx(n_validators: int, *, height: int = HEIGHT, present_first: bool = True,
         present: frozenset[int] = PRESENT) -> BlockContext:
    env = BlockEnv(chain_id="t", height=height, timestamp_ms=0, fee_recipient=b"\x00" * 20, beacon=b"",
                   parent_beacon=b"", n_validators=n_validators)
    flags = Cip11Flags.for_phase(2) if present_first else Cip11Flags.for_phase(1)
    return BlockContext(env=env, basefee_config=BasefeeConfig(), limits=ChainLimits(), flags=flags,
                        system_deployers=(), cycle_basefee=1, cell_basefee=1, present=present)


def _draw(world: WorldState, ctx: BlockContext, m: int, seed: bytes) -> list[bytes]:
    cands = list(RUNNERS_8)
    return [r.address for r in dispatch.draw_from(world, ctx, _spec(), cands, base_weights(cands, RunnerConfig()),
                                                  m, seed)]


def _reference(present: list[RunnerRecord], fallback: list[RunnerRecord], m: int, seed: bytes,
               mru: bytes | None = None, multiplier: int = MRU_WEIGHT_MULTIPLIER) -> list[bytes]:
    cfg = RunnerConfig()
    return [r.address for r in draw.draw_committee_weighted(
        present, base_weights(present, cfg), fallback, base_weights(fallback, cfg), m, seed, mru,
        mru_multiplier=multiplier)]


SEEDS = [keccak256(bytes([i])) for i in range(12)]
PRESENT_RUNNERS = [r for r in RUNNERS_8 if r.index in PRESENT]
ABSENT_RUNNERS = [r for r in RUNNERS_8 if r.index not in PRESENT]


# --- §7.3 membership-steering bound --------------------------------------------------------------------------

@pytest.mark.parametrize(("n", "m", "full"), [(1, 1, False), (1, 3, False), (4, 1, False), (4, 3, True),
                                              (2, 2, True), (100, 16, True)])
def test_membership_over_full_set_exactly_for_multi_validator_multi_runner_jobs(n: int, m: int, full: bool) -> None:
    assert membership_over_full_set(n, m) is full
    assert dispatch.present_set(_ctx(n), m) == (frozenset() if full else PRESENT)


@pytest.mark.parametrize("seed", SEEDS[:6])
def test_dispatch_multi_validator_m3_draws_membership_over_the_full_eligible_set(seed: bytes) -> None:
    """n_validators = 4, M = 3, three runners marked present: the committee is the VRF draw over all eight
    floor-eligible runners (present pool empty), never the present-first composition."""
    world = _world()
    assert _draw(world, _ctx(4), 3, seed) == _reference([], list(RUNNERS_8), 3, seed)
    # the same thing through select_committee's multi-validator switch
    sel = select_committee(RUNNERS_8, PRESENT, 3, seed, RunnerConfig(), present_first=True,
                           membership_over_full_set=True, mru_address=None)
    assert [r.address for r in sel] == _reference([], list(RUNNERS_8), 3, seed)


def test_multi_validator_membership_is_not_steered_by_presence() -> None:
    """A proposer marking a chosen trio present composes the M = 3 committee under one validator, but not
    under several: across seeds the multi-validator committees include runners absent from PresenceInput."""
    world = _world()
    present_set = {r.address for r in PRESENT_RUNNERS}
    for seed in SEEDS:
        assert set(_draw(world, _ctx(1), 3, seed)) == present_set           # single validator: present-first
    multi = [set(_draw(world, _ctx(4), 3, seed)) for seed in SEEDS]
    assert any(c - present_set for c in multi)
    # and with no presence at all the multi-validator committee is unchanged (presence is delivery-only)
    for seed in SEEDS:
        assert _draw(world, _ctx(4, present=frozenset()), 3, seed) == _draw(world, _ctx(4), 3, seed)


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_multi_validator_single_runner_jobs_stay_present_first(seed: bytes) -> None:
    world = _world()
    assert _draw(world, _ctx(4), 1, seed) == _reference(PRESENT_RUNNERS, ABSENT_RUNNERS, 1, seed)


# --- §9.3–§9.4 MRU read at the dispatcher -----------------------------------------------------------------

def _with_mru(runner: bytes, set_at: int) -> WorldState:
    world = _world()
    world.set(mru_key(SUBMITTER, _spec().job_type.KIND), encode_mru(runner, set_at))
    return world


def _mru_seed() -> tuple[bytes, bytes]:
    """A seed and an absent (fallback) runner whose ×4 bias changes the M = 1 draw over the full set."""
    for seed in SEEDS:
        plain = _reference([], list(RUNNERS_8), 1, seed)
        for r in RUNNERS_8:
            if _reference([], list(RUNNERS_8), 1, seed, r.address) != plain:
                return seed, r.address
    raise AssertionError("no seed in SEEDS shows the MRU bias")


def test_mru_multiplier_is_4_at_iteration_zero_within_the_ttl_at_the_assignment_block() -> None:
    seed, mru = _mru_seed()
    set_at = HEIGHT - MRU_TTL_BLOCKS                                   # H − set_at == TTL: still applies
    ctx = _ctx(1, present=frozenset())
    assert _draw(_with_mru(mru, set_at), ctx, 1, seed) == _reference([], list(RUNNERS_8), 1, seed, mru, 4)
    assert _draw(_with_mru(mru, set_at), ctx, 1, seed) != _reference([], list(RUNNERS_8), 1, seed, mru, 3)
    # one block past the TTL: expired, no bias at all
    assert _draw(_with_mru(mru, set_at - 1), ctx, 1, seed) == _reference([], list(RUNNERS_8), 1, seed)


def test_mru_does_not_apply_while_cip11_selection_is_off() -> None:
    seed, mru = _mru_seed()
    ctx = _ctx(1, present=frozenset(), present_first=False)
    assert _draw(_with_mru(mru, HEIGHT), ctx, 1, seed) == _reference([], list(RUNNERS_8), 1, seed)


def test_mru_gives_no_bias_when_its_runner_is_not_in_the_pool_active_at_iteration_zero() -> None:
    """§9.3: the MRU runner sits in the fallback pool while the present pool is active ⇒ no multiplier."""
    absent = ABSENT_RUNNERS[0].address
    for seed in SEEDS[:4]:
        assert _draw(_with_mru(absent, HEIGHT), _ctx(1), 2, seed) == _reference(PRESENT_RUNNERS, ABSENT_RUNNERS, 2,
                                                                                seed)


def test_mru_key_is_per_submitter_and_job_kind() -> None:
    seed, mru = _mru_seed()
    world = _world()
    world.set(mru_key(b"\x5b" * 20, _spec().job_type.KIND), encode_mru(mru, HEIGHT))    # other submitter
    world.set(mru_key(SUBMITTER, 0x00), encode_mru(mru, HEIGHT))                          # other job kind
    assert _draw(world, _ctx(1, present=frozenset()), 1, seed) == _reference([], list(RUNNERS_8), 1, seed)


# --- §9.4 MRU write on a verified result ---------------------------------------------------------------------

def test_verified_result_writes_the_mru_record_with_the_runner_and_current_height() -> None:
    net = _net()  # CIP-11 phase 2: present-first selection active
    submit = net.tx(ALICE_SK, _request())
    p = net.block([submit])
    job_id = derive_job_id(submit.tx_hash(), 0)
    rec = net.job(job_id)
    runner = rec.committee[0]
    spec_kind = 0x01  # the example job is HTTP (§9.4 job_kind 0x01)
    key = mru_key(ALICE, spec_kind)
    assert net.chain.world().get(key) is None                       # nothing at assignment
    p = net.block([net.tx(RUNNER_SKS[RUNNERS.index(runner)], JobResultSubmit(job_id, b'{"v": 1}', b"", 0))])
    assert net.job(job_id).outcome == b'{"v": 1}'
    assert net.chain.world().get(key) == encode_mru(runner, p.block.header.height)



def test_mru_winner_is_the_first_matching_runner_in_committee_order_not_address_order() -> None:
    """§9.4: "r is the first consensus-matching runner in the original selected committee order … Arrival/reveal/
    delivery/map-iteration order MUST NOT affect the choice." The fixture is a three-runner majority-vote job whose
    drawn committee is *not* in address order (the first such job of a fixed chain: deterministic); every member
    reveals the same result, in reverse committee order, so only committee order names committee[0]."""
    net = _net()  # phase 2: M > 1 waits for its seed, then the committee is drawn
    m3 = {"mode": "majority_vote", "runners": 3, "threshold": 2}
    for _ in range(8):  # bounded search over job ids; the draw is a pure function of the chain
        submit = net.tx(ALICE_SK, _request(verification=m3, timeout_blocks=20))
        net.block([submit])
        job_id = derive_job_id(submit.tx_hash(), 0)
        while net.job(job_id).committee == ():
            net.block([])
        rec = net.job(job_id)
        if rec.committee[0] != min(rec.committee):
            break
    else:
        raise AssertionError("no committee out of address order in 8 jobs")
    assert len(rec.committee) == 3 and sorted(rec.committee) != list(rec.committee)
    order = list(reversed(rec.committee))  # reveals arrive last-member first
    sk = {r: RUNNER_SKS[RUNNERS.index(r)] for r in rec.committee}
    net.block([net.tx(sk[r], JobResultCommit(job_id, result_commitment(job_id, r, b"same", b"salt"))) for r in order])
    while net.chain.height < rec.commit_end:
        net.block([])
    p = net.block([net.tx(sk[r], JobResultSubmit(job_id, b"same", b"salt", 0)) for r in order])
    assert net.job(job_id).outcome == b"same"
    assert net.chain.world().get(mru_key(ALICE, 0x01)) == encode_mru(rec.committee[0], p.block.header.height)

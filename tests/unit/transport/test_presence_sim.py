"""Deterministic simulation of multi-validator Mode-B presence (CIP-11 §5.1, §6.3, §8.2; issue 16 proof).

No processes and no clock: n = 4 validators, each with the real :class:`LocalPresence` table (§6.3 timeout) and
the real :class:`PresenceGossip` book (signed announcements), and 30 runners with secp256k1 keys, each pinging the
k = 3 validators of its real ``Sub(R)`` (``cowboy_protocol.transport.subset``) once per block. Every ping and
every announcement crosses a seeded fake network that drops it with probability :data:`LOSS` and otherwise
delivers it 0..:data:`MAX_DELAY` blocks late. Proposers rotate round-robin (validator ``H mod 4`` proposes block
``H``) and build the ``PresenceInput`` exactly as ``Node._presence_input`` does: ``local.present(parent height)
∪ gossip.union(parent height, registry size)`` (that one line is restated here, since a Node needs a chain).

Selection uses the real dispatcher code: the floor filter ``filters.eligible`` and ``selection.select_committee``
(the function ``dispatch`` calls for every job; the M = 1 selection index is a cache proved equal to it in its
own tests), with ``present_first=True`` and ``membership_over_full_set`` as §7.3 sets it for n = 4.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from cowboy_node.execution.jobs.filters import SelectionRequest, eligible
from cowboy_node.execution.jobs.selection import membership_over_full_set, select_committee
from cowboy_node.p2p.presence_gossip import (
    GOSSIP_TTL_BLOCKS,
    GossipRefused,
    PresenceGossip,
    make_announcement,
)
from cowboy_node.transport.presence import PRESENCE_TIMEOUT_BLOCKS, LocalPresence
from cowboy_protocol.crypto import ed25519
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.crypto.secp256k1 import private_key_to_address, private_key_to_public_key
from cowboy_protocol.transport.subset import subset
from cowboy_protocol.types.params import RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_LLM
from tests.unit.execution.jobs.test_selection_support import runner

N_VALIDATORS = 4
N_RUNNERS = 30
LOSS = 0.2
"""Probability that the fake network drops a ping or an announcement."""
MAX_DELAY = 2
"""A message sent during block ``t`` is delivered before block ``t + 1 + d``, ``d`` uniform in 0..MAX_DELAY."""
GENESIS_HASH = keccak256(b"presence-sim genesis")
CFG = RunnerConfig()
REQ = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                       max_price=10**6, required_runner_pool=None)
HEARTBEAT_TIMEOUT = 10_000
VALIDATOR_SEEDS = [keccak256(b"sim validator %d" % i) for i in range(N_VALIDATORS)]
VKEYS = tuple(ed25519.public_key_from_seed(s) for s in VALIDATOR_SEEDS)
RUNNER_SKS = [keccak256(b"sim runner %d" % i) for i in range(N_RUNNERS)]
SUBSETS = [frozenset(VKEYS.index(v) for v in subset(private_key_to_public_key(sk, compressed=True), VKEYS))
           for sk in RUNNER_SKS]
"""Registry index → the validator indices of its Sub(R) (k = 3 of 4: exactly one validator is outside)."""
EVERYONE = frozenset(range(N_RUNNERS))


@dataclass
class Sim:
    """The fake network, the validators' tables and the PresenceInput of every block built so far."""

    seed: int
    byzantine: int | None = None
    """A validator whose proposals carry only its own local presence (it ignores gossip, still announces)."""
    live: set[int] = field(default_factory=lambda: set(EVERYONE))
    height: int = 0
    inputs: dict[int, frozenset[int]] = field(default_factory=dict)
    last_ping_height: dict[int, int] = field(default_factory=dict)
    """Registry index → highest validator height at which any validator recorded a ping of it."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.local = [LocalPresence(timeout_blocks=PRESENCE_TIMEOUT_BLOCKS) for _ in range(N_VALIDATORS)]
        self.gossip = [PresenceGossip(GENESIS_HASH, VKEYS, VKEYS[i]) for i in range(N_VALIDATORS)]
        self.inbox: dict[int, list[tuple[str, int, int, bytes]]] = defaultdict(list)
        self.refused: dict[str, int] = defaultdict(int)

    def _send(self, kind: str, src: int, dst: int, payload: bytes = b"") -> None:
        if self.rng.random() < LOSS:
            return
        self.inbox[self.height + 1 + self.rng.randint(0, MAX_DELAY)].append((kind, src, dst, payload))

    def step(self) -> frozenset[int]:
        """Deliver what is due, build block ``height + 1``'s PresenceInput, commit it, ping and announce."""
        parent = self.height
        for kind, src, dst, payload in self.inbox.pop(parent + 1, []):
            if kind == "ping":
                self.local[dst].ping(src, parent)
                self.last_ping_height[src] = max(self.last_ping_height.get(src, -1), parent)
            else:  # Node._on_presence_gossip: a refused announcement is counted and dropped
                try:
                    self.gossip[dst].receive(src, payload, parent)
                except GossipRefused as e:
                    self.refused[e.reason] += 1
        proposer = (parent + 1) % N_VALIDATORS
        own = self.local[proposer].present(parent)
        union = own if proposer == self.byzantine else own | self.gossip[proposer].union(parent, N_RUNNERS)
        self.height = parent + 1
        self.inputs[self.height] = union
        for v in range(N_VALIDATORS):  # Node._announce_presence after every committed block
            a = make_announcement(VALIDATOR_SEEDS[v], GENESIS_HASH, self.height, N_RUNNERS,
                                  self.local[v].present(self.height)).encode()
            for w in range(N_VALIDATORS):
                if w != v:
                    self._send("announce", v, w, a)
        for r in sorted(self.live):  # one HeartbeatPing per block to each member of Sub(R)
            for v in sorted(SUBSETS[r]):
                self._send("ping", r, v)
        return union

    def run(self, blocks: int) -> None:
        for _ in range(blocks):
            self.step()


CONVERGENCE_BLOCKS = 12
"""Without loss the union is complete from block 7 on (a ping sent in block 1 lands by block 4, the holder's
announcement of block 4 lands by block 7); 12 leaves room for LOSS."""


def test_sub_r_gives_every_runner_three_of_the_four_validators() -> None:
    assert all(len(s) == 3 for s in SUBSETS)
    # every validator is outside the subset of some runner, so no proposer sees everyone first-hand
    assert all(any(v not in s for s in SUBSETS) for v in range(N_VALIDATORS))


def test_the_proposers_union_converges_to_every_connected_runner() -> None:
    worst = 0
    for seed in range(20):
        sim = Sim(seed)
        sim.run(60)
        incomplete = [h for h, got in sim.inputs.items() if got != EVERYONE]
        first_full = max(incomplete, default=0) + 1
        worst = max(worst, first_full)
        assert first_full <= CONVERGENCE_BLOCKS, (seed, incomplete)
        assert set(sim.refused) <= {"stale"}  # only reordered (late) announcements are refused
        # no proposer's own view is complete (each misses the runners whose Sub(R) excludes it): gossip did it
        assert all(sim.local[v].present(sim.height) != EVERYONE for v in range(N_VALIDATORS))
    print(f"union complete from block {worst} at worst over 20 seeds (loss {LOSS}, delay ≤ {MAX_DELAY})")
    assert worst > 1  # the simulation is not trivially complete from the first block


def test_a_silent_runner_leaves_every_presence_input_within_the_timeout_plus_gossip_ttl() -> None:
    lags = []
    for seed in range(20):
        sim = Sim(seed)
        sim.run(30)
        victim = seed % N_RUNNERS
        assert victim in sim.inputs[sim.height]
        sim.live.discard(victim)  # kill -9: no more pings, no Goodbye
        killed_at = sim.height
        sim.run(PRESENCE_TIMEOUT_BLOCKS + GOSSIP_TTL_BLOCKS + MAX_DELAY + 10)
        last_ping = sim.last_ping_height[victim]
        bound = last_ping + PRESENCE_TIMEOUT_BLOCKS + 1 + GOSSIP_TTL_BLOCKS
        last_marked = max(h for h, got in sim.inputs.items() if victim in got)
        assert killed_at <= last_marked <= bound, (seed, killed_at, last_ping, last_marked)
        assert all(got == EVERYONE - {victim} for h, got in sim.inputs.items() if h > bound), seed
        # and the bound is not loose by more than the gossip TTL: the runner stays marked at least T blocks
        assert last_marked >= last_ping + PRESENCE_TIMEOUT_BLOCKS
        lags.append(last_marked - last_ping)
    print(f"last marked − last recorded ping: {min(lags)}..{max(lags)} blocks (bound "
          f"{PRESENCE_TIMEOUT_BLOCKS + 1 + GOSSIP_TTL_BLOCKS})")


# --- selection under a byzantine proposer -----------------------------------------------------------------------

RECORDS = sorted((runner(private_key_to_address(sk), i, last_heartbeat=0) for i, sk in enumerate(RUNNER_SKS)),
                 key=lambda r: r.address)
"""Registry records, equal stake/reputation/price (so equal weights); the floor is evaluated at ``height`` with a
heartbeat timeout covering the whole run."""
BYZ = 0
BYZ_OWN = frozenset(r for r in range(N_RUNNERS) if BYZ in SUBSETS[r])
"""The runners holding a session with the byzantine validator: the only ones it marks present."""
OUTSIDERS = EVERYONE - BYZ_OWN


def _draw(height: int, present: frozenset[int], m: int, *, n_validators: int = N_VALIDATORS) -> list[int]:
    pool = eligible(RECORDS, REQ, height=height, heartbeat_timeout_blocks=HEARTBEAT_TIMEOUT, cfg=CFG)
    assert len(pool) == N_RUNNERS  # the floor: every runner is eligible whatever presence says
    seed = keccak256(b"sim beacon" + height.to_bytes(8, "big"))
    got = select_committee(pool, present, m, seed, CFG, present_first=True,
                           membership_over_full_set=membership_over_full_set(n_validators, m), mru_address=None)
    return [r.index for r in got]


def test_a_byzantine_proposer_cannot_exclude_an_eligible_runner() -> None:
    sim = Sim(7, byzantine=BYZ)
    sim.run(40)
    byz_blocks = [h for h in sim.inputs if h % N_VALIDATORS == BYZ and h > CONVERGENCE_BLOCKS]
    assert byz_blocks and OUTSIDERS
    for h in byz_blocks:
        assert sim.inputs[h] <= BYZ_OWN and not sim.inputs[h] & OUTSIDERS  # it really suppresses them
        # fail-open: the suppressed runners stay in the fallback pool and are drawn once the present pool runs dry
        assert set(_draw(h, sim.inputs[h], N_RUNNERS)) == EVERYONE
        assert set(_draw(h, sim.inputs[h], len(sim.inputs[h]) + 1)) & OUTSIDERS
        # M > 1 on n > 1 (§7.3): membership ignores presence entirely, so the byzantine input changes nothing
        assert _draw(h, sim.inputs[h], 3) == _draw(h, EVERYONE, 3) == _draw(h, frozenset(), 3)


def test_a_byzantine_proposers_bias_is_bounded_by_its_own_slots() -> None:
    """§8.2: damage is bounded to that proposer's own slots. Over many blocks the M = 1 share of the runners it
    favours is at most (1 − 1/n)·fair + 1/n (every one of its slots, fair odds in the others), and every outsider
    keeps winning jobs in honest slots."""
    blocks = 400
    sim = Sim(11, byzantine=BYZ)
    sim.run(blocks)
    wins: dict[int, int] = defaultdict(int)
    counted = 0
    for h in range(CONVERGENCE_BLOCKS + 1, blocks + 1):
        (winner,) = _draw(h, sim.inputs[h], 1)
        wins[winner] += 1
        counted += 1
    own_share = sum(wins[r] for r in BYZ_OWN) / counted
    fair = len(BYZ_OWN) / N_RUNNERS  # equal weights: the honest (complete) union gives each runner 1/30
    bound = (1 - 1 / N_VALIDATORS) * fair + 1 / N_VALIDATORS
    print(f"byzantine-favoured share {own_share:.3f} (fair {fair:.3f}, §8.2 slot bound {bound:.3f}, "
          f"{len(BYZ_OWN)} of {N_RUNNERS} runners, {counted} blocks)")
    assert own_share > fair  # the bias is real (the test would catch a selection that ignored presence) ...
    assert own_share <= bound + 0.05  # ... and bounded (0.05: sampling noise over ~390 draws)
    assert all(wins[r] > 0 for r in OUTSIDERS), {r: wins[r] for r in OUTSIDERS}
    # in the byzantine slots themselves every win went to its own runners; in honest slots outsiders get theirs
    for h in range(CONVERGENCE_BLOCKS + 1, blocks + 1):
        if h % N_VALIDATORS == BYZ:
            assert _draw(h, sim.inputs[h], 1)[0] in BYZ_OWN


def test_the_simulation_is_deterministic() -> None:
    a, b = Sim(3, byzantine=BYZ), Sim(3, byzantine=BYZ)
    a.run(25)
    b.run(25)
    assert a.inputs == b.inputs

"""The selection index (docs/selection.md) against the linear M = 1 path it replaces, on a random corpus.

The reference here is the pre-index implementation, kept verbatim in spirit: run the filter chain over every
record in registry order, weigh each candidate with ``cip2_v3_weight``, partition stably by presence, and
walk the weights literally (``ref_walk``, written from the §9.2 text) with the MRU multiplier at iteration 0.
The corpus mutates the registry the ways a chain does (heartbeats, health flaps, capability, price, stake and
reputation changes, assignments, new registrations, reverted checkpoints, commits, fresh worlds on a
committed root, a changed RunnerConfig, the height moving) and compares after every step.
"""

from __future__ import annotations

import random
from dataclasses import replace

from cowboy_node.execution.context import BlockContext, BlockEnv
from cowboy_node.execution.jobs import selection_index
from cowboy_node.execution.jobs.filters import SelectionRequest, eligible
from cowboy_node.execution.jobs.weights import cip2_v3_weight
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.execution.system_state import get_runner_config, set_runner_config
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.tree import StateTree
from cowboy_node.state.world import WorldState
from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.fields import U128_MAX
from cowboy_protocol.types.params import BasefeeConfig, ChainLimits, Cip11Flags, RunnerConfig
from cowboy_protocol.types.runner import JOB_KIND_HTTP, JOB_KIND_LLM, Health, RunnerRecord
from tests.unit.execution.jobs.test_selection_draw import seed_n
from tests.unit.execution.jobs.test_selection_support import STAKE, addr, ref_ticket, ref_walk, runner

TIMEOUT = 20
KINDS = (JOB_KIND_HTTP, JOB_KIND_LLM)
HOSTS = (None, "api.example.com", "x.other.org")
DOMAINS = (("*",), ("*.example.com",), ("x.other.org",), ("api.example.com", "x.other.org"))


def ref_m1(records: list[RunnerRecord], req: SelectionRequest, height: int, cfg: RunnerConfig,
           present: frozenset[int], mru: bytes | None, seed: bytes) -> tuple[int, list[bytes]]:
    """(eligible count, committee) as the linear path computed them before the index."""
    cands = eligible(records, req, height=height, heartbeat_timeout_blocks=TIMEOUT, cfg=cfg)
    pools = ([r for r in cands if r.index in present], [r for r in cands if r.index not in present])
    pool = pools[0] if pools[0] else pools[1]
    if not pool:
        return len(cands), []
    weights = [cip2_v3_weight(r.stake, r.reputation_x1e9, cfg) for r in pool]
    addresses = [r.address for r in pool]
    if mru is not None and mru in addresses:
        weights[addresses.index(mru)] *= cfg.mru_weight_multiplier
    total = sum(weights)
    if total == 0:
        return len(cands), []
    assert total <= U128_MAX
    return len(cands), [addresses[ref_walk(weights, ref_ticket(seed, 0, total))]]


def random_runner(rng: random.Random, address: bytes, index: int, height: int) -> RunnerRecord:
    kinds = tuple(k for k in KINDS if rng.random() < 0.8) or (JOB_KIND_LLM,)
    stake = rng.choice((0, 1, STAKE, rng.randrange(1, 50) * STAKE, rng.randrange(1, 9) * 10**6))
    return runner(address, index, stake=stake,
                  rep=rng.choice((0, 40_000_000_000, 50_000_000_000, rng.randrange(50, 400) * 10**9)),
                  kinds=kinds, domains=rng.choice(DOMAINS), max_jobs=rng.randrange(1, 4),
                  active=rng.randrange(0, 3), tee=rng.choice(((), ("sgx",), ("sgx", "tdx"))),
                  pools=rng.choice(((), (b"p1",), (b"p1", b"p2"))), base_price=rng.choice((10, 100, 1_000)),
                  health=rng.choice((Health.HEALTHY,) * 6 + (Health.UNHEALTHY, Health.PAUSED, Health.DEREGISTERED)),
                  last_heartbeat=max(0, height - rng.randrange(0, 2 * TIMEOUT)))


def mutate(rng: random.Random, rec: RunnerRecord, height: int) -> RunnerRecord:
    caps = rec.capabilities
    choice = rng.randrange(9)
    if choice == 0:
        return replace(rec, last_heartbeat=height)  # a heartbeat
    if choice == 1:
        return replace(rec, health=rng.choice(list(Health)))  # a health flap
    if choice == 2:
        return replace(rec, active_jobs=max(0, rec.active_jobs + rng.choice((-1, 1))))  # assignment / release
    if choice == 3:
        return replace(rec, reputation_x1e9=rng.randrange(0, 300) * 10**9)
    if choice == 4:
        return replace(rec, stake=rng.choice((0, STAKE, rng.randrange(1, 50) * STAKE, rng.randrange(1, 9) * 10**6)))
    if choice == 5:
        return replace(rec, capabilities=replace(caps, http_domains=rng.choice(DOMAINS)))
    if choice == 6:
        return replace(rec, capabilities=replace(caps, tee_types=rng.choice(((), ("sgx",)))))
    if choice == 7:
        fresh = runner(rec.address, rec.index, base_price=rng.choice((10, 100, 1_000)),
                       kinds=tuple(k for k, _r in rec.rate_card.rates))
        return replace(rec, rate_card=fresh.rate_card)
    return replace(rec, last_heartbeat=max(0, height - rng.randrange(0, 2 * TIMEOUT)))


class Scenario:
    """A registry in a committed store, a current world over it, and the reference records."""

    def __init__(self, rng: random.Random, n: int) -> None:
        self.rng = rng
        self.height = 100
        self.store = MemoryStore()
        self.tree = StateTree(self.store, b"n/")
        self.world = WorldState(self.store, self.tree, data_prefix=b"s/")
        for _ in range(n):
            self.register()
        self.commit()

    def register(self) -> None:
        address = keccak256(self.rng.randbytes(8))[:20]
        index, _ = store.append_active_runner(self.world, address)
        store.put_runner(self.world, random_runner(self.rng, address, index, self.height))

    def commit(self) -> None:
        _root, ops = self.world.prepare_commit()
        self.store.write_batch(ops)
        self.world.mark_committed()

    def records(self) -> list[RunnerRecord]:
        return store.runners_in_index_order(self.world)

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        recs = self.records()
        if roll < 0.45:
            for _ in range(rng.randrange(1, 4)):
                r = rng.choice(recs)
                store.put_runner(self.world, mutate(rng, r, self.height))
        elif roll < 0.55:
            self.register()
        elif roll < 0.65:  # writes undone by a revert
            cp = self.world.checkpoint()
            for r in rng.sample(recs, min(3, len(recs))):
                store.put_runner(self.world, mutate(rng, r, self.height))
            if rng.random() < 0.5:
                self.register()
            self.world.revert(cp)
        elif roll < 0.8:  # the block commits; the next one is one higher, sometimes on a new world
            self.commit()
            self.height += rng.randrange(1, 3)
            if rng.random() < 0.5:
                self.world = WorldState(self.store, self.tree, data_prefix=b"s/")
        elif roll < 0.85:
            cfg = get_runner_config(self.world)
            set_runner_config(self.world, replace(cfg, min_reputation_x1e9=rng.choice((0, 50_000_000_000)),
                                                  w_min_floor_x1e6=rng.choice((0, 100_000, 500_000))))
        else:
            self.height += 1

    def ctx(self) -> BlockContext:
        env = BlockEnv(chain_id="t", height=self.height, timestamp_ms=0, fee_recipient=bytes(20), beacon=b"",
                       parent_beacon=b"", parent_state_root=bytes(32))
        return BlockContext(env=env, basefee_config=BasefeeConfig(),
                            limits=ChainLimits(heartbeat_timeout_blocks=TIMEOUT), flags=Cip11Flags.for_phase(2),
                            system_deployers=(), cycle_basefee=1, cell_basefee=1)


def random_request(rng: random.Random) -> SelectionRequest:
    kind = rng.choice(KINDS)
    return SelectionRequest(job_kind=kind, http_host=rng.choice(HOSTS) if kind == JOB_KIND_HTTP else None,
                            tee_required=rng.random() < 0.15, required_tee_type=rng.choice((None,) * 5 + ("sgx",)),
                            max_price=rng.choice((10**6,) * 6 + (100,)),
                            required_runner_pool=rng.choice((None,) * 5 + (b"p1",)))


def test_index_draws_what_the_linear_path_draws_on_a_mutating_random_corpus() -> None:
    fast_taken = compared = 0
    for case in range(40):
        rng = random.Random(case)
        sc = Scenario(rng, rng.randrange(1, 40))
        for _step in range(25):
            sc.step()
            recs = sc.records()
            addresses = [r.address for r in recs]
            for _job in range(3):
                req = random_request(rng)
                present = frozenset(i for i in range(len(recs)) if rng.random() < rng.choice((0.0, 0.3, 0.9)))
                mru = rng.choice((None, rng.choice(addresses), addr(0xEE)))
                seed = keccak256(rng.randbytes(16))
                cfg = get_runner_config(sc.world)
                count, expected = ref_m1(recs, req, sc.height, cfg, present, mru, seed)
                sel = selection_index.m1_selection(sc.world, sc.ctx(), req, present)
                compared += 1
                if sel is None:  # the linear path runs: allowed only for its three reasons
                    priced_out = any(r.address in {c.address for c in eligible(
                        recs, replace(req, max_price=1 << 200), height=sc.height, heartbeat_timeout_blocks=TIMEOUT,
                        cfg=cfg)} and r.rate_card.rates and min(x.base_price for k, x in r.rate_card.rates
                                                                 if k == req.job_kind) > req.max_price for r in recs)
                    assert count == 0 or priced_out or req.excluded, (case, _step)
                    continue
                fast_taken += 1
                assert sel.view.count == count, (case, _step)
                got = [r.address for r in sel.draw(seed, mru, cfg.mru_weight_multiplier)]
                assert got == expected, (case, _step)
    assert fast_taken > compared // 3  # the comparison is not vacuous


def test_index_matches_the_pinned_present_first_vector() -> None:
    """The §9.2 pin of test_selection_draw (iteration 0: present pool [0x20, 0x30, 0x40], winner 0x20)."""
    st = MemoryStore()
    world = WorldState(st, StateTree(st, b"n/"), data_prefix=b"s/")
    regs = [runner(0x30, 0, stake=3 * STAKE, rep=100_000_000_000), runner(0x10, 1, stake=STAKE, rep=72_250_000_000),
            runner(0x40, 2, stake=5 * STAKE, rep=64_000_000_000), runner(0x20, 3, stake=2 * STAKE, rep=81_000_000_000)]
    for r in regs:
        store.append_active_runner(world, r.address)
        store.put_runner(world, r)
    env = BlockEnv(chain_id="t", height=1_000, timestamp_ms=0, fee_recipient=bytes(20), beacon=b"", parent_beacon=b"",
                   parent_state_root=bytes(32))
    ctx = BlockContext(env=env, basefee_config=BasefeeConfig(), limits=ChainLimits(heartbeat_timeout_blocks=100),
                       flags=Cip11Flags.for_phase(2), system_deployers=(), cycle_basefee=1, cell_basefee=1)
    req = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                           max_price=10**6, required_runner_pool=None)
    sel = selection_index.m1_selection(world, ctx, req, frozenset({0, 2, 3}))
    assert sel is not None and sel.view.count == 4
    assert [r.address for r in sel.draw(seed_n(2), None, 4)] == [addr(0x20)]
    # MRU on the present winner's neighbour: the ticket is re-drawn over the scaled total, as the walk does
    total = 18 * STAKE // 10 + 3 * STAKE * 4 + 4 * STAKE
    expected = [addr(0x20), addr(0x30), addr(0x40)][ref_walk([18 * STAKE // 10, 12 * STAKE, 4 * STAKE],
                                                             ref_ticket(seed_n(2), 0, total))]
    assert [r.address for r in sel.draw(seed_n(2), addr(0x30), 4)] == [expected]


def test_excluded_runners_or_nobody_eligible_send_the_job_down_the_linear_path() -> None:
    sc = Scenario(random.Random(7), 5)
    req = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                           max_price=10**6, required_runner_pool=b"no-such-pool")
    assert selection_index.m1_selection(sc.world, sc.ctx(), req, frozenset()) is None
    req2 = replace(req, required_runner_pool=None, excluded=frozenset({addr(1)}))
    assert selection_index.m1_selection(sc.world, sc.ctx(), req2, frozenset()) is None


def test_index_mru_draw_on_tiny_weights_hits_every_boundary_as_the_walk_does() -> None:
    """Weights of a few units make tickets land on every running-sum boundary, with and without the MRU."""
    st = MemoryStore()
    world = WorldState(st, StateTree(st, b"n/"), data_prefix=b"s/")
    cfg = RunnerConfig()
    regs = [runner(0x10 + i, i, stake=s, rep=100_000_000_000) for i, s in enumerate((1, 0, 3, 2, 1))]
    for r in regs:
        store.append_active_runner(world, r.address)
        store.put_runner(world, r)
    ctx = Scenario.ctx(_Height(1_000))  # type: ignore[arg-type]
    req = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                           max_price=10**6, required_runner_pool=None)
    for present in (frozenset(), frozenset({0, 2, 3})):
        sel = selection_index.m1_selection(world, ctx, req, present)
        assert sel is not None
        for mru in (None, *(r.address for r in regs)):
            for k in range(120):
                seed = keccak256(k.to_bytes(2, "big"))
                _count, expected = ref_m1(regs, req, 1_000, cfg, present, mru, seed)
                assert [r.address for r in sel.draw(seed, mru, cfg.mru_weight_multiplier)] == expected, (mru, k)


class _Height:
    def __init__(self, height: int) -> None:
        self.height = height


def test_a_world_whose_base_moves_under_it_rebuilds_its_index() -> None:
    """Two worlds on one store and tree: B commits registry changes while A still holds an index."""
    rng = random.Random(11)
    sc = Scenario(rng, 12)
    a = sc.world
    b = WorldState(sc.store, sc.tree, data_prefix=b"s/")
    req = SelectionRequest(job_kind=JOB_KIND_LLM, http_host=None, tee_required=False, required_tee_type=None,
                           max_price=10**6, required_runner_pool=None)
    assert selection_index.m1_selection(a, sc.ctx(), req, frozenset()) is not None  # A builds its index
    for r in store.runners_in_index_order(b):  # B makes everyone but one runner ineligible, and commits
        if r.index:
            store.put_runner(b, replace(r, health=Health.UNHEALTHY))
        else:
            store.put_runner(b, runner(r.address, 0, rep=100_000_000_000, last_heartbeat=sc.height))
    _root, ops = b.prepare_commit()
    sc.store.write_batch(ops)
    b.mark_committed()
    sel = selection_index.m1_selection(a, sc.ctx(), req, frozenset())
    assert sel is not None and sel.view.count == 1
    assert [r.index for r in sel.draw(seed_n(1), None, 4)] == [0]

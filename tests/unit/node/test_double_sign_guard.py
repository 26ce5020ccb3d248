"""The double-sign guard (issue 30 §1, CometBFT's ``double_sign_check_height``): a validator of several that starts
without its vote journal signs no vote until it is in sync and has watched ``[consensus] double_sign_check_views``
views; a durable marker makes a crash during the watch restart it; ``run --fresh-key``, ``double_sign_check_views
= 0`` and a single validator vote at once; ``init`` and ``testnet`` create the journal so a new network votes from
view 1. The engine's abstention (``Config.vote_above_view``) is checked on its own too."""

from __future__ import annotations

import hashlib
import stat
import threading
from pathlib import Path

import pytest

from cowboy_node.chain.chain import Chain
from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.cli.main import main
from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE, WATCH_STEP, DoubleSignGuard, VoteJournal, marker_path
from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import Broadcast, Config, Engine, Journal, ProposalWanted
from cowboy_node.consensus.simplex.scheme import ThresholdScheme
from cowboy_node.consensus.simplex.types import Fetch, Notarization, Notarize, Nullify, Proposal
from cowboy_node.crypto import bls, threshold
from cowboy_node.node.config import load_config, render_config
from cowboy_node.node.consensus_service import ConsensusService, ServiceConfig
from cowboy_node.node.devgenesis import create_genesis
from cowboy_node.node.testnet import create_testnet
from cowboy_node.observability.metrics import NodeMetrics
from cowboy_node.state.memory import MemoryStore
from cowboy_node.types.block import Round
from cowboy_protocol.crypto import ed25519
from tests.helpers import ALICE, ALICE_FUNDS, CHAIN_ID
from tests.unit.node.journal_harness import (
    act,
    notarization,
    notarize,
    nullification,
    own_votes_sent,
    proposal,
    service,
)
from tests.unit.node.test_consensus_preverify import _Net, _scheme

WATCH = 3


class _Driver:
    """Moves validator 0's engine through views with nullifications of the other three, on an explicit clock."""

    def __init__(self, svc: ConsensusService, net: _Net) -> None:
        self.svc, self.net, self.t = svc, net, 1_000

    @property
    def view(self) -> int:
        assert self.svc.engine is not None
        return self.svc.engine.view

    def offer_proposal(self) -> Proposal:
        """The current view's leader proposes (on genesis, every view before nullified) and the host verifies it:
        an engine allowed to vote notarizes it."""
        engine = self.svc.engine
        assert engine is not None
        view = engine.view
        leader = engine.leader_of(view)
        assert leader is not None
        p = proposal(self.svc, view)
        self.t += 1
        if leader == 0:
            act(self.svc, engine.propose(Round(0, view), p.payload, self.t))
        else:
            act(self.svc, engine.receive(leader, notarize(leader, p), self.t))
            act(self.svc, engine.verified(p, True, self.t))
        return p

    def next_view(self, to: int | None = None) -> None:
        """A nullification of the current view (or of ``to - 1``: a jump) arrives."""
        engine = self.svc.engine
        assert engine is not None
        self.t += 1
        act(self.svc, engine.receive(1, nullification((to or engine.view + 1) - 1), self.t))

    def timeout(self) -> None:
        engine = self.svc.engine
        assert engine is not None
        self.t += 10**7
        act(self.svc, engine.tick(self.t))


def _votes_in(net: _Net, view: int) -> list[object]:
    return [v for v in own_votes_sent(net) if v.round.view == view]


# ------------------------------------------------------------------------------------------------ the watch


def test_a_validator_without_its_journal_votes_only_after_being_in_sync_and_watching(tmp_path: Path) -> None:
    svc, net = service(tmp_path, journal=False, double_sign_check_views=WATCH)
    journal = tmp_path / VOTE_JOURNAL_FILE
    marker = marker_path(journal)
    seen_at_load: list[bool] = []
    assert svc.journal is not None
    real_load = svc.journal.load

    def load() -> list[object]:
        seen_at_load.append(marker.exists())  # the marker is durable before the journal is created
        return list(real_load())

    svc.journal.load = load  # type: ignore[method-assign]
    svc.start_engine()
    assert seen_at_load == [True] and journal.exists() and marker.exists()
    status = svc.status_json()["voting"]
    assert status["enabled"] is False and status["reason"] == "no_vote_journal"
    assert svc.metrics.consensus_voting._value.get() == 0

    d = _Driver(svc, net)
    svc.resolver.syncing = True  # behind the network: nothing counts
    for _ in range(2 * WATCH):
        d.offer_proposal()
        d.next_view()
    assert own_votes_sent(net) == [] and svc.status_json()["voting"]["until_view"] is None
    svc.resolver.syncing = False
    d.next_view()
    start = d.view
    assert svc.status_json()["voting"]["until_view"] == start + WATCH
    while d.view < start + WATCH:
        d.offer_proposal()
        d.timeout()  # would nullify
        assert own_votes_sent(net) == [], f"voted while watching (view {d.view})"
        d.next_view()
    # the engine entered WATCH views since the watch started: the node votes from the next view on
    assert svc.engine is not None and svc.engine.votes_above == start + WATCH
    assert not marker.exists()
    assert svc.status_json()["voting"] == {"enabled": True, "reason": None, "until_view": None}
    assert svc.metrics.consensus_voting._value.get() == 1
    d.offer_proposal()  # in the view where the watch ended: still no vote
    assert own_votes_sent(net) == []
    d.next_view()
    d.offer_proposal()
    assert [type(v) for v in _votes_in(net, d.view)] == [Notarize]
    assert [type(v) for v in VoteJournal(journal).load()] == [Notarize]  # journaled too


def test_a_view_jump_restarts_the_count(tmp_path: Path) -> None:
    svc, net = service(tmp_path, journal=False, double_sign_check_views=WATCH)
    svc.start_engine()
    d = _Driver(svc, net)
    d.next_view()
    d.next_view()
    assert svc.status_json()["voting"]["until_view"] == 1 + WATCH
    d.next_view(to=d.view + 50)  # an old certificate made us catch up: that is not watching
    jumped = d.view
    assert svc.status_json()["voting"]["until_view"] == jumped + WATCH
    for _ in range(WATCH - 1):
        d.next_view()
        d.offer_proposal()
    assert own_votes_sent(net) == [] and svc.status_json()["voting"]["enabled"] is False


def test_a_crash_during_the_watch_restarts_it(tmp_path: Path) -> None:
    svc, net = service(tmp_path, journal=False, double_sign_check_views=WATCH)
    svc.start_engine()
    d = _Driver(svc, net)
    for _ in range(WATCH - 1):
        d.next_view()
    assert svc.journal is not None
    svc.journal.close()  # crash: the journal now exists (empty), the marker too
    journal = tmp_path / VOTE_JOURNAL_FILE
    assert journal.exists() and marker_path(journal).exists()

    again, net2 = service(tmp_path, journal=False, double_sign_check_views=WATCH)
    again.start_engine()
    assert again.status_json()["voting"]["enabled"] is False
    assert again.status_json()["voting"]["reason"] == "no_vote_journal"
    d2 = _Driver(again, net2)
    d2.offer_proposal()
    d2.timeout()
    assert own_votes_sent(net2) == []


def test_fresh_key_votes_at_once_without_a_journal(tmp_path: Path) -> None:
    svc, net = service(tmp_path, journal=False, double_sign_check_views=WATCH, fresh_key=True)
    svc.start_engine()
    assert not marker_path(tmp_path / VOTE_JOURNAL_FILE).exists()
    assert svc.status_json()["voting"]["enabled"] is True
    _Driver(svc, net).offer_proposal()
    assert [type(v) for v in own_votes_sent(net)] == [Notarize]


def test_double_sign_check_views_0_turns_the_guard_off(tmp_path: Path) -> None:
    svc, net = service(tmp_path, journal=False, double_sign_check_views=0)
    svc.start_engine()
    _Driver(svc, net).offer_proposal()
    assert [type(v) for v in own_votes_sent(net)] == [Notarize]


def test_a_validator_with_its_journal_votes_at_once(tmp_path: Path) -> None:
    svc, net = service(tmp_path, journal=True, double_sign_check_views=WATCH)
    svc.start_engine()
    _Driver(svc, net).offer_proposal()
    assert [type(v) for v in own_votes_sent(net)] == [Notarize]


def test_a_single_validator_is_exempt(tmp_path: Path) -> None:
    """Alone, there is no network to watch and nobody else's votes to combine with an old one of ours."""
    one = create_genesis(chain_id=CHAIN_ID, n_validators=1, fee_recipients=[b"\x70" * 20],
                         balances={ALICE: ALICE_FUNDS}, system_deployers=(ALICE,), genesis_time_ms=1_700_000_000_000,
                         entropy=bytes(range(100)))
    k = one.validator_keys[0]
    g = one.genesis
    scheme = ThresholdScheme(g.group_public_key, g.share_public_keys(), g.threshold,
                             threshold.Share(k.bls_share_index, bls.secret_key_from_bytes(k.bls_secret)))
    seed = k.ed25519_seed
    svc = ConsensusService(
        Chain(MemoryStore(), g), config=ServiceConfig(me=0, block_time_ms=500, delta_ms=60_000,
                                                      double_sign_check_views=WATCH),
        scheme=scheme, tree_lock=threading.Lock(), proposer_key=ed25519.public_key_from_seed(seed),
        sign=lambda d: ed25519.sign(seed, d), fee_recipient=g.validators[0].fee_recipient, take_transactions=list,
        presence=lambda w: b"\x01\x00", inspect=lambda p, e, o: None, on_commit=lambda c: None,
        admit_gossip=lambda b: None, metrics=NodeMetrics(), journal=VoteJournal(tmp_path / VOTE_JOURNAL_FILE))
    svc.start_engine()
    assert svc.engine is not None and svc.engine.votes_above == 0
    assert svc.status_json()["voting"]["enabled"] is True
    assert not marker_path(tmp_path / VOTE_JOURNAL_FILE).exists()
    outs = svc.engine.propose(Round(0, 1), hashlib.sha256(b"b").digest(), 1)
    assert any(isinstance(o, Journal) for o in outs)


def test_the_guard_counts_views_entered_one_by_one_while_in_sync() -> None:
    g = DoubleSignGuard(3)
    assert not g.observe(1, syncing=False) and g.until_view == 4
    assert not g.observe(2, syncing=False) and not g.observe(3, syncing=False)
    assert not g.observe(4, syncing=True) and g.until_view is None  # syncing: start over
    assert not g.observe(40, syncing=False) and g.until_view == 43
    assert not g.observe(41, syncing=False) and not g.observe(41, syncing=False) and not g.observe(42, syncing=False)
    assert g.observe(43, syncing=False) and g.done
    with pytest.raises(ValueError):
        DoubleSignGuard(0)


def test_the_guard_counts_short_jumps_as_watching_and_starts_over_on_a_long_one() -> None:
    """One input often moves a live engine two or three views (a certificate of the next view arrives first);
    a watch that restarted on each would never end under load. A jump longer than WATCH_STEP is catching up."""
    g = DoubleSignGuard(10)
    assert not g.observe(100, syncing=False) and g.until_view == 110
    for v in (102, 105, 106, 109):  # jumps of 2, 3, 1, 3
        assert not g.observe(v, syncing=False) and g.until_view == 110
    assert g.observe(110, syncing=False) and g.done
    g = DoubleSignGuard(10)
    g.observe(100, syncing=False)
    assert not g.observe(100 + WATCH_STEP + 1, syncing=False) and g.until_view == 100 + WATCH_STEP + 1 + 10


# ------------------------------------------------------------------------------------------------ engine abstention


def test_an_abstaining_engine_signs_nothing_but_follows_certificates() -> None:
    genesis = bytes(32)
    e = Engine(Config(me=0, delta_ms=100, genesis=genesis, election=Election.ROUND_ROBIN, vote_above_view=2),
               _scheme(0))
    outs = e.start(0)
    p = Proposal(Round(0, 1), 0, genesis, hashlib.sha256(b"1").digest())
    outs += e.receive(1, notarize(1, p), 1)
    outs += e.verified(p, True, 2)
    outs += e.tick(1_000)  # timeout: would nullify
    cert: Notarization = notarization(p)
    outs += e.receive(2, cert, 1_001)  # would finalize
    assert e.view == 2  # the certificate moved it on
    assert Broadcast(cert) in outs  # and it is relayed as usual
    assert not [o for o in outs if isinstance(o, Journal)]
    assert not [o for o in outs if isinstance(o, Broadcast) and getattr(o.message, "signer", None) == 0]
    answers = e.receive(3, Fetch(0, (1,)), 1_002)  # Fetch answers work
    assert any(getattr(o, "message", None) == cert for o in answers)
    outs = e.tick(2_000)  # view 2 times out: still at or below the limit
    assert not [o for o in outs if isinstance(o, Journal)]
    e.allow_votes_above(2)
    outs = e.receive(1, nullification(2), 2_001)
    outs += e.tick(3_000)
    assert [type(o.vote) for o in outs if isinstance(o, Journal)] == [Nullify]  # view 3: votes again
    assert e.votes_above == 2


def test_an_abstaining_leader_asks_for_no_block() -> None:
    """Building a block it cannot propose would cost the node a full build per led view (and its proposal
    would be a notarize it must not sign): the engine asks for none until it votes again."""
    genesis = bytes(32)
    e = Engine(Config(me=0, delta_ms=100, genesis=genesis, election=Election.ROUND_ROBIN, vote_above_view=8),
               _scheme(0))
    outs = e.start(0)
    led: list[int] = []
    for view in range(1, 13):
        if e.leader_of(e.view) == 0:
            led.append(e.view)
        if e.view == 9:
            assert not [o for o in outs if isinstance(o, ProposalWanted)]  # led views ≤ 8: nothing asked
            outs = []
        outs += e.receive(1, nullification(view), 10 * view)
    assert any(v <= 8 for v in led) and any(v > 8 for v in led)
    assert [o.round.view for o in outs if isinstance(o, ProposalWanted)] == [v for v in led if v > 8]


# ------------------------------------------------------------------------------------------------ homes and config


def test_init_creates_an_empty_vote_journal(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert main(["init", "--home", str(home)]) == 0
    journal = home / "data" / VOTE_JOURNAL_FILE
    assert journal.read_bytes() == b"" and stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert VoteJournal(journal).load() == []


def test_testnet_creates_an_empty_vote_journal_in_every_home(tmp_path: Path) -> None:
    layout = create_testnet(tmp_path / "net", 4, base_port=0)
    for h in layout.validators:
        journal = h.home / "data" / VOTE_JOURNAL_FILE
        assert journal.read_bytes() == b"" and stat.S_IMODE(journal.stat().st_mode) == 0o600
        assert not marker_path(journal).exists()


def test_double_sign_check_views_is_read_and_validated(tmp_path: Path) -> None:
    text = render_config(chain_id="c", rpc_addr="127.0.0.1:4000", quic_addr="127.0.0.1:4433",
                         metrics_addr="127.0.0.1:9464", block_time_ms=1000)
    assert "# double_sign_check_views = 10" in text
    (tmp_path / "config.toml").write_text(text)
    assert load_config(tmp_path).consensus_double_sign_check_views == 10
    (tmp_path / "config.toml").write_text(text.replace("# double_sign_check_views = 10", "double_sign_check_views = 0"))
    assert load_config(tmp_path).consensus_double_sign_check_views == 0
    for bad in ("-1", '"10"', "100001"):
        (tmp_path / "config.toml").write_text(
            text.replace("# double_sign_check_views = 10", f"double_sign_check_views = {bad}"))
        with pytest.raises(ConfigError) as info:
            load_config(tmp_path)
        assert "consensus.double_sign_check_views" in str(info.value)

"""Deterministic simulation of Simplex engines: a seeded fake clock, an in-memory network with latency, loss
and partitions, crashes with journal restarts, and byzantine roles (after commonware's ``simplex/mocks``).

Everything random comes from one ``random.Random(seed)``: a seed replays the same run exactly.

Crash model (as the consensus service persists): each own vote is appended to the validator's journal before it
is broadcast. A crash may tear the journal (``torn``): the node then dies in the middle of its next append, so the
record is incomplete — ``VoteJournal.load`` drops a torn tail — and the vote it was appending is never sent. The
host commits finalized blocks through a queue lagging the engine by up to ``commit_lag`` blocks, and compacts the
journal after a commit once it holds more than ``compact_over`` records: ``compaction="committed"`` keeps the votes
above the committed view (the correct rule), ``"finalized"`` keeps ``engine.own_votes()`` — the votes above the
engine's finalized view, what the service did before issue 30 (unsafe: see ``test_sim_buggy_compaction``). A
restart begins from the committed head (``Config.floor_view``/``genesis`` are the last committed block), not from
what the engine had finalized; the blocks between are finalized again and must be the same.

WAN model (``wan=Wan(...)``, issue 33 §2, ``simwan.py``): every link gets a fixed one-way latency drawn once
from a log-normal (clipped to 30–150 ms) by its own seeded generator, each message adds exponential jitter, 1 % of
messages are lost, and each validator is one CPU: every event it handles costs virtual time — the scheme
operations it performs (:class:`CryptoCosts`, measured on the real BLS scheme by ``bench/consensus_scale.py``,
fixed in the unit test) plus a per-message cost — and events arriving while it is busy wait in its FIFO. A few
slow validators take ``slow_factor`` times as long and hold every output ``slow_delay_ms`` more. Deterministic
given the seed and the costs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from cowboy_node.consensus.simplex.elector import Election
from cowboy_node.consensus.simplex.engine import (
    Broadcast,
    Config,
    Engine,
    Faulty,
    Finalized,
    Journal,
    Notarized,
    Nullified,
    Output,
    ProposalWanted,
    SeedRevealed,
    Send,
    VerifyBlock,
)
from cowboy_node.consensus.simplex.scheme import Scheme, quorum_size
from cowboy_node.consensus.simplex.types import (
    MAX_FETCH_VIEWS,
    Certificate,
    Fetch,
    Finalization,
    Finalize,
    Message,
    Notarization,
    Notarize,
    Nullification,
    Nullify,
    Proposal,
    Vote,
    decode_message,
    encode_message,
    finalize_message,
    notarize_message,
    nullify_message,
    seed_message,
)
from cowboy_node.types.block import Round
from tests.unit.consensus.simwan import CostingScheme, Wan, WanStats

GENESIS = hashlib.sha256(b"sim-genesis").digest()
ROLES = ("equivocator", "conflicter", "nuller", "silent", "outdated", "impersonator", "bad_parent", "forger",
         "withholder", "fetch_abuser")
"""Byzantine roles. ``bad_parent``: as leader, signs (correctly) proposals on a wrong parent digest, an
uncertified parent view, or a certified parent that skips views without nullification. ``forger``: sends forged
certificates (random-byte signatures, a real certificate with another seed, views far above the current one) and
answers every Fetch with junk. ``withholder``: sends its votes of each view only to a subset of peers chosen per
view. ``fetch_abuser``: floods Fetch for many views (below, around and far above the current one) all the time."""


# ------------------------------------------------------------------------------------------------ mock scheme


class FastScheme:
    """Keyed-hash stand-in for the threshold scheme (same interface, ~1 µs per operation): a partial is
    SHA-384(key_i ‖ message), a certificate SHA-384(group ‖ message). Forgery-free inside the simulation
    (byzantine nodes only hold their own keys), unique seeds per round; not a real signature scheme."""

    def __init__(self, n: int, me: int | None, secret: bytes = b"sim") -> None:
        self._n, self._me = n, me
        self._keys = [hashlib.sha256(secret + b"key" + i.to_bytes(2, "big")).digest() for i in range(n)]
        self._group = hashlib.sha256(secret + b"group").digest()

    @property
    def n(self) -> int:
        return self._n

    @property
    def quorum(self) -> int:
        return quorum_size(self._n)

    def sign_as(self, signer: int, message: bytes) -> bytes:
        return hashlib.sha384(self._keys[signer] + message).digest()

    def sign(self, message: bytes) -> bytes:
        assert self._me is not None
        return self.sign_as(self._me, message)

    def verify(self, signer: int, message: bytes, signature: bytes) -> bool:
        return 0 <= signer < self._n and self.sign_as(signer, message) == signature

    def recover(self, message: bytes, partials: Sequence[tuple[int, bytes]]) -> tuple[bytes | None, frozenset[int]]:
        good = {i for i, p in partials if self.verify(i, message, p)}
        bad = frozenset(i for i, _ in partials if i not in good)
        if len(good) < self.quorum:
            return None, bad
        return hashlib.sha384(self._group + message).digest(), bad

    def verify_certificate(self, message: bytes, signature: bytes) -> bool:
        return hashlib.sha384(self._group + message).digest() == signature

    def verify_pair(self, signer: int, message: bytes, signature: bytes, seed_message: bytes, seed: bytes) -> bool:
        return self.verify(signer, message, signature) and self.verify(signer, seed_message, seed)

    def recover_pair(self, message: bytes, partials: Sequence[tuple[int, bytes]], seed_message: bytes,
                     seed_partials: Sequence[tuple[int, bytes]]) -> tuple[bytes, bytes] | None:
        """As the threshold scheme's: certificates from the first quorum of signers in both lists, None unless
        that quorum's partials are all good (a bad partial makes a certificate that does not verify)."""
        sigs, seeds = dict(partials), dict(seed_partials)
        chosen = sorted(i for i in sigs if i in seeds)[:self.quorum]
        if len(chosen) < self.quorum or not all(self.verify(i, message, sigs[i]) and
                                                self.verify(i, seed_message, seeds[i]) for i in chosen):
            return None
        return hashlib.sha384(self._group + message).digest(), hashlib.sha384(self._group + seed_message).digest()


SchemeFactory = Callable[[int | None], Scheme]
"""Validator index (None: verifier only) → its scheme."""


class CountingScheme(FastScheme):
    """FastScheme that counts the signature checks the engine asks for: single partials always, certificates
    too unless ``certificates`` is False (what a flood, or late votes, make the engine spend)."""

    def __init__(self, n: int, me: int | None, *, certificates: bool = True) -> None:
        super().__init__(n, me)
        self._count_certificates = certificates
        self.checks = 0
        """Checks counted so far."""

    def verify(self, signer: int, message: bytes, signature: bytes) -> bool:
        self.checks += 1
        return super().verify(signer, message, signature)

    def verify_certificate(self, message: bytes, signature: bytes) -> bool:
        self.checks += self._count_certificates
        return super().verify_certificate(message, signature)


def fast_schemes(n: int) -> SchemeFactory:
    return lambda me: FastScheme(n, me)


# ------------------------------------------------------------------------------------------------ simulation


@dataclass
class Partition:
    start: int
    end: int
    groups: list[set[int]]

    def blocks(self, a: int, b: int, now: int) -> bool:
        if not self.start <= now < self.end:
            return False
        return not any(a in g and b in g for g in self.groups)


@dataclass
class NodeLog:
    finalized: list[Proposal] = field(default_factory=list)
    finalizations: dict[int, bytes] = field(default_factory=dict)
    """View → signature of the finalization certificate of that view."""
    seeds: dict[Round, bytes] = field(default_factory=dict)
    journal: list[Vote] = field(default_factory=list)
    sent_votes: list[Vote] = field(default_factory=list)
    faulty: list[Faulty] = field(default_factory=list)
    notarized: dict[int, bytes] = field(default_factory=dict)
    committed: int = 0
    """How many blocks of ``finalized`` the host has committed (the commit queue lags the engine)."""
    incarnation: int = 0
    past_chains: list[list[Proposal]] = field(default_factory=list)
    """The finalized chain of each earlier incarnation (a restart keeps only the committed prefix)."""
    torn: int = 0
    """Journal appends torn by a crash (their votes never sent)."""
    uncommitted: int = 0
    """Finalized but not yet committed blocks lost by restarts (finalized again by the next incarnation)."""


@dataclass
class SimResult:
    logs: dict[int, NodeLog]
    honest: list[int]
    end_time: int
    views: dict[int, int]
    messages: int
    wall_s: float


class Sim:
    def __init__(self, n: int, seed: int, *, schemes: SchemeFactory | None = None, delta: int = 100,
                 latency: tuple[int, int] = (5, 40), loss: float = 0.0, election: Election = Election.RANDOM,
                 roles: dict[int, str] | None = None, partitions: Sequence[Partition] = (),
                 crashes: Sequence[tuple[int, int, int]] = (), wire: bool = False, build_ms: int = 10,
                 verify_ms: int = 5, skip_timeout: int | None = None, torn: float = 0.0, commit_lag: int = 0,
                 compaction: str = "committed", compact_over: int = 8, faults_until: int | None = None,
                 wan: Wan | None = None) -> None:
        self.n = n
        self.rng = random.Random(seed)
        self.schemes = schemes or fast_schemes(n)
        self.delta, self.latency, self.loss, self.election = delta, latency, loss, election
        self.roles = dict(roles or {})
        self.partitions = list(partitions)
        self.wire = wire
        self.build_ms, self.verify_ms = build_ms, verify_ms
        self.skip_timeout = skip_timeout
        """Engine ``skip_timeout`` (None: the engine's default)."""
        """Send every message through its CBOR bytes (encode → decode) as a real transport would."""
        if compaction not in ("committed", "finalized", "none"):
            raise ValueError(f"unknown compaction {compaction!r}")
        self.torn, self.commit_lag, self.compaction, self.compact_over = torn, commit_lag, compaction, compact_over
        self.faults_until = faults_until
        """Byzantine roles act before this time only (None: the whole run); silent stays silent."""
        self._tearing: set[int] = set()
        self._withheld: dict[tuple[int, int], set[int]] = {}
        self.logs = {i: NodeLog() for i in range(n)}
        self.engines: dict[int, Engine | None] = {}
        self.signers = {i: self.schemes(i) for i in range(n)}
        self.now = 0
        self._q: list[tuple[int, int, str, int, int, object]] = []
        self._seq = 0
        self.messages = 0
        self._started = False
        self.wall_s = 0.0
        self._old: dict[int, list[Message]] = {i: [] for i in range(n)}
        self.wan = wan
        """The WAN model (None: the uniform ``latency`` and instant processing of the other scenarios)."""
        self.stats = WanStats()
        self._costing: dict[int, CostingScheme] = {}
        self._busy_us: dict[int, int] = {}
        self._depart_us: int | None = None
        """While the outputs of an event are handled: when they leave the validator (µs of simulated time)."""
        self._wanted_at: dict[int, float] = {}
        self._start_us = 0
        """Under the WAN model, when the event being handled starts on its validator's CPU (µs): its arrival, or
        the end of the work before it. Events of one validator are handled in arrival order (a FIFO), each at
        its own start time, so a burst of votes queues behind the CPU without any rounding to whole ms."""
        self._link_us: list[list[int]] = []
        if wan is not None:
            self._draw_links(seed, wan)
        for i in range(n):
            self.engines[i] = None if self.roles.get(i) == "silent" else self._new_engine(i, ())
        for i, down, up in crashes:
            self._push(down, "crash", i, 0, None)
            self._push(up, "restart", i, 0, None)

    # ------------------------------------------------------------------ plumbing

    def _new_engine(self, i: int, journal: Sequence[Vote]) -> Engine:
        """A (re)started validator: its floor is the last block its host committed, its journal its own votes."""
        done = self.logs[i].finalized[:self.logs[i].committed]
        floor_view, floor = (done[-1].round.view, done[-1].payload) if done else (0, GENESIS)
        seed = self.logs[i].seeds.get(Round(0, floor_view)) if floor_view else None  # as the service: the head's seed
        cfg = Config(me=i, delta_ms=self.delta, election=self.election, genesis=floor, floor_view=floor_view,
                     floor_seed=seed)
        if self.skip_timeout is not None:
            cfg = dataclasses.replace(cfg, skip_timeout=self.skip_timeout)
        scheme = self.schemes(i)
        if self.wan is not None:
            scheme = self._costing[i] = CostingScheme(scheme, self.wan.costs)
        return Engine(cfg, scheme, journal)

    def _draw_links(self, seed: int, wan: Wan) -> None:
        """Per-link latencies and the slow validators, from their own generator (the message draws of a seed
        stay what they are whatever ``n`` is)."""
        links = random.Random(f"wan-links-{seed}")
        self.loss = wan.loss
        self._link_us = [[0] * self.n for _ in range(self.n)]
        for a in range(self.n):
            for b in range(a + 1, self.n):
                ms = min(wan.hi_ms, max(wan.lo_ms, wan.median_ms * math.exp(links.gauss(0.0, wan.sigma))))
                self._link_us[a][b] = self._link_us[b][a] = round(ms * 1000)
                self.stats.links_ms.append(ms)
        self.stats.slow = frozenset(links.sample(range(self.n), min(wan.slow, self.n)))
        self.stats.cpu_us = dict.fromkeys(range(self.n), 0)
        self.stats.bytes_sent = dict.fromkeys(range(self.n), 0)

    def _out_ms(self) -> int:
        """The simulated ms at which the outputs being handled leave their validator."""
        return self.now if self._depart_us is None else -(-self._depart_us // 1000)

    def _push(self, at: int, kind: str, node: int, sender: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._q, (at, self._seq, kind, node, sender, payload))

    def _deliver(self, sender: int, to: int, m: Message) -> None:
        if self.wan is not None and to != sender:
            self.stats.sent += 1
        if to == sender or self.rng.random() < self.loss:
            if self.wan is not None and to != sender:
                self.stats.lost += 1
            return
        if any(p.blocks(sender, to, self.now) for p in self.partitions):
            return
        self.messages += 1
        if self.wan is not None:
            depart = self.now * 1000 if self._depart_us is None else self._depart_us
            delay = self._link_us[sender][to]
            if self.wan.jitter_ms > 0:
                delay += round(self.rng.expovariate(1.0 / (self.wan.jitter_ms * 1000)))
            self.stats.delays_ms.append(delay / 1000)
            self._push(-(-(depart + delay) // 1000), "msg", to, sender, m)
            return
        lo, hi = self.latency
        self._push(self.now + self.rng.randint(lo, hi), "msg", to, sender, m)

    def _handle(self, i: int, outputs: list[Output]) -> None:
        engine = self.engines[i]
        if engine is None:
            return
        log = self.logs[i]
        role = self.roles.get(i)
        for o in outputs:
            if isinstance(o, Journal):
                if i in self._tearing:  # the crash lands in this append: a torn record, the vote never sent
                    self._tearing.discard(i)
                    log.torn += 1
                    self.engines[i] = None
                    return
                log.journal.append(o.vote)
            elif isinstance(o, Broadcast | Send):
                sends = self._byzantine(i, role, o)
                if self.wan is not None:
                    self._count_bytes(i, sends)
                for to, m in sends:
                    if isinstance(m, Notarize | Nullify | Finalize) and m.signer == i:
                        log.sent_votes.append(m)
                    if self.wire:
                        m = decode_message(encode_message(m))
                    self._deliver(i, to, m)
            elif isinstance(o, ProposalWanted):  # the host builds a block (block time for n = 1)
                self._push(self._out_ms() + self.build_ms, "propose", i, 0, o)
                if self.wan is not None:
                    self._wanted_at.setdefault(o.round.view, self._out_ms())
                    self.stats.proposers.setdefault(o.round.view, i)
            elif isinstance(o, VerifyBlock):
                self._push(self._out_ms() + self.verify_ms, "verify", i, 0, o.proposal)
            elif isinstance(o, Finalized):
                if self.wan is not None and i not in self.roles:
                    asked = self._wanted_at.get(o.proposal.round.view)
                    if asked is not None:
                        out = self.now if self._depart_us is None else self._depart_us / 1000
                        self.stats.latencies_ms.append(out - asked)
                        self.stats.latency_views.append(o.proposal.round.view)
                log.finalized.append(o.proposal)
                log.finalizations[o.certificate.round.view] = o.certificate.signature
                self._commit(i, engine)
            elif isinstance(o, SeedRevealed):
                log.seeds[o.round] = o.seed
            elif isinstance(o, Notarized):
                log.notarized[o.certificate.round.view] = o.certificate.proposal.payload
            elif isinstance(o, Nullified):
                if self.wan is not None and i not in self.roles:
                    self.stats.nullified.add(o.certificate.round.view)
            elif isinstance(o, Faulty):
                log.faulty.append(o)
        self._arm(i)

    def _count_bytes(self, i: int, sends: Sequence[tuple[int, Message]]) -> None:
        size: dict[int, int] = {}  # one broadcast is one message object: encode it once
        total = 0
        for _, m in sends:
            k = id(m)
            if k not in size:
                size[k] = len(encode_message(m))
            total += size[k]
        self.stats.bytes_sent[i] += total

    def _after(self, i: int, kind: str, outputs: list[Output]) -> None:
        """Act on the outputs of one event at validator ``i``. Under the WAN model the validator is one CPU: the
        event cost the scheme operations it made plus ``message_us`` for a message (× ``slow_factor`` on a slow
        validator), the CPU is busy that long, and the outputs leave at its end (plus ``slow_delay_ms``)."""
        if self.wan is None:
            self._handle(i, outputs)
            return
        costing = self._costing.get(i)
        spent = (costing.take() if costing is not None else 0) + (self.wan.costs.message_us if kind == "msg" else 0)
        slow = i in self.stats.slow
        if slow:
            spent = round(spent * self.wan.slow_factor)
        start = self._start_us if kind != "start" else 0
        self._busy_us[i] = start + spent
        self.stats.cpu_us[i] += spent
        self._depart_us = start + spent + (self.wan.slow_delay_ms * 1000 if slow else 0)
        try:
            self._handle(i, outputs)
        finally:
            self._depart_us = None

    def _commit(self, i: int, engine: Engine) -> None:
        """The host's commit queue: it lags the engine's finalized chain by 0..commit_lag blocks; after a commit
        the journal is compacted as the service does, once it holds more than ``compact_over`` records."""
        log = self.logs[i]
        behind = self.rng.randint(0, self.commit_lag) if self.commit_lag else 0
        log.committed = max(log.committed, len(log.finalized) - behind)
        if self.compaction == "none" or len(log.journal) <= self.compact_over:
            return
        if self.compaction == "finalized":  # the service before issue 30: above the engine's finalized view
            log.journal = list(engine.own_votes())
        else:
            committed_view = log.finalized[log.committed - 1].round.view if log.committed else 0
            log.journal = [v for v in log.journal if v.round.view > committed_view]

    def _restart(self, i: int) -> None:
        log = self.logs[i]
        self._tearing.discard(i)
        log.incarnation += 1
        log.past_chains.append(list(log.finalized))
        log.uncommitted += len(log.finalized) - log.committed
        del log.finalized[log.committed:]
        self.engines[i] = self._new_engine(i, list(log.journal))
        self._handle(i, self.engines[i].start(self.now))  # type: ignore[union-attr]

    def _arm(self, i: int) -> None:
        engine = self.engines[i]
        if engine is None:
            return
        d = engine.next_deadline()
        if d is not None:
            self._push(max(d, self.now), "tick", i, 0, d)

    # ------------------------------------------------------------------ byzantine behaviour

    def _sign(self, i: int, vote_type: type, subject: Proposal | Round, *, as_signer: int | None = None,
              wrong_key: bool = False) -> Vote:
        scheme = self.signers[(i + 1) % self.n] if wrong_key else self.signers[i]
        signer = i if as_signer is None else as_signer
        if vote_type is Nullify:
            assert isinstance(subject, Round)
            return Nullify(subject, signer, scheme.sign(nullify_message(subject)), scheme.sign(seed_message(subject)))
        assert isinstance(subject, Proposal)
        msg = notarize_message(subject) if vote_type is Notarize else finalize_message(subject)
        cls = Notarize if vote_type is Notarize else Finalize
        return cls(subject, signer, scheme.sign(msg), scheme.sign(seed_message(subject.round)))

    def _byzantine(self, i: int, role: str | None, o: Broadcast | Send) -> list[tuple[int, Message]]:
        peers = [j for j in range(self.n) if j != i]
        m = o.message
        plain = [(o.to, m)] if isinstance(o, Send) else [(j, m) for j in peers]
        if self.faults_until is not None and self.now >= self.faults_until:
            return plain
        if role == "forger":
            return self._forge(i, o, plain, peers)
        if role == "fetch_abuser":
            top = (self.engines[i].view if self.engines[i] is not None else 1) + 1000  # type: ignore[union-attr]
            views = tuple(sorted(self.rng.sample(range(1, top), MAX_FETCH_VIEWS)))
            return plain + [(j, Fetch(0, views)) for j in peers]
        if role is None or role == "outdated":
            if role == "outdated" and self._old[i]:
                plain += [(j, self.rng.choice(self._old[i])) for j in peers]
            if role == "outdated":
                self._old[i].append(m)
            return plain
        if not isinstance(m, Notarize | Nullify | Finalize):
            return plain
        if role == "equivocator" and isinstance(m, Notarize):
            out: list[tuple[int, Message]] = []
            for j in peers:
                p = m.proposal
                alt = Proposal(p.round, p.parent_view, p.parent, hashlib.sha256(p.payload + bytes([j % 2])).digest())
                out.append((j, self._sign(i, Notarize, alt)))
            return out
        if role == "conflicter" and isinstance(m, Notarize | Finalize):
            p = m.proposal
            alt = Proposal(p.round, p.parent_view, p.parent, self.rng.randbytes(32))
            return [(j, self._sign(i, type(m), alt)) for j in peers]
        if role == "nuller":
            null = self._sign(i, Nullify, m.round)
            return [(j, x) for j in peers for x in ((m, null) if not isinstance(m, Nullify) else (m,))]
        if role == "bad_parent" and isinstance(m, Notarize) and m.signer == i and \
                self.engines[i] is not None and self.engines[i].leader_of(m.round.view) == i:  # type: ignore[union-attr]
            alt = self._bad_parent(i, m.proposal)
            return [(j, self._sign(i, Notarize, alt)) for j in peers]
        if role == "withholder":
            to = self._withheld.get((i, m.round.view))
            if to is None:
                k = self.rng.randint(0, len(peers) - 1)
                to = self._withheld[(i, m.round.view)] = set(self.rng.sample(peers, k))
            return [(j, x) for j, x in plain if j in to]
        if role == "impersonator":
            forged = self._sign(i, type(m), m.round if isinstance(m, Nullify) else m.proposal, wrong_key=True)
            other = self._sign(i, type(m), m.round if isinstance(m, Nullify) else m.proposal,
                               as_signer=(i + 1) % self.n)
            return [(j, x) for j in peers for x in (forged, other)]
        return plain

    def _bad_parent(self, i: int, p: Proposal) -> Proposal:
        """``p`` moved onto a bad parent: a wrong digest, an uncertified view, or a certified block further back
        than ``p``'s parent (skipping certified views: they hold no nullification)."""
        kind = self.rng.randrange(3)
        if kind == 0 or p.round.view < 2:
            return Proposal(p.round, p.parent_view, self.rng.randbytes(32), p.payload)
        if kind == 1:
            view = self.rng.randrange(p.round.view)
            return Proposal(p.round, view, self.rng.randbytes(32), p.payload)
        back = [(w, d) for w, d in self.logs[i].notarized.items() if w < p.parent_view]
        if p.parent_view > 0:
            back.append((0, GENESIS))
        if not back:
            return Proposal(p.round, p.parent_view, self.rng.randbytes(32), p.payload)
        view, digest = self.rng.choice(back)
        return Proposal(p.round, view, digest, p.payload)

    def _junk(self, cert: Certificate | None, view: int) -> Certificate:
        """A certificate that does not verify: random-byte signature and seed (or a real one with another seed)."""
        if cert is not None and self.rng.random() < 0.5:
            return dataclasses.replace(cert, seed=self.rng.randbytes(48))
        rnd = Round(0, view)
        sig, seed = self.rng.randbytes(48), self.rng.randbytes(48)
        kind = self.rng.randrange(3)
        if kind == 0:
            return Nullification(rnd, sig, seed)
        p = Proposal(rnd, max(0, view - 1), self.rng.randbytes(32), self.rng.randbytes(32))
        return Notarization(p, sig, seed) if kind == 1 else Finalization(p, sig, seed)

    def _forge(self, i: int, o: Broadcast | Send, plain: list[tuple[int, Message]],
               peers: list[int]) -> list[tuple[int, Message]]:
        m = o.message
        cert = m if isinstance(m, Notarization | Nullification | Finalization) else None
        if isinstance(o, Send) and cert is not None:  # a Fetch answer: junk instead
            return [(o.to, self._junk(cert, cert.round.view))]
        engine = self.engines[i]
        view = engine.view if engine is not None else 1
        out = list(plain)
        for j in peers:
            if self.rng.random() < 0.5:
                target = view + (self.rng.randint(65, 10**6) if self.rng.random() < 0.3 else self.rng.randint(0, 2))
                out.append((j, self._junk(cert, cert.round.view if cert is not None else target)))
        return out

    # ------------------------------------------------------------------ run

    def run(self, until: int) -> SimResult:
        t0 = time.perf_counter()
        if not self._started:
            self._started = True
            for i, e in self.engines.items():
                if e is not None:
                    self._after(i, "start", e.start(0))
        while self._q and self._q[0][0] <= until:
            at, _, kind, i, sender, payload = heapq.heappop(self._q)
            self.now = at
            engine = self.engines[i]
            if kind == "crash":
                if self.torn and self.rng.random() < self.torn and engine is not None:
                    self._tearing.add(i)  # dies in its next journal append (or at the hard stop below)
                    self._push(at + 5 * self.delta, "crash_hard", i, 0, None)
                else:
                    self.engines[i] = None
                continue
            if kind == "crash_hard":
                if i in self._tearing:
                    self._tearing.discard(i)
                    self.engines[i] = None
                continue
            if kind == "restart":
                self._restart(i)
                continue
            if engine is None:
                continue
            if self.wan is not None:  # one CPU: the event starts when it arrived or when the previous one ended
                self._start_us = max(at * 1000, self._busy_us.get(i, 0))
                at = self._start_us // 1000
            self._dispatch(i, engine, kind, sender, payload, at)
        honest = [i for i in range(self.n) if i not in self.roles]
        views = {i: e.view for i, e in self.engines.items() if e is not None}
        self.now = max(self.now, until)
        self.wall_s += time.perf_counter() - t0
        return SimResult(self.logs, honest, self.now, views, self.messages, self.wall_s)

    def _dispatch(self, i: int, engine: Engine, kind: str, sender: int, payload: object, at: int) -> None:
        """Hand one event to validator ``i``'s engine at ``at`` and act on its outputs."""
        if kind == "msg":
            assert isinstance(payload, Notarize | Nullify | Finalize) or payload is not None
            if self.wan is not None and i not in self.roles and isinstance(payload, Notarize | Nullify | Finalize):
                st = self.stats
                st.votes[payload.signer] = st.votes.get(payload.signer, 0) + 1
                if payload.round.view <= engine.finalized_view:
                    st.late_votes[payload.signer] = st.late_votes.get(payload.signer, 0) + 1
            self._after(i, kind, engine.receive(sender, payload, at))  # type: ignore[arg-type]
        elif kind == "propose":
            assert isinstance(payload, ProposalWanted)
            block = hashlib.sha256(b"block" + payload.parent + payload.round.view.to_bytes(8, "big")
                                   + i.to_bytes(2, "big")).digest()
            if self.logs[i].incarnation:  # a restarted host builds another block (time, mempool)
                block = hashlib.sha256(block + self.logs[i].incarnation.to_bytes(4, "big")).digest()
            self._after(i, kind, engine.propose(payload.round, block, at))
        elif kind == "verify":
            assert isinstance(payload, Proposal)
            self._after(i, kind, engine.verified(payload, True, at))
        elif kind == "tick":
            d = engine.next_deadline()
            if d is not None and d <= at:
                self._after(i, kind, engine.tick(at))


# ------------------------------------------------------------------------------------------------ properties


def check_safety(r: SimResult) -> None:
    """Honest finalized chains are prefixes of one another, linked, and one block per view; seeds agree."""
    chains = [r.logs[i].finalized for i in r.honest] + [c for i in r.honest for c in r.logs[i].past_chains]
    longest = max(chains, key=len)
    at_height: dict[int, Proposal] = {}
    for c in chains:
        for h, p in enumerate(c):
            assert at_height.setdefault(h, p) == p, f"two finalized blocks at height {h + 1}"
        assert c == longest[:len(c)], "two honest validators (or incarnations) finalized different chains"
    prev_view, prev = 0, GENESIS
    for p in longest:
        assert p.parent == prev and p.parent_view == prev_view and p.round.view > prev_view, "broken chain"
        prev_view, prev = p.round.view, p.payload
    seeds: dict[Round, bytes] = {}
    for i in r.honest:
        for rd, s in r.logs[i].seeds.items():
            assert seeds.setdefault(rd, s) == s, f"seeds of round {rd} disagree"
    for i in r.honest:
        check_votes(r.logs[i].sent_votes)


def check_votes(votes: Sequence[Vote]) -> None:
    """One validator never notarized two proposals (or finalized two) in a view, nor nullified and finalized
    one view."""
    notarized: dict[int, Proposal] = {}
    finalized: dict[int, Proposal] = {}
    nullified: set[int] = set()
    for v in votes:
        view = v.round.view
        if isinstance(v, Notarize):
            assert notarized.setdefault(view, v.proposal) == v.proposal, f"two notarize votes in view {view}"
        elif isinstance(v, Finalize):
            assert finalized.setdefault(view, v.proposal) == v.proposal, f"two finalize votes in view {view}"
        else:
            nullified.add(view)
    assert not nullified & set(finalized), f"nullify and finalize in views {sorted(nullified & set(finalized))}"


def conflicting_votes(votes: Sequence[Vote]) -> str | None:
    """What :func:`check_votes` reports about ``votes`` (None: no conflict)."""
    try:
        check_votes(votes)
    except AssertionError as e:
        return str(e)
    return None


def check_live_after(r: SimResult, view: int, within: int) -> None:
    """Every honest validator finalized a block of a view in ``(view, view + within]``: once the faults stopped
    (at ``view``), progress resumed within a bounded number of views."""
    for i in r.honest:
        after = [p.round.view for p in r.logs[i].finalized if p.round.view > view]
        assert after and min(after) <= view + within, \
            f"validator {i}: first finalization after view {view} at {min(after) if after else None} (> +{within})"


def finalized_after(r: SimResult, i: int, view: int) -> int:
    return sum(1 for p in r.logs[i].finalized if p.round.view > view)

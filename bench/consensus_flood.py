"""What a byzantine peer's floods cost a validator, before and after (issue 30 §2 "flood figures"). Prints JSON.

Each flood runs in a fresh subprocess importing ``cowboy_node`` from a given source tree (``PYTHONPATH=<tree>``
and the tree first on ``sys.path``), so one run measures the current tree and a baseline worktree side by side
(``--baseline DIR``, e.g. ``git worktree add /work/wt-base dd5467d``); ratios are current / baseline. Without
``--baseline`` only the current tree is reported. Keys are real: the 4-validator genesis of
``create_genesis`` (threshold BLS12-381, quorum 3); this validator is 0, the attacker validator 3 (floods 1–2) or
1 (floods 3–4). Engine time advances at ``--rate`` messages per second during a flood (no ticks meanwhile).

Floods:

1. ``junk_certificates_random`` — N (200,000 × scale) Notarization / Nullification / Finalization in turn for
   far-future views (even: increasing from 10,000, odd: random up to 10^12) with random 48-byte signature and
   seed (nearly never a curve point: the real verify rejects them at decode), through ``Engine.receive``.
2. ``junk_certificates_valid_points`` — N/100 of the same whose signature and seed ARE valid G1 points (real
   partials over another message): the real verify costs a pairing each.
3. ``conflicting_votes`` — the attacker's share signs N/100 different Notarize and as many Finalize votes for
   view 1 (real partials, made before the clock starts; one seed partial for all); delivered in turn.
4. ``fetch_engine`` / ``fetch_service`` — N/100 ``Fetch(0, views 1..64)`` from one peer against an engine that
   holds a notarization and a finalization of each of those views (driven there with real votes); at the engine
   (``Engine.receive``) and through ``ConsensusService.on_peer_message`` (decode, engine, encode, the fake
   network's ``send``), both in-process.
5. ``block_request_service`` — N/1000 ``BlockRequest(digest)`` (CH_SYNC) for committed blocks (``--blocks``
   blocks of ``--block-txs`` transfers, built and committed on the service's chain) through
   ``on_peer_message`` inside a running event loop; CPU of the event-loop thread (``thread_time``) separate from
   the whole process (a server thread's work), the run waits until sends stop.

Per flood: messages, CPU seconds per message (``process_time``), sends and bytes sent per message, engine state
after (``len(engine._views)`` etc., via getattr), CPU of the next ``tick`` and of a ``_prune`` after the flood,
liveness (the engine finalizes a view from honest votes afterwards — the current view first nullified
when the flood's clock passed its leader timeout — and that step's CPU), and from a
second subprocess with tracemalloc on (its CPU is not used): tracemalloc peak and retained bytes from the
flood's first message to its last (pre-built messages excluded, the engine still alive), plus the RSS delta of the
first (untraced) run. The fake network keeps no payloads: a real send queue's memory is not in these figures.
Machines are noisy: compare ratios, not absolute times.

Usage: python bench/consensus_flood.py [--baseline /work/wt-base] [--scale 1.0] [--floods a,b] [--no-tracemalloc]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLOODS = ("junk_certificates_random", "junk_certificates_valid_points", "conflicting_votes", "fetch_engine",
          "fetch_service", "block_request_service")
ME, ATTACKER, REQUESTER = 0, 3, 1
N_VALIDATORS = 4
DELTA_MS = 1000


# ------------------------------------------------------------------------------------------------ worker side
# Everything below imports cowboy_node lazily: the worker puts the tree under test first on sys.path.


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _mem_mark() -> int | None:
    """Start of a measured flood: the traced bytes now, with the peak reset (None when not tracing)."""
    if not tracemalloc.is_tracing():
        return None
    tracemalloc.reset_peak()
    return tracemalloc.get_traced_memory()[0]


def _mem_figures(mark: int | None) -> dict[str, int]:
    """Traced bytes allocated by the flood and still held (the engine/service alive), and its peak above the
    mark (the pre-built messages are not counted)."""
    if mark is None:
        return {}
    cur, peak = tracemalloc.get_traced_memory()
    return {"tracemalloc_peak_bytes": peak - mark, "tracemalloc_retained_bytes": cur - mark}


class Keys:
    """The 4-validator genesis and every validator's share (the bench plays all of them)."""

    def __init__(self) -> None:
        from cowboy_node.crypto import bls, threshold
        from cowboy_node.node.devgenesis import create_genesis
        from tests.helpers import ALICE, ALICE_FUNDS, CHAIN_ID

        self.net = create_genesis(chain_id=CHAIN_ID, n_validators=N_VALIDATORS,
                                  fee_recipients=[bytes([0x70 + i]) * 20 for i in range(N_VALIDATORS)],
                                  balances={ALICE: ALICE_FUNDS}, system_deployers=(ALICE,),
                                  genesis_time_ms=1_700_000_000_000, entropy=bytes(range(200)))
        self.shares = [threshold.Share(k.bls_share_index, bls.secret_key_from_bytes(k.bls_secret))
                       for k in self.net.validator_keys]

    def scheme(self, me: int) -> Any:
        from cowboy_node.consensus.simplex.scheme import ThresholdScheme

        g = self.net.genesis
        return ThresholdScheme(g.group_public_key, g.share_public_keys(), g.threshold, self.shares[me])

    def partial(self, i: int, message: bytes) -> bytes:
        from cowboy_node.crypto import threshold

        return threshold.partial_sign(self.shares[i], message)

    def vote(self, kind: type, i: int, p: Any) -> Any:
        from cowboy_node.consensus.simplex.types import Notarize, finalize_message, notarize_message, seed_message

        msg = notarize_message(p) if kind is Notarize else finalize_message(p)
        return kind(p, i, self.partial(i, msg), self.partial(i, seed_message(p.round)))

    def group_seed(self, round_: Any) -> bytes:
        from cowboy_node.crypto import threshold
        from cowboy_node.types.seed import round_message

        parts = [(i + 1, self.partial(i, round_message(round_))) for i in range(3)]
        return threshold.recover(parts, 3)


def _engine(keys: Keys) -> Any:
    from cowboy_node.consensus.simplex.elector import Election
    from cowboy_node.consensus.simplex.engine import Config, Engine

    e = Engine(Config(me=ME, delta_ms=DELTA_MS, election=Election.ROUND_ROBIN), keys.scheme(ME))
    e.start(0)
    return e


def finalize_next_view(engine: Any, keys: Keys, now: int, honest: tuple[int, ...] = (1, 2)) -> bool:
    """Drive ``engine`` through its current view with real votes of ``honest`` validators (and the leader's):
    True when that view was reported Finalized."""
    from cowboy_node.consensus.simplex.engine import Broadcast, Finalized, VerifyBlock
    from cowboy_node.consensus.simplex.types import Finalize, Notarize, Proposal
    from cowboy_node.types.block import Round

    view = engine.view
    r = Round(engine.epoch, view)
    digest = view.to_bytes(32, "big")
    leader = engine.leader_of(view)
    outs: list[Any] = []
    if leader == engine.cfg.me:
        outs += engine.propose(r, digest, now)
        mine = [o.message for o in outs if isinstance(o, Broadcast) and isinstance(o.message, Notarize)]
        if not mine:
            return False
        p = mine[0].proposal
    else:
        p = Proposal(r, engine.finalized_view, engine.finalized_digest, digest)
        outs += engine.receive(leader, keys.vote(Notarize, leader, p), now)
        if any(isinstance(o, VerifyBlock) for o in outs):
            outs += engine.verified(p, True, now)
    others = [leader] if leader != engine.cfg.me else []
    others += [i for i in honest if i not in others and i != engine.cfg.me]
    for i in others[1:] if leader != engine.cfg.me else others:
        outs += engine.receive(i, keys.vote(Notarize, i, p), now)
    for i in others:
        outs += engine.receive(i, keys.vote(Finalize, i, p), now)
    return any(isinstance(o, Finalized) and o.proposal.round.view == view for o in outs)


def live_after(engine: Any, keys: Keys, now: int, honest: tuple[int, ...] = (1, 2)) -> tuple[bool, int]:
    """Whether the engine still finalizes a view: a view it already nullified (its leader timeout passed during the
    flood) is nullified by the honest validators too, then the next view is driven to finalization. Returns
    (finalized, views nullified on the way)."""
    from cowboy_node.consensus.simplex.types import Nullify, nullify_message, seed_message
    from cowboy_node.types.block import Round

    skipped = 0
    for _ in range(4):
        state = getattr(engine, "_views", {}).get(engine.view)
        if getattr(state, "my_nullify", None) is None:
            return finalize_next_view(engine, keys, now, honest), skipped
        r = Round(engine.epoch, engine.view)
        for i in honest:
            engine.receive(i, Nullify(r, i, keys.partial(i, nullify_message(r)), keys.partial(i, seed_message(r))), now)
        skipped += 1
    return False, skipped


def _engine_state(engine: Any) -> dict[str, Any]:
    views = getattr(engine, "_views", None)
    conflicted = sum(len(getattr(v, "conflicted", ())) for v in views.values()) if views else 0
    return {"views": None if views is None else len(views),
            "fetch_at": len(getattr(engine, "_fetch_at", {}) or {}),
            "cert_muted": len(getattr(engine, "_cert_muted", {}) or {}),
            "conflicted_entries": conflicted,
            "view": engine.view, "finalized_view": engine.finalized_view}


def _after(engine: Any, keys: Keys, now: int) -> dict[str, Any]:
    """CPU of the next tick and of a prune, then liveness (a view finalizes, after nullifying the current one if the
    tick timed it out) and its CPU."""
    c0 = time.process_time()
    engine.tick(now)
    tick_s = time.process_time() - c0
    prune = getattr(engine, "_prune", None)
    c0 = time.process_time()
    if prune is not None:
        prune()
    prune_s = time.process_time() - c0
    c0 = time.process_time()
    live, skipped = live_after(engine, keys, now)
    view_s = time.process_time() - c0
    return {"next_tick_cpu_s": round(tick_s, 6), "prune_cpu_s": round(prune_s, 6) if prune else None,
            "liveness_finalized_next_view": live, "liveness_views_nullified_first": skipped,
            "next_view_cpu_s": round(view_s, 6)}


def _count(outs: list[Any]) -> dict[str, int]:
    from cowboy_node.consensus.simplex.engine import Broadcast, Faulty, Send

    return {"sends": sum(isinstance(o, Send | Broadcast) for o in outs),
            "faulty": sum(isinstance(o, Faulty) for o in outs),
            "evidence": sum(isinstance(o, Faulty) and bool(getattr(o, "votes", ())) for o in outs)}


def _junk_certs(n: int, valid_points: bool, keys: Keys) -> list[Any]:
    from cowboy_node.consensus.simplex.types import Finalization, Notarization, Nullification, Proposal
    from cowboy_node.types.block import Round

    rng = random.Random(30)
    points = [keys.partial(ATTACKER, b"another message %d" % i) for i in range(16)] if valid_points else []
    out: list[Any] = []
    for i in range(n):
        view = 10_000 + i if i % 2 == 0 else rng.randrange(10**6, 10**12)
        sig, seed = (points[i % 16], points[(i + 1) % 16]) if valid_points else (rng.randbytes(48), rng.randbytes(48))
        r = Round(0, view)
        if i % 3 == 1:
            out.append(Nullification(r, sig, seed))
        else:
            p = Proposal(r, view - 1, rng.randbytes(32), rng.randbytes(32))
            out.append((Notarization if i % 3 == 0 else Finalization)(p, sig, seed))
    return out


def _conflicting(n: int, keys: Keys, engine: Any) -> list[Any]:
    from cowboy_node.consensus.simplex.types import (
        Finalize,
        Notarize,
        Proposal,
        finalize_message,
        notarize_message,
        seed_message,
    )
    from cowboy_node.types.block import Round

    r = Round(0, 1)
    seed = keys.partial(ATTACKER, seed_message(r))
    out: list[Any] = []
    for i in range(n):
        p = Proposal(r, 0, engine.finalized_digest, i.to_bytes(32, "big"))
        out.append(Notarize(p, ATTACKER, keys.partial(ATTACKER, notarize_message(p)), seed))
        out.append(Finalize(p, ATTACKER, keys.partial(ATTACKER, finalize_message(p)), seed))
    return out


def _timed_engine_flood(engine: Any, sender: int, msgs: list[Any], rate: float, t0: int) -> tuple[dict[str, Any], int]:
    outs: list[Any] = []
    c0 = time.process_time()
    w0 = time.perf_counter()
    now = t0
    for i, m in enumerate(msgs):
        now = t0 + int(i * 1000 / rate)
        outs += engine.receive(sender, m, now)
    cpu = time.process_time() - c0
    wall = time.perf_counter() - w0
    counts = _count(outs)
    n = len(msgs)
    fig = {"messages": n, "cpu_s": round(cpu, 4), "cpu_s_per_message": cpu / n if n else None,
           "wall_s": round(wall, 4), "sends_per_message": counts["sends"] / n if n else None,
           "faulty_outputs": counts["faulty"], "evidence_outputs": counts["evidence"]}
    return fig, now


def flood_engine(name: str, n: int, rate: float) -> dict[str, Any]:
    keys = Keys()
    engine = _engine(keys)
    if name == "junk_certificates_random":
        msgs, sender = _junk_certs(n, False, keys), ATTACKER
    elif name == "junk_certificates_valid_points":
        msgs, sender = _junk_certs(max(1, n // 100), True, keys), ATTACKER
    elif name == "conflicting_votes":
        msgs, sender = _conflicting(max(1, n // 100), keys, engine), ATTACKER
    else:  # fetch_engine
        from cowboy_node.consensus.simplex.types import Fetch

        for _ in range(64):
            if not finalize_next_view(engine, keys, 0):
                raise RuntimeError("could not finalize the 64 views the Fetch flood asks for")
        msgs, sender = [Fetch(0, tuple(range(1, 65)))] * max(1, n // 100), REQUESTER
    before = _rss_bytes()
    mark = _mem_mark()
    fig, now = _timed_engine_flood(engine, sender, msgs, rate, 1)
    fig.update(_mem_figures(mark))
    fig["rss_delta_bytes"] = _rss_bytes() - before
    fig["state_after"] = _engine_state(engine)
    fig.update(_after(engine, keys, now))
    return fig


class _Net:
    def __init__(self) -> None:
        self.sends = 0
        self.bytes = 0
        self.penalized = 0

    def send(self, to: int, channel: int, payload: bytes) -> bool:
        self.sends += 1
        self.bytes += len(payload)
        return True

    def broadcast(self, channel: int, payload: bytes) -> int:
        self.sends += 1
        self.bytes += len(payload)
        return N_VALIDATORS - 1

    def connected(self) -> frozenset[int]:
        return frozenset(range(1, N_VALIDATORS))

    def penalize(self, peer: int, reason: str) -> None:
        self.penalized += 1


def _service(keys: Keys) -> tuple[Any, _Net]:
    import threading

    from cowboy_node.chain.chain import Chain
    from cowboy_node.consensus.simplex.elector import Election
    from cowboy_node.node.consensus_service import ConsensusService, ServiceConfig
    from cowboy_node.observability.metrics import NodeMetrics
    from cowboy_node.state.memory import MemoryStore
    from cowboy_protocol.crypto import ed25519

    chain = Chain(MemoryStore(), keys.net.genesis)
    seed = keys.net.validator_keys[ME].ed25519_seed
    net = _Net()
    svc = ConsensusService(
        chain, config=ServiceConfig(me=ME, block_time_ms=500, delta_ms=60_000, election=Election.ROUND_ROBIN),
        scheme=keys.scheme(ME), tree_lock=threading.Lock(), proposer_key=ed25519.public_key_from_seed(seed),
        sign=lambda d: ed25519.sign(seed, d), fee_recipient=keys.net.genesis.validators[ME].fee_recipient,
        take_transactions=list, presence=lambda w: b"\x01\x00", inspect=lambda p, e, o: None,
        on_commit=lambda c: None, admit_gossip=lambda b: None, metrics=NodeMetrics(), net=net)
    return svc, net


def _svc_now(svc: Any) -> int:
    """The engine clock of the service (split service: its voter's; a baseline tree from before the split: its own)."""
    return int(svc.voter.now()) if hasattr(svc, "voter") else int(svc._now())


def _set_running(svc: Any, running: bool) -> None:
    """Let the service spawn its tasks as its run loop would (the runtime's flag; before the split, its own)."""
    if hasattr(svc, "runtime"):
        svc.runtime.running = running
    else:
        svc._running = running


def _build_chain(svc: Any, keys: Keys, blocks: int, txs: int) -> list[bytes]:
    from cowboy_node.types.block import Round
    from cowboy_protocol.crypto import ed25519
    from tests.helpers import ALICE_SK, BOB, transfer

    digests = []
    nonce = 0
    for h in range(1, blocks + 1):
        leader = h % N_VALIDATORS
        seed = keys.net.validator_keys[leader].ed25519_seed
        batch = [transfer(ALICE_SK, nonce + k, BOB, 1) for k in range(txs)]
        nonce += txs
        cand = svc.forks.build(svc.chain.head.hash(), Round(0, h), batch, timestamp_ms=1_700_000_000_000 + h * 1000,
                               proposer=ed25519.public_key_from_seed(seed), sign=lambda d, s=seed: ed25519.sign(s, d),
                               fee_recipient=keys.net.genesis.validators[leader].fee_recipient,
                               presence=lambda w: b"\x01\x00")
        block = cand.prepared.block
        svc.forks.commit(block, seed=keys.group_seed(Round(0, h)), certificate=None, inspect=lambda p, e: None)
        digests.append(block.hash())
    svc.forks.candidates.clear()
    (svc.bodies.blocks if hasattr(svc, "bodies") else svc._bodies).clear()
    return digests


async def _settle(net: _Net, timeout_s: float = 60.0) -> None:
    import asyncio

    last, still, t_end = -1, 0.0, time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        await asyncio.sleep(0.05)
        if net.sends == last:
            still += 0.05
            if still >= 0.3:
                return
        else:
            last, still = net.sends, 0.0


def flood_service(name: str, n: int, blocks: int, block_txs: int) -> dict[str, Any]:
    import asyncio

    from cowboy_node.consensus.simplex.types import Fetch, encode_message
    from cowboy_node.consensus.sync_messages import CH_CONSENSUS, CH_SYNC, BlockRequest, encode_sync

    keys = Keys()
    svc, net = _service(keys)
    svc.start_engine()
    setup: dict[str, Any] = {}
    if name == "fetch_service":
        for _ in range(64):
            if not finalize_next_view(svc.engine, keys, _svc_now(svc)):
                raise RuntimeError("could not finalize the 64 views the Fetch flood asks for")
        count = max(1, n // 100)
        payloads = [(CH_CONSENSUS, encode_message(Fetch(0, tuple(range(1, 65)))))] * count
    else:
        digests = _build_chain(svc, keys, blocks, block_txs)
        count = max(1, n // 1000)
        payloads = [(CH_SYNC, encode_sync(BlockRequest(digests[i % len(digests)]))) for i in range(count)]
        setup = {"blocks": blocks, "block_txs": block_txs}

    async def run() -> dict[str, Any]:
        _set_running(svc, True)
        sends0, bytes0 = net.sends, net.bytes
        rss0 = _rss_bytes()
        mark = _mem_mark()
        c0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        for channel, payload in payloads:
            svc.on_peer_message(REQUESTER, channel, payload)
        loop_calls_s = time.thread_time() - t0
        await _settle(net)
        await asyncio.sleep(0)
        loop_s = time.thread_time() - t0
        cpu = time.process_time() - c0
        wall = time.perf_counter() - w0
        _set_running(svc, False)
        mem = _mem_figures(mark)
        return {**mem, "messages": count, "request_bytes": len(payloads[0][1]), "cpu_s": round(cpu, 4),
                "cpu_s_per_message": cpu / count, "event_loop_cpu_s_per_message": loop_s / count,
                "event_loop_cpu_in_calls_s_per_message": loop_calls_s / count,
                "wall_s_incl_settle": round(wall, 3), "sends_per_message": (net.sends - sends0) / count,
                "bytes_sent_per_message": (net.bytes - bytes0) / count, "penalized": net.penalized,
                "rss_delta_bytes": _rss_bytes() - rss0}

    fig = asyncio.run(run())
    fig.update(setup)
    fig["state_after"] = _engine_state(svc.engine)
    fig.update(_after(svc.engine, keys, _svc_now(svc)))
    svc.close()
    return fig


def worker(name: str, tree: str, n: int, rate: float, blocks: int, block_txs: int, traced: bool) -> dict[str, Any]:
    sys.path.insert(0, tree)
    from cowboy_node.observability.logging import configure_logging

    configure_logging("console", "error")
    import logging

    logging.getLogger().setLevel(logging.ERROR)
    if traced:
        tracemalloc.start()
    if name in ("fetch_service", "block_request_service"):
        fig = flood_service(name, n, blocks, block_txs)
    else:
        fig = flood_engine(name, n, rate)
    if traced:
        tracemalloc.stop()
        return {k: v for k, v in fig.items() if k.startswith("tracemalloc_")}
    import cowboy_node

    fig["cowboy_node_from"] = str(Path(cowboy_node.__file__).resolve().parents[1])
    return fig


# ------------------------------------------------------------------------------------------------ orchestrator


def run_in_tree(tree: Path, name: str, args: argparse.Namespace, traced: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--tree", str(tree),
           "--n", str(int(200_000 * args.scale)), "--rate", str(args.rate), "--blocks", str(args.blocks),
           "--block-txs", str(args.block_txs)] + (["--traced"] if traced else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(tree), timeout=args.timeout)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-5:]}
    fig: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return fig


RATIO_KEYS = ("cpu_s_per_message", "event_loop_cpu_s_per_message", "sends_per_message", "bytes_sent_per_message",
              "tracemalloc_peak_bytes", "tracemalloc_retained_bytes", "rss_delta_bytes", "next_tick_cpu_s",
              "prune_cpu_s", "next_view_cpu_s")


def ratios(cur: dict[str, Any], base: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k in RATIO_KEYS:
        a, b = cur.get(k), base.get(k)
        if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
            out[k] = round(a / b, 4) if b else None
    a, b = cur.get("state_after", {}).get("views"), base.get("state_after", {}).get("views")
    if a is not None and b:
        out["views_after"] = round(a / b, 4)
    return out


def measure(tree: Path, name: str, args: argparse.Namespace) -> dict[str, Any]:
    fig = run_in_tree(tree, name, args, traced=False)
    if not args.no_tracemalloc and "error" not in fig:
        fig.update(run_in_tree(tree, name, args, traced=True))
    return fig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=None, help="source tree of the baseline (e.g. a git worktree of dd5467d)")
    ap.add_argument("--tree", default=str(ROOT), help="source tree under test (default: this checkout)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every flood size (N = 200,000 × scale)")
    ap.add_argument("--rate", type=float, default=10_000.0, help="attacker messages per second (engine clock)")
    ap.add_argument("--blocks", type=int, default=4, help="committed blocks the BlockRequest flood asks for")
    ap.add_argument("--block-txs", type=int, default=1000, help="transfers per such block")
    ap.add_argument("--floods", default=",".join(FLOODS), help="comma-separated subset of " + ",".join(FLOODS))
    ap.add_argument("--no-tracemalloc", action="store_true", help="skip the traced memory run of each flood")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per subprocess")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=200_000, help=argparse.SUPPRESS)
    ap.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.tree, a.n, a.rate, a.blocks, a.block_txs, a.traced)))
        return
    names = [x for x in a.floods.split(",") if x]
    unknown = set(names) - set(FLOODS)
    if unknown:
        ap.error(f"unknown floods: {sorted(unknown)}")
    tree = Path(a.tree).resolve()
    base = Path(a.baseline).resolve() if a.baseline else None
    out: dict[str, Any] = {"current_tree": str(tree), "baseline_tree": None if base is None else str(base),
                           "scale": a.scale, "rate_per_s": a.rate, "load_average_before": os.getloadavg(),
                           "floods": {}}
    for name in names:
        entry: dict[str, Any] = {}
        if base is not None:
            entry["baseline"] = measure(base, name, a)
        entry["current"] = measure(tree, name, a)
        if base is not None and "error" not in entry["baseline"] and "error" not in entry["current"]:
            entry["ratios_current_over_baseline"] = ratios(entry["current"], entry["baseline"])
        out["floods"][name] = entry
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

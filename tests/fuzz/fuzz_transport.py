"""Fuzz of the CIP-11 frame decoder and both session state machines (issue 5, "Proof").

Each case builds a byte stream — uniformly random bytes, or a stream of valid frames of one real connection
(signed Hellos, HelloAcks, pings, pongs, acks, assignments, cancels, result frames, Goodbyes, frames of another
connection and junk) with up to four mutations (bit flips, byte overwrites, inserts, deletes, truncation,
duplicated or spliced segments, a length prefix replaced by 0 / 1 / MAX_FRAME_BYTES / MAX_FRAME_BYTES+1 /
2^32-1 / its true value ±1), or a near-maximal frame cut short — cuts it into random chunks and feeds them
through a :class:`FrameDecoder` into a :class:`ValidatorSession` or :class:`RunnerSession` (fresh, or
authenticated with a job in flight), as the QUIC adapter does: decoded frames to ``receive``, decoder errors to
``receive_error``, ticks in between, ``close()`` at the end of the stream. Checked for every case:

- the decoder raises nothing but :class:`RemoteProtocolError` and never buffers more than MAX_FRAME_BYTES + 4;
- the sessions raise nothing at all; a session ends with at most one :class:`Closed` event, after which it
  emits and queues nothing; when it closes on its own initiative exactly one Goodbye with that reason is
  queued last, and none when the peer closed;
- memory stays bounded: the tracemalloc peak over the whole run stays below ``--max-peak-mib``.

Cases come from a seeded generator (case ``i`` uses ``random.Random(seed * 1_000_003 + i)``, so any failure
is replayed with ``--seed S --only i``); ``--hypothesis N`` adds N hypothesis-driven cases over the same
generator (drawn through ``st.data()``, so a failure is shrunk). Prints one JSON summary line::

    python tests/fuzz/fuzz_transport.py --cases 100000 [--seed 1] [--hypothesis 2000]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cowboy_protocol.transport.frames import HEADER_LEN, MAX_FRAME_BYTES, Goodbye, encode_frame
from cowboy_protocol.transport.framing import FrameDecoder
from cowboy_protocol.transport.preimages import make_assignment
from cowboy_protocol.transport.protocol_errors import RemoteProtocolError
from cowboy_protocol.transport.session import Authenticated, Closed, Event, SessionBase, SessionState
from tests.unit.protocol.test_transport_session_fuzz import JOB, TO_RUNNER, TO_VALIDATOR
from tests.unit.protocol.test_transport_session_support import CHAIN, JOB_SPEC, RUNNER, VALIDATOR, Pair

Draw = Callable[[int, int], int]
"""``draw(lo, hi)``: an integer in ``[lo, hi]`` (from ``random.Random.randint`` or a hypothesis ``st.data()``)."""

KINDS = ("validator_fresh", "validator_authenticated", "runner_fresh", "runner_authenticated")
"""Session templates a case is fed to."""
BUFFER_BOUND = MAX_FRAME_BYTES + HEADER_LEN
"""The decoder may never hold more than one maximal frame plus its prefix."""
DEFAULT_MAX_PEAK_MIB = 64.0
"""Stated bound on the tracemalloc peak of a run (templates, one near-maximal frame and its copies)."""


def _templates() -> dict[str, SessionBase]:
    """kind → a session in that state (the pools' frames belong to its connection). Cases work on deep copies."""
    out: dict[str, SessionBase] = {}
    fresh_v = Pair()
    out["validator_fresh"] = fresh_v.v
    auth_v = Pair()
    auth_v.handshake(0.0)
    auth_v.v.push(make_assignment(CHAIN, VALIDATOR, JOB, JOB_SPEC, 100, 160, RUNNER.pubkey))
    auth_v.v.take_outbound()
    out["validator_authenticated"] = auth_v.v
    fresh_r = Pair()
    fresh_r.r.start(0.0, 100)
    fresh_r.r.take_outbound()
    out["runner_fresh"] = fresh_r.r
    auth_r = Pair()
    auth_r.handshake(0.0)
    auth_r.r.ping(0.0, 101)
    auth_r.r.take_outbound()
    out["runner_authenticated"] = auth_r.r
    return out


TEMPLATES = _templates()
ENCODED_TO_VALIDATOR = [encode_frame(f) for f in TO_VALIDATOR]
ENCODED_TO_RUNNER = [encode_frame(f) for f in TO_RUNNER]
INTERESTING_LENGTHS = (0, 1, 2, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1, 2**32 - 1)


@dataclass(frozen=True, slots=True)
class Case:
    """One generated input: the session template, the byte stream and how it is cut and timed."""

    kind: str
    """Key of :data:`TEMPLATES`."""
    data: bytes
    """The byte stream the peer sends."""
    chunks: tuple[int, ...]
    """Sizes the stream is cut into (the rest goes in one last chunk)."""
    ticks: tuple[int, ...]
    """Seconds to advance and tick after each chunk (0: no tick)."""
    close: bool
    """Whether the stream ends (``FrameDecoder.close``) after the data."""


def _mutate(data: bytearray, draw: Draw, pool: list[bytes]) -> None:
    op = draw(0, 8)
    n = len(data)
    if n == 0:
        data += bytes([draw(0, 255)])
        return
    i = draw(0, n - 1)
    if op == 0:
        data[i] ^= 1 << draw(0, 7)
    elif op == 1:
        data[i] = draw(0, 255)
    elif op == 2:
        data[i:i] = bytes(draw(0, 255) for _ in range(draw(1, 8)))
    elif op == 3:
        del data[i:i + draw(1, 16)]
    elif op == 4:
        del data[i:]
    elif op == 5:
        j = draw(i, n)
        data[j:j] = data[i:j]
    elif op == 6:
        other = pool[draw(0, len(pool) - 1)]
        a = draw(0, len(other))
        data[i:i] = other[a:a + draw(1, 64)]
    else:  # a length prefix (wherever one would start if the stream were aligned at i) gets a hostile value
        value = INTERESTING_LENGTHS[draw(0, len(INTERESTING_LENGTHS) - 1)] if op == 7 else \
            int.from_bytes(data[i:i + 4].ljust(4, b"\0"), "big") + draw(-1, 1)
        data[i:i + 4] = (value % 2**32).to_bytes(4, "big")


def generate(draw: Draw) -> Case:
    """Build one case from ``draw`` (deterministic in the draws)."""
    kind = KINDS[draw(0, len(KINDS) - 1)]
    pool = ENCODED_TO_VALIDATOR if kind.startswith("validator") else ENCODED_TO_RUNNER
    shape = draw(0, 99)
    if shape < 20:  # random bytes
        data = bytearray(draw(0, 255) for _ in range(draw(0, 96)))
    elif shape < 99:  # mutated stream of valid frames, half of them after the genuine handshake frames
        prefix = pool[0] + pool[1] if kind.endswith("fresh") and draw(0, 1) else b""
        data = bytearray(prefix + b"".join(pool[draw(0, len(pool) - 1)] for _ in range(draw(1, 6))))
        for _ in range(draw(0, 4)):
            _mutate(data, draw, pool)
    else:  # a near-maximal frame, cut short: the decoder holds up to one frame, never more
        length = MAX_FRAME_BYTES - draw(0, 3)
        data = bytearray(length.to_bytes(4, "big") + bytes([draw(0, 255)]) + bytes(draw(0, length - 2)))
    chunks = tuple(draw(1, 64) if draw(0, 3) else draw(65, 4096) for _ in range(draw(0, 6)))
    ticks = tuple(draw(0, 20) if draw(0, 4) == 0 else 0 for _ in range(len(chunks) + 1))
    return Case(kind, bytes(data), chunks, ticks, bool(draw(0, 3)))


def rng_draw(rng: random.Random) -> Draw:
    """A :data:`Draw` over a seeded generator."""
    return rng.randint


class Violation(AssertionError):
    """A fuzz invariant failed."""


def run_case(case: Case) -> str:
    """Feed ``case`` and check every invariant; return how it ended (``open``, ``closed_local``, ``closed_peer``),
    suffixed ``+auth`` if the session was AUTHENTICATED at some point (how deep the case got).

    Raises :class:`Violation` (or whatever escaped the code under test) on failure.
    """
    template = TEMPLATES[case.kind]
    session = copy.deepcopy(template)
    decoder = FrameDecoder()
    now = 1.0
    closed: list[Closed] = []
    height = 100
    authenticated = [session.state is SessionState.AUTHENTICATED]

    def apply(events: list[Event]) -> None:
        authenticated[0] |= session.state is SessionState.AUTHENTICATED or any(
            isinstance(e, Authenticated) for e in events)
        out = session.take_outbound()
        ends = [e for e in events if isinstance(e, Closed)]
        if closed:
            if events or out:
                raise Violation(f"activity after Closed: {events} {out}")
            return
        if len(ends) > 1 or (ends and events[-1] is not ends[0]):
            raise Violation(f"Closed not single and last: {events}")
        goodbyes = [f for f in out if isinstance(f, Goodbye)]
        if ends:
            closed.append(ends[0])
            if session.state is not SessionState.CLOSED:
                raise Violation("Closed emitted but the session is not CLOSED")
            if ends[0].by_peer and goodbyes:
                raise Violation("a Goodbye was queued in answer to the peer's")
            if not ends[0].by_peer and (len(goodbyes) != 1 or out[-1] is not goodbyes[0]
                                        or goodbyes[0].reason is not ends[0].reason):
                raise Violation(f"local close without exactly one last Goodbye of its reason: {out}")
        elif goodbyes or session.state is SessionState.CLOSED:
            raise Violation(f"Goodbye or CLOSED without a Closed event: {out}")

    def feed(chunk: bytes) -> None:
        nonlocal now
        try:
            frames = decoder.feed(chunk)
        except RemoteProtocolError as e:
            apply(session.receive_error(e, now))
            return
        finally:
            if decoder.buffered > BUFFER_BOUND:
                raise Violation(f"decoder buffers {decoder.buffered} bytes")
        for frame in frames:
            now += 0.05
            apply(session.receive(frame, now))

    data = memoryview(case.data)
    pos = 0
    for i, size in enumerate((*case.chunks, len(data))):
        chunk = bytes(data[pos:pos + size])
        pos += len(chunk)
        if chunk:
            feed(chunk)
        if case.ticks[min(i, len(case.ticks) - 1)]:
            now += case.ticks[min(i, len(case.ticks) - 1)]
            height += 1
            apply(session.tick(now, height))  # type: ignore[attr-defined]
        if pos >= len(data):
            break
    if case.close:
        try:
            decoder.close()
        except RemoteProtocolError as e:
            apply(session.receive_error(e, now))
    end = "open" if not closed else "closed_peer" if closed[0].by_peer else "closed_local"
    return end + ("+auth" if authenticated[0] else "")


def run_hypothesis(examples: int, seed: int) -> int:
    """``examples`` hypothesis-driven cases over :func:`generate` (failures are shrunk); return the count run."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    count = 0

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        nonlocal count
        count += 1
        run_case(generate(lambda lo, hi: data.draw(st.integers(lo, hi))))

    prop()
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000, help="seeded random cases (default 100,000)")
    parser.add_argument("--seed", type=int, default=1, help="master seed (default 1)")
    parser.add_argument("--only", type=int, default=None, help="replay one case index")
    parser.add_argument("--hypothesis", type=int, default=0, help="extra hypothesis-driven cases (default 0)")
    parser.add_argument("--max-peak-mib", type=float, default=DEFAULT_MAX_PEAK_MIB, help="tracemalloc peak bound")
    args = parser.parse_args(argv)

    indices = [args.only] if args.only is not None else range(args.cases)
    outcomes: dict[str, int] = {}
    failures: list[dict[str, object]] = []
    tracemalloc.start()
    start = time.monotonic()
    for i in indices:
        case = generate(rng_draw(random.Random(args.seed * 1_000_003 + i)))
        try:
            outcome = run_case(case)
        except Exception as e:  # report, keep going: the summary counts every escape
            failures.append({"case": i, "kind": case.kind, "error": f"{type(e).__name__}: {e}",
                             "data": case.data[:256].hex()})
            if len(failures) <= 3:
                traceback.print_exc()
            continue
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    hypothesis_cases = 0
    hypothesis_error: str | None = None
    if args.hypothesis:
        try:
            hypothesis_cases = run_hypothesis(args.hypothesis, args.seed)
        except Exception as e:
            hypothesis_error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_mib = peak / 2**20
    summary = {
        "cases": len(indices), "hypothesis_cases": hypothesis_cases, "seed": args.seed,
        "exceptions": len(failures) + (hypothesis_error is not None), "outcomes": dict(sorted(outcomes.items())),
        "peak_memory_mib": round(peak_mib, 2), "peak_bound_mib": args.max_peak_mib,
        "seconds": round(time.monotonic() - start, 1), "failures": failures[:10],
        "hypothesis_error": hypothesis_error,
    }
    print(json.dumps(summary))
    return 0 if not failures and hypothesis_error is None and peak_mib < args.max_peak_mib else 1


if __name__ == "__main__":
    sys.exit(main())

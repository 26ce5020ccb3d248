"""Long-running fuzz of the CIP-11 canonical CBOR codec (``cowboy_protocol.codec``).

Runs the hypothesis properties of ``tests/unit/protocol/test_codec_cbor.py`` (round trip,
"decode accepts exactly the canonical encodings", rejection of every
non-canonical variant) round-robin with many more and larger examples, plus a
plain random-bytes loop, until the time budget is spent::

    python tests/fuzz/fuzz_cbor.py --seconds 600 [--seed 1234]

Exits 0 if nothing failed, 1 on the first failure (hypothesis prints the
shrunk falsifying example). Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from tests.unit import test_codec_cbor as props

big_values = st.recursive(
    props.scalars,
    lambda inner: (st.lists(inner, max_size=12) | st.lists(inner, max_size=6).map(tuple)
                   | st.dictionaries(props.scalars, inner, max_size=12)),
    max_leaves=120,
)
fuzz_bytes = st.binary(max_size=512) | props.near_canonical_bytes()

PROPERTIES: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = [
    ("roundtrip", props.check_roundtrip, (props.values,)),
    ("roundtrip-big", props.check_roundtrip, (big_values,)),
    ("arbitrary-bytes", props.check_arbitrary_bytes, (fuzz_bytes,)),
    ("mutation", props.check_mutation,
     (props.values, st.integers(0, 2**32), st.integers(0, 64))),
    ("mutation-big", props.check_mutation,
     (big_values, st.integers(0, 2**32), st.integers(0, 64))),
]


def run_property(check: Callable[..., None], strategies: tuple[Any, ...], examples: int,
                 run_seed: int) -> None:
    """Run ``check`` under hypothesis for ``examples`` examples (raises on failure)."""
    test = hypothesis_seed(run_seed)(settings(
        max_examples=examples, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
    )(given(*strategies)(check)))
    test()


def random_bytes_round(rng: random.Random, seconds: float) -> int:
    """Feed uniformly random short byte strings to the decoder for ``seconds``."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        for _ in range(1000):
            size = rng.choice((1, 2, 3, 5, 9, 16, 32, 64))
            props.check_arbitrary_bytes(rng.randbytes(size))
        n += 1000
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="master seed (default: random)")
    parser.add_argument("--chunk", type=int, default=200, help="examples per property per round")
    args = parser.parse_args(argv)

    master = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    rng = random.Random(master)
    print(f"fuzz_cbor: seed={master} budget={args.seconds}s", flush=True)
    counts = {name: 0 for name, _, _ in PROPERTIES} | {"random-bytes": 0}
    start = time.monotonic()
    deadline = start + args.seconds
    rounds = 0
    try:
        while time.monotonic() < deadline:
            rounds += 1
            for name, check, strategies in PROPERTIES:
                if time.monotonic() >= deadline:
                    break
                run_property(check, strategies, args.chunk, rng.randrange(2**32))
                counts[name] += args.chunk
            remaining = deadline - time.monotonic()
            if remaining > 0:
                counts["random-bytes"] += random_bytes_round(rng, min(1.0, remaining))
    except Exception:
        traceback.print_exc()
        print(f"fuzz_cbor: FAILED (seed={master}, round {rounds})", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - start
    summary = ", ".join(f"{k}={v}" for k, v in counts.items())
    print(f"fuzz_cbor: OK in {elapsed:.1f}s, {rounds} rounds: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

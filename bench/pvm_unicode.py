"""Cost of the pinned Unicode str semantics vs CPython's own methods (same run, same strings).

For each operation and input shape, times the PVM's pinned implementation (``pvm/unicode_str.py``)
and, as the baseline, CPython's method on the same string, and reports ns per character, the
ratio, and the pinned time per cycle the PVM charges for it (the method's ``bytes(len)`` plus
the Unicode surcharge of the cost table; sandboxed code runs at about 80 ns per cycle).
Prints one JSON object.

    .venv/bin/python bench/pvm_unicode.py [--chars N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cowboy_node.execution.pvm import costs
from cowboy_node.execution.pvm import unicode_str as unistr

SHAPES = {
    # ordinary accented prose: long cased runs
    "prose": "Les \u00e9t\u00e9s \u00e0 Montr\u00e9al sont tr\u00e8s chauds, \u00e7a d\u00e9pend. ",
    # worst case for run-based title(): cased and uncased characters alternate
    "alternating": "\u00e9 \u00e9-\u00e9.",
    # Greek with sigmas in every word (final-sigma context checks)
    "sigmas": "\u039f\u0394\u039f\u03a3 \u03a3\u0301\u03a3 ",
    # CJK with ideographic spaces (uncased, whitespace-separated)
    "cjk": "\u6f22\u5b57\u3000\u304b\u306a ",
}
OPS: dict[str, tuple[Callable[[str], object], Callable[[str], object]]] = {
    "upper": (unistr.upper, str.upper),
    "lower": (unistr.lower, str.lower),
    "casefold": (unistr.casefold, str.casefold),
    "title": (unistr.title, str.title),
    "capitalize": (unistr.capitalize, str.capitalize),
    "swapcase": (unistr.swapcase, str.swapcase),
    "isalpha": (lambda s: unistr.predicate("isalpha", s), str.isalpha),
    "isprintable": (lambda s: unistr.predicate("isprintable", s), str.isprintable),
    "istitle": (lambda s: unistr.predicate("istitle", s), str.istitle),
    "islower": (lambda s: unistr.predicate("islower", s), str.islower),
    "split": (lambda s: unistr.split(s, -1), str.split),
    "strip": (lambda s: unistr.strip(s, "strip"), str.strip),
    "splitlines": (lambda s: unistr.splitlines(s, False), str.splitlines),
    "repr": (unistr.repr_str, repr),
}


def _best(fn: Callable[[str], object], s: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(s)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, default=1_000_000)
    args = parser.parse_args()
    for pinned, _ in OPS.values():  # compile the patterns outside the timings
        pinned("\u00e9")
    results = {}
    for shape, unit in SHAPES.items():
        s = (unit * (args.chars // len(unit) + 1))[:args.chars]
        for op, (pinned, native) in OPS.items():
            assert pinned(s) == native(s) or sys.version_info[:2] != (3, 11), (shape, op)
            p, n = _best(pinned, s), _best(native, s)
            # what the PVM charges for it: the method's own bytes(len) plus the Unicode surcharge
            cycles = costs.bytes_cost(len(s)) + unistr.cost(op, s)
            results[f"{shape}.{op}"] = {"pinned_ns_per_char": round(p * 1e9 / len(s), 2),
                                        "native_ns_per_char": round(n * 1e9 / len(s), 2),
                                        "ratio": round(p / n, 1) if n else None,
                                        "pinned_ns_per_charged_cycle": round(p * 1e9 / cycles, 1)}
    worst = max(results.items(), key=lambda kv: kv[1]["pinned_ns_per_charged_cycle"])
    print(json.dumps({"bench": "pvm_unicode", "python": sys.version.split()[0], "chars": args.chars,
                      "worst_ns_per_charged_cycle": {worst[0]: worst[1]}, "results": results}, indent=1))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Compare every pinned str operation with CPython 3.11's own at every code point, then on random text.

Run with the project's CPython 3.11 (whose Unicode 14.0.0 tables are the pinned ones); about half a
minute on this project's machine.  Prints one JSON object; ``mismatches``
must be 0.  (The unit tests cover random text; this covers each of the 1,114,112 code points alone.)

    .venv/bin/python scripts/pvm_unicode_exhaustive.py [--strings 30000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cowboy_node.execution.pvm import unicode_str as unistr
from cowboy_node.execution.pvm import unicode_tables

TRICKY = ("\u03a3\u0345\u0130\u00df\u1e9e\ufb01\u1f88\u01c5\u0660\u06f5\u2028\x85\u2000\u3000\u200b\xa0"
          "\u0301\u02b0'\" \t\n\r")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--strings", type=int, default=30000)
    args = parser.parse_args()
    if unicodedata.unidata_version != unicode_tables.UNICODE_VERSION:
        print("error: run with CPython 3.11 (Unicode 14.0.0)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    bad: list[str] = []

    def check(what: str, got: object, want: object, s: str) -> None:
        if got != want and len(bad) < 20:
            bad.append(f"{what} {s!a}: {got!a} != {want!a}")

    for cp in range(0x110000):
        c = chr(cp)
        for name in unistr.PREDICATES:
            check(name, unistr.predicate(name, c), getattr(c, name)(), c)
        for name, fn in unistr.MAPPINGS.items():
            check(name, fn(c), getattr(c, name)(), c)
        check("repr", unistr.repr_str(c), repr(c), c)
    rnd = random.Random(1)
    pool = [chr(c) for c in range(0x3000)] + list(TRICKY) * 50
    for _ in range(args.strings):
        s = "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 12)))
        for name in unistr.PREDICATES:
            check(name, unistr.predicate(name, s), getattr(s, name)(), s)
        for name, fn in unistr.MAPPINGS.items():
            check(name, fn(s), getattr(s, name)(), s)
        check("repr", unistr.repr_str(s), repr(s), s)
        for m in (-1, 0, 1, 2):
            check("split", unistr.split(s, m), s.split(None, m), s)
            check("rsplit", unistr.rsplit(s, m), s.rsplit(None, m), s)
        check("splitlines", unistr.splitlines(s, True), s.splitlines(True), s)
        check("strip", unistr.strip(s, "strip"), s.strip(), s)
    print(json.dumps({"code_points": 0x110000, "strings": args.strings, "mismatches": len(bad), "first": bad,
                      "seconds": round(time.perf_counter() - t0, 1)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

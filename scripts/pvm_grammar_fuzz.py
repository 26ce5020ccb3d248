#!/usr/bin/env python3
"""Differential fuzz of the pinned grammar: random sources, accepted or refused (with the line) by
``cowboy_node/execution/pvm/grammar.py`` under several interpreters, compared with CPython 3.11's.

    python3 scripts/pvm_grammar_fuzz.py python3.11 python3.12 python3.13 [--n 6000] [--seed 7]

Each interpreter loads grammar.py by path (no dependency needed).  Prints one JSON object: per
interpreter, how many sources differ from the first one and how (accepted/refused, or only the
line of the refusal), with examples.  Result (seed 7, 6,001 sources, CPython 3.11.7 vs 3.12.1 and
3.13.0): no source accepted by one and refused by the other; 85 refusals whose line differs, all
ordinary syntax errors whose line is CPython's parser's own (not a check of grammar.py).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path

GRAMMAR = Path(__file__).resolve().parent.parent / "cowboy_node" / "execution" / "pvm" / "grammar.py"
PARTS = ['f"', "f'", 'f"""', "'", '"', "{", "}", "x", "y", ":", "!r", ">", "3", "\\n", "\\\\", "#c", "\n", " ",
         "[", "]", "(", ")", ",", "=", "lambda:1", "type", "X", "*", '"a"', "'b'", 'rf"', "N{BULLET}",
         "\\N{BULLET}", "except", "try:\n  pass\n", "caf\u00e9", "\U00011f04", "{{", "}}"]
RUN = r'''
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location("grammar", sys.argv[1])
g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
out = {}
for src in json.loads(sys.stdin.read()):
    try:
        v = g.check(src, g.parse(src)); out[src] = None if v is None else v[0]
    except SyntaxError as e:
        out[src] = e.lineno
print(json.dumps(out))
'''


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pythons", nargs="+", help="the first one is the reference (CPython 3.11)")
    parser.add_argument("--n", type=int, default=6000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rnd = random.Random(args.seed)
    sources: set[str] = set()
    while len(sources) < args.n:
        body = "".join(rnd.choice(PARTS) for _ in range(rnd.randint(1, 9)))
        sources.add("v = " + body)
        sources.add('v = f"' + body + '"')
    payload = json.dumps(sorted(sources))
    results = [json.loads(subprocess.run([py, "-c", RUN, str(GRAMMAR)], input=payload, capture_output=True,
                                         text=True, check=True, timeout=600).stdout) for py in args.pythons]
    ref = results[0]
    report: dict[str, object] = {"sources": len(ref), "accepted_by_reference": sum(v is None for v in ref.values())}
    for py, res in zip(args.pythons[1:], results[1:], strict=True):
        kinds: dict[str, int] = {}
        examples = []
        for src, want in ref.items():
            got = res[src]
            if got == want:
                continue
            kind = "line_only" if want is not None and got is not None else "accept_vs_refuse"
            kinds[kind] = kinds.get(kind, 0) + 1
            if len(examples) < 5:
                examples.append({"source": src, "reference_line": want, "line": got})
        report[py] = {"differences": kinds, "examples": examples}
    print(json.dumps(report, indent=1, ensure_ascii=True))


if __name__ == "__main__":
    main()

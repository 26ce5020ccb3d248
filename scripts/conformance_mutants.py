#!/usr/bin/env python3
"""Run the named mutants of docs/conformance.md ("Named mutants"): each must be killed by its row's cited tests.

Each table row gives a mutant id, the matrix row, the file, the rule's source snippet (exactly once in the file), the
mutated text and the tests that must fail. The machinery is scripts/consensus_mutations.py's: the tree is copied
once, each mutant is applied to the copy, its tests run there and the file is restored; the working tree is never
touched. Output: JSON per mutant (``killed`` or ``SURVIVED``). Exit 1 if any survived, 2 if the table is stale or the
unmutated tests fail.

    .venv/bin/python scripts/conformance_mutants.py [--only N01 ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "conformance.md"
_spec = importlib.util.spec_from_file_location("consensus_mutations", ROOT / "scripts" / "consensus_mutations.py")
assert _spec is not None and _spec.loader is not None
cm = importlib.util.module_from_spec(_spec)
sys.modules["consensus_mutations"] = cm
_spec.loader.exec_module(cm)


def named_mutants(text: str) -> list[tuple[str, str, Any]]:
    """(mutant id, matrix row, mutation) of every row of the "Named mutants" table."""
    lines = text.splitlines()
    start = lines.index("## Named mutants") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    out = []
    for line in lines[start:end]:
        if not line.startswith("| N"):
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        mid, row, file, orig, mutated, tests = cells
        out.append((mid, row, cm.Mutation(f"{mid} {row}", file.strip("`"), orig.strip("`"), mutated.strip("`"),
                                          tuple(t.strip("`") for t in tests.split("<br>")))))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="mutant ids to run; default all")
    ap.add_argument("--python", default=sys.executable, help="interpreter with the test dependencies")
    args = ap.parse_args(argv)
    table = [m for mid, _, m in named_mutants(DOC.read_text()) if not args.only or mid in args.only]
    try:
        for m in table:
            cm._apply((ROOT / m.file).read_text(), m)
    except cm.StaleTable as e:
        print(json.dumps({"error": str(e)}), file=sys.stderr)
        return 2
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="conformance-mutants-") as tmp:
        tree = Path(tmp) / "repo"
        shutil.copytree(ROOT, tree, ignore=cm.IGNORE)
        every = tuple(dict.fromkeys(t for m in table for t in m.tests))
        broken = {t: o for t, o in cm._run(tree, every, args.python).items() if o != "passed"}
        if broken:
            print(json.dumps({"error": "the unmutated tests do not pass", "tests": broken}, indent=2), file=sys.stderr)
            return 2
        for m in table:
            target = tree / m.file
            original = target.read_text()
            try:
                target.write_text(cm._apply(original, m))
                outcome = cm._run(tree, m.tests, args.python)
            finally:
                target.write_text(original)
            failed = [t for t, o in outcome.items() if o in ("failed", "error")]
            results[m.rule] = {"result": "killed" if failed else "SURVIVED", "failed": failed}
    survived = [r for r, v in results.items() if v["result"] == "SURVIVED"]  # type: ignore[index]
    print(json.dumps({"mutants": results, "summary": {"mutants": len(results), "survived": survived}}, indent=2))
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())

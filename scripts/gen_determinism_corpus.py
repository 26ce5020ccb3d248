#!/usr/bin/env python3
"""Regenerate ``tests/vectors/determinism/corpus.json`` (the golden determinism corpus).

Only after a reviewed protocol change (a new receipt field, a cost-table change under a new
``pvm_version``...): the test that replays the corpus never regenerates it.  Run from the
repository root with the project's interpreter::

    .venv/bin/python scripts/gen_determinism_corpus.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.unit.execution.test_determinism_corpus import CORPUS, run_corpus  # noqa: E402


def main() -> int:
    doc = run_corpus()
    CORPUS.write_text(json.dumps(doc, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")
    n = sum(len(b["txs"]) for b in doc["blocks"])
    print(f"wrote {CORPUS.relative_to(ROOT)}: {len(doc['blocks'])} blocks, {n} transactions, "
          f"final state root {doc['final_state_root']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Compare the PVM's pinned Unicode 14.0.0 semantics with a newer interpreter's own, code point by code point.

An independent check of the generated tables: every difference must be either a code point that
Unicode 14.0.0 leaves unassigned (the newer version assigned it) or a property change listed in the
newer Unicode version's release notes.  Two steps, no installed dependency needed::

    python3.11 scripts/pvm_unicode_tables_vs.py --dump-unassigned /tmp/unassigned14.json
    python3.13 scripts/pvm_unicode_tables_vs.py --compare /tmp/unassigned14.json

Results, outside the code points unassigned in 14.0, over every predicate and case mapping: CPython
3.12.1 (Unicode 15.0.0) differs only in islower for U+10FC, U+A7F2..U+A7F4 and U+AB69 (added to
Other_Lowercase in Unicode 15.0); CPython 3.13.0 (Unicode 15.1.0) in those and in isnumeric for ten CJK
ideographs (numeric values added in Unicode 15.1).
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pvm_unicode_crossversion import _load, _stub_packages


def main() -> None:
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--dump-unassigned", type=Path, help="(CPython 3.11) write the Cn code points of Unicode 14")
    group.add_argument("--compare", type=Path, help="compare with this interpreter's str methods")
    args = parser.parse_args()
    if args.dump_unassigned:
        if unicodedata.unidata_version != "14.0.0":
            sys.exit("--dump-unassigned needs CPython 3.11 (Unicode 14.0.0)")
        cn = [cp for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cn"]
        args.dump_unassigned.write_text(json.dumps(cn))
        print(f"{len(cn)} code points unassigned in Unicode 14.0.0")
        return
    unassigned = set(json.loads(args.compare.read_text()))
    _stub_packages()
    for name in ("costs", "unicode_tables"):
        _load(name)
    u = _load("unistr")
    diffs: dict[str, list[str]] = {}
    for cp in range(0x110000):
        if cp in unassigned:
            continue
        c = chr(cp)
        for name in sorted(u.PREDICATES):
            if u.predicate(name, c) != getattr(c, name)():
                diffs.setdefault(name, []).append(f"U+{cp:04X}")
        for name, fn in u.MAPPINGS.items():
            if fn(c) != getattr(c, name)():
                diffs.setdefault(name, []).append(f"U+{cp:04X}")
    print(json.dumps({"python": sys.version.split()[0], "unicode": unicodedata.unidata_version,
                      "differences_outside_unassigned_in_14": diffs}, indent=1))


if __name__ == "__main__":
    main()

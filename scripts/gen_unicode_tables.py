#!/usr/bin/env python3
"""Generate ``cowboy_node/execution/pvm/unicode_tables.py``: the PVM's pinned Unicode data.

The PVM's string semantics are fixed by ``pvm_version`` (docs/pvm.md, "Pinned Unicode
data"), not by the interpreter that happens to run the node.  PVM version 1 pins the
behaviour of CPython 3.11's ``str`` methods, whose tables are Unicode 14.0.0.  This
script reads that behaviour off the interpreter running it -- one code point at a time,
through the very ``str`` methods the tables replace -- so the pinned data is, by
construction, what CPython 3.11 does; it must therefore be run with a Python whose
``unicodedata.unidata_version`` is the pinned version (any CPython 3.11.x)::

    python3.11 scripts/gen_unicode_tables.py            # rewrite the module
    python3.11 scripts/gen_unicode_tables.py --check    # exit 1 if it is out of date

Every property is derived from a documented CPython 3.11 behaviour (``Objects/unicodeobject.c``
and ``Objects/unicodectype.c``); the derivations that go through a context rule rather
than a predicate are explained where they are made.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

PINNED_UNICODE_VERSION = "14.0.0"
OUT = Path(__file__).resolve().parent.parent / "cowboy_node" / "execution" / "pvm" / "unicode_tables.py"
MAX_CP = 0x10FFFF

Pred = Callable[[str], bool]


def _cased(c: str) -> bool:
    # do_title(): a character after a cased one is lowercased, after an uncased one titlecased,
    # so "a" keeps its case exactly when the character before it is Cased.
    return (c + "a").title().endswith("a")


def _case_ignorable(c: str) -> bool:
    # handle_capital_sigma(): U+03A3 lowercases to final sigma when the nearest non-case-ignorable
    # character before it is cased and the nearest one after it is not (or the string ends).
    if _cased(c):
        # "AΣc": c ends the string after being skipped (final) or stops the scan as a cased letter.
        return ("A\u03a3" + c).lower()[1] == "\u03c2"
    # "AcΣ": c is skipped (the cased "A" decides: final) or stops the scan uncased (not final).
    return ("A" + c + "\u03a3").lower().endswith("\u03c2")


PREDICATES: dict[str, Pred] = {
    "ALPHA": str.isalpha,
    "DECIMAL": str.isdecimal,
    "DIGIT": str.isdigit,
    "NUMERIC": str.isnumeric,
    "SPACE": str.isspace,
    "PRINTABLE": str.isprintable,
    "LOWER": str.islower,
    "UPPER": str.isupper,
    # a one-character string is istitle() when the character is titlecase (Lt) or uppercase
    "TITLE": lambda c: c.istitle() and not c.isupper(),
    "CASED": _cased,
    "CASE_IGNORABLE": _case_ignorable,
    # isidentifier(): the first character is XID_Start or "_", the others XID_Continue
    "XID_START": lambda c: c.isidentifier() and c != "_",
    "XID_CONTINUE": lambda c: ("a" + c).isidentifier(),
    "LINEBREAK": lambda c: len(("a" + c + "b").splitlines()) == 2,
}
PROPERTY_DOCS: dict[str, str] = {
    "ALPHA": "str.isalpha (categories Lm Lt Lu Ll Lo)",
    "DECIMAL": "str.isdecimal; int()/float() read these digits (DECIMAL_VALUE)",
    "DIGIT": "str.isdigit",
    "NUMERIC": "str.isnumeric",
    "SPACE": "str.isspace; also split()/strip() without arguments and int()/float() blanks",
    "PRINTABLE": "str.isprintable; repr() escapes the others",
    "LOWER": "Lowercase (str.islower of one character)",
    "UPPER": "Uppercase (str.isupper of one character)",
    "TITLE": "titlecase letters (category Lt)",
    "CASED": "Cased (title() and the final-sigma rule)",
    "CASE_IGNORABLE": "Case_Ignorable (the final-sigma rule)",
    "XID_START": "XID_Start (str.isidentifier, first character; '_' is added by the rule)",
    "XID_CONTINUE": "XID_Continue (str.isidentifier, other characters)",
    "LINEBREAK": "line boundaries of str.splitlines (besides the pair CR LF)",
}
MAPS: dict[str, Callable[[str], str]] = {
    "UPPER_MAP": str.upper,
    "LOWER_MAP": str.lower,  # one character: U+03A3 alone has no cased neighbour, so it maps to U+03C3
    "TITLE_MAP": str.title,  # one character: nothing before it is cased, so it is titlecased
    "FOLD_MAP": str.casefold,
}


def _ranges(pred: Pred) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = -1
    for cp in range(MAX_CP + 1):
        if pred(chr(cp)):
            if start < 0:
                start = cp
        elif start >= 0:
            out.append((start, cp - 1))
            start = -1
    if start >= 0:
        out.append((start, MAX_CP))
    return out


def derive() -> dict[str, object]:
    """Every table, read off this interpreter."""
    tables: dict[str, object] = {name: _ranges(pred) for name, pred in PREDICATES.items()}
    tables["DECIMAL_VALUE"] = {cp: int(chr(cp)) for cp in range(MAX_CP + 1) if chr(cp).isdecimal()}
    for name, fn in MAPS.items():
        tables[name] = {cp: fn(chr(cp)) for cp in range(MAX_CP + 1) if fn(chr(cp)) != chr(cp)}
    return tables


def _fmt_ranges(ranges: list[tuple[int, int]]) -> str:
    lines = []
    for i in range(0, len(ranges), 6):
        lines.append("    " + " ".join(f"0x{a:05X}, 0x{b:05X}," for a, b in ranges[i:i + 6]))
    return "(\n" + "\n".join(lines) + "\n)"


def _fmt_map(mapping: dict[int, object]) -> str:
    items = [f"0x{cp:05X}: {v!a}," for cp, v in sorted(mapping.items())]
    lines: list[str] = []
    for item in items:  # pack greedily under the project's line length
        if lines and len(lines[-1]) + 1 + len(item) <= 116:
            lines[-1] += " " + item
        else:
            lines.append("    " + item)
    return "{\n" + "\n".join(lines) + "\n}"


def render(tables: dict[str, object]) -> str:
    body = []
    for name in PREDICATES:
        ranges = tables[name]
        assert isinstance(ranges, list)
        body.append(f"#: {PROPERTY_DOCS[name]}\n{name}: tuple[int, ...] = {_fmt_ranges(ranges)}\n")
    dec = tables["DECIMAL_VALUE"]
    assert isinstance(dec, dict)
    body.append(f"#: value of each decimal digit (int(), float())\nDECIMAL_VALUE: dict[int, int] = {_fmt_map(dec)}\n")
    for name in MAPS:
        m = tables[name]
        assert isinstance(m, dict)
        body.append(f"#: full {name[:-4].lower()} mapping of every code point that does not map to itself\n"
                    f"{name}: dict[int, str] = {_fmt_map(m)}\n")
    text = "\n".join(body)
    digest = hashlib.sha256(text.encode()).hexdigest()
    head = (
        '"""Pinned Unicode data of PVM version 1 (Unicode 14.0.0, as CPython 3.11 applies it).\n\n'
        "GENERATED by ``scripts/gen_unicode_tables.py`` -- do not edit.  Each ``*: tuple[int, ...]``\n"
        "property is a flat tuple of inclusive code point ranges ``(start0, end0, start1, end1, ...)``\n"
        "in increasing order; each ``*_MAP`` gives the full mapping of the code points that do not map\n"
        "to themselves.  Used by :mod:`cowboy_node.execution.pvm.unicode_str`.\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        f'UNICODE_VERSION = "{PINNED_UNICODE_VERSION}"\n'
        "#: sha256 of the generated data below (the generator's --check compares it)\n"
        f'DATA_SHA256 = "{digest}"\n\n'
    )
    return head + text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the checked-in module differs")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if unicodedata.unidata_version != PINNED_UNICODE_VERSION:
        print(f"error: this interpreter has Unicode {unicodedata.unidata_version}; PVM version 1 pins "
              f"{PINNED_UNICODE_VERSION} (run with CPython 3.11)", file=sys.stderr)
        return 2
    text = render(derive())
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is out of date", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""docs/conformance.md (the CIP-11 conformance matrix) stays well-formed and names only tests that exist.

Checks: every matrix row has a unique ``C11-§<section>-<nn>`` id and a status from the allowed set (a deviation or an
out-of-scope row gives its reason in parentheses); ``implemented`` rows name at least one test and ``implemented,
untested`` rows none; the summary counts match the table; the to-do table lists exactly the untested rows; and every
pytest node id quoted anywhere in the document is collected by ``pytest --collect-only`` (a parametrized test may be
named by its function, meaning all of its cases).
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "conformance.md"
ROW_ID = re.compile(r"C11-§\d+(?:\.\d+)?-\d{2}")
TEST_ID = re.compile(r"`(tests/[^`\s]+\.py::[^`]+)`")
PLAIN = ("implemented", "implemented, untested", "missing")
WITH_REASON = ("deviates", "out of scope")
CATEGORY = {"implemented": "implemented+tested", "implemented, untested": "untested", "missing": "missing",
            "deviates": "deviates", "out of scope": "out of scope"}


def _cells(line: str) -> list[str]:
    """The cells of a markdown table row; ``\\|`` is a literal bar inside a cell."""
    inner = line.strip()
    assert inner.startswith("|") and inner.endswith("|"), line
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner[1:-1])]


def _section(text: str, title: str) -> list[str]:
    """Lines of the ``## title`` section, up to the next ``## `` heading."""
    lines = text.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def _table(lines: list[str]) -> list[list[str]]:
    """Body rows of the first table in ``lines`` (header and separator dropped)."""
    rows = [_cells(x) for x in lines if x.startswith("|")]
    assert len(rows) >= 2 and set(rows[1][0]) <= {"-", ":"}, "no table"
    return rows[2:]


@cache
def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


@cache
def _matrix() -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(r) for r in _table(_section(_doc(), "Matrix")))


def _kind(status: str) -> str | None:
    """The status's kind, or None when it is not an allowed status."""
    if status in PLAIN:
        return status
    for kind in WITH_REASON:
        m = re.fullmatch(rf"{kind} \((.+)\)", status, flags=re.S)
        if m and m.group(1).strip():
            return kind
    return None


@cache
def _collected(files: tuple[str, ...]) -> frozenset[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return frozenset(line.strip() for line in proc.stdout.splitlines() if "::" in line)


def test_matrix_rows_have_unique_ids_and_allowed_statuses() -> None:
    rows = _matrix()
    assert len(rows) > 100
    ids = [r[0] for r in rows]
    bad_ids = [i for i in ids if not ROW_ID.fullmatch(i)]
    assert not bad_ids, f"malformed row ids: {bad_ids}"
    dupes = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert not dupes, f"duplicate row ids: {dupes}"
    for row in rows:
        assert len(row) == 6, f"{row[0]}: expected 6 cells, got {len(row)}"
        rid, sec, quote, status, tests, _ = row
        assert rid.startswith(f"C11-{sec}-"), f"{rid}: section cell {sec!r} does not match the id"
        assert quote, f"{rid}: no quote"
        assert len([w for w in quote.split() if w != "…"]) <= 20, f"{rid}: quote longer than 20 words"
        kind = _kind(status)
        assert kind is not None, f"{rid}: status {status!r} is not one of {PLAIN} or '<deviates|out of scope> (reason)'"
        named = TEST_ID.findall(tests)
        if kind == "implemented":
            assert named, f"{rid}: implemented but names no test (use 'implemented, untested')"
        if kind in ("implemented, untested", "missing"):
            assert not named, f"{rid}: {kind} but names tests"


def test_summary_counts_match_the_matrix() -> None:
    counts = collections.Counter(CATEGORY.get(_kind(r[3]) or "", "invalid") for r in _matrix())
    summary = {r[0]: r[1] for r in _table(_section(_doc(), "Summary"))}
    for category in CATEGORY.values():
        assert int(summary[category]) == counts[category], f"summary says {summary[category]} {category}"
    assert summary["**total**"] == f"**{len(_matrix())}**"


def test_todo_lists_exactly_the_untested_rows() -> None:
    untested = {r[0] for r in _matrix() if r[3] == "implemented, untested"}
    todo = {r[0] for r in _table(_section(_doc(), "To-do: implemented but untested"))}
    assert todo == untested


def test_every_named_test_is_collected() -> None:
    named = sorted(set(TEST_ID.findall(_doc())))
    assert named
    files = tuple(sorted({n.split("::", 1)[0] for n in named}))
    missing_files = [f for f in files if not (ROOT / f).is_file()]
    assert not missing_files, f"test files named in the doc do not exist: {missing_files}"
    collected = _collected(files)
    functions = {c.split("[", 1)[0] for c in collected}
    missing = [n for n in named if n not in collected and ("[" in n or n not in functions)]
    assert not missing, "test ids named in docs/conformance.md that pytest does not collect:\n" + "\n".join(missing)


@pytest.mark.parametrize("status,kind", [
    ("implemented", "implemented"), ("implemented, untested", "implemented, untested"), ("missing", "missing"),
    ("deviates (one encoder)", "deviates"), ("out of scope (Mode A)", "out of scope"),
    ("deviates", None), ("out of scope ()", None), ("done", None), ("implemented (mostly)", None),
])
def test_status_parser(status: str, kind: str | None) -> None:
    assert _kind(status) == kind


def _named_mutants() -> list[list[str]]:
    return [r for r in _table(_section(_doc(), "Named mutants")) if r and r[0].startswith("N")]


def _covered_rows() -> set[str]:
    line = next(x for x in _section(_doc(), "Named mutants") if x.startswith("Rows covered:"))
    return set(ROW_ID.findall(line))


def test_named_mutant_table_is_complete_for_the_rows_it_covers() -> None:
    """Issue 31: each covered single-check row has a named mutant that its cited tests kill (run by
    scripts/conformance_mutants.py); here, without running anything, the table must be complete and consistent."""
    rows = {r[0]: r for r in _matrix()}
    mutants = _named_mutants()
    covered = _covered_rows()
    assert mutants and covered
    ids = [m[0] for m in mutants]
    assert len(ids) == len(set(ids)), f"duplicate mutant ids: {ids}"
    assert {m[1] for m in mutants} == covered, "every covered row needs a mutant and every mutant a covered row"
    for mid, rid, file, original, mutated, tests in mutants:
        assert rid in rows and _kind(rows[rid][3]) == "implemented", f"{mid}: {rid} is not an implemented matrix row"
        orig, mut = original.strip("`"), mutated.strip("`")
        assert orig != mut, f"{mid}: the mutant changes nothing"
        count = (ROOT / file.strip("`")).read_text(encoding="utf-8").count(orig)
        assert count == 1, f"{mid}: snippet found {count} times in {file} (expected once): {orig!r}"
        named = set(TEST_ID.findall(tests))
        assert named, f"{mid}: names no test"
        cited = set(TEST_ID.findall(rows[rid][4]))
        assert named <= cited, f"{mid}: tests {sorted(named - cited)} are not cited by row {rid}"

"""``scripts/mutate.py``'s session sharding (issue 31 §2, docs/testing.md "Runtime"): the shards of a session
together run each pending mutant exactly once, and count each mutant the filters skipped exactly once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.unit.project.script_loader import load_script


def _session(path: Path, pending: int, skipped: int) -> None:
    """A cosmic-ray session database (the tables and columns ``_shard`` reads): ``pending`` mutants not run yet,
    ``skipped`` already marked by the filters."""
    con = sqlite3.connect(path)
    con.executescript("CREATE TABLE work_items (job_id TEXT PRIMARY KEY);"
                      "CREATE TABLE mutation_specs (job_id TEXT PRIMARY KEY, module_path TEXT, operator_name TEXT,"
                      " occurrence INTEGER);"
                      "CREATE TABLE work_results (job_id TEXT PRIMARY KEY, worker_outcome TEXT);")
    for i in range(pending + skipped):
        job = f"job{i:03d}"
        con.execute("INSERT INTO work_items VALUES (?)", (job,))
        con.execute("INSERT INTO mutation_specs VALUES (?, 'm.py', ?, ?)", (job, f"op{i % 3}", i))
        if i >= pending:
            con.execute("INSERT INTO work_results VALUES (?, 'SKIPPED')", (job,))
    con.commit()
    con.close()


def _rows(path: Path) -> tuple[set[str], set[str]]:
    con = sqlite3.connect(path)
    try:
        items = {r[0] for r in con.execute("SELECT job_id FROM work_items")}
        done = {r[0] for r in con.execute("SELECT job_id FROM work_results")}
    finally:
        con.close()
    return items - done, done


def test_shards_split_the_pending_mutants_and_count_the_skipped_ones_once(tmp_path: Path) -> None:
    mutate = load_script("mutate")
    for jobs in (1, 2, 3):
        paths = [tmp_path / f"s{jobs}-{k}.sqlite" for k in range(jobs)]
        for p in paths:
            _session(p, pending=10, skipped=4)
        kept = [mutate._shard(p, k, jobs) for k, p in enumerate(paths)]
        pending = [_rows(p)[0] for p in paths]
        skipped = [_rows(p)[1] for p in paths]
        assert kept == [len(s) for s in pending] and sum(kept) == 10
        assert set().union(*pending) == {f"job{i:03d}" for i in range(10)}
        assert sum(len(s) for s in pending) == 10  # disjoint: each mutant runs once
        assert max(kept) - min(kept) <= 1  # every n-th: balanced
        assert skipped[0] == {f"job{i:03d}" for i in range(10, 14)} and not any(skipped[1:])

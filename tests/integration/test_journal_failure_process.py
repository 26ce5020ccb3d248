"""``cowboy-node run`` and its vote journal as a real process (issue 30 §1): a journal the kernel refuses to grow
(EFBIG under RLIMIT_FSIZE) stops the node with a non-zero exit and a message naming the file and the errno, before
any block is finalized with the vote it could not journal; a journal holding two different votes of one kind for a
view refuses to start, naming the file."""

from __future__ import annotations

import os
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from cowboy_node.consensus.journal import VOTE_JOURNAL_FILE
from cowboy_node.consensus.simplex.types import Finalize, Nullify, Proposal, Vote, encode_message
from cowboy_node.types.block import Round
from tests.integration.nodeproc import BIN, NodeProcess

pytestmark = pytest.mark.timeout(600)


def _records(votes: list[Vote]) -> bytes:
    return b"".join(struct.pack(">I", len(encode_message(v))) + encode_message(v) for v in votes)


def _run(home: Path, limit: int | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    exe = BIN / "cowboy-node"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "cowboy_node.cli.main"]

    def limit_file_size() -> None:  # in the child only; CPython ignores SIGXFSZ, so the write fails with EFBIG
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([*cmd, "run", "--home", str(home)], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit_file_size, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_journal_that_cannot_grow_stops_the_node_non_zero_naming_file_and_errno(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home", block_time_ms=100)
    journal = node.home / "data" / VOTE_JOURNAL_FILE
    # View-0 votes are below any floor: restored as nothing, but they make the file as big as the size limit.
    filler = _records([Nullify(Round(0, 0), 0, b"\x01" * 48, b"\x02" * 48)] * 12_000)
    journal.write_bytes(filler)
    res = _run(node.home, limit=len(filler) + 16)  # the first real vote does not fit
    assert res.returncode == 3, res.stdout[-3000:] + res.stderr
    assert "fatal:" in res.stderr and str(journal) in res.stderr and "EFBIG" in res.stderr, res.stderr
    assert "vote journal write failed" in res.stdout  # the critical log line
    assert journal.stat().st_size <= len(filler) + 16


def test_a_journal_with_two_finalizes_for_a_view_refuses_to_start(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "home")
    journal = node.home / "data" / VOTE_JOURNAL_FILE
    p1 = Proposal(Round(0, 1), 0, bytes(32), b"\x0a" * 32)
    p2 = Proposal(Round(0, 1), 0, bytes(32), b"\x0b" * 32)
    journal.write_bytes(_records([Finalize(p1, 0, b"\x01" * 48, b"\x02" * 48),
                                  Finalize(p2, 0, b"\x03" * 48, b"\x02" * 48)]))
    res = _run(node.home)
    assert res.returncode == 1, res.stdout[-3000:] + res.stderr
    assert f"error: {journal}: journal holds two different finalize votes for view 1" in res.stderr, res.stderr

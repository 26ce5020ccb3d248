"""The vote journal's durability rules (``consensus/journal.py``): every byte of a record lands even when
``os.write`` writes less than asked; a write that makes no progress or fails (ENOSPC, EIO, EFBIG) is a typed
:class:`JournalWriteError` carrying the file and the errno, after which the journal refuses every append; the file
and its directory are fsynced when the file is created or replaced."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from cowboy_node.consensus import journal as journal_mod
from cowboy_node.consensus.journal import (
    JournalWriteError,
    VoteJournal,
    create_empty_journal,
    marker_path,
    remove_marker,
    write_marker,
)
from cowboy_node.consensus.simplex.types import Finalize, Notarize, Nullify, Proposal, Vote, encode_message
from cowboy_node.types.block import Round

ROOT = Path(__file__).resolve().parents[3]


def _votes(n: int = 3) -> list[Vote]:
    out: list[Vote] = []
    for view in range(1, n + 1):
        p = Proposal(Round(0, view), view - 1, bytes(32), bytes([view % 256]) * 32)
        kind = view % 3
        if kind == 0:
            out.append(Nullify(Round(0, view), 0, b"\x03" * 48, b"\x04" * 48))
        elif kind == 1:
            out.append(Notarize(p, 0, b"\x01" * 48, b"\x02" * 48))
        else:
            out.append(Finalize(p, 0, b"\x05" * 48, b"\x06" * 48))
    return out


def _encoding(votes: list[Vote]) -> bytes:
    return b"".join(struct.pack(">I", len(encode_message(v))) + encode_message(v) for v in votes)


def _short_writes(monkeypatch: pytest.MonkeyPatch, at_most: int) -> list[int]:
    """os.write in the journal module writes at most ``at_most`` bytes per call (as a full disk or a signal may)."""
    real = os.write
    calls: list[int] = []

    def short(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        return real(fd, bytes(data[:at_most]))

    monkeypatch.setattr(journal_mod.os, "write", short)
    return calls


# ------------------------------------------------------------------------------------------------ short writes


def test_partial_writes_are_continued_until_every_byte_of_the_record_lands(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    calls = _short_writes(monkeypatch, 7)
    votes = _votes(3)
    for v in votes:
        j.append(v)
    j.close()
    assert len(calls) > 3  # the fake really wrote less than asked
    assert path.read_bytes() == _encoding(votes)


def test_compaction_writes_every_byte_despite_partial_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    votes = _votes(6)
    for v in votes:
        j.append(v)
    calls = _short_writes(monkeypatch, 5)
    j.compact(above_view=2)
    j.close()
    assert len(calls) > 1
    assert path.read_bytes() == _encoding(votes[2:])


def test_a_write_that_makes_no_progress_is_an_error_not_success(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    zeros = [0]

    def zero(fd: int, data: bytes | memoryview) -> int:
        zeros[0] += 1
        if zeros[0] > 100:  # without the rule the loop would spin: fail instead of hanging
            raise AssertionError("os.write returning 0 was retried forever")
        return 0

    monkeypatch.setattr(journal_mod.os, "write", zero)
    with pytest.raises(JournalWriteError) as info:
        j.append(_votes(1)[0])
    assert info.value.path == path and info.value.errno == errno.EIO and str(path) in str(info.value)
    assert j.records == 0


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO, errno.EFBIG])
def test_a_failed_write_raises_a_typed_error_with_path_and_errno_and_later_appends_refuse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    first, second = _votes(2)
    j.append(first)

    def fail(fd: int, data: bytes | memoryview) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(journal_mod.os, "write", fail)
    with pytest.raises(JournalWriteError) as info:
        j.append(second)
    assert info.value.path == path and info.value.errno == code
    assert info.value.errno_name == errno.errorcode[code]
    monkeypatch.undo()  # the disk is fine again, but what the file holds past the last good record is unknown
    with pytest.raises(JournalWriteError):
        j.append(second)
    j.close()
    assert path.read_bytes() == _encoding([first])


def test_a_failed_fsync_is_a_journal_write_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()

    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_mod.os, "fsync", fail)
    with pytest.raises(JournalWriteError) as info:
        j.append(_votes(1)[0])
    assert info.value.errno == errno.EIO and info.value.path == path


def test_a_failed_compaction_is_a_journal_write_error_and_keeps_the_journal(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "votes.journal"
    j = VoteJournal(path)
    j.load()
    votes = _votes(4)
    for v in votes:
        j.append(v)

    def fail(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_mod.os, "write", fail)
    with pytest.raises(JournalWriteError) as info:
        j.compact(above_view=2)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == _encoding(votes)  # written aside: the journal itself is intact


EFBIG_CHILD = textwrap.dedent("""
    import json, resource, signal, sys
    from pathlib import Path
    from cowboy_node.consensus.journal import JournalWriteError, VoteJournal
    from tests.unit.consensus.test_journal_durability import _votes
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process instead of failing write
    path, limit = Path(sys.argv[1]), int(sys.argv[2])
    j = VoteJournal(path)
    j.load()
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    appended = 0
    try:
        for v in _votes(50):
            j.append(v)
            appended += 1
    except JournalWriteError as e:
        print(json.dumps({"errno": e.errno, "path": str(e.path), "appended": appended, "message": str(e)}))
        sys.exit(0)
    print(json.dumps({"errno": None, "appended": appended}))
""")


def test_a_real_file_size_limit_gives_efbig_with_the_path(tmp_path: Path) -> None:
    """RLIMIT_FSIZE makes the kernel refuse the write past the limit (a short write first, then EFBIG)."""
    import json

    path = tmp_path / "votes.journal"
    three, four = len(_encoding(_votes(3))), len(_encoding(_votes(4)))
    limit = (three + four) // 2  # the fourth record is cut: a short write, then EFBIG on the rest
    res = subprocess.run([sys.executable, "-c", EFBIG_CHILD, str(path), str(limit)], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["errno"] == errno.EFBIG and out["path"] == str(path), out
    assert out["appended"] == 3
    data = path.read_bytes()
    assert len(data) == limit and data.startswith(_encoding(_votes(3)))
    again = VoteJournal(path)
    assert again.load() == _votes(3) and again.dropped_bytes == limit - three  # the torn record never counted
    again.close()


# ------------------------------------------------------------------------------------------------ directory fsync


def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """Every os.fsync of the journal module, as (is a directory, what the descriptor names)."""
    real: Callable[[int], None] = os.fsync
    seen: list[tuple[bool, str]] = []

    def spy(fd: int) -> None:
        seen.append((stat.S_ISDIR(os.fstat(fd).st_mode), os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(journal_mod.os, "fsync", spy)
    return seen


def test_creating_the_journal_fsyncs_its_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record_fsyncs(monkeypatch)
    j = VoteJournal(tmp_path / "votes.journal")
    j.load()
    j.close()
    assert (True, str(tmp_path)) in seen
    assert (False, str(tmp_path / "votes.journal")) in seen


def test_replacing_the_journal_by_compaction_fsyncs_its_directory(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    j = VoteJournal(tmp_path / "votes.journal")
    j.load()
    for v in _votes(4):
        j.append(v)
    seen = _record_fsyncs(monkeypatch)
    j.compact(above_view=2)
    j.close()
    assert seen[-1] == (True, str(tmp_path))  # after the rename: the new name is durable
    assert (False, str(tmp_path / "votes.tmp")) in seen  # and the new file's bytes before it


def test_create_empty_journal_and_the_marker_fsync_file_and_directory(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _record_fsyncs(monkeypatch)
    data = tmp_path / "home" / "data"
    journal = data / "consensus-votes.journal"
    create_empty_journal(journal)
    assert journal.read_bytes() == b"" and stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert (False, str(journal)) in seen and (True, str(data)) in seen and (True, str(tmp_path / "home")) in seen
    seen.clear()
    marker = marker_path(journal)
    assert marker.name == "consensus-votes.watching"
    write_marker(marker, "watching\n")
    assert seen == [(False, str(marker)), (True, str(data))]
    seen.clear()
    remove_marker(marker)
    assert not marker.exists() and seen == [(True, str(data))]


# ------------------------------------------------------------------------------------------------ group commit


GROUP_SHA256 = "d0826a8787f50d04259d856f9b9ff131113a9f2f3d5e5bd596a7cb5d2e9e9527"
"""sha256 of the journal holding ``_votes(3)`` (issue 36 §2 group commit: the bytes of one append per vote)."""


def test_a_group_commit_writes_the_records_of_one_append_each_with_one_fsync(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    votes = _votes(3)
    single = VoteJournal(tmp_path / "single.journal")
    single.load()
    for v in votes:
        single.append(v)
    single.close()
    fsyncs: list[int] = []
    real_fsync = os.fsync

    def counting(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    group = VoteJournal(tmp_path / "group.journal")
    group.load()
    monkeypatch.setattr(journal_mod.os, "fsync", counting)
    group.append_many(votes)
    monkeypatch.undo()
    group.close()
    data = (tmp_path / "group.journal").read_bytes()
    assert data == _encoding(votes) == (tmp_path / "single.journal").read_bytes()
    assert hashlib.sha256(data).hexdigest() == GROUP_SHA256  # golden: the documented record format, pinned
    assert len(fsyncs) == 1  # the three votes made durable by one fsync
    assert group.votes() == votes and VoteJournal(tmp_path / "group.journal").load() == votes


def test_a_group_commit_torn_anywhere_keeps_exactly_its_whole_records(tmp_path: Path) -> None:
    """A crash part-way through a group write leaves whole records then at most one torn one: at every cut,
    ``load`` returns the votes whose records are whole and truncates the file there."""
    votes = _votes(3)
    data = _encoding(votes)
    ends = [len(_encoding(votes[:i])) for i in range(len(votes) + 1)]
    path = tmp_path / "votes.journal"
    for cut in range(len(data) + 1):
        path.write_bytes(data[:cut])
        j = VoteJournal(path)
        whole = max(i for i, end in enumerate(ends) if end <= cut)
        assert j.load() == votes[:whole], cut
        assert j.dropped_bytes == cut - ends[whole] and path.stat().st_size == ends[whole]
        j.close()


def test_a_failed_group_commit_records_none_of_its_votes_and_refuses_later_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    j = VoteJournal(tmp_path / "votes.journal")
    j.load()
    first, *rest = _votes(3)
    j.append(first)

    def fail(fd: int, data: bytes | memoryview) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(journal_mod.os, "write", fail)
    with pytest.raises(JournalWriteError) as info:
        j.append_many(rest)
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert j.votes() == [first]
    with pytest.raises(JournalWriteError):
        j.append_many(rest)
    j.close()

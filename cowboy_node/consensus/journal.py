"""The vote journal: every own vote is written and fsynced here before it is sent (Simplex restart safety).

File format: a sequence of records ``u32_be length ‖ encoded vote`` (:func:`encode_message`). A crash can
leave a torn last record; :meth:`VoteJournal.load` drops it and truncates the file there (that vote was
never sent: sending waits for the fsync). :meth:`VoteJournal.compact` rewrites the file (atomically, by
rename) without the votes at or below a view the node can no longer re-enter (the committed head's: a restart
resumes there).

Durability: every byte of a record is written (a short write is continued, a write that makes no progress is
an error), the file is fsynced, and so is its directory whenever the file is created or replaced. Any failure
raises :class:`JournalWriteError` naming the file and the errno; the journal then refuses every later append
(the caller must stop before the vote leaves the process).

The double-sign guard's marker (:func:`marker_path`) lives next to the journal: a validator that starts without
its journal writes it before creating the journal and removes it once it has watched the network long enough
(``docs/consensus.md``, "Vote journal and the double-sign guard").
"""

from __future__ import annotations

import errno as _errno
import os
import struct
from pathlib import Path

from cowboy_node.consensus.simplex.types import Finalize, Notarize, Nullify, Vote, decode_message, encode_message

_LEN = struct.Struct(">I")
MAX_RECORD = 1 << 16
"""A vote is a few hundred bytes; a longer length prefix is corruption."""
VOTE_JOURNAL_FILE = "consensus-votes.journal"
"""The consensus vote journal, in the data directory (losing it could let a restarted validator equivocate)."""
WATCH_MARKER_SUFFIX = ".watching"
"""Suffix of the double-sign guard's marker, replacing the journal's ``.journal`` (``consensus-votes.watching``)."""


class JournalError(Exception):
    """The vote journal cannot be used; the message names the file."""

    def __init__(self, path: Path, message: str, errno: int | None = None) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        """The journal file (or the directory / temporary file the failing operation touched)."""
        self.errno = errno
        """The OS error number (None when the failure is not an OS error, e.g. a corrupt record)."""


class JournalCorrupt(JournalError):
    """A record in the middle of the journal does not decode (or is not a vote)."""


class JournalWriteError(JournalError):
    """Writing, fsyncing, creating or replacing the journal failed (ENOSPC, EIO, EFBIG, a write that makes no
    progress…). ``errno`` is the OS error number; a write that returned 0 carries ``EIO`` (no progress, and the
    kernel gave no reason)."""

    @property
    def errno_name(self) -> str:
        """Symbolic name of :attr:`errno` (``ENOSPC``…), or ``"unknown"``."""
        return _errno.errorcode.get(self.errno, "unknown") if self.errno is not None else "unknown"


def _write_all(fd: int, data: bytes, path: Path) -> None:
    """Write every byte of ``data`` to ``fd`` (continuing short writes); :class:`JournalWriteError` otherwise."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except OSError as e:
            raise JournalWriteError(path, f"write failed: {e.strerror or e}", e.errno) from e
        if n <= 0:
            raise JournalWriteError(path, f"write made no progress ({len(view)} bytes left)", _errno.EIO)
        view = view[n:]


def _fsync(fd: int, path: Path) -> None:
    try:
        os.fsync(fd)
    except OSError as e:
        raise JournalWriteError(path, f"fsync failed: {e.strerror or e}", e.errno) from e


def fsync_dir(directory: Path) -> None:
    """fsync ``directory`` (makes a file created, renamed or removed in it durable)."""
    try:
        dfd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise JournalWriteError(directory, f"cannot open directory to fsync it: {e.strerror or e}", e.errno) from e
    try:
        _fsync(dfd, directory)
    finally:
        os.close(dfd)


def _mkdirs(directory: Path) -> None:
    """Create ``directory`` (and missing parents, 0700), fsyncing each parent that gained an entry."""
    missing: list[Path] = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700, exist_ok=True)
        except OSError as e:
            raise JournalWriteError(d, f"cannot create directory: {e.strerror or e}", e.errno) from e
        fsync_dir(d.parent)


def create_empty_journal(path: Path) -> None:
    """Create an empty journal at ``path`` (0600; file and directory fsynced): what ``cowboy-node init`` and
    ``cowboy-node testnet`` do for a key created right now, which has never signed a vote. An existing journal
    is left as it is."""
    _mkdirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as e:
        raise JournalWriteError(path, f"cannot create: {e.strerror or e}", e.errno) from e
    try:
        _fsync(fd, path)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def marker_path(journal_path: Path) -> Path:
    """The double-sign guard's marker next to ``journal_path`` (``consensus-votes.watching``)."""
    return journal_path.with_suffix(WATCH_MARKER_SUFFIX)


def write_marker(path: Path, text: str) -> None:
    """Create (or replace) the marker ``path`` durably: the file and its directory fsynced before returning."""
    _mkdirs(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as e:
        raise JournalWriteError(path, f"cannot create: {e.strerror or e}", e.errno) from e
    try:
        _write_all(fd, text.encode(), path)
        _fsync(fd, path)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


def remove_marker(path: Path) -> None:
    """Remove the marker ``path`` (if present) durably (its directory fsynced)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as e:
        raise JournalWriteError(path, f"cannot remove: {e.strerror or e}", e.errno) from e
    fsync_dir(path.parent)


class VoteJournal:
    """Append-only, fsynced journal of this validator's own votes.

    It keeps (in memory) the votes the file holds, so that :meth:`compact` depends on nothing but the view it is
    given (the engine prunes old views from its own memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        """The journal file (``DATA/consensus-votes.journal``)."""
        self._fd: int | None = None
        self._votes: list[Vote] = []
        self._failed: JournalWriteError | None = None
        self.dropped_bytes = 0
        """Bytes of a torn last record dropped by the last :meth:`load` (the caller logs it)."""
        self.created = False
        """True when the last :meth:`load` created the file (it did not exist)."""

    def load(self) -> list[Vote]:
        """Read every complete record (truncating a torn tail) and open the file for appending.

        Raises :class:`JournalCorrupt` for a bad record before the tail, :class:`JournalWriteError` when the file
        cannot be created, truncated or fsynced."""
        votes: list[Vote] = []
        good = 0
        existed = self.path.exists()
        try:
            data = self.path.read_bytes() if existed else b""
        except OSError as e:
            raise JournalWriteError(self.path, f"cannot read: {e.strerror or e}", e.errno) from e
        pos = 0
        while pos + _LEN.size <= len(data):
            (n,) = _LEN.unpack_from(data, pos)
            if n == 0 or n > MAX_RECORD:
                raise JournalCorrupt(self.path, f"bad record length {n} at offset {pos}")
            if pos + _LEN.size + n > len(data):
                break  # torn tail
            try:
                msg = decode_message(data[pos + _LEN.size:pos + _LEN.size + n])
            except Exception as e:
                if pos + _LEN.size + n == len(data):
                    break  # a torn tail that happens to have a whole length
                raise JournalCorrupt(self.path, f"record at offset {pos} does not decode: {e}") from None
            if not isinstance(msg, Notarize | Nullify | Finalize):
                raise JournalCorrupt(self.path, f"record at offset {pos} is not a vote")
            votes.append(msg)
            pos += _LEN.size + n
            good = pos
        self.dropped_bytes = len(data) - good
        _mkdirs(self.path.parent)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.ftruncate(self._fd, good)
            os.lseek(self._fd, good, os.SEEK_SET)
        except OSError as e:
            raise JournalWriteError(self.path, f"cannot open for appending: {e.strerror or e}", e.errno) from e
        _fsync(self._fd, self.path)
        if not existed:
            fsync_dir(self.path.parent)
        self.created = not existed
        self._votes = list(votes)
        return votes

    def append(self, vote: Vote) -> None:
        """Write ``vote`` (every byte) and fsync; returns only once it is durable (:meth:`append_many`)."""
        self.append_many([vote])

    def append_many(self, votes: list[Vote]) -> None:
        """Write the records of ``votes`` (in order, every byte) and fsync once; returns only once all are
        durable (group commit: the service journals the votes queued behind one write together).

        The records are the same as one :meth:`append` each, so a crash part-way leaves at most one torn record
        (the last one written), which :meth:`load` drops; the votes before it are whole. Raises
        :class:`JournalWriteError` on any failure; after one, every later append raises it again (what the file
        holds past the last good record is unknown until the next :meth:`load` truncates it)."""
        if self._failed is not None:
            raise self._failed
        if self._fd is None:
            raise RuntimeError("journal not opened (call load first)")
        if not votes:
            return
        data = b"".join(_LEN.pack(len(body)) + body for body in map(encode_message, votes))
        try:
            _write_all(self._fd, data, self.path)
            _fsync(self._fd, self.path)
        except JournalWriteError as e:
            self._failed = e
            raise
        self._votes.extend(votes)

    def compact(self, above_view: int) -> None:
        """Rewrite the journal with only the votes of views above ``above_view`` (atomically: written aside,
        fsynced, renamed over the journal, directory fsynced). Nothing is rewritten when no vote would go.

        ``above_view`` must be a view the node can never re-enter after a restart: the committed head's view,
        never the engine's finalized view (blocks finalized but not committed are re-finalized after a restart,
        from the committed head)."""
        if self._failed is not None:
            raise self._failed
        keep = [v for v in self._votes if v.round.view > above_view]
        if len(keep) == len(self._votes):
            return
        tmp = self.path.with_suffix(".tmp")
        try:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            except OSError as e:
                raise JournalWriteError(tmp, f"cannot create: {e.strerror or e}", e.errno) from e
            try:
                _write_all(fd, b"".join(_LEN.pack(len(b)) + b for b in map(encode_message, keep)), tmp)
                _fsync(fd, tmp)
            finally:
                os.close(fd)
            try:
                os.replace(tmp, self.path)
            except OSError as e:
                raise JournalWriteError(self.path, f"cannot replace by {tmp.name}: {e.strerror or e}", e.errno) from e
            fsync_dir(self.path.parent)
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            except OSError as e:
                raise JournalWriteError(self.path, f"cannot reopen: {e.strerror or e}", e.errno) from e
        except JournalWriteError as e:
            self._failed = e
            raise
        self._votes = keep

    @property
    def records(self) -> int:
        """Votes in the file."""
        return len(self._votes)

    def votes(self) -> list[Vote]:
        """The votes the file holds, in file order."""
        return list(self._votes)

    def close(self) -> None:
        """Close the file."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


WATCH_STEP = 3
"""The longest view jump a double-sign watch counts as watching (a longer one starts the count over)."""


class DoubleSignGuard:
    """CometBFT's ``double_sign_check_height`` for Simplex views: a validator that started without its journal
    does not vote until it has been in sync and watched the network enter ``views`` views one after the other.

    The count starts over whenever the node is syncing or its view jumps by more than :data:`WATCH_STEP` views
    (a long jump is catching up, not watching: the certificate that caused it may be old). Short jumps are how a
    live network looks from one validator: one input (a certificate of the next view, a notarization and a
    nullification together) often moves the engine two or three views, and under load or loss a watch that
    demanded one view at a time would never end. Once done, votes are allowed for the views above the current
    one. Pure bookkeeping; the caller owns the marker file and the engine."""

    def __init__(self, views: int) -> None:
        if views < 1:
            raise ValueError("views must be at least 1")
        self.views = views
        """Views to watch (``[consensus] double_sign_check_views``)."""
        self.watch_from: int | None = None
        """The view the current count started at (None: not in sync yet)."""
        self._last: int | None = None
        self.done = False
        """True once the watch is over."""

    @property
    def until_view(self) -> int | None:
        """No vote at or below this view (None until the count has started)."""
        return None if self.watch_from is None else self.watch_from + self.views

    def observe(self, view: int, syncing: bool) -> bool:
        """The engine is at ``view`` and the node is (not) ``syncing``; True once the watch is over."""
        if self.done:
            return True
        if syncing:
            self.watch_from = self._last = None
            return False
        if self.watch_from is None or self._last is None or view > self._last + WATCH_STEP or view < self._last:
            self.watch_from = self._last = view
            return False
        self._last = view
        if view - self.watch_from >= self.views:
            self.done = True
        return self.done

"""The vote journal: every own vote is written and fsynced here before it is sent (Simplex restart safety).

File format: a sequence of records ``u32_be length ‖ encoded vote`` (:func:`encode_message`). A crash can
leave a torn last record; :meth:`VoteJournal.load` drops it and truncates the file there (that vote was
never sent: sending waits for the fsync). Votes at or below the finalized view are no longer needed;
:meth:`VoteJournal.compact` rewrites the file without them (atomically, by rename).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from cowboy_node.consensus.simplex.types import Finalize, Notarize, Nullify, Vote, decode_message, encode_message

_LEN = struct.Struct(">I")
MAX_RECORD = 1 << 16
"""A vote is a few hundred bytes; a longer length prefix is corruption."""


class JournalError(Exception):
    """The journal cannot be read (a record in the middle does not decode)."""


class VoteJournal:
    """Append-only, fsynced journal of this validator's own votes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._count = 0
        self.dropped_bytes = 0
        """Bytes of a torn last record dropped by the last :meth:`load` (the caller logs it)."""

    def load(self) -> list[Vote]:
        """Read every complete record (truncating a torn tail) and open the file for appending."""
        votes: list[Vote] = []
        good = 0
        data = self.path.read_bytes() if self.path.exists() else b""
        pos = 0
        while pos + _LEN.size <= len(data):
            (n,) = _LEN.unpack_from(data, pos)
            if n == 0 or n > MAX_RECORD:
                raise JournalError(f"{self.path}: bad record length {n} at offset {pos}")
            if pos + _LEN.size + n > len(data):
                break  # torn tail
            try:
                msg = decode_message(data[pos + _LEN.size:pos + _LEN.size + n])
            except Exception as e:
                if pos + _LEN.size + n == len(data):
                    break  # a torn tail that happens to have a whole length
                raise JournalError(f"{self.path}: record at offset {pos} does not decode: {e}") from None
            if not isinstance(msg, Notarize | Nullify | Finalize):
                raise JournalError(f"{self.path}: record at offset {pos} is not a vote")
            votes.append(msg)
            pos += _LEN.size + n
            good = pos
        self.dropped_bytes = len(data) - good
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        os.ftruncate(self._fd, good)
        os.lseek(self._fd, good, os.SEEK_SET)
        os.fsync(self._fd)
        self._count = len(votes)
        return votes

    def append(self, vote: Vote) -> None:
        """Write ``vote`` and fsync; returns only once it is durable."""
        if self._fd is None:
            raise RuntimeError("journal not opened (call load first)")
        body = encode_message(vote)
        os.write(self._fd, _LEN.pack(len(body)) + body)
        os.fsync(self._fd)
        self._count += 1

    def compact(self, keep: list[Vote]) -> None:
        """Replace the journal by ``keep`` (the votes above the finalized view), atomically."""
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for vote in keep:
                body = encode_message(vote)
                os.write(fd, _LEN.pack(len(body)) + body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._count = len(keep)

    @property
    def records(self) -> int:
        """Votes in the file."""
        return self._count

    def close(self) -> None:
        """Close the file."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

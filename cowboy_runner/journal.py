"""Durable journal of result obligations (CIP-11 §10.3, §10.5): no signed result transaction is ever lost.

One SQLite row per accepted ``job_id`` (stdlib ``sqlite3``, WAL, ``synchronous=FULL``: every committed write
is fsynced before the call returns). States::

    accepted → executing → executed ─┬→ commit_signed → commit_sent → commit_included ─┐
                                     └──────────────────────────────────────────────────┴→ reveal_signed
    reveal_signed → reveal_sent → included
    any non-terminal state → expired | failed | cancelled (cancelled only before a result tx exists)
    commit_sent → commit_signed, reveal_sent → reveal_signed: a replacement took the place of a transaction whose
    nonce another transaction of the runner used (:meth:`Journal.record_replacement`)

The write-before-send rule is in the API's shape: the only way to get the bytes of a result transaction is the
return value of :meth:`Journal.record_signed_commit` / :meth:`Journal.record_signed_reveal`, which return only
after the row holding those bytes is committed. A crash at any later point leaves the transaction in the
journal; :meth:`Journal.due_rebroadcasts` hands back every signed transaction not yet known to be sent (at once)
or sent but not seen included (after ``grace`` blocks, then every ``interval`` blocks), and never a commit after
its window or a reveal before its window opens or after the deadline.

A result transaction, once signed, is treated as possibly sent: a ``JobCancel`` then no longer ends the
obligation (§10.5: a committed runner must still reveal, or it is slashed as committed-then-silent).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cowboy_protocol.jobs.commitment import result_commitment
from cowboy_protocol.keys import fsync_dir
from cowboy_protocol.types.job_instructions import JobResultCommit, JobResultSubmit
from cowboy_protocol.types.transaction import Transaction

ACCEPTED = "accepted"
EXECUTING = "executing"
EXECUTED = "executed"
COMMIT_SIGNED = "commit_signed"
COMMIT_SENT = "commit_sent"
COMMIT_INCLUDED = "commit_included"
REVEAL_SIGNED = "reveal_signed"
REVEAL_SENT = "reveal_sent"
INCLUDED = "included"
EXPIRED = "expired"
FAILED = "failed"
CANCELLED = "cancelled"

STATES = (ACCEPTED, EXECUTING, EXECUTED, COMMIT_SIGNED, COMMIT_SENT, COMMIT_INCLUDED, REVEAL_SIGNED, REVEAL_SENT,
          INCLUDED, EXPIRED, FAILED, CANCELLED)
"""Every state, in lifecycle order."""
TERMINAL = frozenset({INCLUDED, EXPIRED, FAILED, CANCELLED})
"""States that end the obligation."""
TX_EXISTS = frozenset({COMMIT_SIGNED, COMMIT_SENT, COMMIT_INCLUDED, REVEAL_SIGNED, REVEAL_SENT})
"""Live states in which a signed result transaction exists (and may have been sent)."""

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS obligations (
    job_id            BLOB PRIMARY KEY CHECK (length(job_id) = 32),
    state             TEXT NOT NULL,
    assignment        BLOB NOT NULL,
    needs_commit      INTEGER NOT NULL,
    commit_end        INTEGER NOT NULL,
    deadline_block    INTEGER NOT NULL,
    accepted_height   INTEGER NOT NULL,
    result            BLOB,
    salt              BLOB,
    units             INTEGER,
    commit_tx         BLOB,
    reveal_tx         BLOB,
    sent_height       INTEGER,
    last_broadcast    INTEGER,
    attempts          INTEGER NOT NULL DEFAULT 0,
    included_height   INTEGER,
    reason            TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
"""
_COLUMNS = ("job_id", "state", "assignment", "needs_commit", "commit_end", "deadline_block", "accepted_height",
            "result", "salt", "units", "commit_tx", "reveal_tx", "sent_height", "last_broadcast", "attempts",
            "included_height", "reason")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM obligations"


class JournalError(Exception):
    """A journal operation that does not fit the obligation's state; ``code`` is stable."""

    def __init__(self, code: str, job_id: bytes, message: str) -> None:
        super().__init__(f"job 0x{job_id.hex()}: {code}: {message}")
        self.code = code
        self.job_id = job_id
        self.message = message


@dataclass(frozen=True, slots=True)
class Obligation:
    """One journaled job and what the runner still owes for it."""

    job_id: bytes
    """32-byte job id."""
    state: str
    """One of :data:`STATES`."""
    assignment: bytes
    """The accepted JobAssignment frame, as received (kept to resume and to answer duplicate pushes)."""
    needs_commit: bool
    """True for committees of M > 1: commit first, reveal only after ``commit_end``."""
    commit_end: int
    """Last block of the commit window (reveals are included only above it)."""
    deadline_block: int
    """Chain-derived deadline: no result transaction is included above it."""
    accepted_height: int
    """Runner's finalized height when it accepted the assignment."""
    result: bytes | None
    """Executor output (None until executed)."""
    salt: bytes | None
    """Commitment salt (empty when no commitment; None until executed)."""
    units: int | None
    """Usage units reported with the reveal (None until executed)."""
    commit_tx: bytes | None
    """Signed JobResultCommit ``tx_bytes``, once signed."""
    reveal_tx: bytes | None
    """Signed JobResultSubmit ``tx_bytes``, once signed."""
    sent_height: int | None
    """Height at which the current phase's transaction was first sent (None: not known to be sent)."""
    last_broadcast: int | None
    """Height of its latest send or rebroadcast."""
    attempts: int
    """How many times the current phase's transaction was sent (first send included)."""
    included_height: int | None
    """Block that included the reveal (state ``included``)."""
    reason: str
    """Why a terminal state was reached ("" otherwise)."""

    @property
    def terminal(self) -> bool:
        """Whether the obligation has ended."""
        return self.state in TERMINAL

    @property
    def pending_tx(self) -> bytes | None:
        """The signed transaction of the current phase that is not yet known to be included."""
        if self.state in (COMMIT_SIGNED, COMMIT_SENT):
            return self.commit_tx
        if self.state in (REVEAL_SIGNED, REVEAL_SENT):
            return self.reveal_tx
        return None


def _row(r: tuple[object, ...]) -> Obligation:
    d = dict(zip(_COLUMNS, r, strict=True))
    d["needs_commit"] = bool(d["needs_commit"])
    return Obligation(**d)  # type: ignore[arg-type]


class Journal:
    """The journal file; safe to share between threads (one connection behind a lock)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        created = not self.path.exists()
        self._lock = threading.Lock()
        # isolation_level=None: no implicit transactions; every write below is one explicit transaction.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise OSError(f"journal {self.path}: SQLite refused WAL mode (got {mode!r})")
        self._db.execute("PRAGMA synchronous=FULL")  # fsync the WAL on every commit
        self._db.execute("PRAGMA foreign_keys=ON")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise OSError(f"journal {self.path}: schema version {version}, this runner reads {SCHEMA_VERSION}")
        with self._tx():
            self._db.execute(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        if created:
            fsync_dir(self.path.parent)  # the new file's directory entry must survive a crash too

    # -- plumbing -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _get(self, db: sqlite3.Connection, job_id: bytes) -> Obligation:
        r = db.execute(f"{_SELECT} WHERE job_id = ?", (bytes(job_id),)).fetchone()
        if r is None:
            raise JournalError("unknown_job", job_id, "not in the journal")
        return _row(r)

    def _set(self, db: sqlite3.Connection, job_id: bytes, **values: object) -> None:
        cols = ", ".join(f"{k} = ?" for k in values)
        db.execute(f"UPDATE obligations SET {cols} WHERE job_id = ?", (*values.values(), bytes(job_id)))

    @staticmethod
    def _require(ob: Obligation, allowed: tuple[str, ...], action: str) -> None:
        if ob.state not in allowed:
            raise JournalError("wrong_state", ob.job_id, f"cannot {action} in state {ob.state} "
                                                         f"(needs {' or '.join(allowed)})")

    def close(self) -> None:
        """Close the database (every committed write is already durable)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads ----------------------------------------------------------------------------
    def get(self, job_id: bytes) -> Obligation | None:
        """The obligation for ``job_id``, or None if it was never accepted."""
        with self._lock:
            r = self._db.execute(f"{_SELECT} WHERE job_id = ?", (bytes(job_id),)).fetchone()
        return None if r is None else _row(r)

    def pending(self) -> list[Obligation]:
        """Every non-terminal obligation, by deadline then job id (what a restarted runner resumes)."""
        marks = ", ".join("?" for _ in TERMINAL)
        with self._lock:
            rows = self._db.execute(f"{_SELECT} WHERE state NOT IN ({marks}) ORDER BY deadline_block, job_id",
                                    tuple(sorted(TERMINAL))).fetchall()
        return [_row(r) for r in rows]

    def recent(self, limit: int = 20) -> list[Obligation]:
        """The latest terminal obligations (for ``status``), most recent deadline first."""
        marks = ", ".join("?" for _ in TERMINAL)
        with self._lock:
            rows = self._db.execute(f"{_SELECT} WHERE state IN ({marks}) ORDER BY deadline_block DESC, job_id "
                                    "LIMIT ?", (*sorted(TERMINAL), limit)).fetchall()
        return [_row(r) for r in rows]

    # -- lifecycle ------------------------------------------------------------------------
    def record_accepted(self, job_id: bytes, assignment: bytes, *, needs_commit: bool, commit_end: int,
                        deadline_block: int, height: int) -> bool:
        """Record a verified assignment; False (and nothing written) if ``job_id`` was already accepted.

        The boolean is the §10.1 dedup decision: only the call that returns True may ack ``Accepted``.
        """
        if len(job_id) != 32:
            raise ValueError(f"job_id must be 32 bytes, got {len(job_id)}")
        with self._tx() as db:
            cur = db.execute(
                "INSERT OR IGNORE INTO obligations (job_id, state, assignment, needs_commit, commit_end, "
                "deadline_block, accepted_height) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (bytes(job_id), ACCEPTED, bytes(assignment), int(needs_commit), commit_end, deadline_block, height))
            return cur.rowcount == 1

    def mark_executing(self, job_id: bytes) -> None:
        """The executor started (accepted → executing; repeated after a restart is fine)."""
        with self._tx() as db:
            ob = self._get(db, job_id)
            self._require(ob, (ACCEPTED, EXECUTING), "start executing")
            self._set(db, job_id, state=EXECUTING)

    def record_output(self, job_id: bytes, result: bytes, salt: bytes, units: int) -> None:
        """Keep the executor's output and the salt before anything is signed over them.

        The salt must be non-empty when a commitment is needed and may be empty otherwise.
        """
        with self._tx() as db:
            ob = self._get(db, job_id)
            self._require(ob, (ACCEPTED, EXECUTING), "record an output")
            if ob.needs_commit and not salt:
                raise JournalError("missing_salt", job_id, "a committed result needs a salt")
            self._set(db, job_id, state=EXECUTED, result=bytes(result), salt=bytes(salt), units=units)

    def record_signed_commit(self, job_id: bytes, tx: Transaction) -> bytes:
        """Store the signed JobResultCommit durably and return its ``tx_bytes`` — the only bytes to send.

        Refused unless the commitment is ``result_commitment(job_id, tx.sender, result, salt)`` over the recorded
        output (a commit the reveal could not match would get the runner slashed).
        """
        ins = tx.instruction
        if not isinstance(ins, JobResultCommit) or ins.job_id != bytes(job_id):
            raise JournalError("wrong_tx", job_id, "not a JobResultCommit for this job")
        raw = tx.to_bytes()
        with self._tx() as db:
            ob = self._get(db, job_id)
            self._require(ob, (EXECUTED,), "record a signed commit")
            if not ob.needs_commit:
                raise JournalError("no_commit_needed", job_id, "single-runner jobs are revealed directly")
            assert ob.result is not None and ob.salt is not None
            if ins.commitment != result_commitment(ob.job_id, tx.sender, ob.result, ob.salt):
                raise JournalError("commitment_mismatch", job_id, "the commitment is not over the recorded output")
            self._set(db, job_id, state=COMMIT_SIGNED, commit_tx=raw, sent_height=None, last_broadcast=None,
                      attempts=0)
        return raw

    def record_signed_reveal(self, job_id: bytes, tx: Transaction, *, height: int) -> bytes:
        """Store the signed JobResultSubmit durably and return its ``tx_bytes`` — the only bytes to send.

        ``height`` is the runner's newest finalized height: a committed result may be revealed only once the
        commit window is over (``height > commit_end``) and its commit is included; the reveal must carry
        exactly the recorded result, salt and units.
        """
        ins = tx.instruction
        if not isinstance(ins, JobResultSubmit) or ins.job_id != bytes(job_id):
            raise JournalError("wrong_tx", job_id, "not a JobResultSubmit for this job")
        raw = tx.to_bytes()
        with self._tx() as db:
            ob = self._get(db, job_id)
            if ob.needs_commit:
                self._require(ob, (COMMIT_INCLUDED,), "record a signed reveal")
                if height <= ob.commit_end:
                    raise JournalError("reveal_window_not_open", job_id,
                                       f"reveals open after block {ob.commit_end} (now {height})")
            else:
                self._require(ob, (EXECUTED,), "record a signed reveal")
            if (ins.result, ins.salt, ins.units) != (ob.result, ob.salt, ob.units):
                raise JournalError("reveal_mismatch", job_id, "the reveal does not carry the recorded output")
            self._set(db, job_id, state=REVEAL_SIGNED, reveal_tx=raw, sent_height=None, last_broadcast=None,
                      attempts=0)
        return raw

    def record_replacement(self, job_id: bytes, tx: Transaction) -> bytes:
        """Store a re-signed transaction for the current phase and return its ``tx_bytes`` (§10.3 "a replacement
        MUST be a new runner-signed transaction envelope with a valid fee/nonce").

        Only for a retained transaction that can never be admitted any more because another transaction of the
        same sender took its nonce (the caller checked that no receipt exists for it). The replacement must carry
        the very same instruction from the same sender with a different nonce; it starts unsent (sent at once).
        """
        raw = tx.to_bytes()
        with self._tx() as db:
            ob = self._get(db, job_id)
            self._require(ob, (COMMIT_SIGNED, COMMIT_SENT, REVEAL_SIGNED, REVEAL_SENT), "replace the transaction")
            old_raw = ob.pending_tx
            assert old_raw is not None
            old = Transaction.from_bytes(old_raw)
            if tx.instruction != old.instruction or tx.sender != old.sender:
                raise JournalError("replacement_mismatch", job_id, "a replacement must carry the same instruction")
            if tx.nonce == old.nonce:
                raise JournalError("replacement_mismatch", job_id, "a replacement needs a new nonce")
            if ob.state in (COMMIT_SIGNED, COMMIT_SENT):
                self._set(db, job_id, state=COMMIT_SIGNED, commit_tx=raw, sent_height=None, last_broadcast=None,
                          attempts=0)
            else:
                self._set(db, job_id, state=REVEAL_SIGNED, reveal_tx=raw, sent_height=None, last_broadcast=None,
                          attempts=0)
        return raw

    def mark_sent(self, job_id: bytes, height: int) -> None:
        """The current phase's transaction was sent (or rebroadcast) at ``height``."""
        with self._tx() as db:
            ob = self._get(db, job_id)
            self._require(ob, (COMMIT_SIGNED, COMMIT_SENT, REVEAL_SIGNED, REVEAL_SENT), "mark a send")
            state = COMMIT_SENT if ob.state in (COMMIT_SIGNED, COMMIT_SENT) else REVEAL_SENT
            self._set(db, job_id, state=state, sent_height=ob.sent_height if ob.sent_height is not None else height,
                      last_broadcast=height, attempts=ob.attempts + 1)

    def mark_included(self, job_id: bytes, kind: Literal["commit", "reveal"], height: int) -> None:
        """The commit (→ commit_included) or the reveal (→ included, terminal) was seen in block ``height``.

        A signed-but-unmarked transaction may be the one included (crash between send and :meth:`mark_sent`),
        so the signed states are accepted too. Seeing an inclusion twice is harmless.
        """
        with self._tx() as db:
            ob = self._get(db, job_id)
            if kind == "commit":
                if ob.state == COMMIT_INCLUDED:
                    return
                self._require(ob, (COMMIT_SIGNED, COMMIT_SENT), "mark the commit included")
                self._set(db, job_id, state=COMMIT_INCLUDED, sent_height=None, last_broadcast=None, attempts=0)
            elif kind == "reveal":
                if ob.state == INCLUDED:
                    return
                self._require(ob, (REVEAL_SIGNED, REVEAL_SENT), "mark the reveal included")
                self._set(db, job_id, state=INCLUDED, included_height=height, reason="included")
            else:
                raise ValueError(f"kind must be 'commit' or 'reveal', got {kind!r}")

    def mark_terminal(self, job_id: bytes, state: Literal["expired", "failed", "cancelled"], reason: str) -> None:
        """End the obligation. ``cancelled`` is refused once a result transaction exists (§10.5)."""
        if state not in (EXPIRED, FAILED, CANCELLED):
            raise ValueError(f"state must be expired, failed or cancelled, got {state!r}")
        with self._tx() as db:
            ob = self._get(db, job_id)
            if ob.terminal:
                raise JournalError("wrong_state", job_id, f"already terminal ({ob.state})")
            if state == CANCELLED and ob.state in TX_EXISTS:
                raise JournalError("obligation_retained", job_id,
                                   f"a result transaction exists ({ob.state}); a cancel does not void it")
            self._set(db, job_id, state=state, reason=reason)

    def cancel(self, job_id: bytes) -> bool:
        """Apply a JobCancel: True if the job ended (no result tx existed), False if the obligation stays."""
        with self._tx() as db:
            ob = self._get(db, job_id)
            if ob.terminal or ob.state in TX_EXISTS:
                return False
            self._set(db, job_id, state=CANCELLED, reason="cancelled")
            return True

    def expire(self, height: int) -> list[bytes]:
        """Mark expired every live obligation whose ``deadline_block < height``; returns their job ids.

        Call it after recording the inclusions of blocks up to ``height``: above the deadline nothing can be
        included any more.
        """
        marks = ", ".join("?" for _ in TERMINAL)
        with self._tx() as db:
            rows = db.execute(f"SELECT job_id FROM obligations WHERE state NOT IN ({marks}) AND deadline_block < ? "
                              "ORDER BY job_id", (*sorted(TERMINAL), height)).fetchall()
            ids = [bytes(r[0]) for r in rows]
            for job_id in ids:
                self._set(db, job_id, state=EXPIRED, reason="deadline_passed")
        return ids

    # -- rebroadcast ----------------------------------------------------------------------
    def due_rebroadcasts(self, height: int, grace: int, interval: int) -> list[tuple[bytes, bytes]]:
        """``(job_id, tx_bytes)`` to (re)send at ``height`` through the normal admission path (§10.3).

        Due: a signed transaction never marked sent (at once: it may have died with a crashed process), or a
        sent one not seen included ``grace`` blocks after its first send and then every ``interval`` blocks.
        Never a commit that could only land after ``commit_end``, a reveal that could only land after
        ``deadline_block``, or a committed result's reveal before its window opens. The caller calls
        :meth:`mark_sent` after each send. Ordered by deadline, then job id.
        """
        if grace < 0 or interval < 1:
            raise ValueError("grace must be >= 0 and interval >= 1")
        out: list[tuple[bytes, bytes]] = []
        for ob in self.pending():
            tx = ob.pending_tx
            if tx is None:
                continue
            is_commit = ob.state in (COMMIT_SIGNED, COMMIT_SENT)
            # A tx sent at `height` lands at height + 1 at the earliest.
            if is_commit and height >= ob.commit_end:
                continue
            if not is_commit and (height >= ob.deadline_block or (ob.needs_commit and height <= ob.commit_end)):
                continue
            if ob.sent_height is None or ob.last_broadcast is None:
                out.append((ob.job_id, tx))
            elif ob.attempts <= 1:
                if height - ob.sent_height >= grace:
                    out.append((ob.job_id, tx))
            elif height - ob.last_broadcast >= interval:
                out.append((ob.job_id, tx))
        return out


__all__ = [
    "ACCEPTED", "CANCELLED", "COMMIT_INCLUDED", "COMMIT_SENT", "COMMIT_SIGNED", "EXECUTED", "EXECUTING",
    "EXPIRED", "FAILED", "INCLUDED", "REVEAL_SENT", "REVEAL_SIGNED", "STATES", "TERMINAL", "TX_EXISTS",
    "Journal", "JournalError", "Obligation",
]

"""Result-obligation journal: durable before send, lifecycle rules, rebroadcast schedule, kill -9 survival."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cowboy_runner import journal as J
from cowboy_runner.journal import Journal, JournalError
from cowboy_runner.keyfile import RunnerKey
from cowboy_runner.txbuild import Fees, build_heartbeat, build_result_commit, build_result_submit

KEY = RunnerKey.from_private_key(bytes.fromhex("11" * 32))
FEES = Fees(200_000, 1_000, 200_000, 1_000)
CHAIN = "cowboy-test-1"
JOB = bytes(range(32))
ASSIGNMENT = b"\x0b" + b"assignment-frame"
RESULT = b'{"v":1}'
SALT = b"\xaa" * 32
ROOT = Path(__file__).resolve().parents[3]


def _commit(nonce: int = 5, salt: bytes = SALT, result: bytes = RESULT, job: bytes = JOB):  # type: ignore[no-untyped-def]
    return build_result_commit(KEY, CHAIN, job_id=job, result=result, salt=salt, nonce=nonce, fees=FEES)


def _reveal(nonce: int = 6, salt: bytes = SALT, result: bytes = RESULT, units: int = 2, job: bytes = JOB):  # type: ignore[no-untyped-def]
    return build_result_submit(KEY, CHAIN, job_id=job, result=result, salt=salt, units=units, nonce=nonce, fees=FEES)


def _accepted(j: Journal, *, needs_commit: bool = True, job: bytes = JOB) -> None:
    assert j.record_accepted(job, ASSIGNMENT, needs_commit=needs_commit, commit_end=60, deadline_block=100,
                             height=40)


def _executed(j: Journal, *, needs_commit: bool = True, job: bytes = JOB) -> None:
    _accepted(j, needs_commit=needs_commit, job=job)
    j.mark_executing(job)
    j.record_output(job, RESULT, SALT if needs_commit else b"", 2)


def test_journal_uses_wal_and_synchronous_full(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        assert j._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert j._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: fsync on every commit


def test_accept_once_per_job_id(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _accepted(j)
        # A second push of the same job (another validator, or after a restart) is not accepted again.
        assert not j.record_accepted(JOB, b"other", needs_commit=True, commit_end=1, deadline_block=2, height=3)
        ob = j.get(JOB)
        assert ob is not None and ob.state == J.ACCEPTED and ob.assignment == ASSIGNMENT
        assert j.get(bytes(32)) is None


def test_signed_commit_is_stored_and_its_bytes_returned_for_sending(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        _executed(j)
        tx = _commit()
        raw = j.record_signed_commit(JOB, tx)
        assert raw == tx.to_bytes()
    # Visible to a fresh connection: the row was committed before the call returned.
    db = sqlite3.connect(path)
    state, commit_tx = db.execute("SELECT state, commit_tx FROM obligations WHERE job_id = ?", (JOB,)).fetchone()
    db.close()
    assert (state, commit_tx) == (J.COMMIT_SIGNED, raw)


def test_full_multi_runner_lifecycle(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j)
        commit = j.record_signed_commit(JOB, _commit())
        assert j.due_rebroadcasts(41, grace=2, interval=2) == [(JOB, commit)]  # signed, not yet known sent
        j.mark_sent(JOB, 41)
        assert j.get(JOB).state == J.COMMIT_SENT  # type: ignore[union-attr]
        assert j.due_rebroadcasts(42, 2, 2) == []
        assert j.due_rebroadcasts(43, 2, 2) == [(JOB, commit)]  # grace blocks after the first send
        j.mark_sent(JOB, 43)
        assert j.due_rebroadcasts(44, 2, 2) == []
        assert j.due_rebroadcasts(45, 2, 2) == [(JOB, commit)]  # then every interval
        j.mark_sent(JOB, 45)
        assert j.get(JOB).attempts == 3  # type: ignore[union-attr]
        j.mark_included(JOB, "commit", 46)
        j.mark_included(JOB, "commit", 46)  # seen twice: harmless
        assert j.due_rebroadcasts(47, 2, 2) == []
        with pytest.raises(JournalError, match="reveal_window_not_open"):
            j.record_signed_reveal(JOB, _reveal(), height=60)
        reveal = j.record_signed_reveal(JOB, _reveal(), height=61)
        j.mark_sent(JOB, 61)
        assert j.due_rebroadcasts(63, 2, 2) == [(JOB, reveal)]
        j.mark_included(JOB, "reveal", 64)
        ob = j.get(JOB)
        assert ob is not None and ob.state == J.INCLUDED and ob.included_height == 64 and ob.terminal
        assert j.pending() == [] and j.due_rebroadcasts(70, 2, 2) == []
        assert [o.job_id for o in j.recent()] == [JOB]


def test_single_runner_job_reveals_without_a_commit(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j, needs_commit=False)
        with pytest.raises(JournalError, match="no_commit_needed"):
            j.record_signed_commit(JOB, _commit())
        raw = j.record_signed_reveal(JOB, _reveal(salt=b""), height=41)
        assert j.get(JOB).reveal_tx == raw  # type: ignore[union-attr]


def test_commit_not_over_the_recorded_output_is_refused(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j)
        with pytest.raises(JournalError, match="commitment_mismatch"):
            j.record_signed_commit(JOB, _commit(salt=b"\x01" * 32))
        with pytest.raises(JournalError, match="wrong_tx"):
            j.record_signed_commit(JOB, _commit(job=bytes(32)))
        with pytest.raises(JournalError, match="wrong_tx"):
            j.record_signed_commit(JOB, build_heartbeat(KEY, CHAIN, accepting=True, nonce=0, fees=FEES))
        assert j.get(JOB).state == J.EXECUTED  # type: ignore[union-attr]


def test_reveal_must_carry_the_recorded_output(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j)
        j.record_signed_commit(JOB, _commit())
        j.mark_sent(JOB, 41)
        j.mark_included(JOB, "commit", 42)
        for bad in (_reveal(result=b"other"), _reveal(salt=b"\x01" * 32), _reveal(units=9)):
            with pytest.raises(JournalError, match="reveal_mismatch"):
                j.record_signed_reveal(JOB, bad, height=61)


def test_committed_job_cannot_reveal_before_its_commit_is_included(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j)
        with pytest.raises(JournalError, match="wrong_state"):
            j.record_signed_reveal(JOB, _reveal(), height=61)
        j.record_signed_commit(JOB, _commit())
        with pytest.raises(JournalError, match="wrong_state"):
            j.record_signed_reveal(JOB, _reveal(), height=61)


def test_output_of_a_committed_job_needs_a_salt(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _accepted(j)
        with pytest.raises(JournalError, match="missing_salt"):
            j.record_output(JOB, RESULT, b"", 0)


def test_cancel_ends_the_job_only_while_no_result_tx_exists(tmp_path: Path) -> None:
    other = bytes([1] * 32)
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j, job=other)
        assert j.cancel(other)
        assert j.get(other).state == J.CANCELLED  # type: ignore[union-attr]
        _executed(j)
        j.record_signed_commit(JOB, _commit())
        # §10.5: a commitment that may be out keeps its reveal obligation despite the cancel.
        assert not j.cancel(JOB)
        with pytest.raises(JournalError, match="obligation_retained"):
            j.mark_terminal(JOB, "cancelled", "job_cancel")
        assert j.get(JOB).state == J.COMMIT_SIGNED  # type: ignore[union-attr]
        assert [o.job_id for o in j.pending()] == [JOB]


def test_rebroadcast_respects_the_commit_and_reveal_windows(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j)
        j.record_signed_commit(JOB, _commit())
        j.mark_sent(JOB, 50)
        assert j.due_rebroadcasts(59, 2, 2) != []
        assert j.due_rebroadcasts(60, 2, 2) == []  # would land after commit_end = 60
        j.mark_included(JOB, "commit", 55)
        j.record_signed_reveal(JOB, _reveal(), height=61)
        assert j.due_rebroadcasts(99, 2, 2) != []
        assert j.due_rebroadcasts(100, 2, 2) == []  # would land after deadline_block = 100


def test_expire_ends_obligations_past_their_deadline(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        _executed(j)
        assert j.expire(100) == []
        assert j.expire(101) == [JOB]
        ob = j.get(JOB)
        assert ob is not None and ob.state == J.EXPIRED and ob.reason == "deadline_passed"
        with pytest.raises(JournalError, match="wrong_state"):
            j.mark_terminal(JOB, "failed", "x")


def test_transitions_out_of_order_are_refused(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as j:
        with pytest.raises(JournalError, match="unknown_job"):
            j.mark_executing(JOB)
        _accepted(j)
        with pytest.raises(JournalError, match="wrong_state"):
            j.mark_sent(JOB, 1)
        with pytest.raises(JournalError, match="wrong_state"):
            j.mark_included(JOB, "reveal", 1)


def test_pending_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with Journal(path) as j:
        _executed(j)
        raw = j.record_signed_commit(JOB, _commit())
        j.mark_sent(JOB, 41)
    with Journal(path) as j:
        [ob] = j.pending()
        assert (ob.state, ob.commit_tx, ob.sent_height, ob.result, ob.salt) == (J.COMMIT_SENT, raw, 41, RESULT, SALT)


_CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from tests.unit.runner.test_runner_journal import JOB, ASSIGNMENT, RESULT, SALT, _commit
    from cowboy_runner.journal import Journal
    j = Journal({path!r})
    j.record_accepted(JOB, ASSIGNMENT, needs_commit=True, commit_end=60, deadline_block=100, height=40)
    j.mark_executing(JOB)
    j.record_output(JOB, RESULT, SALT, 2)
    raw = j.record_signed_commit(JOB, _commit())
    os.kill(os.getpid(), signal.SIGKILL)  # right after the call returned: no close, no cleanup
""")


def test_signed_commit_survives_kill_9_right_after_it_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), path=str(path))],
                          capture_output=True, timeout=120, cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    with Journal(path) as j:
        [ob] = j.pending()
        assert ob.state == J.COMMIT_SIGNED and ob.commit_tx == _commit().to_bytes()
        # The restarted runner resumes: the transaction is due at once (it may never have been sent).
        assert j.due_rebroadcasts(41, 2, 2) == [(JOB, _commit().to_bytes())]

#!/usr/bin/env python3
"""Mutation testing (issue 31 §2) with cosmic-ray: one session per module, each against the fast tests covering it.

Every entry of :data:`MODULES` names a module (a short name ``make mutate MODULE=name`` selects), the source file
cosmic-ray mutates and the fast unit tests that cover it. For each module the repository is copied to
``build/mutate/<name>/repo`` (the working tree is never touched; cosmic-ray mutates the copy in place and the copy's
``cowboy_node`` is the one imported, checked), the unmutated tests must pass (baseline), then cosmic-ray runs every
mutant with ``pytest -x`` on those tests. Operators that only yield noise are filtered out (:data:`EXCLUDED`,
argued in docs/testing.md). Mutants listed in :data:`EQUIVALENT` (operator, line and the mutated line's text, with
the reason the mutant cannot change behaviour) are counted as equivalent, not as survivors.

Output: ``build/mutate/<name>/result.json`` (counts, seconds, survivors with their diffs) and one markdown table row
per module on stdout (the table of docs/testing.md). Exit status 1 if a module's baseline fails.

``--recheck NAME``: after tests were added for a finished session's survivors, run only those survivors again (each
mutant applied to a fresh copy of the current tree, then the module's tests) instead of the whole session. Sound
because tests are only added: a mutant the old tests killed is still killed. Refused if the mutated module itself
changed since the session (the mutants would no longer be the same). The outcome is kept in ``recheck.json`` and
folded into the counts (``killed_on_recheck``).

    .venv/bin/python scripts/mutate.py [--list | --summarize | --recheck] [NAME ...]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, also when loaded by file path (tests)
from mutate_select import TIMEOUT_MARKER

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "mutate"
# Relative to the repository (make passes `.venv-mutate`): the sessions run with the copy as working directory.
COSMIC_RAY = Path(ROOT, os.environ.get("MUTATE_VENV", ".venv-mutate")) / "bin"
EXE = "tests/unit/execution"
CONS = "tests/unit/consensus"
PROTO = "tests/unit/protocol"


@dataclass(frozen=True)
class Module:
    name: str
    """Short name (``make mutate MODULE=<name>``)."""
    path: str
    """The file mutated."""
    tests: tuple[str, ...]
    """Fast tests covering it, files or node ids (run with ``pytest -x``; the first failure kills the mutant)."""
    deselect: tuple[str, ...] = ()
    """Tests of those files left out (``--deselect``), each because it cannot kill a mutant the others do not: the
    subprocess tests that compare two ``PYTHONHASHSEED`` runs of a path the in-process tests also run (a
    cosmic-ray mutant changes no iteration order, so both runs agree, and a crash fails those tests too); each costs
    seconds of start-up per mutant."""
    timeout: float = 120.0
    """Floor, in seconds, of the per-mutant timeout; the timeout used is the larger of this and
    :data:`TIMEOUT_FACTOR` times the module's measured baseline (a mutant ended by it counts as killed: it hangs
    the tests, and is reported separately as a timeout)."""


MODULES: tuple[Module, ...] = (
    Module("jobs-draw", "cowboy_node/execution/jobs/draw.py",
           (f"{EXE}/jobs/test_selection_draw.py", f"{EXE}/jobs/test_selection_committee.py",
            f"{EXE}/jobs/test_selection_mru.py", f"{EXE}/jobs/test_selection_boundaries.py")),
    Module("jobs-weights", "cowboy_node/execution/jobs/weights.py",
           (f"{EXE}/jobs/test_selection_weights.py", f"{EXE}/jobs/test_selection_snapshot_root.py",
            f"{EXE}/jobs/test_selection_committee.py")),
    Module("jobs-mru", "cowboy_node/execution/jobs/mru.py",
           (f"{EXE}/jobs/test_selection_mru.py", f"{EXE}/jobs/test_selection_committee.py",
            f"{EXE}/jobs/test_selection_boundaries.py")),
    Module("jobs-seeds", "cowboy_node/execution/jobs/seeds.py",
           (f"{EXE}/jobs/test_selection_seeds.py", f"{EXE}/jobs/test_selection_pending.py",
            f"{EXE}/jobs/test_selection_boundaries.py")),
    Module("jobs-filters", "cowboy_node/execution/jobs/filters.py",
           (f"{EXE}/jobs/test_selection_filters.py", f"{EXE}/jobs/test_selection_index.py",
            f"{EXE}/jobs/test_job_check_rules_agree.py", f"{EXE}/jobs/test_selection_boundaries.py")),
    Module("jobs-dispatch", "cowboy_node/execution/jobs/dispatch.py",
           (f"{EXE}/jobs/test_dispatch_mutants.py", f"{EXE}/jobs/test_selection_committee.py",
            f"{EXE}/jobs/test_jobs_pending_snapshot.py",
            f"{EXE}/jobs/test_pending_spec_rules.py", f"{EXE}/jobs/test_jobs_underfill.py",
            f"{EXE}/jobs/test_mode_a_selection.py",
            f"{EXE}/jobs/test_selection_spec_rules.py", f"{CONS}/test_forks_pending_finality.py",
            f"{EXE}/jobs/test_jobs_e2e.py"),
           deselect=(f"{EXE}/jobs/test_jobs_underfill.py::test_under_fill_and_refill_roots_do_not_depend_on_hash_seed",)),
    Module("jobs-results", "cowboy_node/execution/jobs/results.py",
           (f"{EXE}/jobs/test_results_mutants.py", f"{EXE}/jobs/test_jobs_e2e.py",
            f"{EXE}/jobs/test_job_error_results.py", f"{EXE}/jobs/test_payment.py",
            f"{EXE}/jobs/test_selection_spec_rules.py::"
            "test_mru_winner_is_the_first_matching_runner_in_committee_order_not_address_order",
            f"{EXE}/jobs/test_selection_spec_rules.py::"
            "test_verified_result_writes_the_mru_record_with_the_runner_and_current_height")),
    Module("fees", "cowboy_node/execution/fees.py", (f"{EXE}/test_fees.py", f"{EXE}/eob/test_eob_fees_and_burn.py")),
    Module("admission", "cowboy_node/chain/admission.py",
           ("tests/unit/chain/test_node_admission.py", "tests/unit/chain/test_admission_pool.py",
            "tests/unit/chain/test_admission_reveal_window.py", "tests/unit/chain/test_admission_mutants.py")),
    Module("header", "cowboy_node/consensus/header.py",
           (f"{CONS}/test_header_rules.py", f"{CONS}/test_header_mutants.py", "tests/unit/chain/test_chain.py")),
    Module("consensus-engine", "cowboy_node/consensus/simplex/engine.py",
           (f"{CONS}/test_engine_mutants_a.py", f"{CONS}/test_engine_mutants_b.py",  # written against the
            # session's survivors (they kill most mutants at once)
            f"{CONS}/test_engine_rules.py", f"{CONS}/test_simplex_engine.py", f"{CONS}/test_engine_floor.py",
            f"{CONS}/test_engine_flood_bounds.py", f"{CONS}/test_vote_journal.py",
            # the engine's other fast files (35 tests, 0.6 s): late activity, nullified seeds, optimistic
            # certificates, message types (the simulator files, ~20 s, stay out: each survivor pays its whole list)
            f"{CONS}/test_engine_late_activity.py", f"{CONS}/test_engine_nullified_seed.py",
            f"{CONS}/test_optimistic_certificates.py", f"{CONS}/test_simplex_types.py"), timeout=180.0),
    Module("framing", "cowboy_protocol/transport/framing.py",
           (f"{PROTO}/test_transport_framing_mutants.py", f"{PROTO}/test_transport_framing.py",
            f"{PROTO}/test_transport_frames.py")),
    Module("runner-session", "cowboy_protocol/transport/runner_session.py",
           (f"{PROTO}/test_transport_runner_session_mutants.py", f"{PROTO}/test_transport_session_handshake.py",
            f"{PROTO}/test_transport_session_heartbeat.py", f"{PROTO}/test_transport_session_jobs.py")),
    Module("validator-session", "cowboy_protocol/transport/validator_session.py",
           (f"{PROTO}/test_transport_validator_session_mutants.py", f"{PROTO}/test_transport_session_handshake.py",
            f"{PROTO}/test_transport_session_heartbeat.py", f"{PROTO}/test_transport_session_jobs.py")),
    Module("pvm-guards", "cowboy_node/execution/pvm/guards.py",
           (f"{EXE}/pvm/test_pvm_guards_mutants.py",  # written against the first session's survivors
            f"{EXE}/pvm/test_pvm_escapes.py", f"{EXE}/pvm/test_pvm_policy.py", f"{EXE}/pvm/test_pvm_metering.py")),
)

TIMEOUT_FACTOR = 10.0
"""A mutant's run may take this many times the unmutated run before it is ended. With ``pytest -x`` a mutant's run
is never longer than the baseline except when it hangs, so the factor only absorbs load: on this shared machine a
run can take several times longer than the same run a minute earlier, and a survivor ended by the timeout would be
a false kill."""

EXCLUDED: tuple[str, ...] = (
    # Arithmetic swapped for bit/shift/power operators on these integer paths only re-tests what the +/−/* swaps do.
    r"core/ReplaceBinaryOperator_\w+_(Pow|LShift|RShift|BitXor|MatMul)$",
    r"core/ReplaceBinaryOperator_(Add|Sub|Mul|Div|FloorDiv|Mod|Pow)_(BitOr|BitAnd)$",
    # `is`/`in` against ordering comparisons are type errors (TypeError) or always-false: not a rule change.
    r"core/ReplaceComparisonOperator_(Lt|LtE|Gt|GtE)_(Is|IsNot|In|NotIn)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot|In|NotIn)_(Lt|LtE|Gt|GtE)$",
    # `x is None` ↔ `x == None` (and their negations) are the same test for None.
    r"core/ReplaceComparisonOperator_(Is_Eq|IsNot_NotEq|Eq_Is|NotEq_IsNot)$",
    # Variable insertion/replacement mutants are random-ish and mostly type errors mypy already rejects.
    r"core/Variable(Inserter|Replacer)$",
)

# Reasons shared by several pvm-guards entries of EQUIVALENT (one argument, several mutants of the same lines).
_PVM_ROUND_SHORTCUT_SKIPPED = (
    'round(): the int shortcut only ever answers 0, and only where round() gives 0 too (|number| < '
    '10**(floor(bits*0.30103)+1) <= 10**(-ndigits)/10); this change only skips it more often, and the '
    'clamp below bounds the work'
)
_PVM_ROUND_CLAMP_NEVER_CHANGES = (
    'round() only ever gets an int, bool or float (guarded types cannot be subclassed, actor classes '
    "cannot define __round__): an int's ndigits < 0 took the shortcut above or is >= -1237, an int with "
    "ndigits >= 0 rounds to itself, and CPython 3.11-3.13's float round clips any ndigits past +-323 (x "
    'or +-0.0), so no clamp, a wider one or another bound never changes a value'
)
_PVM_WEIGHT_CAP = (
    'weight(cap) is exact up to cap and above cap past it; any cap >= remaining gives the same outcome: '
    'an exact weight <= remaining is charged the same, a larger one exceeds the cycles left '
    '(out_of_cycles, the meter pinned at its limit, also for a float cap + 1)'
)
_PVM_WEIGHT_CAP_REMAINING = (
    'weight(cap) is exact up to cap and above cap past it; with cap = remaining instead of remaining + 1 '
    'the charge exceeds the cycles left (out_of_cycles, the meter pinned at its limit) in exactly the '
    'same cases and is the same exact weight otherwise'
)
_PVM_ISLICE_CHUNK = (
    'islice(it, _CHUNK) never yields more than _CHUNK items, so != _CHUNK iff < _CHUNK'
)
_PVM_ROUND_BOUND_BY_ONE = (
    'the bound moves by one at a value that the clamp maps to itself (-4096 -> -4096, 4096 -> 4096), so '
    'round() gets the same ndigits'
)
_PVM_VIEW_SCANS_LIKE_LIST = (
    'a list/tuple is scanned as its copy, a values view as itself: the same items in the same order, '
    'len() equal, and walk.weight counts a view as the list it produces (_children), so the same charge '
    'and answer'
)
_PVM_ROUND_SHORTCUT_NEVER_ANSWERS = (
    'ndigits == 0 and positive ndigits enter the shortcut but -ndigits > digits is false there (digits >= '
    '2): nothing returned, the same as skipping it'
)
_PVM_ROUND_LARGE_NDIGITS = (
    'round(x, n) returns x unchanged for every int and float once n >= 4095 (ints: any n >= 0; floats: n '
    '> 323), so clamping to 4095/4096/4097 gives the same value'
)
_PVM_ROUND_CLAMP_SIGN = (
    'only reached with |ndigits| > 4096 (the test above), where ndigits > 0, > 1 and > -1 agree'
)
_PVM_POW_ZERO_BASE = (
    'a == 0 then takes the general path: (0 - 1) * b + 1 <= max_int_bits, pow_cost(0, bits b) = bits(b) * '
    'mul(0, 0) = 0 (words(0) = 1, 1 >> 4 = 0) and int_result(0 ** b) = 0: same value, nothing charged'
)
_PVM_MODPOW_ONE_WORD = (
    'words() of 0, 1 and 2 bits is 1 word, so modpow_cost(max(bits m, 0/1/2), ...) is the same charge (m '
    "= 0 is then CPython's ValueError either way)"
)

EQUIVALENT: dict[str, tuple[tuple[str, int, str, str], ...]] = {
    # module name → (operator, line, text of the mutated line (stripped), why the mutant cannot change behaviour)
    "jobs-draw": (
        ("core/ReplaceBinaryOperator_Mul_Div", 79, "mru_address: bytes | None, /, mru_multiplier: int) -> list[RunnerRecord]:",  # noqa: E501
         "the keyword-only marker * becomes positional-only /: every caller passes mru_multiplier by keyword, which both accept"),  # noqa: E501
        ("core/ReplaceBinaryOperator_Mul_Div", 112, "weight_of: Callable[[RunnerRecord], int], m: int, seed: bytes, mru_address: bytes | None, /,",  # noqa: E501
         "the keyword-only marker * becomes positional-only /: every caller passes mru_multiplier by keyword, which both accept"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_LtE", 60, "if not weights or total <= 0:",
         "weights are non-negative, so total <= 0 iff total == 0"),
        ("core/ReplaceComparisonOperator_Eq_LtE", 92, "if i <= 0 and mru_address is not None:",
         "the iteration counter starts at 0 and only grows: i <= 0 iff i == 0"),
        ("core/ReplaceComparisonOperator_Eq_GtE", 70, "if j >= len(items):",
         "j < len(items) before the pop, so j >= len(items) after it iff j == len(items)"),
        ("core/ReplaceComparisonOperator_Lt_NotEq", 87, "while len(selected) != m:",
         "selected grows by one from 0 and m >= 1, so it reaches m before it could pass it"),
        ("core/ReplaceUnaryOperator_USub_Invert", 91, "mru_slot = ~1",
         "the \"no MRU slot\" sentinel is only compared with >= 0: ~1 = -2 is as negative as -1"),
        ("core/ReplaceUnaryOperator_USub_Invert", 94, "mru_slot = addresses.index(mru_address) if mru_address in addresses else ~1",  # noqa: E501
         "the \"no MRU slot\" sentinel is only compared with >= 0: ~1 = -2 is as negative as -1"),
        ("core/NumberReplacer", 88, "pool, weights = pools[0] if pools[0][ 1] else pools[1]",
         "pools[0] is a (runners, weights) pair of equal lengths: [1] and [-1] are as empty as [0]"),
        ("core/NumberReplacer", 88, "pool, weights = pools[0] if pools[0][ -1] else pools[1]",
         "pools[0] is a (runners, weights) pair of equal lengths: [1] and [-1] are as empty as [0]"),
        ("core/NumberReplacer", 91, "mru_slot = - 2",
         "the sentinel -1 \u2192 -2: still negative, only compared with >= 0"),
        ("core/NumberReplacer", 94, "mru_slot = addresses.index(mru_address) if mru_address in addresses else - 2",
         "the sentinel -1 \u2192 -2: still negative, only compared with >= 0"),
    ),
    "jobs-mru": (
        ("core/NumberReplacer", 49, "return runner if max(height - set_at, -1) <= ttl else None",
         "max(age, 1) <= ttl equals max(age, 0) <= ttl because MRU_TTL_BLOCKS >= 1 (governance bound 1..1,000,000)"),
    ),
    "jobs-seeds": (
        ("core/ReplaceComparisonOperator_Eq_LtE", 73, "return MODE_IMMEDIATE if m <= 1 else MODE_DELAYED",
         "m < 1 was refused two lines above, so m <= 1 iff m == 1"),
    ),
    "jobs-filters": (
        ("core/ReplaceComparisonOperator_Eq_GtE", 71, "host = req.http_host.lower().rstrip(\".\") if req.http_host is not None and kind >= JOB_KIND_HTTP else None",  # noqa: E501
         "http_host is set only for HTTP jobs (http_host(job_type) is None otherwise), so the kind test never decides"),
        ("core/ReplaceTrueWithFalse", 40, "@dataclass(frozen=False, slots=True)",
         "SelectionRequest is built once per job and never mutated, hashed or given new attributes"),
        ("core/ReplaceTrueWithFalse", 40, "@dataclass(frozen=True, slots=False)",
         "SelectionRequest is built once per job and never mutated, hashed or given new attributes"),
        ("core/ReplaceTrueWithFalse", 125, "return out, dict(zip(FILTER_NAMES, counts, strict=False))",
         "FILTER_NAMES and the counts tuple are the same fixed length: strict never fires"),
    ),
    "admission": (
        ("core/ReplaceComparisonOperator_NotEq_Lt", 90, "if prepared is None or len(body) > limit or len(tx_bytes) < len(body) + 4 or tx_bytes[4:] != body:",  # noqa: E501
         "the length test is implied by the content test after it (tx_bytes[4:] == body fixes the length): it only saves the slice"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Gt", 90, "if prepared is None or len(body) > limit or len(tx_bytes) > len(body) + 4 or tx_bytes[4:] != body:",  # noqa: E501
         "the length test is implied by the content test after it (tx_bytes[4:] == body fixes the length): it only saves the slice"),  # noqa: E501
        ("core/ReplaceOrWithAnd", 90, "if prepared is None or len(body) > limit and len(tx_bytes) != len(body) + 4 or tx_bytes[4:] != body:",  # noqa: E501
         "joins the two redundant tests (size: check_static re-checks it; length: implied by the content test), the content test still decides"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_Eq", 90, "if prepared is None or len(body) == limit or len(tx_bytes) != len(body) + 4 or tx_bytes[4:] != body:",  # noqa: E501
         "check_static refuses a body over max_tx_bytes (tx_too_large) however it was decoded: this test only decides whether to decode again"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_GtE", 90, "if prepared is None or len(body) >= limit or len(tx_bytes) != len(body) + 4 or tx_bytes[4:] != body:",  # noqa: E501
         "check_static refuses a body over max_tx_bytes (tx_too_large) however it was decoded: this test only decides whether to decode again"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 130, "if rec is None or rec.status < JobStatus.ASSIGNED:",
         "a terminal job has an empty committee (FAILED) or all its reveals after commit_end (COMPLETED): the checks below return for it as this one would"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Gt", 130, "if rec is None or rec.status > JobStatus.ASSIGNED:",
         "a PENDING_SELECTION job has no committee yet: the membership check below returns for it as this one would"),
        ("core/ReplaceComparisonOperator_LtE_Eq", 134, "if decode_job_spec(rec.spec).verification.runners == 1:",
         "a stored JobSpec has runners >= 1 (JobSubmit refuses others with job_runners_invalid): <= 1 iff == 1"),
        ("core/ReplaceTrueWithFalse", 45, "@dataclass(frozen=False, slots=True)",
         "HeadContext is built once per head and never mutated, hashed or given new attributes"),
        ("core/ReplaceTrueWithFalse", 45, "@dataclass(frozen=True, slots=False)",
         "HeadContext is built once per head and never mutated, hashed or given new attributes"),
        ("core/NumberReplacer", 64, "env = BlockEnv(chain_id=chain.genesis.chain_id, height=head.header.height + 1, timestamp_ms= -1,",  # noqa: E501
         "admission reads only chain_id and height of this BlockEnv (begin_block stores it; check_static, check_reveal_window)"),  # noqa: E501
        ("core/NumberReplacer", 64, "env = BlockEnv(chain_id=chain.genesis.chain_id, height=head.header.height + 1, timestamp_ms= 1,",  # noqa: E501
         "admission reads only chain_id and height of this BlockEnv (begin_block stores it; check_static, check_reveal_window)"),  # noqa: E501
        ("core/NumberReplacer", 65, "fee_recipient=bytes( 21), beacon=b\"\", parent_beacon=b\"\")",
         "admission reads only chain_id and height of this BlockEnv (begin_block stores it; check_static, check_reveal_window)"),  # noqa: E501
        ("core/NumberReplacer", 65, "fee_recipient=bytes( 19), beacon=b\"\", parent_beacon=b\"\")",
         "admission reads only chain_id and height of this BlockEnv (begin_block stores it; check_static, check_reveal_window)"),  # noqa: E501
    ),
    "header": (
        ("core/ReplaceComparisonOperator_NotEq_Gt", 50, "if h.round.epoch > 0 or h.round <= parent.round:",
         "Round.epoch is decoded as an unsigned integer (expect_uint), so > 0 iff != 0"),
    ),
    "framing": (
        ("core/ReplaceBinaryOperator_Sub_Add", 83, "take = min(HEADER_LEN - len(self._buf), len(view) + pos)",
         "the slice view[pos:pos + take] stops at the chunk's end and pos past it ends the loop: a larger take only when the chunk is short, then the prefix is incomplete and the loop breaks as before"),  # noqa: E501
        ("core/ReplaceBinaryOperator_Sub_Add", 93, "take = min(need, len(view) + pos)",
         "the slice view[pos:pos + take] stops at the chunk's end and pos past it ends the loop: a larger take only when the chunk is short, then the payload is incomplete and the loop breaks as before"),  # noqa: E501
        ("core/ReplaceBinaryOperator_Sub_Mul", 72, "while n * pos >= HEADER_LEN:",
         "n * 0 < HEADER_LEN: the fast path is never taken and the buffered loop decodes every frame, with the same checks in the same order (speed only)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_LtE", 21, "if length <= 0:",
         "the length is decoded with int.from_bytes (unsigned), so <= 0 iff == 0"),
        ("core/ReplaceComparisonOperator_Lt_NotEq", 81, "while pos != len(view):",
         "pos never passes len(view): every take is at most len(view) - pos"),
        ("core/ReplaceComparisonOperator_Lt_NotEq", 86, "if len(self._buf) != HEADER_LEN:",
         "the buffer never holds more than HEADER_LEN prefix bytes (take <= HEADER_LEN - len(buf)), so != iff <"),
        ("core/ReplaceComparisonOperator_Lt_NotEq", 96, "if len(self._buf) != self._length:",
         "the buffer never holds more than the frame's length (take <= need), so != iff <"),
        ("core/ReplaceComparisonOperator_Lt_LtE", 34, "code = \"frame_truncated\" if len(data) <= HEADER_LEN + length else \"trailing_bytes\"",  # noqa: E501
         "inside `if len(data) != HEADER_LEN + length`, so len(data) == HEADER_LEN + length never reaches this test"),
        ("core/ReplaceComparisonOperator_Lt_LtE", 81, "while pos <= len(view):",
         "at pos == len(view) one more pass takes 0 bytes and meets the incomplete-prefix or incomplete-payload break"),
        ("core/ReplaceComparisonOperator_Gt_NotEq", 76, "if end != n:",
         "only whether the whole-frame fast path or the buffered loop below decodes: both apply the same checks in the same order and yield the same frames (speed only)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_GtE", 76, "if end >= n:",
         "only whether the whole-frame fast path or the buffered loop below decodes: both apply the same checks in the same order and yield the same frames (speed only)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_Eq", 72, "while n - pos == HEADER_LEN:",
         "only whether the whole-frame fast path or the buffered loop below decodes: both apply the same checks in the same order and yield the same frames (speed only)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_Gt", 72, "while n - pos > HEADER_LEN:",
         "only whether the whole-frame fast path or the buffered loop below decodes: both apply the same checks in the same order and yield the same frames (speed only)"),  # noqa: E501
        ("core/ReplaceBreakWithContinue", 87, "continue",
         "the prefix is incomplete only when the chunk is used up (pos == len(view)), so continue ends the loop as break does"),  # noqa: E501
        ("core/ReplaceBreakWithContinue", 97, "continue",
         "the payload is incomplete only when the chunk is used up (pos == len(view)), so continue ends the loop as break does"),  # noqa: E501
    ),
    "validator-session": (
        ("core/ReplaceBinaryOperator_Sub_Add", 197, "if self._state is SessionState.AUTHENTICATED and not self._jobs and now + self._last_rx < self._idle_timeout:",  # noqa: E501
         "clock readings are >= 0, so now + last_rx < idle implies now - last_rx < idle: the shortcut is taken less often, and the checks it skips find nothing either way"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_LtE", 363, "if job.cancelled and (kind <= \"commit\" or not job.commit_seen):",  # noqa: E501
         "kind is \"commit\" or \"result\", and \"result\" > \"commit\": <= \"commit\" iff == \"commit\""),
        ("core/ReplaceComparisonOperator_Eq_LtE", 365, "if kind <= \"commit\":",
         "kind is \"commit\" or \"result\", and \"result\" > \"commit\": <= \"commit\" iff == \"commit\""),
        ("core/ReplaceTrueWithFalse", 88, "@dataclass(frozen=True, slots=False)",
         "Admission is frozen and never given new attributes: slots only saves memory"),
        ("core/ReplaceTrueWithFalse", 112, "@dataclass(slots=False)",
         "_Job is private to the session and never given new attributes: slots only saves memory"),
        ("core/ReplaceAndWithOr", 299, "assert self._ctx is not None or self._admission is not None",
         "an invariant: _on_hello sets both the context and the admission before the state becomes HANDSHAKE, so neither form fails"),  # noqa: E501
    ),
    "runner-session": (
        ("core/ReplaceComparisonOperator_NotEq_Lt", 279, "if self._outstanding is None or echo < self._outstanding[0]:",
         "echo <= newest was checked above and the outstanding nonce is the newest ping's: echo > outstanding never happens, so < iff !="),  # noqa: E501
        ("core/ReplaceUnaryOperator_USub_Invert", 112, "self._last_answered = ~1  # highest nonce a pong was accepted (or skipped as stale) for",  # noqa: E501
         "~1 == -2, and nonce_echo is a decoded u64: echo <= -1 iff echo <= -2 (both never)"),
        ("core/ReplaceTrueWithFalse", 81, "@dataclass(slots=False)",
         "_Job is private to the session and never given new attributes: slots only saves memory"),
        ("core/ReplaceAndWithOr", 266, "assert self._ctx is not None or self._peer_hello is not None",
         "an invariant: _on_hello sets the context and the peer Hello together, and a HelloAck is dispatched here only after it"),  # noqa: E501
        ("core/NumberReplacer", 108, "self._height = 1",
         "start() sets _height before anything reads it for the wire (a tick before start only takes a max that start overwrites)"),  # noqa: E501
        ("core/NumberReplacer", 108, "self._height = -1",
         "start() sets _height before anything reads it for the wire (a tick before start only takes a max that start overwrites)"),  # noqa: E501
        ("core/NumberReplacer", 112, "self._last_answered = - 2  # highest nonce a pong was accepted (or skipped as stale) for",  # noqa: E501
         "nonce_echo is a decoded u64: echo <= -1 iff echo <= -2 (both never)"),
    ),
    "jobs-results": (
        ("core/ReplaceComparisonOperator_Eq_LtE", 272, "if rec is not None and rec.status <= JobStatus.ASSIGNED:",
         "a deadline entry exists only while its job is ASSIGNED (assign writes it, _release_assignment deletes it before any conclusion): the test never sees another status"),  # noqa: E501
        ("core/ReplaceAndWithOr", 272, "if rec is not None or rec.status == JobStatus.ASSIGNED:",
         "a deadline entry exists only while its job is ASSIGNED, so its record exists and the status test is true: both forms conclude it"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_GtE", 138, "if len(new.reveals) >= len(new.committee):",
         "one reveal per committee member (already_revealed, not_on_committee): reveals never outnumber the committee"),
        ("core/ReplaceComparisonOperator_Gt_NotEq", 127, "multi = decode_job_spec(rec.spec).verification.runners != 1",
         "a stored JobSpec has runners >= 1 (JobSubmit refuses others with job_runners_invalid): != 1 iff > 1"),
        ("core/NumberReplacer", 230, "units = 1 if revealed is None else revealed.units",
         "first is a matching runner, whose reveal the verdict was computed from: revealed is never None here"),
        ("core/NumberReplacer", 230, "units = -1 if revealed is None else revealed.units",
         "first is a matching runner, whose reveal the verdict was computed from: revealed is never None here"),
        ("core/ReplaceBinaryOperator_Sub_Mod", 110, "meter.charge_cells(len(raw) % len(rec.encode()) + 64)",
         "a commit adds one (runner, commitment) entry, far smaller than the record (which holds the whole spec): new < 2 × old, so new % old == new - old"),  # noqa: E501
        ("core/ReplaceBreakWithContinue", 268, "continue",
         "the deadline index is ordered by its big-endian deadline: past the first entry not yet due none is, so continue only scans them without adding any"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_GtE", 272, "if rec is not None and rec.status >= JobStatus.ASSIGNED:",
         "a deadline entry exists only while its job is ASSIGNED (assign writes it, _release_assignment deletes it before any conclusion): the test never sees another status"),  # noqa: E501
    ),
    "jobs-dispatch": (
        ("core/ReplaceComparisonOperator_Gt_NotEq", 177,
         "if missing != 0:  # under-filled (§9.2): the seats §11.2 re-selection fills; absent for a full committee",
         "the draw seats at most M runners, so missing = M − len(committee) ≥ 0: != 0 iff > 0"),
        ("core/NumberReplacer", 111,
         "return max( -1, decode_job_spec(rec.spec).verification.runners - len(rec.committee))",
         "assign writes a committee drawn with at most M seats (the draw loops while len(selected) < m), so M - len(committee) >= 0"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_NotEq", 121, "if ctx.env.n_validators != 1 and m > 1:",
         "n_validators is len(genesis.validators), a non-empty array (admission's BlockEnv keeps the default 1): > 1 iff != 1"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_NotEq", 121, "if ctx.env.n_validators > 1 and m != 1:",
         "m is a job's M, >= 1 (job_runners_invalid at submission): > 1 iff != 1"),
        ("core/ReplaceTrueWithFalse", 147,
         "for r, w in zip(candidates, candidate_weights, strict=False):  # stable partition, weights stay paired",
         "every caller pairs one weight per candidate (base_weights(candidates); process_pending checks len(present) == len(rows) first): strict never fires"),  # noqa: E501
        ("core/NumberReplacer", 184, "tx_hash: bytes, events: list[Event], reserved: int = -1) -> bytes:",
         "the only caller, executors.submit_request, always passes reserved=: the default is never used"),
        ("core/NumberReplacer", 184, "tx_hash: bytes, events: list[Event], reserved: int = 1) -> bytes:",
         "the only caller, executors.submit_request, always passes reserved=: the default is never used"),
        ("core/NumberReplacer", 204,
         "if m == 0 and not ctx.hard_exclude:  # the index keeps a fallback pool, which Mode A does not have",
         "M >= 1, so the M = 1 job takes the linear path, whose answer the index equals by contract (docs/selection.md §8, test_selection_index.py)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_Lt", 204,
         "if m < 1 and not ctx.hard_exclude:  # the index keeps a fallback pool, which Mode A does not have",
         "M >= 1, so the M = 1 job takes the linear path, whose answer the index equals by contract (docs/selection.md §8, test_selection_index.py)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_LtE", 204,
         "if m <= 1 and not ctx.hard_exclude:  # the index keeps a fallback pool, which Mode A does not have",
         "M >= 1 (job_runners_invalid at submission): <= 1 iff == 1"),
        ("core/ReplaceComparisonOperator_Eq_LtE", 247, "elif m <= 1:",
         "M >= 1 (job_runners_invalid at submission): <= 1 iff == 1"),
        ("core/NumberReplacer", 271, "meter.charge_cells(len(raw_spec) + 256 * max( 0, m))",
         "M >= 1 (job_runners_invalid at submission): max(0, m) == max(1, m)"),
        ("core/ReplaceBreakWithContinue", 291, "continue",
         "the due index is ordered by (seed_epoch, seed_view) big-endian: past the first round above up_to_view every later one is above too, so continue only skips them"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 292, "if not out or out[-1] < (epoch, view):",
         "the due index is iterated in ascending round order, so out[-1] <= (epoch, view) always: < iff !="),
        ("core/ReplaceTrueWithFalse", 318, "for r, w in zip(candidates, base, strict=False)])",
         "the only caller (submit) passes base = base_weights(candidates), one weight per candidate: strict never fires"),  # noqa: E501
        ("core/ExceptionReplacer", 348,
         "except CosmicRayTestingException as e:  # a field outside its leaf range cannot be a committed candidate",
         "_snapshot's decoders already bound every leaf field (20-byte address, uint <= U64_MAX, 16-byte u128s); an index > U32_MAX needs > 4e9 rows: root_of_rows cannot raise here"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_LtE", 377, "if len(collected) <= before:",
         "collected only grows after before is taken: <= iff =="),
        ("core/ReplaceComparisonOperator_NotEq_Lt", 391, "if len(present) < len(rows):",
         "present is a filter of cands, one per row: never longer, so < iff !="),
    ),
    "fees": (
        ("core/ReplaceComparisonOperator_Gt_GtE", 33, "if used >= target:",
         "used == target returned three lines above, so >= and > agree here"),
        ("core/ReplaceTrueWithFalse", 43, "@dataclass(frozen=False, slots=True)",
         "FeeSplit is a return value that is never mutated, hashed or given new attributes"),
        ("core/ReplaceTrueWithFalse", 43, "@dataclass(frozen=True, slots=False)",
         "FeeSplit is a return value that is never mutated, hashed or given new attributes"),
    ),
    "consensus-engine": (
        ("core/ReplaceComparisonOperator_LtE_Eq", 644, "if v.my_finalize is not None or v.my_nullify is not None or v.round.view == self.finalized_view \\",  # noqa: E501
         "_finalize runs only in _apply(Notarization) of a view above finalized_view: certificates and votes at or below it are refused, and each vote is assembled on arrival, so no view is finalized and then notarized in one _try_certify"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Lt", 644, "if v.my_finalize is not None or v.my_nullify is not None or v.round.view < self.finalized_view \\",  # noqa: E501
         "_finalize runs only in _apply(Notarization) of a view above finalized_view: certificates and votes at or below it are refused, and each vote is assembled on arrival, so no view is finalized and then notarized in one _try_certify"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_GtE", 706, "if r.view >= self._last_vote_view[sender]:",
         "on equality the assignment writes the value already there"),
        ("core/ReplaceAndWithOr", 718, "if sender == v.leader or v.proposal is None:",
         "the extra _check_leader_vote calls do nothing: a leader's first notarize never finds v.proposal set (it is set only from that notarize or our own proposal), and with no proposal the current view holds no leader notarize (adopted on arrival or on entry)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_GtE", 724, "if sender == v.leader and r.view >= self.view and not self._ended(v) and v.my_nullify is None \\",  # noqa: E501
         "a view above the current one has no leader yet (elected on entry, or when the previous view's seed arrives, which enters it), so sender == v.leader already fails there"),  # noqa: E501
        ("core/NumberReplacer", 753, "if k <= 1 or view <= seen or view + k <= self.view or self.view - seen < k // 2:",
         "a late vote's view is <= finalized_view < self.view (before start, view <= seen returns), so for k <= 1 the clause view + k <= self.view already returns: the k test decides nothing"),  # noqa: E501
        ("core/NumberReplacer", 753, "if k <= -1 or view <= seen or view + k <= self.view or self.view - seen < k // 2:",  # noqa: E501
         "a late vote's view is <= finalized_view < self.view (before start, view <= seen returns), so for k <= 1 the clause view + k <= self.view already returns: the k test decides nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Eq", 753, "if k == 0 or view <= seen or view + k <= self.view or self.view - seen < k // 2:",  # noqa: E501
         "a late vote's view is <= finalized_view < self.view (before start, view <= seen returns), so for k <= 1 the clause view + k <= self.view already returns: the k test decides nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Lt", 753, "if k < 0 or view <= seen or view + k <= self.view or self.view - seen < k // 2:",  # noqa: E501
         "a late vote's view is <= finalized_view < self.view (before start, view <= seen returns), so for k <= 1 the clause view + k <= self.view already returns: the k test decides nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_Eq", 755, "if self._late_checked[sender] == self.view:",
         "_late_checked[s] is only ever set to self.view, which never decreases, so >= is =="),
        ("core/ReplaceBreakWithContinue", 772, "continue",
         "2q > n and a signer holds one finalize per view, so after one proposal's quorum no other group reaches q: _assemble returns None for the rest without a check"),  # noqa: E501
        ("core/ReplaceBreakWithContinue", 778, "continue",
         "2q > n and a signer holds one notarize per view, so after one proposal's quorum no other group reaches q: _assemble returns None for the rest without a check"),  # noqa: E501
        ("core/NumberReplacer", 824, "if self._now < self._cert_muted.get(sender, - 2):",
         "the host clock is non-negative: now < d is false for every default d <= 0, as for -1"),
        ("core/NumberReplacer", 824, "if self._now < self._cert_muted.get(sender, - 0):",
         "the host clock is non-negative: now < d is false for every default d <= 0, as for -1"),
        ("core/ReplaceUnaryOperator_USub_Invert", 824, "if self._now < self._cert_muted.get(sender, ~1):",
         "the host clock is non-negative: now < d is false for every default d <= 0, as for -1"),
        ("core/ReplaceUnaryOperator_USub_Not", 824, "if self._now < self._cert_muted.get(sender, not 1):",
         "the host clock is non-negative: now < d is false for every default d <= 0, as for -1"),
        ("core/AddNot", 843, "if not len(self._cert_muted) >= self.n:  # bounded by the validator count; stale entries go first",  # noqa: E501
         "the prune keeps t > now, dropping only mutes already over (the check is now < t and the host clock does not go back): running it at any size changes nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_Eq", 843, "if len(self._cert_muted) == self.n:  # bounded by the validator count; stale entries go first",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_Gt", 843, "if len(self._cert_muted) > self.n:  # bounded by the validator count; stale entries go first",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_Lt", 843, "if len(self._cert_muted) < self.n:  # bounded by the validator count; stale entries go first",  # noqa: E501
         "the prune keeps t > now, dropping only mutes already over (the check is now < t and the host clock does not go back): running it at any size changes nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_LtE", 843, "if len(self._cert_muted) <= self.n:  # bounded by the validator count; stale entries go first",  # noqa: E501
         "the prune keeps t > now, dropping only mutes already over (the check is now < t and the host clock does not go back): running it at any size changes nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_GtE_NotEq", 843, "if len(self._cert_muted) != self.n:  # bounded by the validator count; stale entries go first",  # noqa: E501
         "the prune keeps t > now, dropping only mutes already over (the check is now < t and the host clock does not go back): running it at any size changes nothing"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_Eq", 844, "self._cert_muted = {k: t for k, t in self._cert_muted.items() if t == self._now}",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_GtE", 844, "self._cert_muted = {k: t for k, t in self._cert_muted.items() if t >= self._now}",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_Lt", 844, "self._cert_muted = {k: t for k, t in self._cert_muted.items() if t < self._now}",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_LtE", 844, "self._cert_muted = {k: t for k, t in self._cert_muted.items() if t <= self._now}",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_NotEq", 844, "self._cert_muted = {k: t for k, t in self._cert_muted.items() if t != self._now}",  # noqa: E501
         "_cert_muted is keyed by the sender, a validator other than this one (receive drops the rest), so it never holds n entries: the prune never runs"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Lt_LtE", 879, "if self._pending_final is None or self._pending_final.round.view <= view:",  # noqa: E501
         "_apply returns earlier when the view already holds a finalization, so the pending finalization's view never equals the new one"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Eq", 890, "if fin is None or fin.round.view == self.finalized_view:",
         "_pending_final is set only from a finalization above finalized_view and cleared when finalized_view reaches it (_finalize_chain, advance_floor): it is never at or below it here"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Lt", 890, "if fin is None or fin.round.view < self.finalized_view:",
         "_pending_final is set only from a finalization above finalized_view and cleared when finalized_view reaches it (_finalize_chain, advance_floor): it is never at or below it here"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 905, "if p.parent_view < self.finalized_view or p.parent != self.finalized_digest:",  # noqa: E501
         "the loop above exits with p.parent_view <= finalized_view, so != and < agree"),
        ("core/ReplaceComparisonOperator_Gt_GtE", 918, "due = sorted(w for w in set(views) if w >= self.finalized_view and",  # noqa: E501
         "every caller asks only for views above finalized_view (_parent_for, _justified, _finalize_chain look above it), so w > finalized_view always holds"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_NotEq", 918, "due = sorted(w for w in set(views) if w != self.finalized_view and",  # noqa: E501
         "every caller asks only for views above finalized_view (_parent_for, _justified, _finalize_chain look above it), so w > finalized_view always holds"),  # noqa: E501
        ("core/ReplaceAndWithOr", 933, "if cur is not None or not self._ended(cur):",
         "after start the current view's state exists and is never ended (a certificate of it, or entering an ended view, moves on at once), so both tests are true"),  # noqa: E501
        ("core/ReplaceAndWithOr", 936, "elif cur.proposal is not None or not cur.verify_requested:",
         "_check_leader_vote does nothing unless the proposal is set and not yet sent for verification (with no proposal the current view holds no leader notarize: adopted on arrival or entry)"),  # noqa: E501
        ("core/ReplaceUnaryOperator_Delete_USub", 952, "return sorted(by.items(), key=lambda kv: len(kv[1]))",
         "2q > n, so at most one proposal holds q votes, and _assemble returns None without a check for a smaller group: the order of the groups is unobservable"),  # noqa: E501
        ("core/ReplaceUnaryOperator_USub_Invert", 952, "return sorted(by.items(), key=lambda kv: ~len(kv[1]))",
         "2q > n, so at most one proposal holds q votes, and _assemble returns None without a check for a smaller group: the order of the groups is unobservable"),  # noqa: E501
        ("core/ReplaceUnaryOperator_USub_Not", 952, "return sorted(by.items(), key=lambda kv: not len(kv[1]))",
         "2q > n, so at most one proposal holds q votes, and _assemble returns None without a check for a smaller group: the order of the groups is unobservable"),  # noqa: E501
        ("core/ReplaceUnaryOperator_USub_UAdd", 952, "return sorted(by.items(), key=lambda kv: +len(kv[1]))",
         "2q > n, so at most one proposal holds q votes, and _assemble returns None without a check for a smaller group: the order of the groups is unobservable"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 83, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 88, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 94, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 101, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 111, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 118, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 123, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 128, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 138, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 146, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 181, "@dataclass(frozen=True, slots=False)",
         "slots=False: nothing relies on slots (no __slots__/__dict__ use, no attribute-refusal test); frozen stays True"),  # noqa: E501
        ("core/ReplaceTrueWithFalse", 223, "@dataclass(slots=False)",
         "_View slots=False: the engine sets only declared fields (mypy-checked), nothing reads __slots__ or __dict__"),
        ("core/ReplaceFalseWithTrue", 231, "verified_ok: bool = True",
         "_View.verified_ok is written (lines 357, 368) but never read anywhere"),
        ("core/ReplaceTrueWithFalse", 357, "v.proposal, v.verified_ok, v.leader_deadline = p, False, None",
         "_View.verified_ok is written but never read anywhere"),
        ("core/ReplaceTrueWithFalse", 368, "v.verified_ok = False",
         "_View.verified_ok is written but never read anywhere"),
        ("core/NumberReplacer", 271, "self._now = 1",
         "_now's initial value is never read: every public method that reaches a read (start, receive, tick, propose, verified, advance_floor) assigns it first"),  # noqa: E501
        ("core/NumberReplacer", 271, "self._now = -1",
         "_now's initial value is never read: every public method that reaches a read (start, receive, tick, propose, verified, advance_floor) assigns it first"),  # noqa: E501
        ("core/NumberReplacer", 274, "self._entered = -1",
         "_entered is read only in _enter, whose view is >= 1: -1 vs 0 differs only in `view > _entered + 1` at view 1, where it sets _grace_from = max(_grace_from, 0), unchanged (_grace_from starts at floor_view >= 0)"),  # noqa: E501
        ("core/NumberReplacer", 275, "self._last_vote_view = [ -1] * self.n",
         "-1 vs 0: every read either compares with a vote view > finalized_view >= 0 (line 700) or takes max(.., _grace_from) with _grace_from >= 0"),  # noqa: E501
        ("core/NumberReplacer", 277, "self._late_checked = [ 1] * self.n",
         "_late_checked[s] >= self.view differs from 0 only at self.view <= 1, where finalized_view is still floor_view <= _grace_from, so _late_activity returned at `view <= seen` before the read"),  # noqa: E501
        ("core/NumberReplacer", 277, "self._late_checked = [ -1] * self.n",
         "-1 vs 0 differs only at self.view == 0, where finalized_view is still floor_view <= _grace_from, so _late_activity returned at `view <= seen` before the read"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_GtE", 298, "for view in sorted(w for w in self._views if w >= self.finalized_view):",  # noqa: E501
         "adds only views <= finalized_view, where start finds no vote that _try_certify has not already seen: _restore skips them and a received vote was certified on receipt"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_NotEq", 298, "for view in sorted(w for w in self._views if w != self.finalized_view):",  # noqa: E501
         "adds only views < finalized_view, where start finds no vote that _try_certify has not already seen: _restore skips them and a received vote was certified on receipt"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 348, "if round_.epoch != self.epoch or v is None or round_.view < self.view or v.leader != self.cfg.me \\",  # noqa: E501
         "a view above self.view never has a leader (elected on entry; _set_leader_if_known(w + 1) runs only where w + 1 is entered next or already passed), so v.leader != me rejects it"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 365, "if v is None or v.proposal != proposal or proposal.round.epoch < self.epoch:",  # noqa: E501
         "v.proposal always has the engine's epoch (propose, _on_vote and _restore check it), so a proposal of another epoch already fails v.proposal != proposal"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Gt", 365, "if v is None or v.proposal != proposal or proposal.round.epoch > self.epoch:",  # noqa: E501
         "v.proposal always has the engine's epoch (propose, _on_vote and _restore check it), so a proposal of another epoch already fails v.proposal != proposal"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_GtE", 369, "if proposal.round.view >= self.view and not self._ended(v):",
         "no view above self.view holds a proposal (propose, _try_propose and _check_leader_vote set it only in the current view), so the guard at line 365 returned"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_GtE", 371, "elif proposal.round.view >= self.view and not self._ended(v):",
         "no view above self.view holds a proposal (propose, _try_propose and _check_leader_vote set it only in the current view), so the guard at line 365 returned"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Eq", 387, "if self._pending_final is not None and self._pending_final.round.view == view:",  # noqa: E501
         "a pending finalization at or below the new finalized view that is kept is dropped by _finalize_chain (fin.round.view <= finalized_view) and replaced in _apply like None"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Lt", 387, "if self._pending_final is not None and self._pending_final.round.view < view:",  # noqa: E501
         "a pending finalization at the new finalized view that is kept is dropped by _finalize_chain (fin.round.view <= finalized_view) and replaced in _apply like None"),  # noqa: E501
        ("core/ReplaceOrWithAnd", 446, "return v.notarization is not None and v.nullification is not None or v.finalization is not None",  # noqa: E501
         "_ended is only evaluated on the current view (or the view being entered), which never holds a certificate: applying one of view w >= self.view enters w + 1 at once"),  # noqa: E501
        ("core/ReplaceOrWithAnd", 446, "return v.notarization is not None or v.nullification is not None and v.finalization is not None",  # noqa: E501
         "_ended is only evaluated on the current view (or the view being entered), which never holds a certificate: applying one of view w >= self.view enters w + 1 at once"),  # noqa: E501
        ("core/ReplaceComparisonOperator_LtE_Lt", 483, "if view < self._entered:",
         "view == _entered reaches _enter only from a second start(): after start self.view == _entered and every other caller enters a view above it; start is called once (docs/consensus.md \u00a72)"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Gt_NotEq", 485, "if view != self._entered + 1:  # a jump: we did not hear the views we skipped, so silence proves nothing",  # noqa: E501
         "view > _entered here (line 483 returned otherwise), so view != _entered + 1 iff view > _entered + 1"),
        ("core/ReplaceComparisonOperator_Gt_NotEq", 538, "while w != self.finalized_view:",
         "w starts at view - 1 >= finalized_view (the current view is above it) and falls by 1, so != and > stop at the same w"),  # noqa: E501
        ("core/ReplaceComparisonOperator_Eq_LtE", 559, "if p.parent_view <= self.finalized_view:",
         "p.parent_view < finalized_view returned False on the line before, so <= here iff =="),
        ("core/ReplaceComparisonOperator_NotEq_Gt", 579, "or v.round.view > self.view or self._ended(v):",
         "_try_propose is called only with the current view's state (_enter, _apply's cur, _retry_fetches' cur): the comparison is always False"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 579, "or v.round.view < self.view or self._ended(v):",
         "_try_propose is called only with the current view's state (_enter, _apply's cur, _retry_fetches' cur): the comparison is always False"),  # noqa: E501
        ("core/ReplaceOrWithAnd", 579, "or v.round.view != self.view and self._ended(v):",
         "v.round.view != self.view is always False in _try_propose (called with the current view only), and _ended(current) is False too"),  # noqa: E501
        ("core/ReplaceComparisonOperator_NotEq_Lt", 594, "if v.round.view < self.view or self._ended(v) or v.leader is None:",  # noqa: E501
         "a view above self.view never has a leader, so `v.leader is None` returns for it anyway"),
        ("core/ReplaceOrWithAnd", 594, "if v.round.view != self.view or self._ended(v) and v.leader is None:",
         "a current view is never ended (so the and is False); with leader None the proposal is None and notarizes.get(None) is None: returns"),  # noqa: E501
    ),
    "pvm-guards": (
        ('core/ReplaceBinaryOperator_Add_FloorDiv', 441, 'ctx.charge(walk.weight(ctx, result, ctx.remaining() // 1))',
         _PVM_WEIGHT_CAP_REMAINING),
        ('core/ReplaceComparisonOperator_Eq_GtE', 223, 'if op >= "+":',
         'in the bytearray branch op is "+" or "*" (op in "+*", op from BINOPS), and "*" < "+", so op >= "+" iff op == "+"'),  # noqa: E501
        ('core/ReplaceComparisonOperator_Lt_NotEq', 525, 'if len(chunk) != _CHUNK:',
         _PVM_ISLICE_CHUNK),
        ('core/ReplaceComparisonOperator_Gt_GtE', 106, 'count = len(s) * n if n >= 0 else 0',
         'n == 0 gives count 0 either way'),
        ('core/ReplaceUnaryOperator_Delete_USub', 540, 'if ndigits > digits:',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/NumberReplacer', 366, 'if source < -1:',
         "bytes(-1)/bytearray(-1) then reach CPython, which raises the same ValueError('negative count'); check_bytes(-1) before it neither halts nor charges (-1 >> 3 < 0)"),  # noqa: E501
        ('core/NumberReplacer', 441, 'ctx.charge(walk.weight(ctx, result, ctx.remaining() + 0))',
         _PVM_WEIGHT_CAP_REMAINING),
        ('core/NumberReplacer', 539, 'digits = int(number.bit_length() * 0.30103) + 1',
         'round(): floor(bits*0.30103)+1 still bounds the decimal digits D of number, so when -ndigits > it, |number| < 10**D <= 10**(-ndigits)/10 and round() gives 0 as the shortcut does'),  # noqa: E501
        ('core/NumberReplacer', 542, 'if ndigits is not None and _is_int(ndigits) and not - 4095 <= ndigits <= 4096:',
         _PVM_ROUND_BOUND_BY_ONE),
        ('core/NumberReplacer', 542, 'if ndigits is not None and _is_int(ndigits) and not -4096 <= ndigits <= 4095:',
         _PVM_ROUND_BOUND_BY_ONE),
        ('core/NumberReplacer', 543, 'ndigits = 4095 if ndigits > 0 else -4096',
         _PVM_ROUND_LARGE_NDIGITS),
        ('core/NumberReplacer', 543, 'ndigits = 4096 if ndigits > -1 else -4096',
         _PVM_ROUND_CLAMP_SIGN),
        ('core/ReplaceBinaryOperator_Add_Mul', 268, 'ctx.charge(walk.weight(ctx, needle[1], ctx.remaining() * 1))',
         _PVM_WEIGHT_CAP_REMAINING),
        ('core/ReplaceBinaryOperator_Mul_Add', 539, 'digits = int(number.bit_length() + 0.30103) + 2',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceBinaryOperator_Mul_Sub', 539, 'digits = int(number.bit_length() - 0.30103) + 2',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceBinaryOperator_Mul_FloorDiv', 539, 'digits = int(number.bit_length() // 0.30103) + 2',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceBinaryOperator_BitOr_BitAnd', 293, '_KNOWN = _SIZED & {int, float, bool, type(None)}',
         '_KNOWN is only read in contains(), as `t not in _KNOWN and isinstance(container, X)`: for each exact type in _KNOWN that isinstance is true only when an earlier `t is ...` test of the same line already matched, so the clause is redundant'),  # noqa: E501
        ('core/ReplaceComparisonOperator_Eq_GtE', 231, 'elif ta is dict and op >= "|":',
         'op is a BINOPS key ("+ - * / // % ** << | & ^"); "|" (0x7c) is the greatest, so op >= "|" iff op == "|"'),
        ('core/ReplaceComparisonOperator_Lt_LtE', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits <= 0:',  # noqa: E501
         'ndigits == 0 enters the shortcut but -0 > digits is false (digits >= 2): nothing returned'),
        ('core/ReplaceComparisonOperator_Lt_Gt', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits > 0:',  # noqa: E501
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceComparisonOperator_LtE_Lt', 542, 'if ndigits is not None and _is_int(ndigits) and not -4096 < ndigits <= 4096:',  # noqa: E501
         _PVM_ROUND_BOUND_BY_ONE),
        ('core/ReplaceComparisonOperator_Gt_NotEq', 106, 'count = len(s) * n if n != 0 else 0',
         "a negative n gives a negative count: check_bytes/check_items neither halt on it nor charge it (charge ignores n <= 0, bytes_cost(<0) < 0), exactly as for count 0; CPython's s * n is [] / '' for both"),  # noqa: E501
        ('core/ReplaceComparisonOperator_IsNot_Is', 274, 'items = container if t is walk.DictValues else list(container)',  # noqa: E501
         _PVM_VIEW_SCANS_LIKE_LIST),
        ('core/ReplaceComparisonOperator_IsNot_Is', 538, 'if ndigits is None and _is_int(number) and _is_int(ndigits) and ndigits < 0:',  # noqa: E501
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceUnaryOperator_USub_Invert', 543, 'ndigits = 4096 if ndigits > 0 else ~4096',
         'only floats reach the clamp with ndigits < -4096 (ints take the shortcut above: their digits are <= 1235); round(float, -4096) and round(float, -4097) are both +-0.0'),  # noqa: E501
        ('core/NumberReplacer', 174, 'if b == 0 or a in ( 1, 1, -1):',
         _PVM_POW_ZERO_BASE),
        ('core/NumberReplacer', 543, 'ndigits = 4097 if ndigits > 0 else -4096',
         _PVM_ROUND_LARGE_NDIGITS),
        ('core/NumberReplacer', 543, 'ndigits = 4096 if ndigits > 1 else -4096',
         _PVM_ROUND_CLAMP_SIGN),
        ('core/ReplaceComparisonOperator_Lt_NotEq', 54, 'if len(chunk) != _CHUNK:',
         _PVM_ISLICE_CHUNK),
        ('core/NumberReplacer', 106, 'count = len(s) * n if n > -1 else 0',
         'n == 0 gives len(s) * 0 = 0, as the else branch does'),
        ('core/NumberReplacer', 106, 'count = len(s) * n if n > 0 else -1',
         "a count of -1 for n <= 0: check_bytes/check_items neither halt on it nor charge it (charge ignores n <= 0, bytes_cost(<0) < 0), exactly as for count 0; CPython's s * n is [] / '' for both"),  # noqa: E501
        ('core/NumberReplacer', 170, 'ctx.charge(costs.modpow_cost(max(m.bit_length(), 0), max(b.bit_length(), 1)))',
         _PVM_MODPOW_ONE_WORD),
        ('core/NumberReplacer', 170, 'ctx.charge(costs.modpow_cost(max(m.bit_length(), 2), max(b.bit_length(), 1)))',
         _PVM_MODPOW_ONE_WORD),
        ('core/NumberReplacer', 174, 'if b == -1 or a in (0, 1, -1):',
         'b < 0 halted just above, so b == -1 is never true; b == 0 then takes the general path: (bits a - 1) * 0 + 1 <= max_int_bits, pow_cost(0, bits 0) = 0 charged, int_result(a ** 0) = 1: same value, nothing charged'),  # noqa: E501
        ('core/NumberReplacer', 174, 'if b == 0 or a in ( -1, 1, -1):',
         _PVM_POW_ZERO_BASE),
        ('core/ReplaceComparisonOperator_Eq_Lt', 174, 'if b < 0 or a in (0, 1, -1):',
         'b < 0 halted just above, so b < 0 is never true; b == 0 then takes the general path: (bits a - 1) * 0 + 1 <= max_int_bits, pow_cost(0, bits 0) = 0 charged, int_result(a ** 0) = 1: same value, nothing charged'),  # noqa: E501
        ('core/ReplaceComparisonOperator_Eq_LtE', 174, 'if b <= 0 or a in (0, 1, -1):',
         'b < 0 halted just above, so b <= 0 iff b == 0'),
        ('core/NumberReplacer', 268, 'ctx.charge(walk.weight(ctx, needle[1], ctx.remaining() + 0))',
         _PVM_WEIGHT_CAP),
        ('core/ReplaceBinaryOperator_Add_Div', 268, 'ctx.charge(walk.weight(ctx, needle[1], ctx.remaining() / 1))',
         _PVM_WEIGHT_CAP),
        ('core/ReplaceBinaryOperator_Add_FloorDiv', 268, 'ctx.charge(walk.weight(ctx, needle[1], ctx.remaining() // 1))',  # noqa: E501
         _PVM_WEIGHT_CAP),
        ('core/NumberReplacer', 268, 'ctx.charge(walk.weight(ctx, needle[1], ctx.remaining() + 2))',
         _PVM_WEIGHT_CAP),
        ('core/AddNot', 274, 'items = container if not t is not walk.DictValues else list(container)',
         _PVM_VIEW_SCANS_LIKE_LIST),
        ('core/ReplaceComparisonOperator_IsNot_Eq', 274, 'items = container if t == walk.DictValues else list(container)',  # noqa: E501
         _PVM_VIEW_SCANS_LIKE_LIST),
        ('core/ReplaceBinaryOperator_BitOr_Sub', 293, '_KNOWN = _SIZED - {int, float, bool, type(None)}',
         '_SIZED holds no scalar type, so _KNOWN becomes _SIZED: for an exact int, float, bool or None container every `t not in _KNOWN and isinstance(container, dict / str | bytes | bytearray / list | tuple)` of contains() is still false, the same branches'),  # noqa: E501
        ('core/ReplaceBinaryOperator_Add_Mul', 441, 'ctx.charge(walk.weight(ctx, result, ctx.remaining() * 1))',
         _PVM_WEIGHT_CAP),
        ('core/ReplaceBinaryOperator_Add_Div', 441, 'ctx.charge(walk.weight(ctx, result, ctx.remaining() / 1))',
         _PVM_WEIGHT_CAP),
        ('core/NumberReplacer', 441, 'ctx.charge(walk.weight(ctx, result, ctx.remaining() + 2))',
         _PVM_WEIGHT_CAP),
        ('core/NumberReplacer', 465, 'items = materialize(ctx, args[ -1])',
         'inside `if len(args) == 1`: args[-1] is args[0]'),
        ('core/AddNot', 538, 'if not ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits < 0:',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/NumberReplacer', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits < -1:',  # noqa: E501
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceComparisonOperator_Lt_Eq', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits == 0:',  # noqa: E501
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceComparisonOperator_Lt_NotEq', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits != 0:',  # noqa: E501
         _PVM_ROUND_SHORTCUT_NEVER_ANSWERS),
        ('core/ReplaceComparisonOperator_Lt_GtE', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits >= 0:',  # noqa: E501
         _PVM_ROUND_SHORTCUT_NEVER_ANSWERS),
        ('core/NumberReplacer', 538, 'if ndigits is not None and _is_int(number) and _is_int(ndigits) and ndigits < 1:',
         _PVM_ROUND_SHORTCUT_NEVER_ANSWERS),
        ('core/ReplaceBinaryOperator_Mul_Div', 539, 'digits = int(number.bit_length() / 0.30103) + 2',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceBinaryOperator_Add_Mul', 539, 'digits = int(number.bit_length() * 0.30103) * 2',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/NumberReplacer', 539, 'digits = int(number.bit_length() * 1.30103) + 2',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/NumberReplacer', 539, 'digits = int(number.bit_length() * 0.30103) + 3',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceComparisonOperator_Gt_GtE', 540, 'if -ndigits >= digits:',
         'digits = floor(bits*0.30103) + 2 >= D + 1 for the D decimal digits of number (0.30103 > log10 2), so -ndigits == digits means |number| < 10**(-ndigits - 1) and round() gives 0, as the shortcut does'),  # noqa: E501
        ('core/ReplaceComparisonOperator_Gt_Eq', 540, 'if -ndigits == digits:',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceUnaryOperator_USub_UAdd', 540, 'if +ndigits > digits:',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceUnaryOperator_USub_Invert', 540, 'if ~ndigits > digits:',
         _PVM_ROUND_SHORTCUT_SKIPPED),
        ('core/ReplaceComparisonOperator_LtE_NotEq', 542, 'if ndigits is not None and _is_int(ndigits) and not -4096 <= ndigits != 4096:',  # noqa: E501
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/ReplaceComparisonOperator_LtE_Lt', 542, 'if ndigits is not None and _is_int(ndigits) and not -4096 <= ndigits < 4096:',  # noqa: E501
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/ReplaceComparisonOperator_IsNot_Is', 542, 'if ndigits is None and _is_int(ndigits) and not -4096 <= ndigits <= 4096:',  # noqa: E501
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/ReplaceUnaryOperator_USub_Invert', 542, 'if ndigits is not None and _is_int(ndigits) and not ~4096 <= ndigits <= 4096:',  # noqa: E501
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/AddNot', 542, 'if not ndigits is not None and _is_int(ndigits) and not -4096 <= ndigits <= 4096:',
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/ReplaceComparisonOperator_LtE_NotEq', 542, 'if ndigits is not None and _is_int(ndigits) and not -4096 != ndigits <= 4096:',  # noqa: E501
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/ReplaceUnaryOperator_USub_Not', 542, 'if ndigits is not None and _is_int(ndigits) and not not 4096 <= ndigits <= 4096:',  # noqa: E501
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/NumberReplacer', 542, 'if ndigits is not None and _is_int(ndigits) and not - 4097 <= ndigits <= 4096:',
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/NumberReplacer', 542, 'if ndigits is not None and _is_int(ndigits) and not -4096 <= ndigits <= 4097:',
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/NumberReplacer', 543, 'ndigits = 4096 if ndigits > 0 else - 4095',
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/ReplaceComparisonOperator_Gt_GtE', 543, 'ndigits = 4096 if ndigits >= 0 else -4096',
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/NumberReplacer', 543, 'ndigits = 4096 if ndigits > 0 else - 4097',
         _PVM_ROUND_CLAMP_NEVER_CHANGES),
        ('core/NumberReplacer', 587, 'if total + len(sep) * max(len(items) - 1, -1) > limit:',
         'max(len(items) - 1, -1) differs from max(..., 0) only for no items, where total + len(sep) * -1 <= 0 <= limit: no halt either way'),  # noqa: E501
        ('core/ReplaceComparisonOperator_Lt_NotEq', 589, 'if len(chunk) != _CHUNK:',
         _PVM_ISLICE_CHUNK),
        ('core/NumberReplacer', 591, 'ctx.charge(costs.bytes_cost(total + len(sep) * max(len(items) - 1, -1)))',
         'max(len(items) - 1, -1) differs from max(..., 0) only for no items: bytes_cost(-len(sep)) <= 0 is not charged (charge ignores n <= 0), as bytes_cost(0) = 0'),  # noqa: E501
    ),
}


def _sh(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def _copy_tree(tree: Path) -> dict[str, str]:
    """Copy the working tree to ``tree``, compile its packages, and return the environment whose imports resolve
    there (checked).

    Compiled with ``checked-hash`` invalidation: Python re-hashes a source against its ``.pyc`` on every import, so
    the mutated module is always compiled from the text on disk (a timestamp ``.pyc`` could be taken for a mutant's
    or the original's when both have the same size and the same second), while every other module loads compiled.
    Without this each mutant's run compiled the whole package from source (bytecode writing was off to avoid that
    staleness), a third of its CPU time."""
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venv-*", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis",
        "*.egg-info", "devnet-home", "testnet-home", "build", "dist", "data"))
    packages = [p.name for p in tree.iterdir() if (p / "__init__.py").is_file()]
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    compiled = _sh([sys.executable, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", *packages],
                   tree, env)
    if compiled.returncode != 0:
        raise RuntimeError(f"compileall failed in {tree}: {compiled.stdout[-2000:]}")
    probe = _sh([sys.executable, "-c", "import cowboy_node, cowboy_protocol; print(cowboy_node.__file__, "
                 "cowboy_protocol.__file__)"], tree, env).stdout.split()
    if not probe or not all(Path(p).resolve().is_relative_to(tree.resolve()) for p in probe):
        raise RuntimeError(f"the copy's packages are not the ones imported ({probe})")
    return env


# Plugins no module's tests use (schemathesis is for `make fuzz-api`; one mutant runs one pytest, never xdist):
# not loading them is a third of a run's CPU time here, where the run is mostly start-up.
UNUSED_PLUGINS = ("schemathesis", "xdist", "xdist.looponfail")


def _uses_hypothesis(tests: tuple[str, ...]) -> bool:
    """Whether any of ``tests`` imports hypothesis. When none does, its pytest plugin is not loaded: it imports
    hypothesis itself, about a second of each run's start-up here, for tests that never use it."""
    return any("hypothesis" in (ROOT / t.split("::")[0]).read_text() for t in tests)


def _pytest_args(tests: tuple[str, ...], deselect: tuple[str, ...] = ()) -> list[str]:
    """pytest's arguments for one run of ``tests``."""
    unused = UNUSED_PLUGINS if _uses_hypothesis(tests) else (*UNUSED_PLUGINS, "hypothesispytest")
    off = [a for p in unused for a in ("-p", f"no:{p}")]
    skip = [a for t in deselect for a in ("--deselect", t)]
    return ["-x", "-q", "--no-header", "-p", "no:cacheprovider", *off, "-o", "addopts=", *skip, *tests]


def _pytest(tests: tuple[str, ...], deselect: tuple[str, ...] = ()) -> str:
    return " ".join([sys.executable, "-m", "pytest", *_pytest_args(tests, deselect)])


SELECT = ROOT / "scripts" / "mutate_select.py"


FORK = ROOT / "scripts" / "mutate_fork.py"


def _test_command(m: Module, select_map: Path | None, server: Path | None = None) -> str:
    """The module's pytest run, through :mod:`mutate_select`'s per-mutant selection when ``select_map`` is given
    (the tests that call the mutated function first, the whole list only if they pass), each run in a child of the
    fork server listening at ``server`` when one is given (:mod:`mutate_fork`)."""
    args = _pytest_args(m.tests, m.deselect)
    if server is not None:
        return " ".join([sys.executable, str(FORK), "run", str(server), str(select_map or "-"), "--", *args])
    if select_map is None:
        return _pytest(m.tests, m.deselect)
    return " ".join([sys.executable, str(SELECT), "run", str(select_map), "--", *args])


def _config(m: Module, timeout: float, select_map: Path | None = None, server: Path | None = None) -> str:
    excluded = ", ".join(json.dumps(e) for e in EXCLUDED)
    command = _test_command(m, select_map, server)
    return (f'[cosmic-ray]\nmodule-path = "{m.path}"\ntimeout = {timeout}\nexcluded-modules = []\n'
            f'test-command = {json.dumps(command)}\n\n[cosmic-ray.distributor]\nname = "local"\n\n'
            f'[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n')


def _baseline(m: Module, tree: Path, env: dict[str, str], modules: Path) -> subprocess.CompletedProcess[str]:
    """The unmutated run of the module's tests in ``tree``; also writes ``modules``, what a fork server of that tree
    may preload (:func:`mutate_fork.baseline`)."""
    return _sh([sys.executable, str(FORK), "baseline", str(modules), m.path, "--",
                *_pytest_args(m.tests, m.deselect)], tree, env)


class ForkServers:
    """One fork server per tree (:mod:`mutate_fork`), each importing from its own tree, started and checked on
    entry and stopped on exit. ``sockets`` is empty when a server could not start or its unmutated run failed:
    the session then runs every mutant in its own process, as without the servers (``reason`` says why)."""

    def __init__(self, m: Module, trees: list[Path], envs: list[dict[str, str]], modules: Path,
                 enabled: bool = True) -> None:
        self.m, self.trees, self.envs, self.modules, self.enabled = m, trees, envs, modules, enabled
        self.procs: list[subprocess.Popen[bytes]] = []
        self.sockets: list[Path] = []
        self.reason = ""

    def __enter__(self) -> ForkServers:
        if not self.enabled:  # --no-fork
            return self
        sockets = [self.modules.parent / f"fork{k}.sock" for k in range(len(self.trees))]
        for sock, tree, env in zip(sockets, self.trees, self.envs, strict=True):
            sock.unlink(missing_ok=True)
            self.procs.append(subprocess.Popen([sys.executable, str(FORK), "serve", str(sock), str(self.modules)],
                                               cwd=tree, env=env, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE))
        deadline = time.monotonic() + 120
        for sock, proc, tree, env in zip(sockets, self.procs, self.trees, self.envs, strict=True):
            while not sock.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if not sock.exists():
                err = proc.stderr.read().decode(errors="replace")[-500:] if proc.poll() is not None and proc.stderr \
                    else "did not start within 120 s"
                return self._fall_back(f"fork server of {tree.name}: {err.strip()}")
            check = _sh(_test_command(self.m, None, sock).split(), tree, env)
            if check.returncode != 0 or "mutate-fork:" in check.stdout + check.stderr:
                return self._fall_back(f"the unmutated tests fail under the fork server of {tree.name}: "
                                       f"{check.stdout[-500:]}")
        self.sockets = sockets
        return self

    def _fall_back(self, reason: str) -> ForkServers:
        """No server for this session: say why, once, on stderr."""
        self.reason = reason
        print(f"{self.m.name}: running without the fork server ({reason})", file=sys.stderr, flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _shard(db: Path, k: int, n: int) -> int:
    """Keep in session ``db`` only shard ``k`` of ``n`` of its pending mutants (every n-th in the session's order,
    so slow and fast lines of the module are spread over the shards); shard 0 also keeps the mutants the filters
    already marked skipped. Returns the number of pending mutants kept."""
    con = sqlite3.connect(db)
    try:
        pending = [r[0] for r in con.execute(
            "SELECT m.job_id FROM mutation_specs m LEFT JOIN work_results r ON r.job_id = m.job_id "
            "WHERE r.job_id IS NULL ORDER BY m.module_path, m.operator_name, m.occurrence")]
        mine = set(pending[k::n])
        drop = [j for j in pending if j not in mine]
        if k > 0:  # the skipped ones are counted once, in shard 0
            drop += [r[0] for r in con.execute("SELECT job_id FROM work_results")]
        for table in ("work_results", "mutation_specs", "work_items"):
            con.executemany(f"DELETE FROM {table} WHERE job_id = ?", [(j,) for j in drop])
        con.commit()
    finally:
        con.close()
    return len(mine)


def run_module(m: Module, jobs: int = 1, select: bool = True, fork: bool = True) -> dict[str, object]:
    """Run one module's session on ``jobs`` worker processes; returns its result (also written to
    ``build/mutate/<name>/result.json``).

    With ``jobs`` > 1 the session is initialised and filtered once, then its mutants are split into ``jobs``
    shards (:func:`_shard`), each a copy of the session database in its own copy of the tree (``repo``, ``repo1``,
    …: cosmic-ray mutates the file in place, so two workers cannot share one), executed concurrently; the shards'
    dumps together are the session's (``dump.jsonl``)."""
    work = OUT / m.name
    shutil.rmtree(work, ignore_errors=True)
    trees = [work / ("repo" if k == 0 else f"repo{k}") for k in range(jobs)]
    envs = [_copy_tree(t) for t in trees]
    tree, env = trees[0], envs[0]
    t0 = time.monotonic()
    base = _baseline(m, tree, env, work / "preload.json")
    if base.returncode != 0:
        return {"module": m.name, "error": "baseline fails", "output": base.stdout[-3000:]}
    baseline_s = time.monotonic() - t0
    timeout = round(max(m.timeout, TIMEOUT_FACTOR * baseline_s))
    select_map, record_s = None, 0.0
    if select:  # which tests execute each function: one traced run, in the first copy (its paths are the shards')
        t1 = time.monotonic()
        select_map = work / "select.json"
        rec = _sh([sys.executable, str(SELECT), "record", str(select_map), m.path, json.dumps(list(m.tests)), "--",
                   *_pytest_args(m.tests, m.deselect)], tree, env)
        if rec.returncode != 0:
            return {"module": m.name, "error": "recording the tests' coverage failed", "output": rec.stdout[-3000:]}
        record_s = time.monotonic() - t1
    (tree / "cr.toml").write_text(_config(m, timeout, select_map))
    cr = str(COSMIC_RAY)
    for cmd in ([f"{cr}/cosmic-ray", "init", "cr.toml", "session.sqlite"],
                [f"{cr}/cr-filter-operators", "session.sqlite", "cr.toml"],
                [f"{cr}/cr-filter-pragma", "session.sqlite"]):
        r = _sh(cmd, tree, env)
        if r.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {r.stderr[-2000:]}")
    for t in trees[1:]:
        shutil.copy(tree / "session.sqlite", t / "session.sqlite")
    for k, t in enumerate(trees):
        _shard(t / "session.sqlite", k, jobs)
    with ForkServers(m, trees, envs, work / "preload.json", enabled=fork) as servers:
        for k, t in enumerate(trees):  # each shard's test command names its own tree's server
            server = servers.sockets[k] if servers.sockets else None
            (t / "cr.toml").write_text(_config(m, timeout, select_map, server))
        # What --summarize needs to count a session stopped before its end (no result.json yet).
        (work / "session.json").write_text(json.dumps({
            "baseline_seconds": baseline_s, "timeout_seconds": timeout, "jobs": jobs, "started": time.time(),
            "select": select, "record_seconds": record_s, "fork": bool(servers.sockets)}))
        procs = [subprocess.Popen([f"{cr}/cosmic-ray", "exec", "cr.toml", "session.sqlite"], cwd=t, env=e,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for t, e in zip(trees, envs, strict=True)]
        for p in procs:
            _, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"cosmic-ray exec failed: {err[-2000:]}")
    dump = "".join(_sh([f"{cr}/cosmic-ray", "dump", "session.sqlite"], t, e).stdout
                   for t, e in zip(trees, envs, strict=True))
    (work / "dump.jsonl").write_text(dump)
    seconds = time.monotonic() - t0
    return _summarize(m, tree, dump, seconds, baseline_s, work, timeout, jobs)


def _dump(work: Path, env: dict[str, str]) -> str:
    """A session's dump: the shards' merged ``dump.jsonl`` when it finished, else each shard's database as it is
    (a session stopped before its end, or one from before sharding: only ``repo``)."""
    merged = work / "dump.jsonl"
    if merged.exists():
        return merged.read_text()
    shards = sorted(p for p in work.glob("repo*") if (p / "session.sqlite").exists())
    return "".join(_sh([f"{COSMIC_RAY}/cosmic-ray", "dump", "session.sqlite"], t, env).stdout for t in shards)


def recheck_module(m: Module, fork: bool = True) -> dict[str, object]:
    """Run the survivors of ``m``'s finished session again against the current tests (``--recheck``)."""
    work = OUT / m.name
    prev = json.loads((work / "result.json").read_text())
    if (work / "repo" / m.path).read_text() != (ROOT / m.path).read_text():
        raise RuntimeError(f"{m.path} changed since the session of {m.name}: run the session again")
    tree = work / "recheck"
    env = _copy_tree(tree)
    base = _baseline(m, tree, env, work / "preload.json")
    if base.returncode != 0:
        return {"module": m.name, "error": "baseline fails", "output": base.stdout[-3000:]}
    timeout = float(prev["timeout_seconds"])
    outcomes: dict[str, str] = {}
    original = (tree / m.path).read_text()
    with ForkServers(m, [tree], [env], work / "preload.json", enabled=fork) as servers:
        command = _test_command(m, None, servers.sockets[0] if servers.sockets else None).split()
        for sv in prev["survivors"]:
            key = f"{sv['operator']}#{sv['occurrence']}"
            applied = _sh([f"{COSMIC_RAY}/cosmic-ray", "apply", m.path, str(sv["operator"]),
                           str(sv["occurrence"])], tree, env)
            if applied.returncode != 0 or (tree / m.path).read_text() == original:
                raise RuntimeError(f"cosmic-ray apply {key} failed: {applied.stderr[-2000:]}")
            try:
                run = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False,
                                     timeout=timeout)
                outcomes[key] = "survived" if run.returncode == 0 else "killed"
            except subprocess.TimeoutExpired:  # our direct child was killed; the server kills its run
                outcomes[key] = "timeout"
            finally:
                (tree / m.path).write_text(original)
    # A second recheck runs only what the first left (result.json's survivors): keep the first's outcomes.
    earlier = work / "recheck.json"
    if earlier.exists():
        outcomes = {**json.loads(earlier.read_text())["outcomes"], **outcomes}
    earlier.write_text(json.dumps({"tests": list(m.tests), "outcomes": outcomes}, indent=2))
    return _summarize(m, work / "repo", _dump(work, env), float(prev["seconds"]), float(prev["baseline_seconds"]),
                      work, timeout, int(prev.get("jobs", 1)))


def _annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions (line, col) of every type annotation in ``source``. Under ``from __future__ import
    annotations`` (every module here) an annotation is a string that is never evaluated, so a ``|`` mutated
    inside one (``bytes | None``) cannot change behaviour: such mutants are equivalent by construction."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        anns: list[ast.expr | None] = []
        if isinstance(node, ast.arg):
            anns.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for a in anns:
            if a is not None and a.end_lineno is not None and a.end_col_offset is not None:
                spans.append(((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)))
    return spans


def _in_annotation(pos: tuple[int, int], spans: list[tuple[tuple[int, int], tuple[int, int]]]) -> bool:
    return any(start <= pos < end for start, end in spans)


def _summarize(m: Module, tree: Path, dump: str, seconds: float, baseline_s: float, work: Path,
               timeout: float, jobs: int) -> dict[str, object]:
    source = (tree / m.path).read_text()
    lines = source.splitlines()
    spans = _annotation_spans(source) if "from __future__ import annotations" in source else []
    equivalent = {(op, line, text): why for op, line, text, why in EQUIVALENT.get(m.name, ())}
    counts = {"mutants": 0, "killed": 0, "survived": 0, "equivalent": 0, "timeout": 0, "skipped": 0,
              "killed_on_recheck": 0, "pending": 0}
    recheck_file = work / "recheck.json"
    rechecked: dict[str, str] = json.loads(recheck_file.read_text())["outcomes"] if recheck_file.exists() else {}
    survivors: list[dict[str, object]] = []
    timeouts: list[dict[str, object]] = []
    equivalents: list[dict[str, object]] = []
    for raw in dump.splitlines():
        item, result = json.loads(raw)
        if result is None:  # not run yet: a session stopped before its end (counted, never as a result)
            counts["pending"] += 1
            continue
        if result["worker_outcome"] == "skipped":
            counts["skipped"] += 1
            continue
        counts["mutants"] += 1
        mut = item["mutations"][0]
        line = mut["start_pos"][0]
        entry = {"operator": mut["operator_name"], "occurrence": mut["occurrence"], "line": line,
                 "source": lines[line - 1].strip() if line <= len(lines) else "", "diff": result.get("diff", "")}
        outcome = result["test_outcome"]
        # cosmic-ray reports a run it ended at the timeout as killed with the output "timeout" (testing.py); a
        # selection stopped at its own budget says so in its output (mutate_select.py)
        if result["worker_outcome"] == "timeout" or (outcome == "killed" and (
                result.get("output") == "timeout" or TIMEOUT_MARKER in str(result.get("output", "")))):
            counts["timeout"] += 1
            counts["killed"] += 1
            timeouts.append(entry)
        elif outcome == "survived":
            mutated = _mutated_line(str(entry["diff"]))
            why = equivalent.get((str(entry["operator"]), line, mutated))
            if why is None and _in_annotation((line, mut["start_pos"][1]), spans):
                why = "inside a type annotation (a string under `from __future__ import annotations`, never evaluated)"
            if why is None and _keyword_marker_only(str(entry["diff"])):
                why = "a def's keyword-only marker `*,` became `/,`: callers pass the arguments before it positionally, the rest by keyword; both forms accept that"  # noqa: E501
            again = rechecked.get(f"{entry['operator']}#{entry['occurrence']}")
            if why is not None:
                counts["equivalent"] += 1
                equivalents.append({**entry, "why": why})
            elif again in ("killed", "timeout"):  # by a test added after the session (--recheck)
                counts["killed"] += 1
                counts["killed_on_recheck"] += 1
                counts["timeout"] += again == "timeout"
            else:
                counts["survived"] += 1
                survivors.append(entry)
        else:  # killed, or incompetent (the mutant does not even import): the tests notice either way
            counts["killed"] += 1
    live = counts["mutants"] - counts["equivalent"]
    result = {"module": m.name, "path": m.path, "tests": list(m.tests), **counts,
              "score_percent": round(100 * counts["killed"] / live, 1) if live else 100.0,
              "seconds": round(seconds), "baseline_seconds": round(baseline_s, 1), "timeout_seconds": timeout,
              "jobs": jobs, "seconds_per_mutant": round(seconds * jobs / max(1, counts["mutants"]), 2),
              "survivors": survivors, "timeouts": timeouts, "equivalents": equivalents}
    (work / "result.json").write_text(json.dumps(result, indent=2))
    return result


def _keyword_marker_only(diff: str) -> bool:
    """Whether the mutant only turns a def's ``*,`` into ``/,`` (cosmic-ray reads the marker as a multiplication).
    The arguments before it become positional-only: a caller passing them by keyword would fail (killed), so a
    survivor is one whose callers all pass them positionally, which both forms accept."""
    minus = [d[1:] for d in diff.splitlines() if d.startswith("-") and not d.startswith("---")]
    plus = [d[1:] for d in diff.splitlines() if d.startswith("+") and not d.startswith("+++")]
    return len(minus) == len(plus) == 1 and "*," in minus[0] and plus[0] == minus[0].replace("*,", "/,", 1)


def _mutated_line(diff: str) -> str:
    """The first added line of a unified diff, stripped (identifies an equivalent mutant with its operator/line)."""
    for d in diff.splitlines():
        if d.startswith("+") and not d.startswith("+++"):
            return d[1:].strip()
    return ""


def row(r: dict[str, object]) -> str:
    """The docs/testing.md table row of a module's result."""
    if "error" in r:
        return f"| {r['module']} | baseline fails | | | | | | |"
    again = f" ({r['killed_on_recheck']} on recheck)" if r.get("killed_on_recheck") else ""
    partial = f" (partial: {r['pending']} not run yet)" if r.get("pending") else ""
    return (f"| {r['module']}{partial} | {r['mutants']} | {r['killed']}{again} | {r['survived']} | {r['equivalent']} | "
            f"{r['timeout']} (limit {r['timeout_seconds']} s) | {r['score_percent']} % | {r['seconds']} s "
            f"({r.get('jobs', 1)} × {r.get('seconds_per_mutant', '?')} s/mutant) |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="modules to run (default: all, in table order)")
    ap.add_argument("--list", action="store_true", help="print the module table and exit")
    ap.add_argument("--summarize", action="store_true",
                    help="recount finished sessions in build/mutate/ (after editing EQUIVALENT) without running")
    ap.add_argument("--jobs", "-j", type=int, default=int(os.environ.get("MUTATE_JOBS", "2")),
                    help="worker processes per session, each on its own copy of the tree (default: $MUTATE_JOBS "
                         "or 2, the cores of this machine)")
    ap.add_argument("--no-select", action="store_true",
                    help="run every mutant against the module's whole test list (default: the tests that execute "
                         "the mutated function first, scripts/mutate_select.py)")
    ap.add_argument("--no-fork", action="store_true",
                    help="run every mutant's pytest in a fresh process (default: in a child of a fork server that "
                         "has the libraries and the modules that do not import the mutated one loaded, "
                         "scripts/mutate_fork.py)")
    ap.add_argument("--recheck", action="store_true",
                    help="run only the survivors of finished sessions again, against the current tests")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in {m.name for m in MODULES}]
    if unknown:
        print(f"unknown module(s) {unknown}; known: {[m.name for m in MODULES]}", file=sys.stderr)
        return 2
    chosen = [m for m in MODULES if not args.names or m.name in args.names]
    if args.list:
        for m in chosen:
            print(f"{m.name}\t{m.path}\t{' '.join(m.tests)}")
        return 0
    print("| module | mutants | killed | survived | equivalent | timeouts (in killed) | killed / non-equivalent "
          "| time |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    for m in chosen:
        if args.recheck:
            if not (OUT / m.name / "result.json").exists():
                continue
            r = recheck_module(m, fork=not args.no_fork)
        elif args.summarize:
            work = OUT / m.name
            prev, started = work / "result.json", work / "session.json"
            if prev.exists():
                old = json.loads(prev.read_text())
            elif started.exists():  # stopped before its end: the time is up to its last result
                old = json.loads(started.read_text())
                last = max(p.stat().st_mtime for p in work.glob("repo*/session.sqlite"))
                old["seconds"] = last - float(old["started"])
            else:
                continue
            r = _summarize(m, work / "repo", _dump(work, dict(os.environ)), float(old["seconds"]),
                           float(old["baseline_seconds"]), work, float(old.get("timeout_seconds", m.timeout)),
                           int(old.get("jobs", 1)))
        else:
            r = run_module(m, args.jobs, select=not args.no_select, fork=not args.no_fork)
        failed |= "error" in r
        print(row(r), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

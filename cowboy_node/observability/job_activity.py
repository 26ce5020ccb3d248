"""What a block did to jobs, for the node's metrics.

:func:`block_job_activity` runs in the node after a block is built and before it is committed: it compares
the job records the block writes with the parent's (the state ops of the block) and decodes the block's
PresenceInput; the selection timings come from the node's observer around the real selection calls
(execution never reads a clock; see docs/jobs.md "Metrics").
"""

from __future__ import annotations

from dataclasses import dataclass

from cowboy_node.chain.blockstore import STATE_PREFIX
from cowboy_node.chain.chain import Chain, PreparedBlock
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.jobs.job_record import JOB_PREFIX, JobRecord, JobStatus
from cowboy_node.execution.runners import registry_state as store
from cowboy_node.types.presence import decode_presence
from cowboy_protocol.types.validation_errors import DecodeError

TRANSITIONS = ("submitted", "assigned", "committed", "revealed", "settled", "failed")
"""Job events counted per block (the ``transition`` label of ``cowboy_job_transitions_total``)."""


@dataclass(frozen=True, slots=True)
class JobActivity:
    """Job events of one built block, derived from its state writes (read by the node's metrics)."""

    transitions: dict[str, int]
    """Count per event name of :data:`TRANSITIONS` (zero counts included)."""
    reselections: int
    """Timeout re-selections (attempt increments)."""
    present_pool: int
    """Runners marked present by the block's PresenceInput (0 when the field is absent or undecodable)."""
    selection: list[tuple[str, float]]
    """``(section, seconds)`` of each selection section execution ran in the block: ``job_filter`` (registry
    scan and filter chain) and ``job_draw`` (present-first partition and weighted draw), measured by the
    node's observer around the real calls (empty when the block was not measured)."""


def _same_assignment(old: JobRecord | None, new: JobRecord) -> bool:
    """Both records describe the same assignment (commits and reveals accumulate within one)."""
    return old is not None and old.attempt == new.attempt and old.assignment_height == new.assignment_height


def count_transitions(old: JobRecord | None, new: JobRecord, counts: dict[str, int]) -> int:
    """Add the events of one job record change (``old`` → ``new``; ``old`` None for a new job) to ``counts``
    (keys: :data:`TRANSITIONS`); returns the re-selections it carries (attempt increments)."""
    if old is None:
        counts["submitted"] += 1
    same = _same_assignment(old, new)
    if new.assignment_height and (old is None or old.assignment_height != new.assignment_height):
        counts["assigned"] += 1  # assignment heights only grow: a new one is a (re-)assignment
    base_commits = len(old.commits) if same and old is not None else 0
    base_reveals = len(old.reveals) if same and old is not None else 0
    counts["committed"] += max(0, len(new.commits) - base_commits)
    counts["revealed"] += max(0, len(new.reveals) - base_reveals)
    if new.status == JobStatus.COMPLETED and (old is None or old.status != JobStatus.COMPLETED):
        counts["settled"] += 1
    if new.status == JobStatus.FAILED and (old is None or old.status != JobStatus.FAILED):
        counts["failed"] += 1
    return 0 if old is None else max(0, new.attempt - old.attempt)


def block_job_activity(chain: Chain, prepared: PreparedBlock, env: BlockEnv,
                       selection: list[tuple[str, float]] | None = None) -> JobActivity:
    """What ``prepared`` (built, not yet committed: ``chain.world()`` is still its parent state) did to jobs.

    Call it under the node's state lock, before ``chain.commit(prepared)``. Never raises: metrics must not stop
    block production (an unexpected error yields an empty activity).
    """
    try:
        return _activity(chain, prepared, env, list(selection or ()))
    except Exception:
        return JobActivity(transitions=dict.fromkeys(TRANSITIONS, 0), reselections=0, present_pool=0,
                           selection=list(selection or ()))


def _activity(chain: Chain, prepared: PreparedBlock, env: BlockEnv,
              selection: list[tuple[str, float]]) -> JobActivity:
    parent = chain.world()
    counts = dict.fromkeys(TRANSITIONS, 0)
    reselections = 0
    prefix = STATE_PREFIX + JOB_PREFIX
    for key, value in prepared.result.state_ops:  # data ops are sorted by key; tree ops do not match the prefix
        if value is None or not key.startswith(prefix):
            continue
        new = JobRecord.decode(value)
        old_raw = parent.get(key[len(STATE_PREFIX):])
        old = None if old_raw is None else JobRecord.decode(old_raw)
        reselections += count_transitions(old, new, counts)
    size = store.registry_size(parent)
    raw = prepared.block.header.presence_input
    try:
        present = frozenset() if raw is None else decode_presence(raw, size)
    except DecodeError:
        present = frozenset()
    return JobActivity(transitions=counts, reselections=reselections, present_pool=len(present),
                       selection=selection)

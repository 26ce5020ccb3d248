"""Job Dispatcher: JobSubmit, committee selection and assignment (CIP-11 §7.3, §9; CIP-2 as used by CIP-11).

 - M == 1: selected inside the JobSubmit transaction from the parent beacon (mode 0x00).
 - M > 1: JobSubmit records a PendingSelectionV1 and the block-S candidate snapshot; the committee is drawn
   at the start of the first block whose ``ConsumedSeedsV1`` carries the seed of ``r_seed`` (mode 0x01).
 - ``CIP11_PRESENT_FIRST_ENABLED`` false: the CIP-2 v2 path — immediate selection for every M from
   ``cowboy-runner-select-v2:``, no presence ordering, no MRU (mode byte stored as 0xFF).

Block-S snapshot (project choice, docs/jobs.md): this node keeps no historical state, so the expanded
block-S candidate list (address, stake, reputation, base weight) is committed in state next to the pending
record; at the pending pass its root is recomputed and compared byte for byte with the
``candidates_snapshot_root`` committed in the ``PendingSelectionV1`` at submit time, exactly as §9.2
prescribes (a mismatch is ``InvalidBlock(snapshot_root_mismatch)``), and the draw uses those block-S weights.
The proposer never commits the seed of a round whose records would fail that check (:func:`due_seed_rounds`).
JobSubmit pays the cells of every pending-path write (record, due-index entry, snapshot) by size.

Under-fill (§9.2 weighted_draw step 3 and "If |eligible| < M, the loop breaks early; the shortfall is
handled by the existing CIP-2 under-fill / timeout re-selection path (§11.2)"): a job is accepted with as
many runners as are eligible (at least one) and assigned a committee smaller than M; the shortfall is
``M − len(committee)`` (:func:`shortfall`, also in the ``job.assigned`` event). §11.2 re-selection draws the
next full committee of M from the job's original seed (``reselection_seed(seed, attempt)``) once the
assignment times out, which fills the missing seats from whoever is eligible then. Verification keeps the
job's own threshold (docs/verification.md): it is never scaled down to the committee actually drawn.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from cowboy_node.execution.context import BlockContext
from cowboy_node.execution.jobs import draw, mru, pending, seeds, selection_index, snapshot_root, weights
from cowboy_node.execution.jobs.filters import SelectionRequest, eligible_with_report
from cowboy_node.execution.jobs.job_record import (
    JobRecord,
    JobStatus,
    deadline_key,
    job_key,
    runner_job_key,
)
from cowboy_node.execution.jobs.snapshot_root import SnapshotRow
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.runners import registry_state as registry
from cowboy_node.execution.system_state import JOB_DISPATCHER, get_account, get_runner_config, move_balance
from cowboy_node.execution.validity_errors import InvalidBlock, TxFailed
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import decode, encode
from cowboy_protocol.types.fields import ADDRESS_LEN, decode_u128, encode_u128, expect_bytes, expect_uint
from cowboy_protocol.types.jobspec import (
    JobRequest,
    JobSpecV1,
    canonical_job_spec,
    decode_job_spec,
    derive_job_id,
    http_host,
)
from cowboy_protocol.types.runner import RunnerRecord
from cowboy_protocol.types.validation_errors import DecodeError

MODE_V2 = 0xFF
"""Stored mode byte of a job selected on the CIP-2 v2 path (flag off)."""
SUBMIT_CYCLES = 20_000
"""Cycles of a JobSubmit before selection."""
SELECT_CYCLES_PER_CANDIDATE = 50
"""Selection cost per registry entry scanned (filter chain + weights)."""
SNAPSHOT_PREFIX = pending.DISPATCHER_NS + b"pending_snapshot/"
TOPIC_SUBMITTED = "job.submitted"
TOPIC_ASSIGNED = "job.assigned"
TOPIC_PENDING = "job.pending_selection"


def selection_request(spec: JobSpecV1, excluded: tuple[bytes, ...] = ()) -> SelectionRequest:
    """The filter-chain inputs a job spec fixes."""
    v = spec.verification
    return SelectionRequest(job_kind=spec.job_type.KIND, http_host=http_host(spec.job_type),
                            tee_required=v.tee_required or v.required_tee_type is not None,
                            required_tee_type=v.required_tee_type, max_price=spec.max_price,
                            required_runner_pool=spec.required_runner_pool, excluded=frozenset(excluded))


def observed(ctx: BlockContext, section: str) -> AbstractContextManager[object]:
    """``ctx.observe(section)`` when the node measures this block, else a no-op (execution never reads a clock)."""
    return ctx.observe(section) if ctx.observe is not None else nullcontext()


def eligible_for(world: WorldState, ctx: BlockContext, spec: JobSpecV1,
              excluded: tuple[bytes, ...]) -> tuple[list[RunnerRecord], dict[str, int]]:
    """Floor-eligible candidates for ``spec`` in address order, and the per-filter rejection counts."""
    with observed(ctx, "job_filter"):
        return _eligible_for(world, ctx, spec, excluded)


def _eligible_for(world: WorldState, ctx: BlockContext, spec: JobSpecV1,
                  excluded: tuple[bytes, ...]) -> tuple[list[RunnerRecord], dict[str, int]]:
    return eligible_with_report(registry.runners_in_index_order(world), selection_request(spec, excluded),
                                height=ctx.env.height, heartbeat_timeout_blocks=ctx.limits.heartbeat_timeout_blocks,
                                cfg=get_runner_config(world))


def _no_runner_error(report: dict[str, int]) -> TxFailed:
    detail = ", ".join(f"{name}: {n}" for name, n in report.items() if n)
    return TxFailed("no_eligible_runner", f"no registered runner can serve this job (excluded by filter: "
                    f"{detail or 'no runners registered'})")


def shortfall(rec: JobRecord) -> int:
    """Seats of an assigned job's committee left unfilled (under-fill, CIP-11 §9.2): ``M − len(committee)``."""
    if rec.status != JobStatus.ASSIGNED:
        return 0
    return max(0, decode_job_spec(rec.spec).verification.runners - len(rec.committee))


def present_set(ctx: BlockContext, m: int) -> frozenset[int]:
    """Registry indices marked present for membership: empty unless present-first applies (§7.3 bound)."""
    if not ctx.flags.CIP11_PRESENT_FIRST_ENABLED:
        return frozenset()
    if ctx.hard_exclude:  # Mode A: presence is consensus-verified, not proposer-set (§15.9), so no bound
        return ctx.present
    # Membership-steering bound: with n > 1 validators, M > 1 committees are drawn over the full set.
    if ctx.env.n_validators > 1 and m > 1:
        return frozenset()
    return ctx.present


def _mru_address(world: WorldState, ctx: BlockContext, submitter: bytes, job_kind: int) -> bytes | None:
    if not ctx.flags.CIP11_PRESENT_FIRST_ENABLED:
        return None
    cfg = get_runner_config(world)
    return mru.lookup_mru(world.get(mru.mru_key(submitter, job_kind)), ctx.env.height, cfg.mru_ttl_blocks)


def draw_from(world: WorldState, ctx: BlockContext, spec: JobSpecV1, candidates: list[RunnerRecord],
              candidate_weights: list[int], m: int, seed: bytes) -> list[RunnerRecord]:
    """Present-first weighted draw of up to ``m`` runners from address-ordered candidates with paired weights."""
    with observed(ctx, "job_draw"):
        return _draw_from(world, ctx, spec, candidates, candidate_weights, m, seed)


def _draw_from(world: WorldState, ctx: BlockContext, spec: JobSpecV1, candidates: list[RunnerRecord],
               candidate_weights: list[int], m: int, seed: bytes) -> list[RunnerRecord]:
    present_idx = present_set(ctx, m)
    present: list[RunnerRecord] = []
    present_w: list[int] = []
    fallback: list[RunnerRecord] = []
    fallback_w: list[int] = []
    for r, w in zip(candidates, candidate_weights, strict=True):  # stable partition, weights stay paired
        if r.index in present_idx:
            present.append(r)
            present_w.append(w)
        elif not ctx.hard_exclude:  # Mode A effective: a runner without a presence proof is not selectable
            fallback.append(r)
            fallback_w.append(w)
    cfg = get_runner_config(world)
    return draw.draw_committee_weighted(present, present_w, fallback, fallback_w, m, seed,
                                        _mru_address(world, ctx, spec.submitter, spec.job_type.KIND),
                                        mru_multiplier=cfg.mru_weight_multiplier)


def assign(world: WorldState, ctx: BlockContext, rec: JobRecord, spec: JobSpecV1, committee: list[RunnerRecord],
           *, deadline: int) -> JobRecord:
    """Write the assignment (committee order kept), its indexes and the runners' active-job counts."""
    cfg = get_runner_config(world)
    h = ctx.env.height
    timeout = spec.timeout_blocks
    new = replace(rec, status=JobStatus.ASSIGNED, committee=tuple(r.address for r in committee),
                  assignment_height=h, deadline_block=deadline,
                  commit_end=h + max(1, timeout * cfg.commit_phase_permille // 1000), commits=(), reveals=())
    for r in committee:
        registry.adjust_active_jobs(world, r.address, +1)
        world.set(runner_job_key(r.address, rec.job_id), b"")
    world.set(deadline_key(deadline, rec.job_id), b"")
    world.set(job_key(rec.job_id), new.encode())
    ctx.jobs_assigned.append(rec.job_id)
    assigned: dict[int, object] = {0: rec.job_id, 1: [r.address for r in committee], 2: h, 3: deadline}
    missing = spec.verification.runners - len(committee)
    if missing > 0:  # under-filled (§9.2): the seats §11.2 re-selection fills; absent for a full committee
        assigned[4] = missing
    ctx.events.append(Event(JOB_DISPATCHER, TOPIC_ASSIGNED, encode(assigned)))
    return new


def submit(world: WorldState, ctx: BlockContext, meter: Meter, request: JobRequest, *, submitter: bytes,
           tx_hash: bytes, events: list[Event], reserved: int = 0) -> bytes:
    """JobSubmit (from a transaction or ``pvm_host.submit_job``): validate, escrow, select or record pending.

    Raises ``TxFailed`` with a stable code; nothing is written before every check passed (the caller's
    checkpoint reverts partial writes anyway). ``reserved`` is the part of the submitter's balance already
    promised (a transaction's maximum fee). Returns the job id.
    """
    meter.charge_cycles(SUBMIT_CYCLES)
    index = ctx.jobs_per_tx.get(tx_hash, 0)
    ctx.jobs_per_tx[tx_hash] = index + 1
    job_id = derive_job_id(tx_hash, index)
    if world.get(job_key(job_id)) is not None:
        raise TxFailed("job_exists", f"job 0x{job_id.hex()} already exists")
    h = ctx.env.height
    spec = request.to_spec(job_id, submitter, h)
    m = spec.verification.runners
    meter.charge_cycles(SELECT_CYCLES_PER_CANDIDATE * registry.registry_size(world))
    # M == 1: the selection index answers as the linear path would, without re-reading the registry
    # (docs/selection.md); None sends the job down the linear path (which also builds the error report).
    fast = None
    if m == 1 and not ctx.hard_exclude:  # the index keeps a fallback pool, which Mode A does not have
        with observed(ctx, "job_filter"):
            fast = selection_index.m1_selection(world, ctx, selection_request(spec), present_set(ctx, m))
    candidates: list[RunnerRecord] = []
    if fast is None:
        candidates, report = eligible_for(world, ctx, spec, ())
    # Under-fill (CIP-11 §9.2): fewer than M eligible runners is not a refusal — the draw takes as many as
    # exist and "the shortfall is handled by the existing CIP-2 under-fill / timeout re-selection path
    # (§11.2)". Zero eligible stays refused: the spec's shortfall is that of a committee the loop *began* to
    # fill ("the loop breaks early"), and with nobody eligible there is no committee, no assignment and so no
    # deadline_block for §11.2 to time out (§10.1 derives it from an assignment). For M > 1 the candidate
    # snapshot is moreover frozen at T = S, so an empty block-S snapshot could never yield a runner at the
    # pending pass; accepting would only lock the escrow. "A job is never failed for lack of *present*
    # runners" concerns presence (§7.3 fail-open), not the CIP-2 eligibility chain.
        if not candidates:
            raise _no_runner_error(report)
    escrow = spec.max_price + spec.tip
    payer = get_account(world, submitter)
    if payer.balance - reserved < escrow:
        raise TxFailed("insufficient_balance", f"escrow of {escrow} exceeds the available balance")
    move_balance(world, submitter, JOB_DISPATCHER, escrow)
    raw_spec = canonical_job_spec(spec)
    rec = JobRecord(job_id=job_id, spec=raw_spec, status=JobStatus.PENDING_SELECTION, mode_byte=MODE_V2, seed=b"",
                    committee=(), attempt=0, excluded=(), assignment_height=0, deadline_block=0, commit_end=0,
                    commits=(), reveals=(), escrow=escrow, payer=submitter, outcome=None, reason="", finished_at=0)
    cfg = get_runner_config(world)
    base = weights.base_weights(candidates, cfg)

    def draw_one(seed: bytes) -> list[RunnerRecord]:
        if fast is None:
            return draw_from(world, ctx, spec, candidates, base, m, seed)
        with observed(ctx, "job_draw"):
            return fast.draw(seed, _mru_address(world, ctx, spec.submitter, spec.job_type.KIND),
                             cfg.mru_weight_multiplier)

    parent = ctx.env.parent_round
    if not ctx.flags.CIP11_PRESENT_FIRST_ENABLED:
        # CIP-2 v2 draw over the 32-byte canonical seed bytes of the parent beacon (never the raw 48-byte
        # signature: the v2 preimage is fixed-width, and that mistake used to halt block production).
        seed = seeds.selection_seed_v2(seeds.beacon_hash_v1(parent[0], parent[1], ctx.env.parent_beacon), job_id, h)
        rec = replace(rec, seed=seed)
        committee = draw_one(seed)
        rec = assign(world, ctx, rec, spec, committee, deadline=h + spec.timeout_blocks)
    elif m == 1:
        seed = seeds.selection_seed_v3(seeds.MODE_IMMEDIATE,
                                       seeds.beacon_hash_v1(parent[0], parent[1], ctx.env.parent_beacon), job_id, h)
        rec = replace(rec, seed=seed, mode_byte=seeds.MODE_IMMEDIATE)
        committee = draw_one(seed)
        rec = assign(world, ctx, rec, spec, committee, deadline=h + spec.timeout_blocks)
    else:
        seed_epoch, seed_view = seeds.advance_round(ctx.env.round[0], ctx.env.round[1],
                                                    cfg.selection_seed_delay_views)
        record = pending.PendingSelectionV1(
            job_id=job_id, submitted_at=h, submit_epoch=ctx.env.round[0], submit_view=ctx.env.round[1],
            seed_epoch=seed_epoch, seed_view=seed_view,
            candidates_snapshot_root=snapshot_root.candidates_snapshot_root(candidates, cfg, base), runners=m,
            submitter=submitter, job_kind=spec.job_type.KIND)
        writes = [(pending.pending_by_job_key(job_id), record.encode()),
                  (record.due_key(), pending.PENDING_DUE_VALUE),
                  (SNAPSHOT_PREFIX + job_id, encode_snapshot(candidates, base))]
        # Metered like any other state write (key + value bytes): the snapshot grows with the eligible set.
        meter.charge_cells(sum(len(k) + len(v) for k, v in writes))
        for k, v in writes:
            world.set(k, v)
        rec = replace(rec, mode_byte=seeds.MODE_DELAYED)
        world.set(job_key(job_id), rec.encode())
        events.append(Event(JOB_DISPATCHER, TOPIC_PENDING, encode({0: job_id, 1: seed_epoch, 2: seed_view})))
    meter.charge_cells(len(raw_spec) + 256 * max(1, m))
    events.append(Event(JOB_DISPATCHER, TOPIC_SUBMITTED, encode({0: job_id, 1: submitter, 2: encode_u128(escrow)})))
    return job_id


def due_seed_rounds(world: WorldState, up_to_view: int, finalized_height: int | None = None) -> list[tuple[int, int]]:
    """Distinct (seed_epoch, seed_view) of pending selections whose seed round is ≤ ``(0, up_to_view)``.

    Used by the proposer to decide which seeds to commit in ``ConsumedSeedsV1`` (single epoch 0). A round is
    left out while any of its records could not be assigned — its block S is above ``finalized_height`` (not
    final yet, §9.2 first condition; None: every block of ``world`` is final), its record is missing or its
    snapshot does not verify against the committed ``candidates_snapshot_root`` — because committing that
    seed would make the block invalid (§9.2); the records stay pending under the same keys, as for a seed not
    yet observed.
    """
    out: list[tuple[int, int]] = []
    blocked: set[tuple[int, int]] = set()
    for key, _ in world.iterate(pending.PENDING_DUE_PREFIX):
        epoch, view, submitted_at, job_id = pending.parse_pending_due_key(key)
        if (epoch, view) > (0, up_to_view):
            break
        if not out or out[-1] != (epoch, view):
            out.append((epoch, view))
        if not source_final(submitted_at, finalized_height) or not _assignable(world, job_id):
            blocked.add((epoch, view))
    return [r for r in out if r not in blocked]


def source_final(submitted_at: int, finalized_height: int | None) -> bool:
    """Whether block S = ``submitted_at`` is final for a block executed with ``finalized_height`` (§9.2)."""
    return finalized_height is None or submitted_at <= finalized_height


def _assignable(world: WorldState, job_id: bytes) -> bool:
    raw = world.get(pending.pending_by_job_key(job_id))
    if raw is None:
        return False
    try:
        verified_snapshot(world, pending.PendingSelectionV1.decode(raw))
    except (InvalidBlock, DecodeError):
        return False
    return True


def encode_snapshot(candidates: list[RunnerRecord], base: list[int]) -> bytes:
    """Stored block-S snapshot: ``[[address, effective_stake u128, reputation_x1e9, base_weight u128], …]``."""
    return encode([[r.address, encode_u128(weights.effective_stake(r)), r.reputation_x1e9, encode_u128(w)]
                   for r, w in zip(candidates, base, strict=True)])


def _snapshot(world: WorldState, job_id: bytes) -> list[SnapshotRow]:
    raw = world.get(SNAPSHOT_PREFIX + job_id)
    if raw is None:
        raise InvalidBlock("pending_snapshot_missing", f"no block-S snapshot for job 0x{job_id.hex()}")
    try:
        rows = decode(raw)
        if not isinstance(rows, list):
            raise DecodeError("the block-S snapshot is not a list", field="snapshot")
        out: list[SnapshotRow] = []
        for r in rows:
            if not isinstance(r, list) or len(r) != 4:
                raise DecodeError("malformed block-S snapshot row", field="snapshot")
            out.append((expect_bytes(r[0], "snapshot.address", ADDRESS_LEN), decode_u128(r[1], "snapshot.stake"),
                        expect_uint(r[2], "snapshot.reputation"), decode_u128(r[3], "snapshot.weight")))
        return out
    except DecodeError as e:
        raise InvalidBlock("pending_snapshot_invalid", f"block-S snapshot of job 0x{job_id.hex()}: {e}",
                           field="candidates_snapshot_root") from e


def verified_snapshot(world: WorldState, p: pending.PendingSelectionV1) -> list[SnapshotRow]:
    """The stored block-S snapshot of ``p``, once its root equals the ``candidates_snapshot_root`` committed in
    the PendingSelectionV1 at submit time (§9.2: "compare it byte-for-byte to the committed
    candidates_snapshot_root; if they differ, the block is invalid")."""
    rows = _snapshot(world, p.job_id)
    try:
        root = snapshot_root.root_of_rows(rows)
    except ValueError as e:  # a field outside its leaf range cannot be a committed candidate
        raise InvalidBlock("pending_snapshot_invalid", f"block-S snapshot of job 0x{p.job_id.hex()}: {e}",
                           field="candidates_snapshot_root") from e
    if root != p.candidates_snapshot_root:
        raise InvalidBlock("snapshot_root_mismatch", f"candidates snapshot of job 0x{p.job_id.hex()} does "
                           "not match the candidates_snapshot_root committed at submission",
                           field="candidates_snapshot_root")
    return rows


def process_pending(world: WorldState, ctx: BlockContext) -> None:
    """Start of block H: assign every pending M > 1 selection whose seed ``ConsumedSeedsV1`` commits (§9.2).

    Block validity: every entry must be consumed by at least one pending record (else ``unconsumed_seed``),
    whose block S is final for this validator (else ``pending_source_not_final``, :attr:`BlockEnv.finalized_height`);
    entries are sorted by round without duplicates (checked by the header check). Records are processed in
    ascending (submitted_at, job_id) whatever the storage order.
    """
    if not ctx.env.consumed_seeds:
        return
    collected: list[tuple[pending.PendingSelectionV1, bytes]] = []
    for epoch, view, signature in ctx.env.consumed_seeds:
        canonical = seeds.beacon_hash_v1(epoch, view, signature)
        before = len(collected)
        for key, _ in world.iterate(pending.pending_due_round_prefix(epoch, view)):
            raw = world.get(pending.pending_by_job_key(pending.parse_pending_due_key(key)[3]))
            if raw is None:
                raise InvalidBlock("pending_record_missing", "due-round index entry without its pending record")
            collected.append((pending.PendingSelectionV1.decode(raw), canonical))
        if len(collected) == before:
            raise InvalidBlock("unconsumed_seed", f"consumed seed of round ({epoch}, {view}) has no pending "
                               "selection", field="consumed_seeds")
    by_job = {p.job_id: c for p, c in collected}
    for p in pending.order_due([p for p, _ in collected]):
        if not source_final(p.submitted_at, ctx.env.finalized_height):
            # §9.2: "block S is finalized and applied to canonical local state" — a block built on a notarized,
            # not yet final S (Simplex, n > 1) must not assign from it, or a fork dropping S would strand H.
            raise InvalidBlock("pending_source_not_final", f"consumed seed of round ({p.seed_epoch}, "
                               f"{p.seed_view}) assigns job 0x{p.job_id.hex()} from block {p.submitted_at}, "
                               f"above the finalized height {ctx.env.finalized_height}", field="consumed_seeds")
        rows = verified_snapshot(world, p)
        cands = [registry.get_runner(world, a) for a, _, _, _ in rows]
        present = [r for r in cands if r is not None]
        if len(present) != len(rows):
            raise InvalidBlock("pending_snapshot_invalid", "snapshot names an unknown runner")
        raw = world.get(job_key(p.job_id))
        assert raw is not None
        rec = JobRecord.decode(raw)
        spec = decode_job_spec(rec.spec)
        seed = seeds.selection_seed_v3(seeds.MODE_DELAYED, by_job[p.job_id], p.job_id, p.submitted_at)
        committee = draw_from(world, ctx, spec, present, [w for _, _, _, w in rows], p.runners, seed)
        world.delete(pending.pending_by_job_key(p.job_id))
        world.delete(p.due_key())
        world.delete(SNAPSHOT_PREFIX + p.job_id)
        assign(world, ctx, replace(rec, seed=seed), spec, committee, deadline=ctx.env.height + spec.timeout_blocks)

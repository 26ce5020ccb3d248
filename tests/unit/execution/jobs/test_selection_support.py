"""Builders shared by the selection tests (CIP-11 §9), plus a check that they build valid registry records."""

from __future__ import annotations

from cowboy_protocol.crypto.keccak import keccak256
from cowboy_protocol.types.runner import JOB_KINDS, Capabilities, Health, Rate, RateCard, RunnerRecord

ALL_KINDS = tuple(sorted(JOB_KINDS.values()))
HEIGHT = 1_000
REP_50 = 50_000_000_000
STAKE = 10**18


def addr(n: int) -> bytes:
    """A 20-byte address whose first byte is ``n`` (so address order = order of ``n``)."""
    return bytes([n]) + bytes(18) + bytes([0xAA])


def runner(a: bytes | int, index: int, *, stake: int = STAKE, rep: int = REP_50, kinds: tuple[int, ...] = ALL_KINDS,
           domains: tuple[str, ...] = ("*",), max_jobs: int = 4, active: int = 0, tee: tuple[str, ...] = (),
           pools: tuple[bytes, ...] = (), base_price: int = 100, health: Health = Health.HEALTHY,
           last_heartbeat: int = HEIGHT) -> RunnerRecord:
    """A registry record with permissive defaults; every keyword breaks exactly one filter when changed."""
    address = addr(a) if isinstance(a, int) else a
    caps = Capabilities(job_kinds=tuple(sorted(kinds)), regions=(), http_domains=tuple(sorted(domains)),
                        max_concurrent_jobs=max_jobs, tee_types=tuple(sorted(tee)), pools=tuple(sorted(pools)))
    rates = RateCard(tuple((k, Rate(base_price, 1)) for k in sorted(kinds)))
    return RunnerRecord(address=address, index=index, stake=stake, capabilities=caps, rate_card=rates, health=health,
                        registered_at=1, last_heartbeat=last_heartbeat, reputation_x1e9=rep, active_jobs=active,
                        unbonding_until=0)


def hashed_runners(n: int) -> list[RunnerRecord]:
    """``n`` runners with pseudo-random addresses (registry index = creation order), distinct stakes."""
    return [runner(keccak256(i.to_bytes(4, "big"))[:20], i, stake=STAKE + i * 10**15,
                   rep=REP_50 + (i % 7) * 5_000_000_000) for i in range(n)]


def test_selection_support_builds_records_that_round_trip() -> None:
    r = runner(3, 7, tee=("sgx",), pools=(b"p",), domains=("*.example.com", "api.x.org"))
    assert RunnerRecord.decode(r.encode()) == r
    assert addr(1) < addr(2)


# --- independent reference of the CIP-11 §9.2 draw, written from the spec text (not from draw.py) ---------------

def ref_ticket(seed: bytes, i: int, total: int) -> int:
    """ticket = u64::from_le_bytes(keccak256(seed ‖ i_le8)[0..8]) % total."""
    h = keccak256(seed + i.to_bytes(8, "little"))
    return int.from_bytes(h[:8], "little") % total


def ref_walk(weights: list[int], ticket: int) -> int:
    """First j with ticket < weights[j], subtracting each weight passed."""
    for j, w in enumerate(weights):
        if ticket < w:
            return j
        ticket -= w
    raise AssertionError("ticket beyond the total")


def ref_committee(present: list[tuple[bytes, int]], fallback: list[tuple[bytes, int]], seed: bytes, m: int,
                  mru: bytes | None = None, mult: int = 4, *, reset_counter: bool = False) -> list[bytes]:
    """Addresses drawn: present pool until empty, then fallback; swap_remove; MRU ×mult at i == 0 only.

    ``reset_counter`` models the forbidden variant that restarts i at the fallback boundary.
    """
    pools = [list(present), list(fallback)]
    out: list[bytes] = []
    i = 0
    k = 0  # iteration index within the current pool (only used by the forbidden variant)
    current = 0
    while len(out) < m:
        p = 0 if pools[0] else 1
        pool = pools[p]
        if not pool:
            break
        if p != current:
            current, k = p, 0
        weights = [w * mult if (i == 0 and a == mru) else w for a, w in pool]
        total = sum(weights)
        if total == 0:
            break
        j = ref_walk(weights, ref_ticket(seed, k if reset_counter else i, total))
        out.append(pool[j][0])
        last = pool.pop()           # swap_remove(j): the last element takes slot j
        if j < len(pool):
            pool[j] = last
        i += 1
        k += 1
    return out

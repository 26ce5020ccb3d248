"""A long, mixed run of seeds/003 timers through real blocks: the reference scenario of the timer-fire fast paths.

Five PVM actors on a dev chain (three funded, two funded for a few fires only) schedule timers from
transactions and from their own fires, and the blocks deliver them through the whole End-of-Block pipeline
(``build_block``: transactions, DeliverTimers, Mailbox, fees, commit). What the timers do covers every path a
fire can take: a plain write, an event, a handler that raises or runs out of cycles after writing (reverted),
a fire that schedules another, one that cancels a later timer due in the same block, one that moves its own
fee payer's balance between the pre-charge and the refund, ``_handler`` envelopes (JSON and CBOR) routed to
another handler, timers paid by the scheduling transaction's sender, a burst of out-of-cycle spinners that
closes the lane (the rest deferred, then expired), and more unfunded timers due at one height than the GC
budget removes (the rest left for the next block).

:func:`run` returns, per block, SHA-256 digests of the net state changes (sorted ``(key, value)`` pairs, so a
change of the state tree's definition does not move them), of the receipts' canonical bytes and of the block
events, plus the End-of-Block counters and the state root. ``tests/unit/execution/timers/test_timer_mixed_run.py``
pins the digest of the whole run as computed at 8cb54ba (before the fast paths); run this module
(``python -m tests.unit.execution.timers.timer_mixed_scenario``) from another checkout to compare two versions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Callable

from cowboy_node.chain.chain import STATE_PREFIX, Chain
from cowboy_node.execution.actors.actor_record import derive_actor_address
from cowboy_node.execution.block import start_block
from cowboy_node.execution.context import BlockEnv
from cowboy_node.execution.end_of_block import EOB_STEPS, run_end_of_block
from cowboy_node.execution.transactions import execute_transaction
from cowboy_node.state.memory import MemoryStore
from cowboy_node.state.world import WorldState
from cowboy_node.types.receipt import Event
from cowboy_protocol.codec import encode
from cowboy_protocol.types.instructions import CallActor, DeployActor, Instruction, Transfer
from tests.helpers import ALICE, ALICE_SK, CHAIN_ID, FEE_RECIPIENT, make_dev_genesis, make_tx

SOURCE = '''import pvm_host

SINK = b"\\x00" * 19 + b"\\x05"


def arm(spec):
    now = pvm_host.current_block()
    sender = pvm_host.context()["sender"]
    i = 0
    n = len(spec)
    while i < n:
        ln = spec[i] * 256 + spec[i + 1]
        r = spec[i + 2:i + 2 + ln]
        i = i + 2 + ln
        h = now + r[0]
        payer = sender if r[7] == 1 else b""
        gas = ((r[3] * 256 + r[4]) * 256 + r[5]) * 256 + r[6]
        tid = pvm_host.schedule_timer_ex(h, r[8:], payer, gas, 0, h + r[1] * 256 + r[2])
        if len(r) > 8 and r[8] == 7:
            pvm_host.set_state(b"victim", tid)
    return b""


def handle_timer(p):
    op = p[0]
    pvm_host.set_state(b"t" + p[1:], p)
    if op == 1:
        pvm_host.emit_event("tick", p)
    elif op == 2:
        raise ValueError("boom")
    elif op == 3:
        while True:
            pass
    elif op == 4:
        pvm_host.schedule_timer(pvm_host.current_block() + 1 + p[-1] % 3, b"\\x01" + p[1:] + b"c")
    elif op == 5:
        victim = pvm_host.get_state(b"victim")
        if victim is not None:
            pvm_host.cancel_timer(victim)
    elif op == 6:
        pvm_host.transfer_balance(SINK, 1000 + p[-1])
    return b""


def alt(p):
    pvm_host.set_state(b"alt" + p[:8], p)
    pvm_host.emit_event("alt", p)
    return b""
'''

TX_CYCLES = 3_000_000
TX_CELLS = 400_000
TXS_PER_BLOCK = 10
"""At most this many transactions per block (their limits stay under the block's 40M cycles and 8M cells)."""
MAX_FEE = 10_000_000
RICH = 10**21
SPIN_GAS = 550_000
"""TimerConfig.max_cycles_per_fire: 19 such spinners fill the 10M lane."""
FIRST = 1
"""Height of the first block (deployments and funding)."""
BLOCKS = 14


def _entry(dh: int, payload: bytes, *, gas: int = 20_000, ttl: int = 50, alice_pays: bool = False) -> bytes:
    body = (bytes([dh]) + ttl.to_bytes(2, "big") + gas.to_bytes(4, "big") + bytes([1 if alice_pays else 0])
            + payload)
    return len(body).to_bytes(2, "big") + body


def _json_envelope(inner: bytes) -> bytes:
    return json.dumps({"_handler": "alt", "_payload": base64.b64encode(inner).decode()}).encode()


def _cbor_envelope(inner: bytes) -> bytes:
    return encode({"_handler": "alt", "_payload": inner})


def _mixed_specs(rng: random.Random, tag: int, count: int, spread: int) -> list[bytes]:
    """Arm specs of ``count`` timers over the next ``spread`` blocks, ops drawn at random (100 per spec)."""
    entries = []
    for i in range(count):
        dh = 1 + rng.randrange(spread)
        suffix = bytes([tag]) + i.to_bytes(2, "big") + bytes([rng.randrange(256)])
        kind = rng.choices(range(10), weights=[30, 15, 6, 2, 8, 3, 6, 6, 6, 8])[0]
        if kind == 7:
            payload = _json_envelope(b"j" + suffix)
        elif kind == 8:
            payload = _cbor_envelope(b"c" + suffix)
        elif kind == 9:
            payload = b"\x00" + suffix  # a plain write paid by the transaction's sender
            entries.append(_entry(dh, payload, alice_pays=True))
            continue
        else:
            payload = bytes([kind]) + suffix
        gas = 9_000 if kind == 3 else 20_000 + rng.randrange(5_000)  # spinners: small limit, run out of cycles
        entries.append(_entry(dh, payload, gas=gas))
    return [b"".join(entries[i:i + 100]) for i in range(0, len(entries), 100)]


class _Run:
    """Blocks executed as the chain does (transactions, then every End-of-Block step), committed to a memory store.

    With ``roots`` each block is committed through the state tree (``prepare_commit``: the state root is
    reported); without, only the raw state writes are stored and the run does not touch the tree (so the
    scenario compares timer code even while the tree is being changed).
    """

    def __init__(self, roots: bool, after_block: Callable[[Chain], None] | None = None) -> None:
        self.after_block = after_block
        self.chain = Chain(MemoryStore(), make_dev_genesis().genesis)
        self.world: WorldState = self.chain.world()
        self.roots = roots
        self.nonce = 0
        self.blocks: list[dict[str, object]] = []

    def tx(self, instruction: Instruction) -> object:
        t = make_tx(ALICE_SK, self.nonce, instruction, cycles_limit=TX_CYCLES, cells_limit=TX_CELLS,
                    max_fee=MAX_FEE, tip=0)
        self.nonce += 1
        return t

    def block(self, height: int, instructions: list[Instruction]) -> None:
        env = BlockEnv(chain_id=CHAIN_ID, height=height, timestamp_ms=1_700_000_000_000 + height * 1_000,
                       fee_recipient=FEE_RECIPIENT, beacon=b"", parent_beacon=b"")
        world = self.world
        ctx = start_block(world, env, strict_presence=False)  # as build_block: no PresenceInput in this run
        receipts = [execute_transaction(world, self.tx(i), ctx) for i in instructions]  # type: ignore[arg-type]
        steps = EOB_STEPS if self.roots else tuple(s for s in EOB_STEPS if s[0] != "commit")
        run_end_of_block(world, ctx, steps=steps)
        changes = sorted(world.changes().items())
        events = [e for e in ctx.events if isinstance(e, Event)]
        eob = ctx.eob
        self.blocks.append({
            "height": height,
            "changes": hashlib.sha256(encode([[k, v] for k, v in changes])).hexdigest(),
            "receipts": hashlib.sha256(encode([r.encode() for r in receipts])).hexdigest(),
            "events": hashlib.sha256(encode([[e.emitter, e.topic, e.data] for e in events])).hexdigest(),
            "counts": [len(changes), len(events), eob.timers_fired, eob.timers_deferred, eob.timers_expired,
                       eob.timers_self_destructed, eob.timers_gc_deferred],
            "receipts_failed": [[i, r.error_code] for i, r in enumerate(receipts) if r.error_code is not None],
        })
        store = self.chain.store
        if self.roots:
            root, ops = world.prepare_commit()
            self.blocks[-1]["state_root"] = root.hex()
            store.write_batch(ops, sync=False)
            world.mark_committed()
        else:
            store.write_batch([(STATE_PREFIX + k, v) for k, v in changes], sync=False)
            self.world = self.chain.world()
        if self.after_block is not None:
            self.after_block(self.chain)


def run(*, roots: bool = False, after_block: Callable[[Chain], None] | None = None) -> dict[str, object]:
    """Execute the scenario; the per-block digests and one digest of them all (state roots too with ``roots``).
    ``after_block(chain)`` is called once each block's writes are in the chain's store."""
    rng = random.Random(8_000_003)
    r = _Run(roots, after_block)
    salts = [b"a1", b"a2", b"a3", b"b1", b"b2"]
    actors = [derive_actor_address(ALICE, s, SOURCE) for s in salts]
    a1, a2, a3, b1, b2 = actors
    # block 1: deploy, fund (the B actors get a few fires' worth)
    first: list[Instruction] = [DeployActor(source=SOURCE, salt=s, init_handler="", init_payload=b"") for s in salts]
    first += [Transfer(to=a, amount=RICH) for a in (a1, a2, a3)]
    first += [Transfer(to=b, amount=7 * 10**10) for b in (b1, b2)]
    r.block(FIRST, first)
    # block 2: the bulk of the timers
    arms: list[Instruction] = []
    arms += [CallActor(actor=a1, handler="arm", payload=s) for s in _mixed_specs(rng, 1, 700, 6)]
    arms += [CallActor(actor=a3, handler="arm", payload=s) for s in _mixed_specs(rng, 3, 300, 3)]
    # a2: 30 max-gas spinners due at FIRST + 4 that expire there (the lane takes 18: the rest expire next block),
    # behind them 20 plain timers (deferred with them, then fired)
    spin = [_entry(3, b"\x03" + bytes([2, i]), gas=SPIN_GAS, ttl=0) for i in range(30)]
    spin += [_entry(3, b"\x00" + bytes([2, 100 + i]), ttl=5) for i in range(20)]
    arms.append(CallActor(actor=a2, handler="arm", payload=b"".join(spin)))
    # a fire that cancels a timer due after it in the same block (the scan then finds its record gone)
    arms.append(CallActor(actor=a3, handler="arm", payload=_entry(2, b"\x05x") + _entry(2, b"\x07victim")))
    # b1, b2: 600 each due at FIRST + 5, funded for a few: more unfunded than the GC budget removes in a block
    for b, tag in ((b1, 4), (b2, 5)):
        plain = [_entry(4, b"\x00" + bytes([tag]) + i.to_bytes(2, "big"), gas=100_000) for i in range(600)]
        arms += [CallActor(actor=b, handler="arm", payload=b"".join(plain[i:i + 150])) for i in range(0, 600, 150)]
    height = FIRST + 1
    while arms:  # offsets are from the block that arms them: the arming blocks overlap the firing ones
        r.block(height, arms[:TXS_PER_BLOCK])
        del arms[:TXS_PER_BLOCK]
        height += 1
    for h in range(height, height + BLOCKS):
        more = _mixed_specs(rng, 0x10 + h % 0xF0, 40, 3)
        r.block(h, [CallActor(actor=a1, handler="arm", payload=s) for s in more])
    digest = hashlib.sha256(json.dumps([{k: v for k, v in b.items() if k != "state_root"} for b in r.blocks],
                                       sort_keys=True).encode()).hexdigest()
    return {"digest": digest, "blocks": r.blocks}


if __name__ == "__main__":
    import sys

    print(json.dumps(run(roots="--roots" in sys.argv), indent=1))

"""The per-run shortcuts of ``actors.invoke`` (issue 20 item 4) behave as the plain code they replace.

* ``_ensure_headroom`` asks ``sys._getframe`` whether the stack is shallow enough before walking it: the limit it
  leaves must be the walk's at every depth, in particular on both sides of the boundary.
* A timer fire's frame is taken from a per-actor cache: the same fields as a freshly built one.
* ``enter_host`` / ``leave_host`` make a host current and restore the previous one, as ``host_scope`` does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from cowboy_node.execution.actors import invoke, sdk_bridge
from cowboy_node.execution.actors.frame import CallFrame


def _stack_depth() -> int:
    """Frames on the stack, the caller's included."""
    depth = 0
    f = sys._getframe(1)
    while f is not None:
        depth += 1
        f = f.f_back  # type: ignore[assignment]
    return depth


@pytest.fixture
def restore_limit() -> Iterator[None]:
    old = sys.getrecursionlimit()
    yield
    sys.setrecursionlimit(old)


@pytest.mark.parametrize("slack", [-50, -1, 0, 1, 50])
def test_headroom_leaves_the_limit_the_full_walk_would(slack: int, restore_limit: None) -> None:
    # inside _ensure_headroom the stack is this frame's depth + 1; the walk sets the limit to that + headroom when
    # the limit is below it and leaves it alone otherwise
    inner = _stack_depth() + 1
    needed = inner + invoke.RECURSION_HEADROOM
    sys.setrecursionlimit(needed + slack)
    invoke._ensure_headroom()
    assert sys.getrecursionlimit() == (needed if slack < 0 else needed + slack)


def test_headroom_from_deeper_stacks_and_a_limit_below_the_headroom(restore_limit: None) -> None:
    def at_depth(n: int) -> tuple[int, int]:
        if n:
            return at_depth(n - 1)
        inner = _stack_depth() + 1
        invoke._ensure_headroom()
        return inner, sys.getrecursionlimit()

    for extra in (0, 7, 100):
        sys.setrecursionlimit(200)  # below RECURSION_HEADROOM: the shortcut does not apply, the walk sets it
        inner, limit = at_depth(extra)
        assert limit == inner + invoke.RECURSION_HEADROOM
        sys.setrecursionlimit(limit)  # exactly enough at that depth: unchanged; one frame deeper: raised by one
        assert at_depth(extra) == (inner, limit)
        assert at_depth(extra + 1) == (inner + 1, limit + 1)


def test_a_fires_frame_is_the_actor_calling_itself() -> None:
    actor = bytes(range(20))
    frame = invoke._self_frame(actor)
    assert frame == CallFrame(actor=actor, sender=actor, tx_sender=actor, tx_hash=bytes(32), depth=1)
    assert invoke._self_frame(bytes(actor)) is frame  # cached by value
    other = bytes(range(1, 21))
    assert invoke._self_frame(other).actor == other


def test_self_frame_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(invoke, "_SELF_FRAMES_MAX", 3)
    monkeypatch.setattr(invoke, "_self_frames", {})
    for i in range(10):
        actor = bytes([i]) * 20
        assert invoke._self_frame(actor).sender == actor
        assert len(invoke._self_frames) <= 3


def test_enter_and_leave_host_nest_like_host_scope() -> None:
    outer, inner = object(), object()
    t1 = sdk_bridge.enter_host(outer)
    try:
        assert sdk_bridge.current_host() is outer
        t2 = sdk_bridge.enter_host(inner)
        assert sdk_bridge.current_host() is inner
        sdk_bridge.leave_host(t2)
        assert sdk_bridge.current_host() is outer
        with sdk_bridge.host_scope(inner):
            assert sdk_bridge.current_host() is inner
        assert sdk_bridge.current_host() is outer
    finally:
        sdk_bridge.leave_host(t1)
    with pytest.raises(RuntimeError):
        sdk_bridge.current_host()  # nothing current (no sandbox call running either)


# -- a fire inside the caller's checkpoint ------------------------------------------------------------------------

NESTING = '''import pvm_host

def init(payload):
    pvm_host.set_state(b"count", payload)
    return b""

def inc(payload):
    pvm_host.set_state(b"count", b"inc" + payload)
    pvm_host.emit_event("counted", payload)
    return b""

def spin(payload):
    pvm_host.set_state(b"count", b"spinning")
    while True:
        pass

def boom(payload):
    pvm_host.set_state(b"count", b"boom")
    raise ValueError("no way")

def nested_fail(payload):
    pvm_host.set_state(b"outer", b"1")
    pvm_host.call_actor(pvm_host.self_address(), "boom", b"", 20000, 1000)
    return b""

def nested_ok(payload):
    pvm_host.set_state(b"outer", b"2")
    pvm_host.call_actor(pvm_host.self_address(), "inc", b"n", 20000, 1000)
    return b""

def not_bytes(payload):
    pvm_host.set_state(b"count", b"nb")
    return "text"
'''


@pytest.mark.parametrize("handler", ["inc", "spin", "boom", "nested_fail", "nested_ok", "not_bytes", "missing"])
@pytest.mark.parametrize("cycles", [3_000, 60_000])
def test_a_fire_without_its_own_checkpoint_inside_run_checkpointed_is_the_guarded_fire(handler: str,
                                                                                      cycles: int) -> None:
    from cowboy_node.execution.meter import Meter
    from cowboy_node.execution.timers.deliver import run_checkpointed
    from cowboy_node.execution.timers.timer_record import Timer
    from tests.unit.execution.actors.test_actors_helpers import make_env

    results = []
    for fire in (invoke.run_timer_fire, invoke.run_checkpointed_fire):
        env = make_env()
        _r, addr = env.deploy(NESTING, init="init", init_payload=b"0")
        timer = Timer(actor_address=addr, height=1, payload=b"p", timer_id=bytes(32), handler=handler,
                      fee_payer=addr, gas_limit_per_fire=cycles, expires_at=10, seq=0)
        before = env.world.changes()
        meter = Meter(cycles, 10_000)
        outcome = run_checkpointed(env.world, meter, lambda m, t=timer, f=fire, e=env: f(e.world, e.ctx, t, m))
        after = env.world.changes()
        written = {k: v for k, v in after.items() if before.get(k, b"absent") != v}
        results.append((outcome, written, meter.cycles_used, meter.cells_used, env.world.watch_log[-20:]))
    assert results[0] == results[1]
    if handler in ("inc", "nested_ok") and cycles > 3_000:
        assert results[0][0].ok and results[0][1]  # the case where writes are kept is covered


def test_make_outcome_is_the_dataclass() -> None:
    from cowboy_node.execution.timers.deliver import FireOutcome, make_outcome
    from cowboy_node.types.receipt import Event

    ev = (Event(bytes(20), "t", b"d"),)
    for args in ((True, 1, 2, None, ev), (False, 0, 0, "out_of_cycles", ())):
        made, plain = make_outcome(*args), FireOutcome(*args)  # type: ignore[arg-type]
        assert made == plain and hash(made) == hash(plain) and type(made) is FireOutcome
    assert FireOutcome.__slots__ == ("ok", "cycles_used", "cells_used", "error_code", "events")


def test_load_code_front_gives_the_code_caches_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    from cowboy_node.execution.actors.actor_record import source_hash
    from cowboy_node.execution.actors.codecache import CODE_CACHE
    from cowboy_node.execution.validity_errors import TxFailed
    from tests.unit.execution.actors.test_actors_helpers import make_env

    monkeypatch.setattr(invoke, "_RECENT_CODE_MAX", 2)
    monkeypatch.setattr(invoke, "_recent_code", {})
    env = make_env()
    sources = [NESTING + f"\n# {i}\n" for i in range(4)]
    for i, src in enumerate(sources):
        env.deploy(src, salt=bytes([i]))
    for src in sources * 2:
        digest = source_hash(src)
        compiled = invoke.load_code(env.world, digest)
        assert compiled is CODE_CACHE.get(digest) or compiled is invoke._recent_code.get(digest)
        assert invoke.load_code(env.world, digest) is compiled
        assert len(invoke._recent_code) <= 2
    with pytest.raises(TxFailed) as e:
        invoke.load_code(env.world, bytes(32))
    assert e.value.code == "actor_code_missing"

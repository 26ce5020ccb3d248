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

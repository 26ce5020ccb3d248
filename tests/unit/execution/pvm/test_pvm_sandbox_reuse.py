"""call_handler reuses its sandboxes (``runtime.Sandbox``): nothing of one call may show in another.

The outcomes (returned bytes, error code and message, cycles used) of a corpus of actors are pinned from
commit 8cb54ba, whose sandbox built every helper afresh for each call (``pvm_reuse_corpus.py`` says how the
golden file was made); here they run one after the other through reused sandboxes, forwards and backwards,
so each case follows different limits, host modules, imports and halts.  The other tests cover what the
corpus cannot: halts followed by calls on the same Sandbox, nested and concurrent calls, what an idle
Sandbox keeps, and the shared builtins staying out of the actor's reach.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected, PvmError, call_handler, compile_actor, runtime, sandbox
from cowboy_node.execution.pvm import ctx as pvm_ctx
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.pvm_errors import PvmHalt
from tests.unit.execution.pvm import pvm_reuse_corpus as corpus

GOLDEN = Path(__file__).resolve().parents[3] / "vectors" / "pvm_reuse" / "golden_8cb54ba.json"


@pytest.fixture(autouse=True)
def _deep_stack() -> Iterator[None]:
    # as in pvm_reuse_corpus.main: the PVM's depth limits, not the interpreter's, stop the recursive cases
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10_000))
    yield
    sys.setrecursionlimit(old)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[runtime.Sandbox]:
    """Every Sandbox call_handler builds from now on (an empty free list to start with)."""
    made: list[runtime.Sandbox] = []
    monkeypatch.setattr(sandbox, "_IDLE", [])

    def make() -> runtime.Sandbox:
        box = runtime.Sandbox()
        made.append(box)
        return box

    monkeypatch.setattr(sandbox, "Sandbox", make)
    return made


def golden() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return doc


def run(name: str) -> dict[str, Any]:
    return corpus.run_case(corpus.all_cases()[name])


# --- the corpus ------------------------------------------------------------------------------------------
def test_corpus_is_the_pinned_one() -> None:
    assert list(golden()) == sorted(corpus.all_cases())
    assert len(corpus.escape_cases()) >= 50 and len(corpus.HANDWRITTEN) >= 60


@pytest.mark.parametrize("order", ["forwards", "backwards"])
def test_reused_sandboxes_give_the_outcomes_of_the_build_every_call_sandbox(
        order: str, built: list[runtime.Sandbox]) -> None:
    want = golden()
    names = sorted(want) if order == "forwards" else sorted(want, reverse=True)
    got = {name: run(name) for name in names}
    for name in names:
        assert got[name] == want[name], name
    assert len(built) == 1  # one Sandbox served every call: it really was reused


# --- a halt does not poison the next call -----------------------------------------------------------------
@pytest.mark.parametrize(("first", "then"), [
    ("out_of_cycles_loop", "loop_sum"),
    ("out_of_cycles_caught", "trivial"),
    ("handler_error", "json_roundtrip"),
    ("recursion_small_limit", "recursion_lambda"),
    ("int_add_small_bits", "int_add_default"),
    ("host_halt", "host_other_tag"),
    ("memory_limit_small", "text_rendering"),
    ("bad_return_type", "classes"),
])
def test_the_next_call_on_the_same_sandbox_is_unaffected(first: str, then: str,
                                                         built: list[runtime.Sandbox]) -> None:
    want = golden()
    assert "error" in want[first]
    assert run(first) == want[first]
    assert run(then) == want[then]
    assert len(built) == 1


def test_a_pre_interrupted_meter_then_a_normal_call(built: list[runtime.Sandbox]) -> None:
    actor = compile_actor(corpus.HANDWRITTEN["loop_sum"][0])
    meter = Meter(10**9, 0)
    meter.interrupt("read_timeout", "deadline")
    with pytest.raises(PvmError) as stopped:
        call_handler(actor, "fire", b"5000", meter=meter)
    assert stopped.value.code == "read_timeout"
    assert run("loop_sum") == golden()["loop_sum"]
    assert len(built) == 1


def test_a_finished_calls_context_stays_halted() -> None:
    seen: list[pvm_ctx.Ctx | None] = []
    host = corpus.host(b"S")

    def look() -> bytes:
        seen.append(pvm_ctx.active())
        return b""

    host.look = look
    actor = compile_actor("import pvm_host\n\ndef fire(p):\n    return pvm_host.look()\n")
    assert call_handler(actor, "fire", b"", meter=Meter(10**6, 0), modules={"pvm_host": host}) == b""
    stale = seen[0]
    assert stale is not None
    with pytest.raises(PvmHalt) as halted:
        stale.charge(1)
    assert (halted.value.code, halted.value.message) == ("forbidden", "the call has finished")


# --- per-call values --------------------------------------------------------------------------------------
def test_limits_and_host_modules_are_those_of_each_call(built: list[runtime.Sandbox]) -> None:
    src = ("import pvm_host\n\ndef fire(p):\n    x = 1 << 40\n    return pvm_host.tag + str(x * x).encode()\n")
    actor = compile_actor(src)
    outcomes = []
    for tag, bits in [(b"A", 4096), (b"B", 64), (b"C", 4096), (b"D", 80), (b"E", 100)]:
        limits = Limits(max_int_bits=bits)
        try:
            outcomes.append(call_handler(actor, "fire", b"", meter=Meter(10**6, 0), limits=limits,
                                         modules={"pvm_host": corpus.host(tag)}))
        except PvmError as exc:
            outcomes.append(exc.code.encode())
    square = str(1 << 80).encode()
    assert outcomes == [b"A" + square, b"int_too_large", b"C" + square, b"int_too_large", b"E" + square]
    assert len(built) == 1


def test_an_idle_sandbox_keeps_nothing_of_its_last_call(built: list[runtime.Sandbox]) -> None:
    class Host:
        tag = b"W"

        def get_state(self, key: bytes) -> bytes:
            return key

    import gc
    import weakref

    host = Host()
    alive = weakref.ref(host)
    meter = Meter(10**6, 0)
    assert run("host_state")["ok"]  # the view of an earlier host module is in no cache either
    actor = compile_actor("import pvm_host\nimport json\n\ndef fire(p):\n    return pvm_host.get_state(b'k')\n")
    assert call_handler(actor, "fire", b"", meter=meter, modules={"pvm_host": host}) == b"k"
    (box,) = built
    assert box.ctx.meter is not meter and box.ctx.modules == {} and box.ctx.actor_classes == {}
    assert box.ctx.halted == runtime.FINISHED
    del host
    gc.collect()
    assert alive() is None


# --- nested and concurrent calls ---------------------------------------------------------------------------
INNER = "def fire(p):\n    x = 1 << 50\n    return str(x * x).encode()\n"
OUTER = """
import pvm_host

def fire(p):
    out = []
    for i in range(3):
        x = 1 << 100
        out.append(pvm_host.nested(bytes([i])) + b'|' + str(x * x).encode()[:6])
    return b','.join(out)
"""


def _nested_run() -> tuple[bytes, int, list[int], list[bytes]]:
    """OUTER calls INNER three times through a host function, under other limits (64-bit integers)."""
    inner = compile_actor(INNER)
    contexts: list[int] = []
    inner_results: list[bytes] = []

    def nested(payload: bytes) -> bytes:
        outer_ctx = pvm_ctx.active()
        assert outer_ctx is not None
        contexts.append(id(outer_ctx))
        try:
            inner_results.append(call_handler(inner, "fire", payload, meter=Meter(10**6, 0),
                                              limits=Limits(max_int_bits=64, max_recursion_depth=3)))
        except PvmError as exc:
            inner_results.append(exc.code.encode())
        assert pvm_ctx.active() is outer_ctx
        return inner_results[-1]

    host = corpus.host(b"N")
    host.nested = nested
    meter = Meter(10**6, 0)
    out = call_handler(compile_actor(OUTER), "fire", b"", meter=meter, modules={"pvm_host": host})
    return out, meter.cycles_used, contexts, inner_results


def test_a_nested_call_runs_in_another_sandbox_and_leaves_the_outer_one_intact(
        built: list[runtime.Sandbox], monkeypatch: pytest.MonkeyPatch) -> None:
    out, cycles, contexts, inner = _nested_run()
    assert len(built) == 2 and len(set(contexts)) == 1
    assert inner == [b"int_too_large"] * 3  # the inner call's limits...
    square = str(1 << 200).encode()[:6]
    assert out == b",".join(b"int_too_large|" + square for _ in range(3))  # ...not the outer's
    # the same run with a new Sandbox for every call (nothing reused): same cycles
    monkeypatch.setattr(sandbox, "_take_sandbox", runtime.Sandbox)
    assert _nested_run()[:2] == (out, cycles)


LOOP = """
import pvm_host

def fire(p):
    pvm_host.enter()
    t = 0
    for i in range(int(p)):
        t = t + i * i
    return str(t).encode()
"""


def test_two_threads_calling_at_once_get_their_own_sandboxes(built: list[runtime.Sandbox]) -> None:
    actor = compile_actor(LOOP)
    inside = [0]
    most = [0]
    lock = threading.Lock()

    def call(n: int, cycles: int) -> tuple[str, int]:
        entered = []

        def enter() -> bytes:
            with lock:
                entered.append(1)
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            return b""

        host = corpus.host(b"T")
        host.enter = enter
        meter = Meter(cycles, 0)
        try:
            return call_handler(actor, "fire", str(n).encode(), meter=meter, modules={"pvm_host": host}).decode(), \
                meter.cycles_used
        except PvmError as exc:
            return exc.code, meter.cycles_used
        finally:
            with lock:
                inside[0] -= len(entered)

    jobs: dict[str, list[tuple[int, int]]] = {
        "a": [(3000, 10**6), (2000, 5_000)] * 6,  # every other call runs out of cycles
        "b": [(2500, 10**6), (1500, 10**6)] * 6,
    }
    expected = {k: [call(n, c) for n, c in calls] for k, calls in jobs.items()}
    got: dict[str, list[tuple[str, int]]] = {}
    start = threading.Barrier(2)

    def worker(key: str) -> None:
        start.wait()
        got[key] = [call(n, c) for n, c in jobs[key]]

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so the calls overlap
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(old)
    assert got == expected
    assert most[0] == 2  # the two threads were inside a handler at the same time
    assert len(built) == 2


# --- the shared builtins ----------------------------------------------------------------------------------
@pytest.mark.parametrize("src", [
    "def fire(p):\n    __builtins__['len'] = None\n",
    "def fire(p):\n    return globals()\n",
    "def fire(p):\n    return vars(len)\n",
    "def fire(p):\n    return fire.__globals__\n",
    "def fire(p):\n    return _pvm_charge\n",
    "def fire(p):\n    return len.__self__\n",
    "def fire(p):\n    f = lambda: 0\n    return f.__builtins__\n",
    "def fire(p):\n    setattr(len, 'x', 1)\n",
])
def test_actor_code_cannot_name_the_builtins_or_the_helpers(src: str) -> None:
    with pytest.raises(ActorRejected):
        compile_actor(src)


WRITES = [name for name in corpus.HANDWRITTEN if name.startswith(("write_", "delete_", "rebind_"))]


def _snapshot(box: runtime.Sandbox) -> list[tuple[str, int, Any]]:
    out: list[tuple[str, int, Any]] = []
    for name, value in box.builtins.items():
        state: Any = vars(value).copy() if hasattr(value, "__dict__") else None
        if isinstance(value, runtime.GuardedType):
            state = (value._pvm_real, value._pvm_make)
        out.append((name, id(value), state))
    return out


def test_writes_to_the_shared_builtins_fail_as_before_and_change_nothing(built: list[runtime.Sandbox]) -> None:
    want = golden()
    assert run("trivial") == want["trivial"]
    (box,) = built
    before = _snapshot(box)
    for name in WRITES:
        assert run(name) == want[name], name
    assert run("after_rebind_builtins") == want["after_rebind_builtins"]
    assert _snapshot(box) == before
    assert len(built) == 1
    assert {want[n]["error"][0] for n in WRITES if n != "rebind_builtin_names"} == {"handler_error"}


def test_fresh_build_reference_has_the_same_names_as_a_sandbox() -> None:
    ctx = pvm_ctx.Ctx(Meter(10, 0), Limits())
    fresh: Callable[..., dict[str, Any]] = runtime.build_globals
    env = fresh(ctx, {}, ())
    assert list(env) == ["__builtins__", "__name__"]
    assert list(env["__builtins__"]) == list(runtime.Sandbox().builtins)

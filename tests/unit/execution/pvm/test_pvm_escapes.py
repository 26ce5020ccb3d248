"""PVM escape attempts: every vector in tests/vectors/pvm_escapes is refused or halted.

Each vector's first line is ``# expect: rejected <rule>`` or ``# expect: halted <code>``.
After every attack a benign actor must still run in the same process with exactly the
same result and cycle count (the sandbox and the host were not corrupted).
"""

from __future__ import annotations

import types
from functools import cache
from pathlib import Path

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected, PvmError, call_handler, compile_actor

VECTORS = sorted((Path(__file__).resolve().parents[3] / "vectors" / "pvm_escapes").glob("*.py"))
CYCLES = 5_000_000

BENIGN = '''
import json
import pvm_host

class Tally:
    def __init__(self):
        self.seen = {}

    def add(self, word):
        self.seen[word] = self.seen.get(word, 0) + 1

def handler(payload):
    t = Tally()
    for word in payload.decode().split():
        t.add(word)
    ranked = sorted(t.seen.items(), key=lambda kv: (-kv[1], kv[0]))
    return json.dumps({"ranked": ranked, "state": pvm_host.get_state(b"k").hex(), "big": str(3 ** 200)[:8]}).encode()
'''


def host() -> types.SimpleNamespace:
    return types.SimpleNamespace(get_state=lambda key: b"value:" + key)


def run_benign() -> tuple[bytes, int]:
    meter = Meter(CYCLES, 0)
    modules = {"pvm_host": host()}
    actor = compile_actor(BENIGN, allowed_modules=modules)
    return call_handler(actor, "handler", b"b a c a b a", meter=meter, modules=modules), meter.cycles_used


@cache
def baseline() -> tuple[bytes, int]:
    return run_benign()


def expectation(path: Path) -> tuple[str, str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    marker, kind, what = first.split(":", 1)[0], *first.split(":", 1)[1].split()
    assert marker == "# expect" and kind in ("rejected", "halted"), first
    return kind, what


def test_there_are_enough_vectors() -> None:
    assert len(VECTORS) >= 30
    assert baseline()[0].startswith(b'{"ranked": [["a", 3], ["b", 2], ["c", 1]]')


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_escape_vector(path: Path) -> None:
    expected_baseline = baseline()
    kind, what = expectation(path)
    source = path.read_text(encoding="utf-8")
    shared_host = host()
    modules = {"pvm_host": shared_host}
    before = dict(vars(shared_host))
    if kind == "rejected":
        with pytest.raises(ActorRejected) as rejected:
            compile_actor(source, allowed_modules=modules)
        assert rejected.value.rule == what, rejected.value
        assert rejected.value.line >= 1
    else:
        actor = compile_actor(source, allowed_modules=modules)
        meter = Meter(CYCLES, 0)
        with pytest.raises(PvmError) as halted:
            call_handler(actor, "handler", b"", meter=meter, modules=modules)
        assert halted.value.code == what, halted.value
        assert meter.cycles_used <= CYCLES
    assert vars(shared_host) == before
    assert run_benign() == expected_baseline


def test_real_package_as_host_module_hides_what_it_imported() -> None:
    import json as real_json  # a real package standing in for a host package such as cowboy_sdk

    modules = {"pvm_host": real_json}
    src = "import pvm_host\n\ndef handler(payload):\n    return pvm_host.dumps([1]).encode()\n"
    assert call_handler(compile_actor(src, allowed_modules=modules), "handler", b"", meter=Meter(CYCLES, 0),
                        modules=modules) == b"[1]"
    escape = "import pvm_host\n\ndef handler(payload):\n    return repr(pvm_host.decoder.re).encode()\n"
    with pytest.raises(PvmError) as info:
        call_handler(compile_actor(escape, allowed_modules=modules), "handler", b"", meter=Meter(CYCLES, 0),
                     modules=modules)
    assert info.value.code == "handler_error" and "does not export 're'" in info.value.message

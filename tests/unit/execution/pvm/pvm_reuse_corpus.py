"""Actor calls whose outcomes must not depend on how the sandbox is set up (fresh per call or reused).

Used by ``test_pvm_sandbox_reuse.py``; also a script: ``python tests/unit/execution/pvm/pvm_reuse_corpus.py``
prints every case's outcome as JSON.  ``tests/vectors/pvm_reuse/golden_8cb54ba.json`` is that output
taken at commit 8cb54ba (the last build-every-call sandbox), from a ``git worktree`` of it::

    git worktree add /tmp/h1base 8cb54ba
    PYTHONPATH=/tmp/h1base python tests/unit/execution/pvm/pvm_reuse_corpus.py \
        > tests/vectors/pvm_reuse/golden_8cb54ba.json

This module uses only the PVM's public API of that commit (``compile_actor``, ``call_handler``, ``Meter``,
``Limits``), so the same file runs against both versions.  The cases: every escape vector that compiles
(``tests/vectors/pvm_escapes``, each halts), then hand-written actors exercising each per-call value of
the sandbox (meter, limits, host modules, imports, classes, call depth), error texts that name helper
functions, and attempts to write attributes of the shared builtins.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected, PvmError, call_handler, compile_actor
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.validity_errors import TxFailed

ROOT = Path(__file__).resolve().parents[4]
ESCAPES = sorted((ROOT / "tests" / "vectors" / "pvm_escapes").glob("*.py"))
CYCLES = 5_000_000


def host(tag: bytes = b"A") -> types.SimpleNamespace:
    """A host module: ``tag`` tells two hosts apart in results."""

    def fail(code: str) -> bytes:
        raise TxFailed(code, f"host refused ({code})")

    return types.SimpleNamespace(get_state=lambda key: tag + b":" + key, fail=fail, tag=tag)


#: name -> (source, handler, payload, cycles limit, Limits overrides, host tag or None for no host modules)
Case = tuple[str, str, bytes, int, dict[str, int], "bytes | None"]

HANDWRITTEN: dict[str, Case] = {
    "trivial": ("def fire(p):\n    return b''\n", "fire", b"", CYCLES, {}, None),
    "returns_none": ("def fire(p):\n    pass\n", "fire", b"", CYCLES, {}, None),
    "bad_return_type": ("def fire(p):\n    return 'text'\n", "fire", b"", CYCLES, {}, None),
    "no_such_handler": ("def fire(p):\n    return b''\n", "other", b"", CYCLES, {}, None),
    "echo_payload": ("def fire(p):\n    return p + p\n", "fire", b"abc", CYCLES, {}, None),
    "payload_too_large": ("def fire(p):\n    return p\n", "fire", b"12345", CYCLES, {"max_payload_bytes": 4}, None),
    "return_too_large": ("def fire(p):\n    return b'123'\n", "fire", b"", CYCLES, {"max_return_bytes": 2}, None),
    "handler_error": ("def fire(p):\n    raise ValueError('bad ' + str(len(p)))\n", "fire", b"xy", CYCLES, {}, None),
    "key_error_repr": ("def fire(p):\n    d = {'a': [1, 2.5, None]}\n    return d['b']\n",
                       "fire", b"", CYCLES, {}, None),
    "out_of_cycles_loop": ("def fire(p):\n    n = 0\n    while True:\n        n += 1\n", "fire", b"", 20_000, {}, None),
    "out_of_cycles_caught": (
        "def fire(p):\n    n = 0\n    while True:\n        try:\n            n += 1\n"
        "        except Exception:\n            pass\n", "fire", b"", 7_777, {}, None),
    "loop_sum": (
        "def fire(p):\n    t = 0\n    for i in range(int(p)):\n        t = t + i * 3 - (i // 2) % 7\n"
        "    return str(t).encode()\n", "fire", b"5000", CYCLES, {}, None),
    "recursion_default": (
        "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n\ndef fire(p):\n    return str(f(int(p))).encode()\n",
        "fire", b"200", CYCLES, {}, None),
    "recursion_small_limit": (
        "def f(n):\n    return 0 if n == 0 else 1 + f(n - 1)\n\ndef fire(p):\n    return str(f(int(p))).encode()\n",
        "fire", b"10", CYCLES, {"max_recursion_depth": 5}, None),
    "recursion_lambda": ("def fire(p):\n    g = lambda n: 0 if n == 0 else g(n - 1)\n    return str(g(100)).encode()\n",
                         "fire", b"", CYCLES, {"max_recursion_depth": 50}, None),
    "recursion_caught_then_ok": (
        "def f(n):\n    return f(n + 1)\n\ndef fire(p):\n    try:\n        f(0)\n    except Exception as e:\n"
        "        return b'caught'\n    return b'no'\n", "fire", b"", CYCLES, {}, None),
    "int_add_default": ("def fire(p):\n    x = 1 << 4000\n    return str(x + x).encode()[:10]\n",
                        "fire", b"", CYCLES, {}, None),
    "int_add_small_bits": ("def fire(p):\n    x = 1 << 63\n    return str(x + x).encode()\n", "fire", b"", CYCLES,
                           {"max_int_bits": 64}, None),
    "int_mul_small_bits": ("def fire(p):\n    x = 1 << 20\n    return str(x * x).encode()\n", "fire", b"", CYCLES,
                           {"max_int_bits": 32}, None),
    "int_mul_fits": ("def fire(p):\n    x = 1 << 15\n    return str(x * x).encode()\n", "fire", b"", CYCLES,
                     {"max_int_bits": 32}, None),
    "int_iadd_small_bits": ("def fire(p):\n    x = 1\n    while True:\n        x += x\n", "fire", b"", CYCLES,
                            {"max_int_bits": 40}, None),
    "int_isub_small_bits": ("def fire(p):\n    x = -1\n    while True:\n        x -= 1 << 30\n", "fire", b"", CYCLES,
                            {"max_int_bits": 34}, None),
    "int_invert_pow": ("def fire(p):\n    return str(~(3 ** 40) + pow(3, 5, 7)).encode()\n", "fire", b"", CYCLES,
                       {"max_int_bits": 128}, None),
    "memory_limit_bytes": ("def fire(p):\n    return b'x' * (1 << 25)\n", "fire", b"", CYCLES, {}, None),
    "memory_limit_small": ("def fire(p):\n    return b'x' * 100\n",
                           "fire", b"", CYCLES, {"max_bytes_object": 64}, None),
    "items_limit": ("def fire(p):\n    return bytes(len(list(range(50))))\n", "fire", b"", CYCLES,
                    {"max_collection_items": 10}, None),
    "json_roundtrip": (
        "import json\n\ndef fire(p):\n    d = json.loads(p)\n    d['n'] = d['n'] * 2\n"
        "    return json.dumps(d, sort_keys=True).encode()\n", "fire", b'{"n": 21, "s": "x"}', CYCLES, {}, None),
    "json_nesting_limit": ("import json\n\ndef fire(p):\n    return json.dumps(json.loads(p)).encode()\n", "fire",
                           b"[[[[[[[[1]]]]]]]]", CYCLES, {"max_nesting_depth": 4}, None),
    "math_calls": (
        "import math\n\ndef fire(p):\n    return str([math.isqrt(10 ** 30), math.gcd(12, 18), math.factorial(20),"
        " math.floor(2.5), math.comb(30, 7)]).encode()\n", "fire", b"", CYCLES, {}, None),
    "math_arity_error": ("import math\n\ndef fire(p):\n    return str(math.isqrt(1, 2)).encode()\n", "fire", b"",
                         CYCLES, {}, None),
    "math_factorial_limit": ("import math\n\ndef fire(p):\n    return str(math.factorial(100)).encode()\n", "fire",
                             b"", CYCLES, {"max_int_bits": 256}, None),
    "typing_import": ("from typing import Any, Optional\n\ndef fire(p: Any) -> Optional[bytes]:\n    return b'ok'\n",
                      "fire", b"", CYCLES, {}, None),
    "import_twice_same_view": ("import json\nimport json as j2\n\ndef fire(p):\n    return bytes([json is j2])\n",
                               "fire", b"", CYCLES, {}, None),
    "host_state": ("import pvm_host\n\ndef fire(p):\n    return pvm_host.get_state(p) + pvm_host.tag\n", "fire",
                   b"key", CYCLES, {}, b"H1"),
    "host_other_tag": ("import pvm_host\n\ndef fire(p):\n    return pvm_host.get_state(p) + pvm_host.tag\n", "fire",
                       b"key", CYCLES, {}, b"H2"),
    "host_halt": ("import pvm_host\n\ndef fire(p):\n    try:\n        pvm_host.fail('timer_bad')\n"
                  "    except Exception:\n        return b'swallowed'\n", "fire", b"", CYCLES, {}, b"H1"),
    "host_missing_module": ("import pvm_host\n\ndef fire(p):\n    return b''\n", "fire", b"", CYCLES, {}, None),
    "host_missing_attr": ("from pvm_host import nothing\n\ndef fire(p):\n    return b''\n", "fire", b"", CYCLES, {},
                          b"H1"),
    "classes": (
        "class Box:\n    def __init__(self, v):\n        self.v = v\n\n    def get(self):\n        return self.v\n\n"
        "class Sub(Box):\n    def __init__(self, v):\n        Box.__init__(self, v * 2)\n\n"
        "def fire(p):\n    b = Sub(3)\n    b.w = 4\n    return bytes([b.get(), b.w])\n", "fire", b"", CYCLES, {}, None),
    "init_arity_error": ("class A:\n    def __init__(self, x):\n        self.x = x\n\ndef fire(p):\n    A.__init__()\n",
                         "fire", b"", CYCLES, {}, None),
    "init_wrong_self": ("class A:\n    def __init__(self, x):\n        self.x = x\n\ndef fire(p):\n"
                        "    A.__init__(len, 1)\n", "fire", b"", CYCLES, {}, None),
    "exception_subclass": ("class Oops(ValueError):\n    pass\n\ndef fire(p):\n    raise Oops('custom', 7)\n",
                           "fire", b"", CYCLES, {}, None),
    "write_builtin_function": ("def fire(p):\n    len.x = 1\n", "fire", b"", CYCLES, {}, None),
    "write_guarded_builtin": ("def fire(p):\n    isinstance.x = 1\n", "fire", b"", CYCLES, {}, None),
    "write_guarded_type": ("def fire(p):\n    list.x = 1\n", "fire", b"", CYCLES, {}, None),
    "delete_guarded_type_attr": ("def fire(p):\n    del dict.fromkeys\n", "fire", b"", CYCLES, {}, None),
    "write_exception_class": ("def fire(p):\n    ValueError.x = 1\n", "fire", b"", CYCLES, {}, None),
    "write_module_view": ("import json\n\ndef fire(p):\n    json.dumps = None\n", "fire", b"", CYCLES, {}, None),
    "write_host_view": ("import pvm_host\n\ndef fire(p):\n    pvm_host.tag = b'X'\n", "fire", b"", CYCLES, {}, b"H1"),
    "write_method_of_builtin": ("def fire(p):\n    f = 'a'.upper\n    f.x = 1\n", "fire", b"", CYCLES, {}, None),
    "rebind_builtin_names": (
        "len = 5\n\ndef fire(p):\n    global str\n    str = None\n    return bytes([len])\n", "fire", b"", CYCLES, {},
        None),
    "after_rebind_builtins": ("def fire(p):\n    return str(len('abc')).encode()\n", "fire", b"", CYCLES, {}, None),
    "subclass_builtin_type": ("class L(list):\n    pass\n\ndef fire(p):\n    return b''\n", "fire", b"", CYCLES, {},
                              None),
    "text_rendering": (
        "def fire(p):\n    d = {'k': [1, 'é', b'\\x00', 2.5, None, (True,)]}\n"
        "    s = f'{d!r}|{3.14159:.3f}|{\"x\":>5}'\n"
        "    return (s + '%s-%d' % ('a', 4) + repr(ValueError('v'))).encode()\n", "fire", b"", CYCLES, {}, None),
    "sorting_and_dicts": (
        "def fire(p):\n    words = p.decode().split()\n    c = {}\n    for w in words:\n"
        "        c[w] = c.get(w, 0) + 1\n"
        "    r = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))\n    return repr(r).encode()\n", "fire",
        b"b a c a b a d", CYCLES, {}, None),
    "unicode_methods": ("def fire(p):\n    s = 'İstanbul ǅemal straße'\n    return (s.upper() + s.lower() + s.title())"
                        ".encode()\n", "fire", b"", CYCLES, {}, None),
    "dict_bad_key": ("def fire(p):\n    d = {}\n    d[(1, [2])] = 3\n", "fire", b"", CYCLES, {}, None),
    "float_pow_forbidden": ("def fire(p):\n    return str(2.0 ** 0.5).encode()\n", "fire", b"", CYCLES, {}, None),
    "class_method_guard": ("def fire(p):\n    return repr(dict.fromkeys(['a', 'b'], 0)).encode() + "
                           "int.from_bytes(b'\\x01\\x02', 'big').to_bytes(2, 'little')\n",
                           "fire", b"", CYCLES, {}, None),
    "unbound_method_wrong_arg": ("def fire(p):\n    return str.upper(5)\n", "fire", b"", CYCLES, {}, None),
    "attr_not_routed": ("def fire(p):\n    x = (1).real\n", "fire", b"", CYCLES, {}, None),
    "deep_data_repr": ("def fire(p):\n    x = []\n    for i in range(20):\n        x = [x]\n"
                       "    return repr(x).encode()\n", "fire", b"", CYCLES, {"max_nesting_depth": 8}, None),
}


def escape_cases() -> dict[str, Case]:
    """The escape vectors that compile (``# expect: halted``), run as in ``test_pvm_escapes``."""
    out: dict[str, Case] = {}
    for path in ESCAPES:
        if "# expect: halted" not in path.read_text(encoding="utf-8").splitlines()[0]:
            continue
        out[f"escape/{path.stem}"] = (path.read_text(encoding="utf-8"), "handler", b"", CYCLES, {}, b"E")
    return out


def all_cases() -> dict[str, Case]:
    return {**escape_cases(), **HANDWRITTEN}


def run_case(case: Case) -> dict[str, Any]:
    """The case's outcome: returned bytes (hex) or error code and message, and the cycles used."""
    source, handler, payload, cycles, overrides, tag = case
    limits = Limits(**overrides)
    modules: dict[str, object] = {} if tag is None else {"pvm_host": host(tag)}
    try:
        actor = compile_actor(source, limits=limits, allowed_modules={"pvm_host": None, "cowboy_sdk": None})
    except ActorRejected as exc:
        return {"rejected": [exc.line, exc.rule, exc.message]}
    meter = Meter(cycles, 0)
    try:
        out = call_handler(actor, handler, payload, meter=meter, limits=limits, modules=modules)
    except PvmError as exc:
        return {"error": [exc.code, exc.message], "cycles": meter.cycles_used}
    return {"ok": out.hex(), "cycles": meter.cycles_used}


def main() -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    print(json.dumps({name: run_case(case) for name, case in all_cases().items()}, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

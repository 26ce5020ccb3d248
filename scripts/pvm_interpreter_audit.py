#!/usr/bin/env python3
"""Audit of what actors see of CPython's builtins, across interpreters.

    python3 scripts/pvm_interpreter_audit.py .venv/bin/python .venv-3.12/bin/python .venv-3.13/bin/python [--check]

Two probes per interpreter (each a venv's python with the project's dependencies; ``--raw-only`` needs none):

* ``cpython``: CPython itself. Calls every builtin function, every public method of
  str/bytes/bytearray/list/tuple/dict/set/int/float and every ``math`` function with a fixed set of
  argument lists (none, ``None``, text, five ints, a negative, a float, a list; with and without an unknown
  keyword) and records each outcome as ``Type: message`` or "returned".
* ``pvm``: what an actor reaches, through the PVM (``cowboy_node/execution/pvm``): every builtin of the
  actor's builtins dict, every method the PVM routes (``methods.GUARDED_METHOD_NAMES``; the others halt
  ``forbidden`` everywhere) on str/bytes/bytearray/list/tuple/dict/int/float/range, the class-level
  constructors, the ``math``/``json`` views, twenty operators over twelve operands, and fifty statements run
  as real actors (arity and unpacking errors, ``NameError``, subscripts, formatting...), with more argument
  lists (bytes, two texts, two ints, a 71-bit int; keywords that exist somewhere: ``key``, ``count``, ``sep``,
  ``keepends``, ``default``). Each outcome is rendered as a receipt renders it (``describe_exception``), a
  halt as its code and message, a return as ``returned`` and the PVM's repr of the value.

Prints one JSON object: for each interpreter after the first and each probe, how many probes have another
outcome than under the first, split into *behaviour* (one raises, the other returns) and *text* (other
exception types, messages or returned values), with examples. ``--check`` exits 1 when the ``pvm`` probe
differs anywhere: such a difference reaches receipts or state, and the interpreter must not be listed in
``VALIDATED_INTERPRETERS`` (``cowboy_node/execution/pvm/version.py``, docs/pvm.md "PVM versions").

Result (2026-12-02, CPython 3.11.7 the reference; 4,074 cpython probes, 20,382 pvm probes):

=============  ==================================  ==================================
interpreter    before pvm/canon.py (cpython, pvm)  after (cpython, pvm)
=============  ==================================  ==================================
3.12.1         37 (12+25), 34 (19+15)              37 (12+25), 0
3.13.0         465 (12+453), 1891 (21+1870)        465 (12+453), 0
=============  ==================================  ==================================

(behaviour+text.) CPython's own differences stay (``splitlines`` accepts a non-int ``keepends``; ``max([])``,
``math.log``, and in 3.13 the argument-error texts of most builtins reworded); the PVM pins what actors reach
of them to 3.11's argument handling and wording (``pvm/canon.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import builtins, json, math
objs = {"str": "abc", "bytes": b"abc", "bytearray": bytearray(b"a"), "list": [1, 2], "tuple": (1,),
        "dict": {1: 2}, "set": {1}, "int": 5, "float": 1.5}
argsets = [(), (None,), ("a",), (1, 2, 3, 4, 5), (-1,), (1.5,), ([],)]
out = {}
def probe(name, f):
    for a in argsets:
        for k in ({}, {"x": 1}):
            try:
                f(*a, **k)
                out[f"{name}{a!r}{k!r}"] = "returned"
            except Exception as e:
                out[f"{name}{a!r}{k!r}"] = f"{type(e).__name__}: {e}"
skip = {"input", "print", "open", "help", "breakpoint", "exit", "quit", "exec", "eval", "compile", "__import__",
        "memoryview", "aiter", "anext", "globals", "locals", "vars", "dir", "copyright", "credits", "license",
        "id", "hash", "object", "type", "super", "property", "classmethod", "staticmethod", "delattr", "setattr"}
for n in sorted(dir(builtins)):
    f = getattr(builtins, n)
    if n.startswith("_") or n in skip or not callable(f) or (isinstance(f, type) and issubclass(f, BaseException)):
        continue
    probe(n, f)
for tn, o in objs.items():
    for m in sorted(dir(o)):
        if not m.startswith("_") and callable(getattr(o, m)):
            probe(f"{tn}.{m}", getattr(o, m))
for m in sorted(dir(math)):
    if not m.startswith("_") and callable(getattr(math, m)):
        probe(f"math.{m}", getattr(math, m))
print(json.dumps(out))
'''

PVM_PROBE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import methods, runtime, text
from cowboy_node.execution.pvm.ctx import ACTIVE, Ctx
from cowboy_node.execution.pvm.pvm_errors import PvmError, PvmHalt
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.sandbox import call_handler, compile_actor, describe_exception

ctx = Ctx(Meter(1 << 50, 0), Limits())
env = runtime.build_globals(ctx, {}, ("math", "json"))["__builtins__"]
ACTIVE.set(ctx)
objs = {"str": lambda: "abc", "bytes": lambda: b"abc", "bytearray": lambda: bytearray(b"a"),
        "list": lambda: [1, 2], "tuple": lambda: (1,), "dict": lambda: {1: 2}, "int": lambda: 5,
        "float": lambda: 1.5, "range": lambda: range(3)}
argsets = [(), (None,), ("a",), (1, 2, 3, 4, 5), (-1,), (1.5,), ([],), (b"a",), ("a", "b"), (2, 1), (1 << 70,)]
kwsets = ({}, {"x": 1}, {"key": None}, {"count": 1}, {"sep": "a"}, {"keepends": True}, {"default": 0})
out = {}

def outcome(f, a, k):
    ctx.halted = None
    ctx.depth = 0
    try:
        r = f(*a, **k)
    except PvmHalt as h:
        ctx.halted = None
        return f"halt {h.code}: {h.message}"
    except Exception as e:
        return describe_exception(e)
    try:
        return "returned " + text.safe_repr(ctx, r)[:200]
    except BaseException:
        ctx.halted = None
        return "returned <unrenderable>"

def probe(name, make_f):
    for a in argsets:
        for k in kwsets:
            out[f"{name}{a!r}{k!r}"] = outcome(make_f(), a, k)

for n in sorted(env):
    f = env[n]
    if n.startswith("_") or not callable(f) or (isinstance(f, type) and issubclass(f, BaseException)):
        continue
    probe(n, lambda f=f: f)
callm = env["_pvm_callm"]
for tn, make in objs.items():
    for m in sorted(dir(make())):
        if m.startswith("_") or not callable(getattr(make(), m)):
            continue
        if m not in methods.GUARDED_METHOD_NAMES:
            continue  # actor code cannot name it: _pvm_attr/_pvm_callm halt 'forbidden' on every interpreter
        probe(f"{tn}.{m}", lambda make=make, m=m: (lambda *a, **k: callm(make(), m, *a, **k)))
    for m in sorted(methods.CLASS_METHODS):
        if hasattr(type(make()), m):
            probe(f"{tn}:{m}", lambda tn=tn, m=m: (lambda *a, **k: callm(env.get(tn, range), m, *a, **k)))
for mod in ("math", "json"):
    view = env["_pvm_import"](mod)
    names = [n for n in ("isqrt gcd lcm factorial comb perm fsum floor ceil trunc sqrt fabs copysign fmod modf frexp "
                         "ldexp isfinite isinf isnan dumps loads").split() if hasattr(view, n)]
    for n in names:
        probe(f"{mod}.{n}", lambda view=view, n=n: getattr(view, n))
ops = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lshift", "bitor", "bitand", "bitxor", "eq", "lt",
       "gte", "in", "getitem", "iadd", "imul", "isub", "delitem"]
operands = {"str": "abc", "bytes": b"ab", "list": [1], "tuple": (1,), "dict": {1: 2}, "int": 5, "float": 1.5,
            "None": None, "neg": -1, "zero": 0, "big": 1 << 70, "range": range(2)}
for op in ops:
    f = env["_pvm_" + op]
    for an, a in operands.items():
        for bn, b in operands.items():
            out[f"op:{op}({an},{bn})"] = outcome(lambda: f(a if not isinstance(a, list | dict) else a.copy(), b),
                                                  (), {})
SNIPPETS = {
    "arity": "def f(a):\n    return a\nf(1, 2)",
    "arity_kw": "def f(a):\n    return a\nf(b=1)",
    "missing": "def f(a, b):\n    return a\nf()",
    "kwonly": "def f(*, a):\n    return a\nf(1)",
    "unpack_many": "a, b = [1, 2, 3]",
    "unpack_few": "a, b, c = [1, 2]",
    "unpack_int": "a, b = 5",
    "name": "undefined_name",
    "attr_int": "(5).nothing",
    "not_callable": "(5)()",
    "not_iterable": "for x in 5:\n    pass",
    "not_subscriptable": "(5)[0]",
    "index_range": "[1][3]",
    "str_index": "'a'[5]",
    "tuple_assign": "t = (1,)\nt[0] = 2",
    "str_assign": "s = 'a'\ns[0] = 'b'",
    "key": "{}['k']",
    "unhashable": "{[1]: 2}",
    "zero_div": "1 / 0",
    "zero_mod": "1 % 0",
    "float_zero": "1.0 / 0",
    "neg_shift": "1 << -1",
    "concat": "'a' + 1",
    "compare": "'a' < 1",
    "unary": "-'a'",
    "format_spec": "f'{5:q}'",
    "fmt_arg": "'%d' % 'a'",
    "fmt_few": "'%s %s' % (1,)",
    "class_arity": "class A:\n    def __init__(self, a):\n        self.a = a\nA()",
    "method_arity": "class A:\n    def m(self):\n        return 1\nA().m(2)",
    "int_text": "int('x1')",
    "float_text": "float('x1')",
    "chr": "chr(-1)",
    "next": "next(iter([]))",
    "raise_custom": "raise ValueError('mine')",
    "assert": "assert False, 'no'",
    "dict_iter": "d = {1: 2}\nfor k in d:\n    d[k + 1] = 0",
    "list_remove": "[1].remove(3)",
    "dict_pop": "{}.pop('k')",
    "starred_kw": "def f(**k):\n    return k\nf(**{1: 2})",
    "kw_twice": "def f(a):\n    return a\nf(1, a=2)",
    "max_empty": "max([])",
    "min_empty": "min([])",
    "sum_str": "sum(['a'])",
    "sorted_mixed": "sorted([1, 'a'])",
    "round_str": "round('a')",
    "bytes_neg": "bytes(-1)",
    "int_base": "int('1', 99)",
    "splitlines_none": "'a\\nb'.splitlines(None)",
    "replace_kw": "'aaa'.replace('a', 'b', count=1)",
}
for name, body in SNIPPETS.items():
    src = ("def run(payload):\n    try:\n" + "".join("        " + line + "\n" for line in body.splitlines())
           + "    except Exception as e:\n        return (repr(e) + ' | ' + str(e)).encode()\n    return b'ok'\n"
           "def bare(payload):\n" + "".join("    " + line + "\n" for line in body.splitlines()) + "    return b'ok'\n")
    try:
        actor = compile_actor(src, allowed_modules={})
    except Exception as e:
        out[f"actor:{name}"] = "rejected " + str(e)
        continue
    for handler in ("run", "bare"):
        try:
            out[f"actor:{name}:{handler}"] = "returned " + call_handler(actor, handler, b"",
                                                                       meter=Meter(10**8, 0)).decode()
        except PvmError as e:
            out[f"actor:{name}:{handler}"] = f"halt {e.code}: {e.message}"
print(json.dumps(out))
'''


def _run(python: str, probe: str) -> dict[str, str]:
    done = subprocess.run([python, "-W", "ignore", "-c", probe, str(ROOT)], capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{python}: the probe failed:\n{done.stderr[-2000:]}")
    result: dict[str, str] = json.loads(done.stdout)
    return result


def compare(ref: dict[str, str], res: dict[str, str], examples: int) -> dict[str, object]:
    """Counts of probes whose outcome differs from the reference's: behaviour (one raises, the other
    returns) and text (both raise, or both return, with other types, messages or values)."""
    common = [k for k in ref if k in res]
    behaviour = [k for k in common if ref[k].startswith("returned") != res[k].startswith("returned")]
    text = [k for k in common if ref[k] != res[k] and k not in behaviour]
    return {"compared": len(common), "missing": len(ref) - len(common), "behaviour": len(behaviour),
            "text": len(text),
            "examples": [{"probe": k, "reference": ref[k], "this": res[k]}
                         for k in (behaviour[:examples] + text[:examples])]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pythons", nargs="+", help="the first one is the reference (CPython 3.11); each needs the "
                        "project's dependencies installed (a venv's python) for the PVM probe")
    parser.add_argument("--examples", type=int, default=5, help="differing probes shown per kind")
    parser.add_argument("--raw-only", action="store_true", help="only CPython's own builtins (no venv needed)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when an interpreter differs from the reference in what actors see (the PVM probe)")
    args = parser.parse_args()
    probes = {"cpython": PROBE} if args.raw_only else {"cpython": PROBE, "pvm": PVM_PROBE}
    runs = {kind: [_run(py, probe) for py in args.pythons] for kind, probe in probes.items()}
    report: dict[str, object] = {"reference": args.pythons[0],
                                 "probes": {kind: len(res[0]) for kind, res in runs.items()}}
    for i, py in enumerate(args.pythons[1:], start=1):
        report[py] = {kind: compare(res[0], res[i], args.examples) for kind, res in runs.items()}
    print(json.dumps(report, indent=1))
    if args.check and "pvm" in probes:
        differing = [py for py in args.pythons[1:] if any(
            report[py]["pvm"][kind] for kind in ("behaviour", "text", "missing"))]  # type: ignore[index]
        if differing:
            raise SystemExit(f"actor-visible differences from {args.pythons[0]} under: {', '.join(differing)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Audit of the CPython builtins an actor can reach, across interpreters.

    python3 scripts/pvm_interpreter_audit.py python3.11 ~/.pyenv/versions/3.12.1/bin/python3 \
        ~/.pyenv/versions/3.13.0/bin/python3

Calls every builtin function, every public method of str/bytes/bytearray/list/tuple/dict/set/int/float
and every ``math`` function with a fixed set of argument lists (none, ``None``, text, five ints, a
negative, a float, a list; with and without an unknown keyword) and records each outcome as
``Type: message`` or "returned". Prints one JSON object: for each interpreter after the first, how
many probes have another outcome than under the first, split into *behaviour* (one raises, the other
returns) and *text* (both raise, with other types or messages), with examples. These outcomes reach
actors through the PVM's plain pass-through of builtins, so a difference means the interpreter is not
validated for the PVM version (``cowboy_node/execution/pvm/version.py``, docs/pvm.md "PVM versions").

Result (2026-11-27): of 4,074 probes CPython 3.12.1 differs from 3.11.7 in 37 (12 behaviour:
``splitlines`` accepts a non-int ``keepends``; 25 text: ``max([])``, ``math.log``, ``math.nextafter``),
3.13.0 in 465 (the same 12 behaviour; 453 text: the argument-error texts of most builtins were reworded).
"""

from __future__ import annotations

import argparse
import json
import subprocess

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pythons", nargs="+", help="the first one is the reference (CPython 3.11)")
    args = parser.parse_args()
    runs = [json.loads(subprocess.run([py, "-W", "ignore", "-c", PROBE], capture_output=True, text=True,
                                      check=True, timeout=600).stdout) for py in args.pythons]
    ref = runs[0]
    report: dict[str, object] = {"reference": args.pythons[0], "probes": len(ref)}
    for py, res in zip(args.pythons[1:], runs[1:], strict=True):
        common = [k for k in ref if k in res]
        behaviour = [k for k in common if (ref[k] == "returned") != (res[k] == "returned")]
        text = [k for k in common if ref[k] != res[k] and k not in behaviour]
        report[py] = {"compared": len(common), "behaviour": len(behaviour), "text": len(text),
                      "examples": [{"probe": k, "reference": ref[k], "this": res[k]}
                                   for k in (behaviour[:5] + text[:5])]}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

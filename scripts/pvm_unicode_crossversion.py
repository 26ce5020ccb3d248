#!/usr/bin/env python3
"""Print a digest of the PVM's pinned str semantics over 20,000 random strings, and how often
the running interpreter's own ``str`` methods disagree with them.

Run it with every Python you have (it needs no installed dependency)::

    for py in python3.11 python3.12 python3.13; do $py scripts/pvm_unicode_crossversion.py; done

Every interpreter must print the same digest (the pinned results do not depend on it);
the disagreement count is 0 only on CPython 3.11, whose tables are the pinned ones.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import sys
import types
import unicodedata
from pathlib import Path

PVM = Path(__file__).resolve().parent.parent / "cowboy_node" / "execution" / "pvm"


def _load(name: str) -> types.ModuleType:
    """Load one PVM module by path, without importing the node's dependencies."""
    spec = importlib.util.spec_from_file_location(f"cowboy_node.execution.pvm.{name}", PVM / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    setattr(sys.modules["cowboy_node.execution.pvm"], name, mod)
    return mod


def _stub_packages() -> None:
    """Empty parent packages, so the PVM modules load without the node's dependencies."""
    for pkg in ("cowboy_node", "cowboy_node.execution", "cowboy_node.execution.pvm"):
        stub = types.ModuleType(pkg)
        stub.__path__ = []
        sys.modules.setdefault(pkg, stub)


def main() -> None:
    _stub_packages()
    _load("costs")
    _load("unicode_tables")
    u = _load("unistr")
    rnd = random.Random(1)
    pool = ([chr(c) for c in range(0, 0x3000, 3)] + [chr(c) for c in range(0x1F900, 0x1FB00)]
            + [chr(c) for c in range(0x10000, 0x10500)] + ["\u03a3", " ", "'", '"', "\u0345", "\u0660", "\u2028"] * 30)
    digest = hashlib.sha256()
    differs = 0
    for _ in range(20000):
        s = "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 10)))
        pinned = ([u.predicate(n, s) for n in sorted(u.PREDICATES)] + [f(s) for f in u.MAPPINGS.values()]
                  + [u.repr_str(s), u.strip(s, "strip"), u.split(s, -1), u.rsplit(s, 1), u.splitlines(s, True)])
        native = ([getattr(s, n)() for n in sorted(u.PREDICATES)] + [getattr(s, n)() for n in u.MAPPINGS]
                  + [repr(s), s.strip(), s.split(), s.rsplit(None, 1), s.splitlines(True)])
        differs += pinned != native
        digest.update(ascii([*pinned, u.number_ascii(s)]).encode())
    print(f"python {sys.version.split()[0]} unicode {unicodedata.unidata_version}: pinned digest "
          f"{digest.hexdigest()[:16]}; native str methods differ on {differs} of 20000 strings")


if __name__ == "__main__":
    main()

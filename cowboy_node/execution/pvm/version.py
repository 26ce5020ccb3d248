"""PVM versions: what an actor call's result depends on, fixed per chain by ``genesis.json``.

A PVM version fixes, for every validator whatever its Python interpreter:

* the grammar accepted at deploy time (:mod:`grammar`: Python 3.11's),
* the Unicode data of every table-dependent ``str`` operation (:mod:`unicode_tables`,
  Unicode 14.0.0, applied by :mod:`unistr`),
* the cost table (:mod:`costs`) and the limits' defaults (:mod:`limits`).

A node refuses to start on a genesis whose ``pvm_version`` it does not implement (see
``cowboy_node.chain.genesis``), and on an interpreter the version has not been validated on
(:func:`interpreter_refusal`): the data above is shipped, and the builtins outside it, whose argument
handling (``str.splitlines(None)``) and error texts (``max([])``) differ between CPython minor versions,
are pinned to CPython 3.11's by :mod:`canon`; an interpreter is listed once
``scripts/pvm_interpreter_audit.py`` finds no actor-visible difference on it and the golden corpus replays on
it.  A new version is added, never an old one changed: the golden corpus in ``tests/vectors/determinism``
pins version 1 byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence

from cowboy_node.execution.pvm import grammar, unicode_tables

#: The version a new genesis gets when ``pvm_version`` is absent.
PVM_VERSION = 1
#: Versions this node implements.
SUPPORTED_PVM_VERSIONS: frozenset[int] = frozenset({1})
#: What version 1 pins (for ``docs/pvm.md``, status output and error messages).
PINS: dict[int, dict[str, str]] = {
    1: {
        "python_grammar": ".".join(map(str, grammar.PYTHON_GRAMMAR)),
        "unicode": unicode_tables.UNICODE_VERSION,
        "unicode_tables_sha256": unicode_tables.DATA_SHA256,
    },
}
#: CPython (major, minor) versions on which each PVM version's results are validated to be identical:
#: the golden corpus replays byte for byte and ``scripts/pvm_interpreter_audit.py`` finds no actor-visible
#: difference from 3.11 (``make test-pythons`` checks both on every listed interpreter).
VALIDATED_INTERPRETERS: dict[int, tuple[tuple[int, int], ...]] = {1: ((3, 11), (3, 12), (3, 13))}


def interpreter_refusal(pvm_version: int, version_info: Sequence[int]) -> str | None:
    """Why this interpreter must not execute actors under ``pvm_version`` (``None`` when it may)."""
    running = (version_info[0], version_info[1])
    validated = VALIDATED_INTERPRETERS.get(pvm_version, ())
    if running in validated:
        return None
    names = ", ".join(f"{major}.{minor}" for major, minor in validated) or "no interpreter"
    here = ".".join(str(x) for x in version_info[:3])
    return (f"PVM version {pvm_version} is validated on CPython {names} only and this node runs Python {here}: "
            "builtins outside the pinned data differ between Python versions (argument handling, error texts) "
            "and would make this validator compute other results than the network; run the node on "
            f"Python {names}")

"""PVM versions: what an actor call's result depends on, fixed per chain by ``genesis.json``.

A PVM version fixes, for every validator whatever its Python interpreter:

* the grammar accepted at deploy time (:mod:`grammar`: Python 3.11's),
* the Unicode data of every table-dependent ``str`` operation (:mod:`unicode_tables`,
  Unicode 14.0.0, applied by :mod:`unistr`),
* the cost table (:mod:`costs`) and the limits' defaults (:mod:`limits`).

A node refuses to start on a genesis whose ``pvm_version`` it does not implement (see
``cowboy_node.chain.genesis``).  A new version is added, never an old one changed: the
golden corpus in ``tests/vectors/determinism`` pins version 1 byte for byte.
"""

from __future__ import annotations

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

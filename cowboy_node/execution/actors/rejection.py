"""The receipt of a refused actor source (deploy or ``upgrade_self``): code and message.

Both are consensus data (the code is the receipt's ``error_code``, the message its ``error_message``,
hashed into the receipts root), so neither may depend on the interpreter. Refusals by CPython's own
parser or compiler (:data:`PARSER_RULES`) carry CPython's text *and line*, and both differ between
Python versions for the same source (``scripts/pvm_grammar_fuzz.py``: 85 of 6,001 random sources get a
different line on 3.12/3.13 than on 3.11). For those the receipt names the rule with line 0 and no
parser text; ``cowboy-node tx deploy`` re-parses the source locally to show where the error is.
Every other rule is the node's own check, with a line and message that are the node's.
"""

from __future__ import annotations

from cowboy_node.execution.pvm import ActorRejected
from cowboy_node.execution.pvm.grammar import PYTHON_GRAMMAR
from cowboy_node.execution.validity_errors import TxFailed

REJECTED = "actor_rejected"
"""Prefix of the error code of a refused source: ``actor_rejected:<rule>:<line>``."""

PARSER_RULES = frozenset({"syntax_error", "unsupported_construct"})
"""Rules whose line and message come from CPython's parser/compiler: line 0 and no text in the receipt."""

_GRAMMAR = f"{PYTHON_GRAMMAR[0]}.{PYTHON_GRAMMAR[1]}"

PARSER_LINE = 0
"""The line a receipt gives for a :data:`PARSER_RULES` refusal (the real line is not consensus data)."""


def rejected_code(rule: str, line: int) -> str:
    """Receipt error code of a refused source: it names the rule and line (matchable without the message)."""
    return f"{REJECTED}:{rule}:{line}"


def rejected_message(e: ActorRejected) -> str:
    """Receipt message of a refused source: deterministic whatever the interpreter."""
    if e.rule in PARSER_RULES:
        return f"{e.rule}: the source is not valid Python {_GRAMMAR} (the parser's line is not part of the receipt)"
    return f"line {e.line}: {e.rule}: {e.message}"


def rejection_failure(e: ActorRejected) -> TxFailed:
    """The failed-receipt exception for a refused source."""
    line = PARSER_LINE if e.rule in PARSER_RULES else e.line
    return TxFailed(rejected_code(e.rule, line), rejected_message(e))


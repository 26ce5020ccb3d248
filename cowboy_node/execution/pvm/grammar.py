"""The grammar of PVM version 1: Python 3.11's, whatever interpreter parses the source.

``ast.parse`` accepts whatever the running interpreter's grammar accepts, and that grows
with every minor version: 3.12 added ``type`` statements, type parameter lists and the
PEP 701 f-strings (the enclosing quote, backslashes, comments and line breaks inside the
replacement fields); 3.14 adds t-strings and unparenthesized ``except A, B``.  An actor
that deploys on one validator must deploy on all, so :func:`check` refuses, with the rule
``syntax_version``, everything Python 3.11 would refuse among those, and names outside
ASCII (``non_ascii_identifier``: identifiers are NFKC-normalized and classified with the
interpreter's Unicode tables, which change with the minor version).

The parser is called with ``feature_version=PYTHON_GRAMMAR`` (which refuses 3.12's type
statements and parameter lists); the checks here cover what ``feature_version`` does not.
Nothing here may import the rest of the node: ``scripts/`` loads this module on other
interpreters to test it.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize

#: The Python grammar pinned by PVM version 1.
PYTHON_GRAMMAR = (3, 11)

#: Every syntax node class of Python 3.11's ``ast`` (nodes of newer grammars are refused).
PY311_NODES = frozenset({
    "Module", "Interactive", "Expression", "FunctionType", "FunctionDef", "AsyncFunctionDef", "ClassDef",
    "Return", "Delete", "Assign", "AugAssign", "AnnAssign", "For", "AsyncFor", "While", "If", "With",
    "AsyncWith", "Match", "Raise", "Try", "TryStar", "Assert", "Import", "ImportFrom", "Global", "Nonlocal",
    "Expr", "Pass", "Break", "Continue", "BoolOp", "NamedExpr", "BinOp", "UnaryOp", "Lambda", "IfExp", "Dict",
    "Set", "ListComp", "SetComp", "DictComp", "GeneratorExp", "Await", "Yield", "YieldFrom", "Compare", "Call",
    "FormattedValue", "JoinedStr", "Constant", "Attribute", "Subscript", "Starred", "Name", "List", "Tuple",
    "Slice", "Load", "Store", "Del", "And", "Or", "Add", "Sub", "Mult", "MatMult", "Div", "Mod", "Pow",
    "LShift", "RShift", "BitOr", "BitXor", "BitAnd", "FloorDiv", "Invert", "Not", "UAdd", "USub", "Eq",
    "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In", "NotIn", "comprehension", "ExceptHandler",
    "arguments", "arg", "keyword", "alias", "withitem", "match_case", "MatchValue", "MatchSingleton",
    "MatchSequence", "MatchMapping", "MatchClass", "MatchStar", "MatchAs", "MatchOr", "TypeIgnore",
})

Violation = tuple[int, str, str]
"""(line, rule, message) of a refused construct."""


def parse(source: str) -> ast.Module:
    """``ast.parse`` restricted (as far as CPython can) to the pinned grammar."""
    return ast.parse(source, filename="<actor>", mode="exec", type_comments=False,
                     feature_version=PYTHON_GRAMMAR)


def _names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if isinstance(node, ast.Global | ast.Nonlocal):
        return list(node.names)
    if isinstance(node, ast.ExceptHandler):
        return [node.name or ""]
    return []


def _tree_violations(source: str, tree: ast.Module) -> list[Violation]:
    lines = source.splitlines()
    out: list[Violation] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        kind = type(node).__name__
        if kind not in PY311_NODES:
            out.append((line, "syntax_version", f"{kind} is not Python {PYTHON_GRAMMAR[0]}.{PYTHON_GRAMMAR[1]} syntax"))
        if getattr(node, "type_params", None):
            out.append((line, "syntax_version", "type parameter lists are not Python 3.11 syntax"))
        for name in _names(node):
            if not name.isascii():
                out.append((line, "non_ascii_identifier", f"identifier {name!r} is not ASCII"))
        if isinstance(node, ast.ExceptHandler) and isinstance(node.type, ast.Tuple):
            t = node.type
            text = lines[t.lineno - 1] if 0 < t.lineno <= len(lines) else ""
            if text.encode("utf-8")[t.col_offset:t.col_offset + 1] != b"(":
                out.append((line, "syntax_version", "multiple exception types must be parenthesized"))
    return out


def _fstring_violations(source: str) -> list[Violation]:
    """PEP 701 f-string syntax (Python 3.12+ tokenizer), refused as Python 3.11 refuses it."""
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    if fstring_start is None:
        return []  # a 3.11 tokenizer: the parser itself already enforced the 3.11 rules
    fstring_middle = tokenize.FSTRING_MIDDLE  # type: ignore[attr-defined]
    fstring_end = tokenize.FSTRING_END  # type: ignore[attr-defined]
    out: list[Violation] = []
    stack: list[tuple[str, int]] = []  # (closing quote, line of the opening) of the enclosing f-strings
    prev_end = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            line = tok.start[0]
            if stack and tok.type != fstring_end:
                # quotes of the f-strings this token is inside an expression part of
                enclosing = stack[:-1] if tok.type == fstring_middle else stack
                text = tok.string
                if enclosing and "\\" in text:
                    out.append((line, "syntax_version", "f-string expression part cannot include a backslash"))
                if tok.type == tokenize.COMMENT:
                    out.append((line, "syntax_version", "f-string expression part cannot include '#'"))
                if any(quote in text for quote, _ in enclosing):
                    out.append((line, "syntax_version", "f-string: the enclosing quote reused inside"))
                if tok.type != fstring_middle and any(len(q) == 1 for q, _ in enclosing) and line > prev_end:
                    out.append((line, "syntax_version", "single-quoted f-string expression spans lines"))
            if tok.type == fstring_start:
                quote = tok.string.lstrip("rRbBfFuU")
                stack.append((quote, line))
            elif tok.type == fstring_end and stack:
                stack.pop()
            prev_end = tok.end[0]
    except (tokenize.TokenError, SyntaxError):
        return out  # the parser accepted the source; a tokenizer disagreement is not ours to judge
    return out


def check(source: str, tree: ast.Module) -> Violation | None:
    """The first (by line) construct outside the pinned grammar, or None."""
    found = _tree_violations(source, tree) + _fstring_violations(source)
    return min(found) if found else None


def interpreter_grammar() -> tuple[int, int]:
    """The running interpreter's own grammar version (for messages and docs)."""
    return sys.version_info[0], sys.version_info[1]

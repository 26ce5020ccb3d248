"""The grammar of PVM version 1: Python 3.11's, whatever interpreter parses the source.

``ast.parse`` accepts whatever the running interpreter's grammar accepts, and that grows
with every minor version: 3.12 added ``type`` statements, type parameter lists and the
PEP 701 f-strings (the enclosing quote, backslashes, comments and line breaks inside the
replacement fields); 3.14 adds t-strings and unparenthesized ``except A, B``.  An actor
that deploys on one validator must deploy on all, so :func:`check` refuses everything
Python 3.11 would refuse among those, identifiers outside ASCII (they are NFKC-normalized
and classified with the interpreter's Unicode tables, which change with the minor version)
and named escapes in text literals (resolved with the interpreter's Unicode name table).
Every refusal has the rule ``syntax_error``, like 3.11's own parser errors, and the line of
the construct, so validators on different interpreters write the same receipt.

The parser is called with ``feature_version=PYTHON_GRAMMAR`` (which refuses 3.12's type
statements and parameter lists); the checks here cover what ``feature_version`` does not.
Nothing here may import the rest of the node: ``scripts/`` loads this module on other
interpreters to test it.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize

#: The Python grammar pinned by PVM version 1.
PYTHON_GRAMMAR = (3, 11)
#: Rule of every refusal here.  The same as CPython 3.11's own parser errors on purpose: a source
#: that 3.11's parser refuses and a newer interpreter parses must be refused with the same rule
#: and line on both, since the rule and line are in the receipt (``actor_rejected:<rule>:<line>``).
RULE = "syntax_error"

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
            out.append((line, RULE, f"{kind} is not Python {PYTHON_GRAMMAR[0]}.{PYTHON_GRAMMAR[1]} syntax"))
        if getattr(node, "type_params", None):
            out.append((line, RULE, "type parameter lists are not Python 3.11 syntax"))
        for name in _names(node):
            if not name.isascii():
                out.append((line, RULE, f"identifier {name!a} is not ASCII"))
        if isinstance(node, ast.ExceptHandler) and isinstance(node.type, ast.Tuple):
            t = node.type
            text = lines[t.lineno - 1] if 0 < t.lineno <= len(lines) else ""
            if text.encode("utf-8")[t.col_offset:t.col_offset + 1] != b"(":
                out.append((line, RULE, "multiple exception types must be parenthesized"))
    return out


def _nested_too_deeply(tree: ast.Module) -> list[tuple[int, int]]:
    """Positions of replacement fields inside the format spec of a field that is itself inside a format
    spec (``f"{x:{y:{z}}}"``): Python 3.11 refuses them ("f-string: expressions nested too deeply")."""
    found: list[tuple[int, int]] = []
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, ast.FormattedValue):
            if depth >= 2:
                found.append((node.lineno, node.col_offset))
            stack.append((node.value, 0))
            if node.format_spec is not None:
                stack.extend((v, depth + 1) for v in ast.iter_child_nodes(node.format_spec))
            continue
        stack.extend((child, depth) for child in ast.iter_child_nodes(node))
    return found


def _fstring_violations(source: str, deep: list[tuple[int, int]]) -> list[Violation]:
    """PEP 701 f-string syntax (Python 3.12+ tokenizer), refused as Python 3.11 refuses it; ``deep`` are
    the positions :func:`_nested_too_deeply` found."""
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    if fstring_start is None:
        return []  # a 3.11 tokenizer: the parser itself already enforced the 3.11 rules
    fstring_middle = tokenize.FSTRING_MIDDLE  # type: ignore[attr-defined]
    fstring_end = tokenize.FSTRING_END  # type: ignore[attr-defined]
    out: list[Violation] = []
    stack: list[tuple[str, int]] = []  # (closing quote, line of the opening) of the enclosing f-strings
    pending: list[str] = []  # problems inside the current outermost f-string
    outer_start = (0, 0)
    prev_end = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            line = tok.start[0]
            if stack and tok.type != fstring_end:
                # quotes of the f-strings this token is inside an expression part of
                enclosing = stack[:-1] if tok.type == fstring_middle else stack
                text = tok.string
                if enclosing and "\\" in text:
                    pending.append("f-string expression part cannot include a backslash")
                if tok.type == tokenize.COMMENT:
                    pending.append("f-string expression part cannot include '#'")
                if any(quote in text for quote, _ in enclosing):
                    pending.append("f-string: the enclosing quote reused inside")
                single = [start for q, start in enclosing if len(q) == 1]
                if tok.type != fstring_middle and single and line > prev_end:
                    # 3.11's tokenizer: an unterminated string literal, on the line where it starts
                    out.append((single[-1], RULE, "single-quoted f-string expression spans lines"))
            if tok.type == fstring_start:
                if not stack:
                    outer_start = tok.start
                stack.append((tok.string.lstrip("rRbBfFuU"), line))
            elif tok.type == fstring_end and stack:
                stack.pop()
                if not stack and any(outer_start <= pos <= tok.end for pos in deep):
                    pending.append("f-string: expressions nested too deeply")
                if not stack and pending:
                    # 3.11 parses f-string expressions after the whole literal: it reports its last line
                    out.append((tok.end[0], RULE, pending[0]))
                    pending.clear()
            prev_end = tok.end[0]
    except (tokenize.TokenError, SyntaxError):
        return out  # the parser accepted the source; a tokenizer disagreement is not ours to judge
    return out


#: ``\N{NAME}`` preceded by an even number of backslashes (so it is an escape, not ``\\N``).
_NAMED_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\N\{")


def _named_escape_violations(source: str) -> list[Violation]:
    """A named escape (backslash, N, {NAME}) in a text literal: the parser resolves NAME with the
    interpreter's Unicode name table, so a name added after Unicode 14 would deploy on a 3.12
    validator and fail on a 3.11 one."""
    fstring_start = getattr(tokenize, "FSTRING_START", -1)
    fstring_middle = getattr(tokenize, "FSTRING_MIDDLE", -1)
    fstring_end = getattr(tokenize, "FSTRING_END", -1)
    out: list[Violation] = []
    raw_stack: list[bool] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.STRING or tok.type == fstring_start:
                prefix = tok.string[:len(tok.string) - len(tok.string.lstrip("rRbBfFuU"))].lower()
                plain = "r" not in prefix and "b" not in prefix
                if tok.type == fstring_start:
                    raw_stack.append(not plain)
                elif plain and _NAMED_ESCAPE.search(tok.string):
                    out.append((tok.start[0], RULE, "\\N{...} escapes depend on the interpreter's "
                                                              "Unicode names; write the character or \\uXXXX"))
            elif tok.type == fstring_middle and raw_stack and not raw_stack[-1] and _NAMED_ESCAPE.search(tok.string):
                out.append((tok.start[0], RULE, "\\N{...} escapes depend on the interpreter's "
                                                          "Unicode names; write the character or \\uXXXX"))
            elif tok.type == fstring_end and raw_stack:
                raw_stack.pop()
    except (tokenize.TokenError, SyntaxError):
        return out
    return out


def check(source: str, tree: ast.Module) -> Violation | None:
    """The first (by line) construct outside the pinned grammar, or None."""
    found = (_tree_violations(source, tree) + _fstring_violations(source, _nested_too_deeply(tree))
             + _named_escape_violations(source))
    return min(found) if found else None


def interpreter_grammar() -> tuple[int, int]:
    """The running interpreter's own grammar version (for messages and docs)."""
    return sys.version_info[0], sys.version_info[1]

"""``str`` semantics that depend on Unicode data, computed from the pinned tables.

CPython's ``str.upper``, ``isprintable``, ``split()``, ``repr``, ``int("٣")``... read the
interpreter's own Unicode tables, which change with the minor version (3.11: Unicode 14,
3.12: 15.0, 3.13: 15.1).  The PVM instead applies the tables of its ``pvm_version``
(:mod:`cowboy_node.execution.pvm.unicode_tables`, generated from CPython 3.11) with the
algorithms of CPython 3.11 (``Objects/unicodeobject.c``), so every validator computes the
same result whatever its interpreter.

Only the *data* is looked up here; the heavy lifting stays in C and is table-free:
predicates are regular expressions over explicit code point ranges, case mappings are
``str.translate`` with explicit dicts, whitespace stripping is ``str.strip(chars)`` with
an explicit character list.  Pure-ASCII text takes CPython's own methods (ASCII behaviour
is identical in every Unicode version), which is also the fast path.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable

from cowboy_node.execution.pvm import unicode_tables as T

Ranges = list[tuple[int, int]]
_MAX = 0x10FFFF
_SIGMA = "\u03a3"


# --- code point sets ----------------------------------------------------------------
def _pairs(flat: tuple[int, ...]) -> Ranges:
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def _union(*sets: Ranges) -> Ranges:
    merged: Ranges = []
    for a, b in sorted(r for s in sets for r in s):
        if merged and a <= merged[-1][1] + 1:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _complement(s: Ranges) -> Ranges:
    out: Ranges = []
    nxt = 0
    for a, b in s:
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = b + 1
    if nxt <= _MAX:
        out.append((nxt, _MAX))
    return out


def _minus(s: Ranges, t: Ranges) -> Ranges:
    return _complement(_union(_complement(s), t))


def _prop(name: str) -> Ranges:
    flat: tuple[int, ...] = getattr(T, name)
    return _pairs(flat)


def _class(s: Ranges) -> str:
    """A regex character class matching exactly the code points of ``s`` (no Unicode-aware syntax)."""
    if not s:
        return "(?!)"
    parts = [f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in s]
    return "[" + "".join(parts) + "]"


class _Member:
    """Membership test for one property (bisect over the range starts)."""

    __slots__ = ("ends", "starts")

    def __init__(self, s: Ranges) -> None:
        self.starts = [a for a, _ in s]
        self.ends = [b for _, b in s]

    def __call__(self, ch: str) -> bool:
        cp = ord(ch)
        i = bisect.bisect_right(self.starts, cp) - 1
        return i >= 0 and cp <= self.ends[i]


@functools.cache
def _member(name: str) -> _Member:
    return _Member(_prop(name))


@functools.cache
def _re(kind: str) -> re.Pattern[str]:
    """Compiled patterns, built on first use (compiling a class of hundreds of ranges takes milliseconds)."""
    p = _prop
    alnum = _union(p("ALPHA"), p("DECIMAL"), p("DIGIT"), p("NUMERIC"))
    upper_title = _union(p("UPPER"), p("TITLE"))
    lower_only = _minus(p("LOWER"), upper_title)
    other = _complement(_union(upper_title, lower_only))
    cased = p("CASED")
    patterns = {
        "isalpha": _class(p("ALPHA")) + "+",
        "isdecimal": _class(p("DECIMAL")) + "+",
        "isdigit": _class(p("DIGIT")) + "+",
        "isnumeric": _class(p("NUMERIC")) + "+",
        "isspace": _class(p("SPACE")) + "+",
        "isalnum": _class(alnum) + "+",
        "isprintable": _class(p("PRINTABLE")) + "*",
        "isidentifier": _class(_union(p("XID_START"), [(0x5F, 0x5F)])) + _class(p("XID_CONTINUE")) + "*",
        # istitle(): an uppercase/titlecase character only after an uncased one, a lowercase one only
        # after a cased one, and at least one cased character
        "istitle": (lambda u, low, o: f"{o}*{u}{low}*(?:{o}+{u}{low}*)*{o}*")(
            _class(upper_title), _class(lower_only), _class(other)),
        "upper_or_title": _class(upper_title),
        "lower_or_title": _class(_union(p("LOWER"), p("TITLE"))),
        "lower": _class(p("LOWER")),
        "upper": _class(p("UPPER")),
        "runs": f"{_class(cased)}+|{_class(_complement(cased))}+",
        "word": _class(_complement(p("SPACE"))) + "+",
        "linebreak": "\r\n|" + _class(p("LINEBREAK")),
        "repr_escape": _class(_union([(0, 0x1F), (0x5C, 0x5C), (0x7F, 0x7F)],
                                     _minus(_complement(p("PRINTABLE")), [(0, 0x7F)]))),
    }
    return re.compile(patterns[kind])


@functools.cache
def whitespace() -> str:
    """Every whitespace character, for ``str.strip(chars)``."""
    return "".join(chr(c) for a, b in _prop("SPACE") for c in range(a, b + 1))


# --- predicates -----------------------------------------------------------------------
_FULLMATCH = frozenset({"isalpha", "isdecimal", "isdigit", "isnumeric", "isspace", "isalnum", "isprintable",
                        "isidentifier", "istitle"})
#: Predicates computed here; ``isascii`` needs no table.
PREDICATES = _FULLMATCH | {"islower", "isupper"}


def predicate(name: str, s: str) -> bool:
    """``s.<name>()`` for one of :data:`PREDICATES`, under the pinned tables."""
    if name in _FULLMATCH:
        return _re(name).fullmatch(s) is not None
    if name == "islower":
        return _re("upper_or_title").search(s) is None and _re("lower").search(s) is not None
    if name == "isupper":
        return _re("lower_or_title").search(s) is None and _re("upper").search(s) is not None
    raise ValueError(f"no pinned predicate {name!r}")


# --- case mappings ----------------------------------------------------------------------
@functools.cache
def _table(name: str) -> dict[int, str]:
    if name == "lower":
        return {cp: v for cp, v in T.LOWER_MAP.items() if cp != 0x3A3}  # U+03A3 depends on context
    if name == "upper":
        return dict(T.UPPER_MAP)
    if name == "title":
        return dict(T.TITLE_MAP)
    if name == "fold":
        return dict(T.FOLD_MAP)
    if name == "swap":
        is_upper, is_lower = _member("UPPER"), _member("LOWER")
        swap = {cp: v for cp, v in T.LOWER_MAP.items() if is_upper(chr(cp)) and cp != 0x3A3}
        swap.update({cp: v for cp, v in T.UPPER_MAP.items()
                     if not is_upper(chr(cp)) and is_lower(chr(cp))})
        return swap
    raise ValueError(name)


def _final_sigma(s: str, i: int) -> str:
    """Lowercase of the U+03A3 at ``s[i]`` (CPython's ``handle_capital_sigma``)."""
    ignorable, cased = _member("CASE_IGNORABLE"), _member("CASED")
    j = i - 1
    while j >= 0 and ignorable(s[j]):
        j -= 1
    final = j >= 0 and cased(s[j])
    if final and i + 1 < len(s):
        j = i + 1
        while j < len(s) and ignorable(s[j]):
            j += 1
        final = j == len(s) or not cased(s[j])
    return "\u03c2" if final else "\u03c3"


def _mapped(s: str, start: int, end: int, table: str, sigma: bool) -> str:
    """``s[start:end]`` mapped through ``table``; each U+03A3 lowercased in the context of all of ``s``."""
    tr = _table(table)
    if not sigma or _SIGMA not in s[start:end]:
        return s[start:end].translate(tr)
    out: list[str] = []
    pos = start
    i = s.find(_SIGMA, start, end)
    while i >= 0:
        out.append(s[pos:i].translate(tr))
        out.append(_final_sigma(s, i))
        pos = i + 1
        i = s.find(_SIGMA, pos, end)
    out.append(s[pos:end].translate(tr))
    return "".join(out)


def upper(s: str) -> str:
    return s.translate(_table("upper"))


def lower(s: str) -> str:
    return _mapped(s, 0, len(s), "lower", True)


def casefold(s: str) -> str:
    return s.translate(_table("fold"))


def swapcase(s: str) -> str:
    return _mapped(s, 0, len(s), "swap", True)


def capitalize(s: str) -> str:
    if not s:
        return s
    return s[0].translate(_table("title")) + _mapped(s, 1, len(s), "lower", True)


def title(s: str) -> str:
    """CPython's ``do_title``: a character after a cased one is lowercased, any other titlecased."""
    out: list[str] = []
    cased = _member("CASED")
    for m in _re("runs").finditer(s):
        a, b = m.span()
        if cased(s[a]):
            out.append(s[a].translate(_table("title")))
            out.append(_mapped(s, a + 1, b, "lower", True))
        else:
            out.append(s[a].translate(_table("lower" if a > 0 else "title")))
            out.append(s[a + 1:b].translate(_table("title")))
    return "".join(out)


MAPPINGS = {"upper": upper, "lower": lower, "casefold": casefold, "swapcase": swapcase,
            "capitalize": capitalize, "title": title}


# --- whitespace and lines -------------------------------------------------------------
def strip(s: str, name: str) -> str:
    """``s.strip()``/``lstrip()``/``rstrip()`` without characters: pinned whitespace."""
    ws = whitespace()
    return s.strip(ws) if name == "strip" else s.lstrip(ws) if name == "lstrip" else s.rstrip(ws)


def split(s: str, maxsplit: int) -> list[str]:
    """``s.split(None, maxsplit)``: runs of pinned whitespace separate, none at either end."""
    out: list[str] = []
    for m in _re("word").finditer(s):
        if 0 <= maxsplit <= len(out):
            out.append(s[m.start():])  # the rest keeps its trailing whitespace
            break
        out.append(m.group())
    return out


def rsplit(s: str, maxsplit: int) -> list[str]:
    """``s.rsplit(None, maxsplit)``."""
    words = [m.span() for m in _re("word").finditer(s)]
    if maxsplit < 0 or len(words) <= maxsplit:
        return [s[a:b] for a, b in words]
    kept = words[len(words) - maxsplit:] if maxsplit else []
    head_end = words[len(words) - maxsplit - 1][1]
    return [s[:head_end]] + [s[a:b] for a, b in kept]  # the head keeps its leading whitespace


def splitlines(s: str, keepends: bool) -> list[str]:
    out: list[str] = []
    pos = 0
    for m in _re("linebreak").finditer(s):
        out.append(s[pos:m.end()] if keepends else s[pos:m.start()])
        pos = m.end()
    if pos < len(s):
        out.append(s[pos:])
    return out


# --- repr and number parsing ----------------------------------------------------------
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def repr_str(s: str) -> str:
    """``repr(s)`` (CPython's ``unicode_repr``): non-printable characters by the pinned table are escaped."""
    quote = '"' if "'" in s and '"' not in s else "'"
    body = _re("repr_escape").sub(_escape, s)
    if quote == "'":
        body = body.replace("'", "\\'")
    return quote + body + quote


@functools.cache
def _number_table() -> dict[int, str]:
    table = {cp: str(v) for cp, v in T.DECIMAL_VALUE.items() if cp >= 0x7F}
    table.update({ord(c): " " for c in whitespace() if ord(c) >= 0x7F})
    return table


def number_ascii(s: str) -> str | None:
    """The ASCII text ``int()``/``float()`` parse for ``s`` (``_PyUnicode_TransformDecimalAndSpaceToASCII``):
    decimal digits become ASCII digits and whitespace a space; None if another non-ASCII character remains."""
    t = s.translate(_number_table())
    if not t.isascii() or "\x7f" in t:
        return None
    return t


def iter_code_points(flat: tuple[int, ...]) -> Iterable[int]:
    """Every code point of a flat range tuple (tests and tools)."""
    for a, b in _pairs(flat):
        yield from range(a, b + 1)


def parse_int(s: str, base: int) -> int:
    """``int(s, base)`` for text (``PyLong_FromUnicodeObject``); the error shows the pinned ``repr``."""
    t = number_ascii(s)
    if t is not None:
        try:
            return int(t, base)
        except ValueError as e:
            if not str(e).startswith("invalid literal"):
                raise
    else:
        int("0", base)  # an invalid base is reported first, as CPython does
    raise ValueError(f"invalid literal for int() with base {base}: {repr_str(s)[:200]}")


def parse_float(s: str) -> float:
    """``float(s)`` for text (``PyFloat_FromString``); the error shows the pinned ``repr``."""
    t = number_ascii(s)
    if t is not None:
        try:
            return float(t)
        except ValueError:
            pass
    raise ValueError(f"could not convert string to float: {repr_str(s)}")

"""``str`` semantics that depend on Unicode data, computed from the pinned tables.

CPython's ``str.upper``, ``isprintable``, ``split()``, ``repr``, ``int("٣")``... read the
interpreter's own Unicode tables, which change with the minor version (3.11: Unicode 14,
3.12: 15.0, 3.13: 15.1).  The PVM instead applies the tables of its ``pvm_version``
(:mod:`cowboy_node.execution.pvm.unicode_tables`, generated from CPython 3.11) with the
algorithms of CPython 3.11 (``Objects/unicodeobject.c``), so every validator computes the
same result whatever its interpreter.

Only the *data* is looked up here; the heavy lifting stays in C and uses no Unicode-aware
machinery of the interpreter: one ``str.translate`` through a list indexed by code point turns
the text into one ASCII class code per character, and predicates, runs, and the final-sigma
context are regular expressions over those codes; case mappings are ``str.translate`` with
explicit dicts; whitespace stripping is ``str.strip(chars)`` with an explicit character list;
``repr`` escapes with the ``unicode_escape`` codec.  Pure-ASCII text takes CPython's own
methods (ASCII behaviour is identical in every Unicode version), which is also the fast path.
What still runs in Python per step (title() runs, escaped repr runs) is priced per step by the
caller (:func:`cost`).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Callable, Iterable

from cowboy_node.execution.pvm import costs
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
    """Patterns over the text itself (classes without astral ranges, which stay fast)."""
    patterns = {
        "word": _class(_complement(_prop("SPACE"))) + "+",
        "linebreak": "\r\n|" + _class(_prop("LINEBREAK")),
        "markers": _class([(ord(_MARKERS[-1]), ord(_MARKERS[0]))]),
    }
    return re.compile(patterns[kind])


@functools.cache
def whitespace() -> str:
    """Every whitespace character, for ``str.strip(chars)``."""
    return "".join(chr(c) for a, b in _prop("SPACE") for c in range(a, b + 1))


# --- classification: one ASCII code per character ---------------------------------------
#: The properties a character's class code records (the keys of unicode_tables' range tuples).
PROPERTIES = ("ALPHA", "DECIMAL", "DIGIT", "NUMERIC", "SPACE", "PRINTABLE", "LOWER", "UPPER", "TITLE", "CASED",
              "CASE_IGNORABLE", "XID_START", "XID_CONTINUE", "LINEBREAK")


class _Classes:
    """A list indexed by code point giving a one-character ASCII code per distinct property set.

    ``s.translate(table)`` turns any text into its code string in C (a list lookup per character),
    and every question about properties becomes a regular expression over a handful of ASCII codes:
    this is what keeps the pinned semantics within a small factor of CPython's own methods (a regex
    class of hundreds of astral ranges costs a linear scan per character).  U+03A3 has a code of its
    own (the final-sigma rule looks for it).  About 10 MB, built once on first use.
    """

    __slots__ = ("codes", "sigma", "table")

    def __init__(self) -> None:
        members = [_member(n) for n in PROPERTIES]
        bounds = sorted({0, _MAX + 1} | {x for n in PROPERTIES for a, b in _prop(n) for x in (a, b + 1)})
        combos: dict[tuple[bool, ...], str] = {}
        table: list[str] = [""] * (_MAX + 1)
        for lo, hi in itertools.pairwise(bounds):
            flags = tuple(m(chr(lo)) for m in members)
            code = combos.setdefault(flags, chr(0x21 + len(combos)))
            table[lo:hi] = [code] * (hi - lo)
        self.sigma = chr(0x21 + len(combos))
        sigma_flags = next(f for f, c in combos.items() if c == table[0x3A3])
        table[0x3A3] = self.sigma
        assert ord(self.sigma) < 0x7F
        by_code = {c: f for f, c in combos.items()} | {self.sigma: sigma_flags}
        self.codes = {name: frozenset(c for c, f in by_code.items() if f[i]) for i, name in enumerate(PROPERTIES)}
        self.table = table


@functools.cache
def _classes() -> _Classes:
    return _Classes()


def classify(s: str) -> str:
    """The class code string of ``s`` (same length, one ASCII code per character)."""
    return s.translate(_classes().table)


def _cls(codes: Iterable[str]) -> str:
    """A regex character class of class codes."""
    chars = sorted(codes)
    return "[" + "".join(re.escape(c) for c in chars) + "]" if chars else "(?!)"


@functools.cache
def _code_re(kind: str) -> re.Pattern[str]:
    """Patterns over class code strings."""
    c = _classes().codes
    upper_title = c["UPPER"] | c["TITLE"]
    lower_only = c["LOWER"] - upper_title
    all_codes = frozenset().union(*c.values()) | {chr(0x21 + i) for i in range(0x5E)}
    other = all_codes - upper_title - lower_only
    alnum = c["ALPHA"] | c["DECIMAL"] | c["DIGIT"] | c["NUMERIC"]
    patterns = {
        "isalpha": _cls(c["ALPHA"]) + "+",
        "isdecimal": _cls(c["DECIMAL"]) + "+",
        "isdigit": _cls(c["DIGIT"]) + "+",
        "isnumeric": _cls(c["NUMERIC"]) + "+",
        "isspace": _cls(c["SPACE"]) + "+",
        "isalnum": _cls(alnum) + "+",
        "isprintable": _cls(c["PRINTABLE"]) + "*",
        "identifier_start": _cls(c["XID_START"]) + _cls(c["XID_CONTINUE"]) + "*",
        "identifier_rest": _cls(c["XID_CONTINUE"]) + "*",
        # istitle(): an uppercase/titlecase character only after an uncased one, a lowercase one only
        # after a cased one, and at least one cased character
        "istitle": (lambda u, low, o: f"{o}*{u}{low}*(?:{o}+{u}{low}*)*{o}*")(
            _cls(upper_title), _cls(lower_only), _cls(other)),
        "upper_or_title": _cls(upper_title),
        "lower_or_title": _cls(c["LOWER"] | c["TITLE"]),
        "lower": _cls(c["LOWER"]),
        "upper": _cls(c["UPPER"]),
        "runs": f"{_cls(c['CASED'])}+|{_cls(all_codes - c['CASED'])}+",
        "cased_runs": _cls(c["CASED"]) + "+",
        "ignorable_run": _cls(c["CASE_IGNORABLE"]) + "*",
        "nonprintable_runs": _cls(all_codes - c["PRINTABLE"]) + "+",
    }
    return re.compile(patterns[kind])


# --- predicates -----------------------------------------------------------------------
_FULLMATCH = frozenset({"isalpha", "isdecimal", "isdigit", "isnumeric", "isspace", "isalnum", "isprintable",
                        "isidentifier", "istitle"})
#: Predicates computed here; ``isascii`` needs no table.
PREDICATES = _FULLMATCH | {"islower", "isupper"}


def predicate(name: str, s: str) -> bool:
    """``s.<name>()`` for one of :data:`PREDICATES`, under the pinned tables."""
    c = classify(s)
    if name == "isidentifier":
        if s[:1] == "_":  # "_" may start an identifier without being XID_Start
            return _code_re("identifier_rest").fullmatch(c, 1) is not None
        return _code_re("identifier_start").fullmatch(c) is not None
    if name in _FULLMATCH:
        return _code_re(name).fullmatch(c) is not None
    if name == "islower":
        return _code_re("upper_or_title").search(c) is None and _code_re("lower").search(c) is not None
    if name == "isupper":
        return _code_re("lower_or_title").search(c) is None and _code_re("upper").search(c) is not None
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


#: Candidate private-use characters standing for a decided U+03A3 while a string is mapped (two not in
#: the string are taken; they have no case mapping, so translate() leaves them alone).
_MARKERS = tuple(chr(0x10FFFD - k) for k in range(64))


@functools.cache
def _sigma_re(kind: str, marker: str = "") -> re.Pattern[str]:
    ignorable = _class(_prop("CASE_IGNORABLE"))
    cased = _class(_union(_prop("CASED"), [(ord(marker), ord(marker))] if marker else []))
    # possessive: a character both cased and case-ignorable is skipped, never taken back as the cased one
    if kind == "cased_before":  # run on the reversed string
        return re.compile(f"{_SIGMA}(?={ignorable}*+{cased})")
    return re.compile(f"{re.escape(marker)}(?={ignorable}*+{cased})")  # "cased_after"


def _mark_sigmas(s: str) -> tuple[str, str, str] | None:
    """``s`` with each U+03A3 replaced by a final or a non-final marker (CPython's ``handle_capital_sigma``:
    final when the nearest non-case-ignorable character before it is cased and the nearest one after
    it is not, or the string ends), and the two markers; None without a U+03A3 or free markers."""
    if _SIGMA not in s:
        return None
    free = _free_markers(s)
    if len(free) < 2:
        return None
    final, other = free[0], free[1]
    # a cased character before: a candidate (in the reversed string, "before" is "after")
    candidates = _sigma_re("cased_before").sub(final, s[::-1])[::-1]
    # ... that has a cased character after is not final; a sigma that was no candidate is not final either
    marked = _sigma_re("cased_after", final).sub(other, candidates).replace(_SIGMA, other)
    return marked, final, other


def _free_markers(s: str) -> list[str]:
    present = set(_re("markers").findall(s))
    return [m for m in _MARKERS if m not in present]


def _with_sigmas(name: str, s: str, fn: Callable[[str, str], str]) -> str:
    """``fn(s, text)`` where ``text`` is ``s`` with its sigmas decided; the markers become σ or ς."""
    marked = _mark_sigmas(s)
    if marked is None:
        if _SIGMA in s:  # the text holds 63 of the 64 markers: CPython's loop, in Python
            return _slow(name, s)
        return fn(s, s)
    text, final, other = marked
    return fn(s, text).replace(final, "\u03c2").replace(other, "\u03c3")


def _slow(name: str, s: str) -> str:
    """CPython's ``lower``/``swapcase``/``capitalize``/``title`` loops, one character at a time."""
    ignorable, cased, is_upper, is_lower = (_member(n) for n in ("CASE_IGNORABLE", "CASED", "UPPER", "LOWER"))

    def lower_at(i: int, ch: str) -> str:
        if ch != _SIGMA:
            return T.LOWER_MAP.get(ord(ch), ch)
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

    out: list[str] = []
    previous_cased = False
    for i, ch in enumerate(s):
        if name == "lower" or (name == "capitalize" and i > 0):
            out.append(lower_at(i, ch))
        elif name == "swapcase":
            out.append(lower_at(i, ch) if is_upper(ch) else T.UPPER_MAP.get(ord(ch), ch) if is_lower(ch) else ch)
        elif name == "capitalize" or not previous_cased:  # capitalize's first character, or title
            out.append(T.TITLE_MAP.get(ord(ch), ch))
        else:
            out.append(lower_at(i, ch))
        previous_cased = cased(ch)
    return "".join(out)


def upper(s: str) -> str:
    return s.translate(_table("upper"))


def lower(s: str) -> str:
    return _with_sigmas("lower", s, lambda orig, text: text.translate(_table("lower")))


def casefold(s: str) -> str:
    return s.translate(_table("fold"))


def swapcase(s: str) -> str:
    return _with_sigmas("swapcase", s, lambda orig, text: text.translate(_table("swap")))


def capitalize(s: str) -> str:
    if not s:
        return s
    return _with_sigmas("capitalize", s, lambda orig, text: orig[0].translate(_table("title"))
                        + text[1:].translate(_table("lower")))


def title(s: str) -> str:
    """CPython's ``do_title``: a character after a cased one is lowercased, any other titlecased."""
    return _with_sigmas("title", s, _title)


def _title(orig: str, text: str) -> str:
    out: list[str] = []
    codes = classify(orig)
    cased = _classes().codes["CASED"]
    for m in _code_re("runs").finditer(codes):
        a, b = m.span()
        if codes[a] in cased:
            out.append(orig[a].translate(_table("title")))
            out.append(text[a + 1:b].translate(_table("lower")))
        else:
            out.append(orig[a].translate(_table("lower" if a > 0 else "title")))
            out.append(orig[a + 1:b].translate(_table("title")))
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
def _escape_printable(text: str, quote: str) -> str:
    text = text.replace("\\", "\\\\")
    return text.replace("'", "\\'") if quote == "'" else text


def repr_str(s: str) -> str:
    """``repr(s)`` (CPython's ``unicode_repr``): non-printable characters by the pinned table are escaped.

    A run of non-printable characters is escaped by the ``unicode_escape`` codec, which writes exactly
    ``repr``'s escapes (``\\t \\n \\r \\xhh \\uhhhh \\Uhhhhhhhh``) and consults no Unicode table.
    """
    quote = '"' if "'" in s and '"' not in s else "'"
    out: list[str] = [quote]
    pos = 0
    for m in _code_re("nonprintable_runs").finditer(classify(s)):
        a, b = m.span()
        out.append(_escape_printable(s[pos:a], quote))
        out.append(s[a:b].encode("unicode_escape").decode("ascii"))
        pos = b
    out.append(_escape_printable(s[pos:], quote))
    out.append(quote)
    return "".join(out)


def cost(name: str, s: str) -> int:
    """Cycles charged for ``name`` on the non-ASCII text ``s`` on top of the method's own cost
    (``costs.UNICODE_CHAR`` per code point, ``costs.UNICODE_STEP`` per :func:`events`)."""
    return costs.UNICODE_CHAR * len(s) + costs.UNICODE_STEP * events(name, s)


def events(name: str, s: str) -> int:
    """Context-dependent steps of ``name`` on ``s`` that may run in Python rather than C (priced per step
    by ``costs.UNICODE_STEP``): final-sigma decisions (every character when the fast path has no free
    marker), title() runs, escaped runs of repr()."""
    n = 0
    if name in ("lower", "swapcase", "capitalize", "title") and _SIGMA in s:
        # each sigma; every character when the text leaves no free marker (CPython's loop in Python)
        n += s.count(_SIGMA) + (len(s) if len(_free_markers(s)) < 2 else 0)
    if name == "title":
        n += 2 * len(_code_re("cased_runs").findall(classify(s))) + 1
    elif name == "repr":
        n += len(_code_re("nonprintable_runs").findall(classify(s)))
    return n


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

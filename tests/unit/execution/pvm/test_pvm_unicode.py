"""The PVM's table-dependent str semantics come from the pinned Unicode 14.0.0 tables.

Three kinds of evidence: characters hand-checked against the Unicode 14.0.0 / 15.0.0
standard (UnicodeData.txt, SpecialCasing.txt, PropList.txt; an independent source), the
pinned implementation agreeing with CPython 3.11 (whose tables are the pinned ones) on
random text, and actors seeing the pinned results through the sandbox.  The checked-in
tables are compared with what the generator derives from a Unicode-14 interpreter.
"""

from __future__ import annotations

import importlib.util
import random
import unicodedata
from pathlib import Path

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import PvmError, call_handler, compile_actor, unicode_tables
from cowboy_node.execution.pvm import unicode_str as unistr

ROOT = Path(__file__).resolve().parents[4]
PINNED_INTERPRETER = unicodedata.unidata_version == unicode_tables.UNICODE_VERSION
needs_pinned_interpreter = pytest.mark.skipif(
    not PINNED_INTERPRETER,
    reason="not applicable: compares with CPython's own Unicode 14.0.0 tables")

# (character, property, expected) from the Unicode Character Database, checked by hand.
HAND_CHECKED_PREDICATES = [
    ("\u0660", "isdecimal", True),     # ARABIC-INDIC DIGIT ZERO: Nd
    ("\u00b2", "isdecimal", False),    # SUPERSCRIPT TWO: No, Numeric_Type=Digit
    ("\u00b2", "isdigit", True),
    ("\u2155", "isdigit", False),      # VULGAR FRACTION ONE FIFTH: Numeric_Type=Numeric
    ("\u2155", "isnumeric", True),
    ("\u3000", "isspace", True),       # IDEOGRAPHIC SPACE: Zs
    ("\u1680", "isspace", True),       # OGHAM SPACE MARK: Zs
    ("\u200b", "isspace", False),      # ZERO WIDTH SPACE: Cf
    ("\u200b", "isprintable", False),
    ("\u00a0", "isprintable", False),  # NO-BREAK SPACE: Zs (only the ASCII space is printable)
    ("\U0001fae0", "isprintable", True),  # MELTING FACE: added in Unicode 14.0
    ("\u0870", "isalpha", True),       # ARABIC LETTER ALEF WITH ATTACHED FATHA: Lo, added in 14.0
    ("\U0001fae8", "isprintable", False),  # SHAKING FACE: added in Unicode 15.0, unassigned in 14.0
    ("\U00011f04", "isalpha", False),  # KAWI LETTER A: added in Unicode 15.0
    ("\u01c5", "istitle", True),       # LATIN CAPITAL LETTER D WITH SMALL LETTER Z WITH CARON: Lt
    ("\u01c5", "isupper", False),
    ("\u0345", "islower", True),       # COMBINING GREEK YPOGEGRAMMENI: Other_Lowercase
    ("\u2118", "isidentifier", True),  # SCRIPT CAPITAL P: Other_ID_Start
    ("\u00b7", "isidentifier", False),  # MIDDLE DOT: Other_ID_Continue only
    ("\u10fc", "islower", False),      # MODIFIER LETTER GEORGIAN NAR: Other_Lowercase only from 15.0
    ("\uab69", "islower", False),      # MODIFIER LETTER SMALL TURNED W: likewise
    ("\u4e24", "isnumeric", False),    # CJK ideograph 'two': a numeric value only from 15.1
    ("\u4e8c", "isnumeric", True),     # CJK ideograph 'two' (kPrimaryNumeric 2 since 3.2)
]
HAND_CHECKED_MAPPINGS = [
    ("\u00df", "upper", "SS"),                # SpecialCasing: ß -> SS
    ("\u00df", "casefold", "ss"),
    ("\u1e9e", "lower", "\u00df"),            # LATIN CAPITAL LETTER SHARP S
    ("\u1e9e", "casefold", "ss"),
    ("\u0130", "lower", "i\u0307"),           # SpecialCasing: İ -> i + COMBINING DOT ABOVE
    ("\u01c5", "upper", "\u01c4"),
    ("\u01c5", "lower", "\u01c6"),
    ("\u01c6", "title", "\u01c5"),
    ("\ufb01", "upper", "FI"),                # LATIN SMALL LIGATURE FI
    ("\ufb01", "title", "Fi"),
    ("\u0345", "upper", "\u0399"),
    ("\u1f88", "lower", "\u1f80"),            # GREEK CAPITAL ALPHA WITH PSILI AND PROSGEGRAMMENI
    ("\u1f80", "upper", "\u1f08\u0399"),
    ("\u03a3", "lower", "\u03c3"),            # alone: no cased letter before it
    ("\u039f\u0394\u039f\u03a3", "lower", "\u03bf\u03b4\u03bf\u03c2"),  # final sigma
    ("\u039f\u03a3\u039f", "lower", "\u03bf\u03c3\u03bf"),
    ("\u039f\u03a3\u0301 x", "lower", "\u03bf\u03c2\u0301 x"),  # a case-ignorable mark after it
    ("\u00e9t\u00e9 d'\u00e9t\u00e9", "title", "\u00c9t\u00e9 D'\u00c9t\u00e9"),
]


def test_pinned_version_is_unicode_14() -> None:
    assert unicode_tables.UNICODE_VERSION == "14.0.0"


@pytest.mark.parametrize(("ch", "name", "expected"), HAND_CHECKED_PREDICATES)
def test_hand_checked_properties(ch: str, name: str, expected: bool) -> None:
    assert unistr.predicate(name, ch) is expected


@pytest.mark.parametrize(("s", "name", "expected"), HAND_CHECKED_MAPPINGS)
def test_hand_checked_case_mappings(s: str, name: str, expected: str) -> None:
    assert unistr.MAPPINGS[name](s) == expected


def test_repr_escapes_what_unicode_14_leaves_unassigned() -> None:
    assert unistr.repr_str("a\U0001fae8") == "'a\\U0001fae8'"   # unassigned in 14.0
    assert unistr.repr_str("a\U0001fae0") == "'a\U0001fae0'"    # MELTING FACE, 14.0
    assert unistr.repr_str("\u00e9'\xa0\u2028") == '"\u00e9\'\\xa0\\u2028"'


def test_whitespace_and_lines() -> None:
    assert unistr.split("\u3000a\u1680b  c\u00a0", -1) == ["a", "b", "c"]
    assert unistr.split(" a b  c ", 1) == ["a", "b  c "]
    assert unistr.rsplit(" a b  c ", 1) == [" a b", "c"]
    assert unistr.strip("\u3000\u00e9\u2029", "strip") == "\u00e9"
    assert unistr.splitlines("a\u2028b\r\nc\x85", True) == ["a\u2028", "b\r\n", "c\x85"]
    assert unistr.whitespace() == "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(
        chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000"


def test_numbers_read_decimal_digits_of_any_script() -> None:
    assert unistr.parse_int("\u0663\u0664", 10) == 34
    assert unistr.parse_int("\u3000\U0001d7cf\U0001d7d0 ", 10) == 12   # MATHEMATICAL BOLD DIGITS
    assert unistr.parse_int("\uff11\uff10", 16) == 16                  # FULLWIDTH DIGITS
    assert unistr.parse_float("\u0661.\u0665") == 1.5
    with pytest.raises(ValueError, match=r"invalid literal for int\(\) with base 10: '\\U0001fae8'"):
        unistr.parse_int("\U0001fae8", 10)
    with pytest.raises(ValueError, match="base must be"):
        unistr.parse_int("\u00b2", 99)
    with pytest.raises(ValueError, match="could not convert string to float: '\u00b2'"):
        unistr.parse_float("\u00b2")


@needs_pinned_interpreter
def test_checked_in_tables_are_what_the_generator_derives() -> None:
    spec = importlib.util.spec_from_file_location("gen_unicode_tables", ROOT / "scripts" / "gen_unicode_tables.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (ROOT / "cowboy_node" / "execution" / "pvm" / "unicode_tables.py").read_text(encoding="utf-8")
    assert gen.render(gen.derive()) == text


# Characters where the algorithms have context rules or the tables have special entries.
_POOL = ([chr(c) for c in range(0x20, 0x250)] + [chr(c) for c in range(0x370, 0x400)]
         + list("\u03a3\u0345\u0130\u00df\u1e9e\ufb01\u1f88\u01c5\u0660\u06f5\u2028\x85\u2000\u3000\u200b\xa0"
                "\u0301\u02b0\u00b7'\"\\ \t\n\r\x7f\U0001fae8\U0001fae0\U00010400\U0001d7ce\U000e0001\ud800")) * 1
_POOL += ["\u03a3", " ", "\u0301", "'"] * 40


@needs_pinned_interpreter
def test_pinned_implementation_agrees_with_cpython_3_11_on_random_text() -> None:
    rnd = random.Random(17)
    for _ in range(4000):
        s = "".join(rnd.choice(_POOL) for _ in range(rnd.randint(0, 9)))
        for name in sorted(unistr.PREDICATES):
            assert unistr.predicate(name, s) == getattr(s, name)(), (name, s)
        for name, fn in unistr.MAPPINGS.items():
            assert fn(s) == getattr(s, name)(), (name, s)
        assert unistr.repr_str(s) == repr(s), s
        for name in ("strip", "lstrip", "rstrip"):
            assert unistr.strip(s, name) == getattr(s, name)(), (name, s)
        for maxsplit in (-1, 0, 1, 2):
            assert unistr.split(s, maxsplit) == s.split(None, maxsplit), s
            assert unistr.rsplit(s, maxsplit) == s.rsplit(None, maxsplit), s
        assert unistr.splitlines(s, False) == s.splitlines() and unistr.splitlines(s, True) == s.splitlines(True)


@needs_pinned_interpreter
def test_number_parsing_agrees_with_cpython_3_11() -> None:
    rnd = random.Random(3)
    pool = [*"0123456789 -+._e", "\u0663", "\u06f5", "\uff11", "\U0001d7ce", "\u3000", "\u00b2", "\u00e9"]
    for _ in range(3000):
        s = "".join(rnd.choice(pool) for _ in range(rnd.randint(1, 6)))
        for parse, native in ((lambda t: unistr.parse_int(t, 10), int), (unistr.parse_float, float)):
            try:
                expected: object = native(s)
            except ValueError as e:
                expected = str(e)
            try:
                got: object = parse(s)
            except ValueError as e:
                got = str(e)
            assert got == expected, s


# --- through the sandbox --------------------------------------------------------------
ACTOR = r'''
import json

def probe(payload):
    s = payload.decode()
    out = {
        "upper": s.upper(), "lower": s.lower(), "casefold": s.casefold(), "title": s.title(),
        "capitalize": s.capitalize(), "swapcase": s.swapcase(),
        "flags": [s.isalpha(), s.isprintable(), s.isspace(), s.isdecimal(), s.isdigit(), s.isnumeric(),
                  s.isalnum(), s.isidentifier(), s.islower(), s.isupper(), s.istitle()],
        "split": s.split(), "rsplit": s.rsplit(None, 1), "strip": s.strip(), "lines": s.splitlines(True),
        "repr": repr(s), "str_list": str([s]), "fstr": f"{s!r}", "pct": "%r|%s" % (s, s),
        "unbound": str.upper(s),
    }
    return json.dumps(out, ensure_ascii=True).encode()

def number(payload):
    s = payload.decode()
    return repr([int(s), float(s)]).encode()

def bad_number(payload):
    return str(int(payload.decode())).encode()
'''


def _run(handler: str, payload: bytes) -> bytes:
    actor = compile_actor(ACTOR, allowed_modules={})
    return call_handler(actor, handler, payload, meter=Meter(5_000_000, 0), modules={})


def test_actor_sees_the_pinned_semantics() -> None:
    import json
    s = "\u039f\u0394\u039f\u03a3\u3000\U0001fae8 \u00df\u0130"
    out = json.loads(_run("probe", s.encode()))
    assert out["upper"] == "\u039f\u0394\u039f\u03a3\u3000\U0001fae8 SS\u0130"
    assert out["lower"] == "\u03bf\u03b4\u03bf\u03c2\u3000\U0001fae8 \u00dfi\u0307"
    assert out["casefold"] == "\u03bf\u03b4\u03bf\u03c3\u3000\U0001fae8 ssi\u0307"
    assert out["flags"] == [False] * 8 + [False, False, False]
    assert out["split"] == ["\u039f\u0394\u039f\u03a3", "\U0001fae8", "\u00df\u0130"]
    assert out["repr"] == out["fstr"] == "'\u039f\u0394\u039f\u03a3\\u3000\\U0001fae8 \u00df\u0130'"
    assert out["str_list"] == "[" + out["repr"] + "]"
    assert out["pct"] == out["repr"] + "|" + s
    assert out["unbound"] == out["upper"]
    assert json.loads(_run("probe", "\U0001fae0".encode()))["flags"][1] is True  # printable in 14.0


def test_actor_reads_digits_of_other_scripts() -> None:
    assert _run("number", "\u0663\u0664".encode()) == b"[34, 34.0]"
    with pytest.raises(PvmError) as e:
        _run("bad_number", "\U0001fae8".encode())
    assert e.value.code == "handler_error"
    assert "invalid literal for int() with base 10: '\\U0001fae8'" in str(e.value)


def test_not_found_messages_use_the_pinned_repr() -> None:
    # CPython renders these with its own repr (Unicode tables; an address for other objects)
    actor = compile_actor(
        "class Box:\n    pass\n\n"
        "def h(payload):\n    out = []\n"
        "    for probe in ('\\U0001fae8', Box()):\n"
        "        try:\n            [1].index(probe)\n        except ValueError as e:\n            out.append(str(e))\n"
        "    try:\n        range(3).index('\\u3000')\n    except ValueError as e:\n        out.append(str(e))\n"
        "    return '|'.join(out).encode()\n", allowed_modules={})
    got = call_handler(actor, "h", b"", meter=Meter(1_000_000, 0), modules={}).decode()
    assert got == "'\\U0001fae8' is not in list|<Box object> is not in list|value is not in range"


def _cycles(expr: str) -> int:
    actor = compile_actor(f"def h(payload):\n    s = {expr}\n    s.upper()\n    s.title()\n    return b''\n",
                          allowed_modules={})
    meter = Meter(1_000_000, 0)
    call_handler(actor, "h", b"", meter=meter, modules={})
    return meter.cycles_used


def test_non_ascii_text_pays_the_unicode_surcharge() -> None:
    # docs/pvm.md: + UNICODE_CHAR (2) per code point, + UNICODE_STEP (16) per final-sigma decision and
    # per title() run (2 x cased runs + 1); ASCII text of the same length pays neither.
    ascii_cycles = _cycles("'ab ab'")
    greek_cycles = _cycles("'\\u0391\\u03a3 \\u0391\\u03a3'")
    upper = 2 * 5
    title = 2 * 5 + 16 * (2 + 2 * 2 + 1)
    assert greek_cycles - ascii_cycles == upper + title


@needs_pinned_interpreter
def test_sigma_rule_without_free_markers_falls_back_to_cpythons_loop() -> None:
    # text that holds the private-use characters the fast final-sigma path borrows as markers
    crowd = "".join(chr(0x10FFFD - k) for k in range(64))
    rnd = random.Random(5)
    for _ in range(300):
        s = crowd + "".join(rnd.choice(_POOL) for _ in range(rnd.randint(0, 9)))
        for name in ("lower", "swapcase", "capitalize", "title"):
            assert unistr.MAPPINGS[name](s) == getattr(s, name)(), (name, s)
            assert unistr._slow(name, s[64:]) == getattr(s[64:], name)(), (name, s)
    assert unistr.events("lower", crowd + "A\u03a3") == 1 + 66  # priced per character on that path
    assert unistr.events("lower", "A\u03a3") == 1


def test_format_widths_are_ascii_digits_only() -> None:
    # CPython reads any decimal digit of its own tables as a width: KAWI DIGIT THREE is one on 3.12 only
    for spec in ("\\u0663", "\\U00011f53", ">\\u0663"):
        actor = compile_actor(f"def h(payload):\n    return format(5, '{spec}').encode()\n", allowed_modules={})
        with pytest.raises(PvmError) as e:
            call_handler(actor, "h", b"", meter=Meter(1_000_000, 0), modules={})
        assert "unsupported format specifier" in str(e.value)
    actor = compile_actor("def h(payload):\n    return f'{5:\\u2605>3}|%3d'.encode() % 7\n", allowed_modules={})
    assert call_handler(actor, "h", b"", meter=Meter(1_000_000, 0), modules={}) == "\u2605\u26055|  7".encode()

"""The declarative schema of ``runner.toml``: every key is declared once, as a field of a settings dataclass.

A field made by one of the constructors below (:func:`integer`, :func:`seconds`, :func:`choice`, …) carries a
:class:`Spec` in its metadata: the key's parser (type and bounds), its doc text and, through the field, its
default. :func:`read` parses one TOML table against a dataclass's fields (unknown keys, required keys, every
value) and :func:`reference` lists the keys of a section for ``docs/runner-settings.md``. Problems are a
:class:`SettingError` naming the full dotted key; ``cowboy_runner.config`` shows it as ``runner.toml: <key>: …``.

This module imports nothing of the runner, so the executors' own configuration (``executors/config.py``) can
declare the keys it shares with ``runner.toml`` (the custom executor's sandbox) here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from cowboy_protocol.http_client import normalize_url
from cowboy_protocol.netaddr import parse_host_port

SPEC = "runner.toml"
"""Metadata key of a field's :class:`Spec`."""


class SettingError(Exception):
    """An invalid ``runner.toml`` key; ``key`` is its full dotted name (``executors.llm.timeout_s``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        """Full dotted key."""
        self.message = message
        """What is wrong with it."""


Parser = Callable[[object, str], Any]
"""Checks one present value; called with the value and its full dotted key, returns the parsed value."""


@dataclass(frozen=True, slots=True)
class Spec:
    """How one ``runner.toml`` key is read and documented (the default is the field's)."""

    parse: Parser
    """Type and bounds check of a present value (raises :class:`SettingError`)."""
    doc: str
    """What the key does (the reference's text)."""
    kind: str
    """What the value must be, in words (the reference's type column)."""
    key: str | None = None
    """TOML key when it differs from the field name."""
    required: bool = False
    """Absent is an error (``required key is missing``)."""


def _field(default: Any, spec: Spec, *, factory: Callable[[], Any] | None = None) -> Any:
    if factory is not None:
        return field(default_factory=factory, metadata={SPEC: spec})
    if default is MISSING:
        return field(metadata={SPEC: spec})
    return field(default=default, metadata={SPEC: spec})


# -- value checks (the texts are the ones the loader has always shown) ------------------------
def check_int(value: object, key: str, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (booleans are not integers)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SettingError(key, f"expected an integer >= {minimum}, got {value!r}")
    return value


def check_seconds(value: object, key: str) -> float:
    """A positive finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise SettingError(key, f"expected a positive number of seconds, got {value!r}")
    return float(value)


def check_bool(value: object, key: str) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise SettingError(key, f"expected true or false, got {value!r}")
    return value


def check_str(value: object, key: str) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise SettingError(key, f"expected a non-empty string, got {value!r}")
    return value


def check_table(value: object, key: str) -> dict[str, Any]:
    """A TOML table."""
    if not isinstance(value, dict):
        raise SettingError(key, "expected a table")
    return value


def check_known(table: Mapping[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    """Every key of ``table`` is one of ``allowed`` (first unknown one in sorted order is the error)."""
    for k in sorted(table):
        if k not in allowed:
            raise SettingError(f"{where}.{k}" if where else k, f"unknown key; allowed: {', '.join(allowed)}")


def check_strings(value: object, key: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    """An array of non-empty strings without NUL (non-empty unless ``allow_empty``)."""
    if not isinstance(value, list) or not all(isinstance(a, str) and a and "\x00" not in a for a in value) \
            or (not value and not allow_empty):
        raise SettingError(key, f"expected {'an' if allow_empty else 'a non-empty'} array of non-empty strings "
                                f"without NUL, got {value!r}")
    return tuple(value)


def check_string_map(value: object, key: str) -> dict[str, str]:
    """A table of strings without NUL, sorted by key."""
    t = check_table(value, key)
    for k, v in t.items():
        if not isinstance(v, str) or "\x00" in v or "\x00" in k:
            raise SettingError(f"{key}.{k}", f"expected a string without NUL, got {v!r}")
    return dict(sorted(t.items()))


def check_url(value: object, key: str) -> str:
    """An ``http://`` or ``https://`` URL, normalised."""
    if not isinstance(value, str):
        raise SettingError(key, f"expected an http:// or https:// URL string, got {value!r}")
    try:
        return normalize_url(value)
    except ValueError as e:
        raise SettingError(key, str(e)) from None


def check_host_port(value: object, key: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT``)."""
    if not isinstance(value, str):
        raise SettingError(key, f"expected HOST:PORT, got {value!r}")
    try:
        return parse_host_port(value, key=key)
    except ValueError as e:
        raise SettingError(key, str(e).removeprefix(f"{key}: ")) from None


def check_hash_key(text: str, where: str, what: str = "a 32-byte hash") -> bytes:
    """32 bytes from a table key of 64 hex digits, optionally ``0x``-prefixed; the error names ``where.text``."""
    body = text[2:] if text.startswith("0x") else text
    if len(body) != 64 or any(c not in "0123456789abcdefABCDEF" for c in body):
        raise SettingError(f"{where}.{text}", f"expected {what}: 64 hex digits, optionally 0x-prefixed")
    return bytes.fromhex(body)


# -- field constructors -----------------------------------------------------------------------
def integer(default: int, doc: str, *, minimum: int = 1, key: str | None = None) -> Any:
    """An integer key >= ``minimum``."""
    return _field(default, Spec(lambda v, k: check_int(v, k, minimum), doc, f"integer >= {minimum}", key))


def optional_integer(doc: str, *, minimum: int = 1) -> Any:
    """An integer key >= ``minimum`` whose absence means None."""
    return _field(None, Spec(lambda v, k: check_int(v, k, minimum), doc, f"integer >= {minimum}"))


def seconds(default: float, doc: str) -> Any:
    """A positive number of seconds (read as a float)."""
    return _field(default, Spec(check_seconds, doc, "seconds > 0"))


def positive(default: float, doc: str) -> Any:
    """A positive finite number (read as a float; the error says seconds, as it always has)."""
    return _field(default, Spec(check_seconds, doc, "number > 0"))


def number_in(default: float, low: float, high: float, doc: str) -> Any:
    """A number in ``low..high`` (read as a float)."""
    def parse(v: object, k: str) -> float:
        if isinstance(v, bool) or not isinstance(v, int | float) or not low <= v <= high:
            raise SettingError(k, f"expected a number in {low:g}..{high:g}, got {v!r}")
        return float(v)
    return _field(default, Spec(parse, doc, f"number in {low:g}..{high:g}"))


def boolean(default: bool, doc: str) -> Any:
    """``true`` or ``false``."""
    return _field(default, Spec(check_bool, doc, "boolean"))


def text(default: str | None, doc: str, *, key: str | None = None, max_chars: int | None = None) -> Any:
    """A non-empty string (None default: absent means None)."""
    def parse(v: object, k: str) -> str:
        s = check_str(v, k)
        if max_chars is not None and len(s) > max_chars:
            raise SettingError(k, f"longer than {max_chars} characters")
        return s
    return _field(default, Spec(parse, doc, "string", key))


def choice(default: str, choices: tuple[str, ...], doc: str) -> Any:
    """One of ``choices``."""
    def parse(v: object, k: str) -> str:
        if v not in choices:
            raise SettingError(k, f"expected one of {list(choices)}, got {v!r}")
        return str(v)
    return _field(default, Spec(parse, doc, "one of " + ", ".join(choices)))


def strings(default: tuple[str, ...], doc: str, *, allow_empty: bool = True,
            then: Callable[[tuple[str, ...], str], tuple[str, ...]] | None = None) -> Any:
    """An array of non-empty strings, optionally checked further by ``then``."""
    def parse(v: object, k: str) -> tuple[str, ...]:
        out = check_strings(v, k, allow_empty=allow_empty)
        return out if then is None else then(out, k)
    return _field(default, Spec(parse, doc, "array of strings"))


def url(doc: str, *, required: bool = False) -> Any:
    """An ``http(s)://`` URL (absent: None, or an error when ``required``)."""
    return _field(MISSING if required else None, Spec(check_url, doc, "URL", required=required))


def host_port(default: tuple[str, int] | None, doc: str) -> Any:
    """``HOST:PORT``."""
    return _field(default, Spec(check_host_port, doc, "HOST:PORT"))


def table(parse: Parser, doc: str, kind: str) -> Any:
    """A sub-table parsed by ``parse`` (absent: empty)."""
    return _field(None, Spec(parse, doc, kind), factory=dict)


# -- reading ----------------------------------------------------------------------------------
def specs(cls: type) -> tuple[tuple[Field[Any], Spec], ...]:
    """The declared keys of a settings dataclass, in declaration order."""
    return tuple((f, f.metadata[SPEC]) for f in fields(cls) if SPEC in f.metadata)


def keys(cls: type) -> tuple[str, ...]:
    """TOML keys of a settings dataclass."""
    return tuple(s.key or f.name for f, s in specs(cls))


def read(cls: type, t: Mapping[str, Any], where: str, *, known: bool = True) -> dict[str, Any]:
    """Field values of ``cls`` from the TOML table ``t`` at ``where``: present keys parsed, absent ones left out
    (their default applies). ``known``: other keys are errors."""
    if known:
        check_known(t, where, keys(cls))
    out: dict[str, Any] = {}
    for f, spec in specs(cls):
        key = spec.key or f.name
        if key in t:
            out[f.name] = spec.parse(t[key], f"{where}.{key}" if where else key)
        elif spec.required:
            raise SettingError(f"{where}.{key}" if where else key, "required key is missing")
    return out


def default_text(f: Field[Any]) -> str:
    """A field's default as the reference shows it (TOML-like)."""
    if f.metadata[SPEC].required:
        return "required"
    if f.default_factory is not MISSING:
        return "empty"
    v = f.default
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], int) and not isinstance(v[0], int):
        return f'"{v[0]}:{v[1]}"'
    if isinstance(v, tuple):
        return "[" + ", ".join(f'"{s}"' for s in v) + "]"
    return repr(v)


def reference(sections: tuple[tuple[str, type], ...]) -> str:
    """The Markdown key reference of ``sections`` (``(section name, settings dataclass)``)."""
    out = []
    for name, cls in sections:
        out += [f"### [{name}]", "", "| Key | Type | Default | Meaning |", "|---|---|---|---|"]
        for f, spec in specs(cls):
            doc = " ".join(spec.doc.split()).replace("``", "`").replace("|", "\\|")
            out.append(f"| `{spec.key or f.name}` | {spec.kind} | `{default_text(f)}` | {doc} |")
        out.append("")
    return "\n".join(out)

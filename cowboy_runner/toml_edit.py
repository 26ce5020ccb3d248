"""Set single keys in a commented ``runner.toml`` without rewriting the rest of it.

``cowboy-runner capabilities`` changes two or three keys of a file the operator may have commented and edited by
hand; a TOML round-trip would lose every comment. :func:`set_key` replaces the ``key = value`` line of one section
(or adds it right after the section header, or appends the section). The caller re-parses the result and checks
that it says what was meant (a value spread over several lines is not something this editor rewrites).
"""

from __future__ import annotations

import json
import re


def toml_value(value: bool | list[str]) -> str:
    """A TOML literal for a boolean or an array of plain strings (JSON string escapes are TOML's basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "[" + ", ".join(json.dumps(v) for v in value) + "]"


def _header(line: str) -> str | None:
    m = re.fullmatch(r"\s*\[([^\[\]]+)\]\s*(?:#.*)?", line)
    return m.group(1).strip() if m else None


def set_key(text: str, section: str, key: str, value: bool | list[str]) -> str:
    """``text`` with ``[section] key = value``: the existing line replaced, else inserted after the header, else
    the section appended at the end."""
    lines = text.splitlines()
    literal = f"{key} = {toml_value(value)}"
    start = next((i for i, line in enumerate(lines) if _header(line) == section), None)
    if start is None:
        tail = [] if not lines or not lines[-1].strip() else [""]
        return "\n".join([*lines, *tail, f"[{section}]", literal]) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if _header(lines[i]) is not None or
                lines[i].lstrip().startswith("[[")), len(lines))
    pattern = re.compile(rf"\s*{re.escape(key)}\s*=")
    for i in range(start + 1, end):
        if pattern.match(lines[i]):
            lines[i] = literal
            break
    else:
        lines.insert(start + 1, literal)
    return "\n".join(lines) + "\n"

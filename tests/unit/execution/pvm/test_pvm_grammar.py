"""PVM version 1 accepts Python 3.11's grammar, on whatever interpreter parses the actor.

The PEP 701 f-string checks only run under a 3.12+ tokenizer, so they are exercised by
running ``grammar.py`` (which imports nothing from the node) under the other CPython
versions found on this machine; the test is skipped where there are none.
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cowboy_node.execution.pvm import ActorRejected, compile_actor

GRAMMAR = Path(__file__).resolve().parents[4] / "cowboy_node" / "execution" / "pvm" / "grammar.py"

# source -> None if Python 3.11 accepts it, else the line of its refusal (rule syntax_error everywhere)
CASES: dict[str, int | None] = {
    'x = f"{a!r:>{w}} {b}"': None,
    "x = f\'\'\'{ {'k': 1}['k'] }\'\'\'": None,
    'x = f"{\'a\'}"': None,
    'x = 1\nx = f"{a["k"]}"': 2,                 # the enclosing quote inside (PEP 701)
    "x = f\"{'\\n'.join(a)}\"": 1,             # a backslash in the expression part
    'x = 1\nx = f"""{a # note\n}"""': 3,        # a comment in the expression part (3.11: the last line)
    'x = f"{a\n}"': 1,                           # a line break in a single-quoted f-string
    'x = f"{f"{f"{a}"}"}"': 1,
    "x = 1\ntype X = int": 2,
    "def f[T](x: T) -> T:\n    return x": 1,
    "class A[T]:\n    pass": 1,
    "try:\n    pass\nexcept (ValueError, TypeError):\n    pass": None,
    "x = 1\n\U00011f04 = 2": 2,                  # KAWI LETTER A: a letter only since Unicode 15
    "x = 1\ncaf\u00e9 = 2": 2,                   # a Unicode 14 letter: still not ASCII
    'x = "\\N{SHAKING FACE}"': 1,               # a character name of Unicode 15
    'x = 1\ny = "\\N{BULLET}"': 2,              # a name of every version: still refused
    'x = r"\\N{BULLET}" + "\\\\N{BULLET}"': None,
    'x = ("a"\n     f"{b["k"]}"\n     "c")': 2,     # implicit concatenation
    'x = f"""\n{a}\n{b[\'\\n\']}\n"""': 4,       # 3.11 reports the literal's last line
    'x = f"{a:{b}}" f\'{c["d"]}\'': None,
    'x = f"{a:{b:{c}}}"': 1,                      # 3.11: expressions nested too deeply
    'x = 1\nx = ("a"\n     f"{a:{b:>{c}}}")': 3,
    'x = f"{a:{ {b} }}"': None,
}

SCRIPT = r'''
import ast, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("grammar", sys.argv[1])
g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
out = {}
for src in json.loads(sys.stdin.read()):
    try:
        v = g.check(src, g.parse(src))
        out[src] = None if v is None else [v[1], v[0]]
    except SyntaxError as e:
        out[src] = ["syntax_error", e.lineno]
print(json.dumps(out))
'''
EXPECTED = {src: None if line is None else ["syntax_error", line] for src, line in CASES.items()}


def _other_pythons() -> list[str]:
    found = [shutil.which(f"python3.{m}") for m in (12, 13, 14)]
    found += sorted(glob.glob(str(Path.home() / ".pyenv" / "versions" / "3.1[234]*" / "bin" / "python")))
    usable = []
    for p in dict.fromkeys(p for p in found if p):
        ok = subprocess.run([p, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"], capture_output=True,
                            timeout=30).returncode == 0
        if ok:  # a pyenv shim without that version installed exits 127
            usable.append(p)
    return usable


def test_this_interpreter_accepts_exactly_the_3_11_grammar() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(GRAMMAR)],
                         input=json.dumps(list(CASES)), capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == EXPECTED


@pytest.mark.skipif(not _other_pythons(), reason="no CPython 3.12+ on this machine")
def test_newer_interpreters_accept_exactly_the_3_11_grammar() -> None:
    for python in _other_pythons():
        out = subprocess.run([python, "-c", SCRIPT, str(GRAMMAR)], input=json.dumps(list(CASES)),
                             capture_output=True, text=True, timeout=60, check=True)
        assert json.loads(out.stdout) == EXPECTED, python


def test_non_ascii_identifiers_are_refused() -> None:
    for src in ("def h(payload):\n    caf\u00e9 = 1\n    return b''\n",
                "def h(payload, \u00e9=1):\n    return b''\n",
                "def h(payload):\n    return payload.d\u00e9code()\n"):
        with pytest.raises(ActorRejected) as e:
            compile_actor(src, allowed_modules={})
        assert e.value.rule == "syntax_error" and e.value.line in (2, 1) and "not ASCII" in e.value.message
    # non-ASCII text in string literals is fine
    compile_actor("def h(payload):\n    return '\u00e9\U0001fae8'.encode()\n", allowed_modules={})


def test_type_statement_is_refused() -> None:
    with pytest.raises(ActorRejected) as e:
        compile_actor("type X = int\n", allowed_modules={})
    assert (e.value.rule, e.value.line) == ("syntax_error", 1)

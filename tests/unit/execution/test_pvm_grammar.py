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

GRAMMAR = Path(__file__).resolve().parents[3] / "cowboy_node" / "execution" / "pvm" / "grammar.py"

# source -> accepted by Python 3.11 (checked with python3.11 -c "import ast; ast.parse(...)")
CASES = {
    'x = f"{a!r:>{w}} {b}"': True,
    "x = f'''{ {'k': 1}['k'] }'''": True,
    'x = f"{\'a\'}"': True,
    'x = f"{a["k"]}"': False,                  # the enclosing quote inside (PEP 701)
    "x = f\"{'\\n'.join(a)}\"": False,          # a backslash in the expression part
    'x = f"""{a # note\n}"""': False,           # a comment in the expression part
    'x = f"{a\n}"': False,                      # a line break in a single-quoted f-string
    'x = f"{f"{f"{a}"}"}"': False,
    "type X = int": False,
    "def f[T](x: T) -> T:\n    return x": False,
    "class A[T]:\n    pass": False,
    "try:\n    pass\nexcept (ValueError, TypeError):\n    pass": True,
}

SCRIPT = r'''
import ast, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("grammar", sys.argv[1])
g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
out = {}
for src in json.loads(sys.stdin.read()):
    try:
        out[src] = g.check(src, g.parse(src)) is None
    except SyntaxError:
        out[src] = False
print(json.dumps(out))
'''


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
    assert json.loads(out.stdout) == CASES


@pytest.mark.skipif(not _other_pythons(), reason="no CPython 3.12+ on this machine")
def test_newer_interpreters_accept_exactly_the_3_11_grammar() -> None:
    for python in _other_pythons():
        out = subprocess.run([python, "-c", SCRIPT, str(GRAMMAR)], input=json.dumps(list(CASES)),
                             capture_output=True, text=True, timeout=60, check=True)
        assert json.loads(out.stdout) == CASES, python


def test_non_ascii_identifiers_are_refused() -> None:
    for src in ("def h(payload):\n    caf\u00e9 = 1\n    return b''\n",
                "def h(payload, \u00e9=1):\n    return b''\n",
                "def h(payload):\n    return payload.d\u00e9code()\n"):
        with pytest.raises(ActorRejected) as e:
            compile_actor(src, allowed_modules={})
        assert e.value.rule == "non_ascii_identifier" and e.value.line in (2, 1)
    # non-ASCII text in string literals is fine
    compile_actor("def h(payload):\n    return '\u00e9\U0001fae8'.encode()\n", allowed_modules={})


def test_type_statement_is_refused() -> None:
    with pytest.raises(ActorRejected) as e:
        compile_actor("type X = int\n", allowed_modules={})
    assert e.value.rule in ("syntax_error", "syntax_version")

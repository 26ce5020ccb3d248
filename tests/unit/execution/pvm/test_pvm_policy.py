"""PVM deploy-time policy: every rule rejects with its line and rule name (docs/pvm.md)."""

from __future__ import annotations

import textwrap

import pytest

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import ActorRejected, Limits, call_handler, compile_actor
from cowboy_protocol.crypto.keccak import keccak256


def rejected(source: str, **kwargs: object) -> ActorRejected:
    with pytest.raises(ActorRejected) as info:
        compile_actor(textwrap.dedent(source), **kwargs)  # type: ignore[arg-type]
    return info.value


# (rule, source, line of the first violation)
CASES = [
    ("syntax_error", "def handler(payload):\n    return (\n", 2),
    ("underscore_name", "x = 1\n__secret = 2\n", 2),
    ("underscore_name", "def handler(__payload):\n    return b''\n", 1),
    ("underscore_name", "def _pvm_charge():\n    pass\n", 1),
    ("underscore_name", "x = __builtins__\n", 1),
    ("underscore_name", "def f():\n    return dict(__x=1)\n", 2),
    ("underscore_name", "class A:\n    def __eq__(self, other):\n        return True\n", 2),
    ("dunder_attribute", "x = 1\ny = ().__class__\n", 2),
    ("dunder_attribute", "def handler(p):\n    return handler.__globals__\n", 2),
    ("private_attribute", "def f(p):\n    return p._x\n", 2),
    ("forbidden_attribute", "s = '{0.__class__}'.format(1)\n", 1),
    ("forbidden_attribute", "s = '{x}'.format_map({})\n", 1),
    ("forbidden_attribute", "g = (x for x in [])\nf = g.gi_frame\n", 2),
    ("forbidden_attribute", "def f(frame):\n    return frame.f_back\n", 2),
    ("forbidden_attribute", "def f(e):\n    return e.tb_frame\n", 2),
    ("forbidden_attribute", "def f(c):\n    return c.co_code\n", 2),
    ("forbidden_attribute", "m = int.mro()\n", 1),
    ("forbidden_name", "x = 1\ny = eval('1')\n", 2),
    ("forbidden_name", "y = getattr(1, 'real')\n", 1),
    ("forbidden_name", "y = type(1)\n", 1),
    ("forbidden_name", "y = set([1])\n", 1),
    ("forbidden_name", "y = hash('x')\n", 1),
    ("forbidden_name", "print('x')\n", 1),
    ("import_not_allowed", "import os\n", 1),
    ("import_not_allowed", "x = 1\nfrom sys import modules\n", 2),
    ("import_not_allowed", "def f():\n    import importlib\n", 2),
    ("import_not_allowed", "from __future__ import division\n", 1),
    ("import_form", "import pvm_host.sub\n", 1),
    ("relative_import", "from . import x\n", 1),
    ("star_import", "from json import *\n", 1),
    ("async", "async def f():\n    pass\n", 1),
    ("yield", "def f():\n    yield 1\n", 2),
    ("yield", "def f():\n    yield from [1]\n", 2),
    ("with_statement", "def f(x):\n    with x:\n        pass\n", 2),
    ("match_statement", "def f(x):\n    match x:\n        case 1:\n            pass\n", 2),
    ("except_star", "try:\n    pass\nexcept* ValueError:\n    pass\n", 1),
    ("set_literal", "x = {1, 2}\n", 1),
    ("set_literal", "x = {i for i in range(3)}\n", 1),
    ("bare_except", "try:\n    pass\nexcept:\n    pass\n", 3),
    ("catch_base_exception", "try:\n    pass\nexcept BaseException:\n    pass\n", 3),
    ("catch_base_exception", "try:\n    pass\nexcept (ValueError, SystemExit):\n    pass\n", 3),
    ("finally_control_flow", "def f():\n    try:\n        pass\n    finally:\n        return 1\n", 5),
    ("finally_control_flow", "for i in []:\n    try:\n        pass\n    finally:\n        break\n", 5),
    ("class_keywords", "class A(metaclass=int):\n    pass\n", 1),
    ("complex_literal", "x = 1\ny = 2j\n", 2),
    ("int_too_large", f"x = {1 << 4096}\n", 1),
    ("starred_target", "for a, *b in []:\n    pass\n", 1),
    ("starred_target", "x = [b for a, *b in []]\n", 1),
    ("slice_target", "def f(l):\n    l[1:2] += [3]\n", 2),
    ("slice_target", "def f(l):\n    a, l[0:1] = 1, [2]\n", 2),
    ("unsupported_construct", "def g(y):\n    return y\nclass A:\n    x = [1 < g(y) < 3 for y in [2]]\n", 4),
]


@pytest.mark.parametrize(("rule", "source", "line"), CASES, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(CASES)])
def test_rule_rejects_with_line(rule: str, source: str, line: int) -> None:
    err = rejected(source)
    assert (err.rule, err.line) == (rule, line), err
    assert isinstance(err, ValueError)
    assert err.message


def test_source_too_large_and_too_complex() -> None:
    err = rejected("x = 1\n" * 10, limits=Limits(max_source_bytes=20))
    assert (err.rule, err.line) == ("source_too_large", 0)
    deep = "x = " + "[" * 120 + "]" * 120 + "\n"
    assert rejected(deep).rule in ("too_complex", "syntax_error")
    chain = "x = " + " + ".join(["1"] * 500) + "\n"
    err = rejected(chain)
    assert (err.rule, err.line) == ("too_complex", 0)


def test_every_documented_rule_is_exercised() -> None:
    documented = {
        "syntax_error", "source_too_large", "too_complex", "underscore_name", "dunder_attribute",
        "private_attribute", "forbidden_attribute", "forbidden_name", "import_not_allowed", "import_form",
        "relative_import", "star_import", "async", "yield", "with_statement", "match_statement", "except_star",
        "set_literal", "bare_except", "catch_base_exception", "finally_control_flow", "class_keywords",
        "complex_literal", "int_too_large", "starred_target", "slice_target", "unsupported_construct",
    }
    assert documented - {rule for rule, _, _ in CASES} == {"source_too_large", "too_complex"}


def test_first_violation_in_source_order_is_reported() -> None:
    err = rejected("import os\nx = ().__class__\n")
    assert (err.rule, err.line) == ("import_not_allowed", 1)


VALID = '''
from __future__ import annotations

import json
import math
import pvm_host
from pvm_host import get_state as read
from typing import Optional

LIMIT: int = 10
counter = 0


class Account:
    kind = "basic"

    def __init__(self, owner: bytes, balance: int = 0) -> None:
        self.owner = owner
        self.balance = balance

    def deposit(self, amount: int) -> int:
        self.balance += amount
        return self.balance


class InsufficientFunds(ValueError):
    pass


def _unused_name_is_fine_as_underscore_only():
    pass
'''


def test_single_underscore_helper_is_allowed_but_not_a_handler() -> None:
    # cowboy_sdk's ``def _helper(): ...`` convention: deployable, never callable by name
    assert "_unused_name_is_fine_as_underscore_only" not in compile_actor(VALID).handlers


GOOD = '''
from __future__ import annotations

import json
import math
import pvm_host
from pvm_host import get_state as read
from typing import Optional

LIMIT: int = 10
counter = 0


class Account:
    kind = "basic"

    def __init__(self, owner: bytes, balance: int = 0) -> None:
        self.owner = owner
        self.balance = balance

    def deposit(self, amount: int) -> int:
        self.balance += amount
        return self.balance


class InsufficientFunds(ValueError):
    def __init__(self, need: int) -> None:
        ValueError.__init__(self, f"need {need}")
        self.need = need


def bump(n: int) -> int:
    global counter
    counter += n
    return counter


def deposit(payload: bytes) -> bytes:
    acct = Account(payload[:4], 5)
    total = acct.deposit(len(payload))
    for _ in range(3):
        bump(1)
    id = 7  # shadowing a forbidden builtin name is fine
    square = lambda x: x * x  # noqa: E731
    data = {"total": total, "sq": square(id), "root": math.isqrt(total), "n": counter}
    return json.dumps(data, sort_keys=True).encode()


def withdraw(payload: bytes) -> bytes:
    try:
        raise InsufficientFunds(len(payload))
    except InsufficientFunds as e:
        return str(e.need).encode() + b":" + str(e).encode()
    finally:
        pass


def peek(payload: bytes) -> Optional[bytes]:
    return read(payload)
'''


def test_valid_actor_compiles_and_lists_handlers() -> None:
    actor = compile_actor(GOOD)
    assert actor.handlers == ("bump", "deposit", "withdraw", "peek")
    assert actor.imports == ("json", "math", "pvm_host", "typing")
    meter = Meter(1_000_000, 0)
    host = {"pvm_host": {"get_state": lambda k: k + b"!"}}
    out = call_handler(actor, "deposit", b"abcdef", meter=meter, modules=host)
    assert out == b'{"n": 3, "root": 3, "sq": 49, "total": 11}'
    assert call_handler(actor, "withdraw", b"xyz", meter=meter, modules=host) == b"3:need 3"
    assert call_handler(actor, "peek", b"k", meter=meter, modules=host) == b"k!"


def test_compiled_actor_identity() -> None:
    a, b = compile_actor(GOOD), compile_actor(GOOD)
    assert a == b and hash(a) == hash(b)
    assert a.code is not b.code
    assert a.source_hash == keccak256(GOOD.encode())
    assert compile_actor(GOOD + "\n") != a


def test_allowed_modules() -> None:
    src = "import pvm_host\nimport json\n"
    compile_actor(src)  # default host modules
    compile_actor(src, allowed_modules={"pvm_host": object()})
    assert rejected(src, allowed_modules={}).rule == "import_not_allowed"
    assert rejected("import cowboy_sdk\n", allowed_modules=["pvm_host"]).rule == "import_not_allowed"
    compile_actor("import cowboy_sdk as sdk\n")


def test_annotations_are_dropped_not_evaluated() -> None:
    src = "def handler(p: undefined_name) -> also_undefined:\n    x: missing = p\n    y: nothing\n    return x\n"
    assert call_handler(compile_actor(src), "handler", b"ok", meter=Meter(10_000, 0)) == b"ok"


def test_handlers_are_module_level_defs_only() -> None:
    src = "class A:\n    def m(self):\n        pass\n\ndef outer():\n    def inner():\n        pass\n"
    assert compile_actor(src).handlers == ("outer",)

"""PVM version 1's argument handling and error texts for the builtins it passes to CPython.

Error texts are results: a handler's uncaught exception is its receipt's ``error_message`` (hashed into
the receipts root) and an actor can store ``str(e)``.  CPython rewords its argument errors between
minor versions (3.12: ``max() iterable argument is empty``; 3.13: most argument-clinic texts) and 3.12
changed what some methods accept (``splitlines`` takes any ``keepends``, 3.13's ``str.replace`` takes
``count=``).  Version 1's texts and argument handling are CPython 3.11's, so the PVM

* checks, before CPython does, the arguments whose handling changed (:func:`check_keepends`,
  :func:`check_replace`, :func:`check_chr`), raising 3.11's exception and text on every interpreter, and
* rewrites the texts a later interpreter words differently back to 3.11's (:func:`pin`), at the sites that
  call CPython's builtins directly, keyed by the builtin called, so an actor's own message is never
  touched by a rule meant for another function.

The rules only match wordings CPython 3.11 never produces for that builtin, so on 3.11 nothing changes
(the golden corpus is byte-identical).  ``scripts/pvm_interpreter_audit.py`` probes the builtins, methods,
operators and statements an actor reaches on 3.11, 3.12 and 3.13 and counts what still differs.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Any

from cowboy_node.execution.pvm.where import ACTOR_FILENAME

#: str/bytes/bytearray methods whose argument errors 3.13 rewords (3.11: ``find() takes ...``).
_SEARCH = frozenset({"count", "endswith", "find", "index", "rfind", "rindex", "startswith"})
_C_INT = 1 << 31
_C_INT_OVERFLOW = "Python int too large to convert to C int"

_Rule = tuple["re.Pattern[str]", Callable[["re.Match[str]", str], str | None]]
#: The name a rule sees for a str/bytes/bytearray method: list.index and tuple.index keep their wording.
_TEXT_METHOD = "text."


def _no_keywords(m: re.Match[str], name: str) -> str | None:
    # 3.13: "str.find() takes no keyword arguments"; 3.11: "find() takes no keyword arguments"
    return f"{m[1]}() takes no keyword arguments" if _TEXT_METHOD + m[1] == name and m[1] in _SEARCH else None


def _arg_count(m: re.Match[str], name: str) -> str | None:
    # 3.13: "find expected at least 1 argument, got 0"; 3.11: "find() takes at least 1 argument (0 given)"
    if _TEXT_METHOD + m[1] != name or m[1] not in _SEARCH:
        return None
    return f"{m[1]}() takes at {m[2]} {m[3]} argument{'' if m[3] == '1' else 's'} ({m[4]} given)"


def _must_be_str(m: re.Match[str], name: str) -> str | None:
    # 3.13: "find() argument 1 must be str, not None"; 3.11: "must be str, not NoneType"
    if _TEXT_METHOD + m[1] != name or m[1] not in _SEARCH:
        return None
    return f"must be str, not {'NoneType' if m[2] == 'None' else m[2]}"


def _keyword(m: re.Match[str], name: str) -> str | None:
    # 3.13: "hex() got an unexpected keyword argument 'x'"; 3.11: "'x' is an invalid keyword argument for hex()"
    return f"'{m[2]}' is an invalid keyword argument for {m[1]}()" if name.endswith("." + m[1]) or m[1] == name \
        else None


def _empty(m: re.Match[str], name: str) -> str | None:
    # 3.12: "max() iterable argument is empty"; 3.11: "max() arg is an empty sequence"
    return f"{name}() arg is an empty sequence" if m[1] == name else None


def _fixed(text: str, called: str) -> Callable[[re.Match[str], str], str | None]:
    return lambda m, name: text if name == called else None


_RULES: tuple[_Rule, ...] = (
    (re.compile(r"(?:str|bytes|bytearray)\.(\w+)\(\) takes no keyword arguments"), _no_keywords),
    (re.compile(r"(\w+) expected at (least|most) (\d+) arguments?, got (\d+)"), _arg_count),
    (re.compile(r"(\w+)\(\) argument 1 must be str, not (\w+)"), _must_be_str),
    (re.compile(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'"), _keyword),
    (re.compile(r"(max|min)\(\) iterable argument is empty"), _empty),
    (re.compile(r"float modulo by zero"), _fixed("float modulo", "%")),
    (re.compile(r"iter\(object, sentinel\): object must be callable"),
     _fixed("iter(v, w): v must be callable", "iter")),
)


def site(receiver: Any, method: str) -> str:
    """The name :func:`pin` takes for ``receiver.method(...)``: ``text.find`` on str/bytes/bytearray
    (whose search methods 3.13 rewords), ``other.index`` on anything else (list.index is unchanged)."""
    return ("text." if isinstance(receiver, str | bytes | bytearray) else "other.") + method


def canonical(message: str, name: str) -> str:
    """Version 1's text for ``message``, raised by CPython's builtin ``name`` (a function name, a method's
    :func:`site`, ``"%"`` for the modulo operator); ``message`` itself when no rule rewrites it."""
    for pattern, rewrite in _RULES:
        m = pattern.fullmatch(message)
        if m is not None:
            out = rewrite(m, name)
            if out is not None:
                return out
    return message


def _raised_by_actor(exc: BaseException) -> bool:
    """Whether the innermost frame ``exc`` passed through is actor code (its message is the actor's own:
    a ``key=`` function or a generator a builtin was consuming raised it)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename == ACTOR_FILENAME


def pin(exc: BaseException, name: str) -> None:
    """Give ``exc`` (raised by CPython's builtin ``name``) version 1's text, in place."""
    if type(exc) in (TypeError, ValueError, ZeroDivisionError) and len(exc.args) == 1 \
            and type(exc.args[0]) is str and not _raised_by_actor(exc):
        text = canonical(exc.args[0], name)
        if text is not exc.args[0]:
            exc.args = (text,)


def builtin(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` (a CPython builtin function) with its error texts pinned."""

    def pinned(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            pin(exc, name)
            raise

    return pinned


def check_c_int(value: Any) -> int:
    """``value`` as CPython 3.11 converts an ``int`` argument: ``__index__``, then the C int range."""
    n = operator.index(value)
    if not -_C_INT <= n < _C_INT:
        raise OverflowError(_C_INT_OVERFLOW)
    return n


def check_keepends(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``splitlines(keepends)``: 3.11 needs an int (3.12+ takes any object's truth value)."""
    if len(args) + len(kwargs) == 1 and (args or "keepends" in kwargs):
        check_c_int(args[0] if args else kwargs["keepends"])


def check_replace(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``str.replace``: 3.11 takes no keywords (3.13 takes ``count=``) and words the count errors its way."""
    if kwargs:
        raise TypeError("str.replace() takes no keyword arguments")
    if len(args) < 2:
        raise TypeError(f"replace expected at least 2 arguments, got {len(args)}")
    if len(args) > 3:
        raise TypeError(f"replace expected at most 3 arguments, got {len(args)}")


def chr_(*args: Any, **kwargs: Any) -> str:
    """``chr``: an int outside the C int range is 3.11's ``OverflowError`` (3.13: ``ValueError``)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], int):
        check_c_int(args[0])
    return chr(*args, **kwargs)

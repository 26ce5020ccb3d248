"""Deploy-time lowering of ``@runner.continuation`` functions that await inside loops (node-side).

The SDK's validator accepts an await inside ``for``/``while`` only under ``@bounded_loop(max_iterations=N)``
(CIP-6 Appendix A rule 8), but its generator (``cowboy_sdk._compiler.FSMCompiler``) splits a function only at
top-level awaits, so it cannot lower them. This module produces the same two legs the node uses for every
continuation — an initial leg ``f(self, ...)`` and ``f__resume(self, msg)`` — for such functions:

* one *driver* body is generated and used by both legs. ``_cowboy_resume`` is None in the initial leg and the
  state of the await being resumed in the resume leg; every statement is guarded so that, in resume mode, the
  code skips forward to that await (re-entering the loops and ``if`` branches around it without re-running
  anything), binds the reply and runs on normally from there;
* each await-carrying loop becomes ``while True`` with an *advance* step: a ``for`` loop's iterable is
  materialised once at loop entry (``range`` as its bounds, anything else as a list) and walked by index, a
  ``while`` loop re-evaluates its test; every started iteration of these loops counts against ``N``, summed
  over the whole continuation (every leg), and iteration ``N + 1`` raises the SDK's ``LoopBoundExceeded``
  with the SDK's message (``bounded_loop._LoopContext.increment``);
* an await suspends: the function's locals (arguments but ``self``, names it assigns, the loop positions,
  the iteration count) go into the continuation record (``save_cont``) next to the ``capture()`` fields, then
  the runner job is sent exactly as the SDK's legs send it (same request bytes, same cid) and the leg returns.
  The resume leg loads the record, deletes it (a later await saves it again), restores the locals and drives.

Record layout: the SDK's ``__continuation:<cid>`` record unchanged, its ``ctx`` holding the ``capture()``
fields plus one extra key, ``fsm_carry.LOOP_KEY``: ``{'locals': {name: value}, 'results': [name]}`` (see
``fsm_carry``; only names bound at the await). Besides the function's own locals, ``_cowboy_n`` is the number of
iterations started so far and ``_cowboy_it<i>``/``_cowboy_ix<i>`` are loop ``i``'s materialised iterable —
``{'range': [start, stop, step]}`` or ``{'items': [...]}`` — and its next index. Locals are carried as the SDK's
implicit carry carries them (a value ``capture()`` refuses is left behind: reading it after the await raises
``NameError``; a tuple comes back as a list); a ``RunnerResult`` comes back as a ``RunnerResult``.

Accepted await positions: a whole statement (``x = await runner.<job>(...)`` / ``await runner.<job>(...)``) at
the top level, in the body of a ``for``/``while`` loop (loops nest), or in an ``if``/``elif``/``else`` branch
inside such a loop body. Refused (rule ``continuation_await_position``): awaits in an ``if`` outside every
loop, in a loop's ``else``, in ``with``/``try`` blocks, in loop headers or in expressions. Refused (rule
``continuation_invalid``): nested ``def``/``class``, ``import``, ``global``/``nonlocal`` in such a function
(they could not be restored in the resume leg), names starting with ``_cowboy`` and a non-literal bound.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from cowboy_sdk import _compiler as _sdk_compiler

from cowboy_node.execution.actors.fsm_loop_locals import LOOP_KEY
from cowboy_node.execution.pvm.pvm_errors import ActorRejected

DEFAULT_MAX_ITERATIONS = 1000
"""``bounded_loop()``'s default ``max_iterations``."""
_PREFIX = "_cowboy"
_BOUND_RESULT_SRC: Any = _sdk_compiler._bound_result_src  # untyped in the SDK
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)
_BOUND_MESSAGE = ("Loop exceeded maximum iterations: {n}. Increase max_iterations in @bounded_loop or reduce loop "
                  "body complexity. If this is a continuation loop, ensure @bounded_loop wraps the continuation.")


def _own_nodes(nodes: list[Any]) -> list[ast.AST]:
    """Every node under ``nodes`` in the function's own scope (nested scopes are not entered)."""
    out: list[ast.AST] = []
    todo = list(reversed(nodes))
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, _SCOPES):
            continue
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _has_await(nodes: list[Any]) -> bool:
    return any(isinstance(n, ast.Await) for n in _own_nodes(nodes))


def has_loop_await(fn: ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` awaits inside a ``for``/``while`` loop (then this module lowers it)."""
    return any(isinstance(n, ast.For | ast.While | ast.AsyncFor) and _has_await([*n.body, *n.orelse])
               for n in _own_nodes(list(fn.body)))


def _is_await_stmt(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assign | ast.Expr) and isinstance(stmt.value, ast.Await)


def max_iterations(fn: ast.AsyncFunctionDef) -> tuple[int, ast.expr]:
    """``N`` of the function's ``@bounded_loop(max_iterations=N)`` (a literal) and that decorator."""
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
        if name != "bounded_loop":
            continue
        if not isinstance(deco, ast.Call):
            raise ActorRejected(deco.lineno, "continuation_invalid",
                                f"{fn.name!r}: write @bounded_loop(max_iterations=N) (an int literal)")
        values = [*deco.args, *(kw.value for kw in deco.keywords)]
        if len(values) > 1 or any(kw.arg != "max_iterations" for kw in deco.keywords):
            raise ActorRejected(deco.lineno, "continuation_invalid",
                                f"{fn.name!r}: @bounded_loop takes one argument, max_iterations")
        if not values:
            return DEFAULT_MAX_ITERATIONS, deco
        value = values[0]
        if not (isinstance(value, ast.Constant) and type(value.value) is int and value.value >= 0):
            raise ActorRejected(deco.lineno, "continuation_invalid",
                                f"{fn.name!r}: @bounded_loop max_iterations must be a non-negative int literal (it "
                                "is not re-evaluated across continuation legs)")
        return value.value, deco
    # the SDK's validator refuses this first (_check_loop_awaits); kept for callers that skip it
    raise ActorRejected(fn.lineno, "continuation_invalid",
                        f"'{fn.name}': await inside a loop requires @bounded_loop decorator (CIP-6 Appendix A rule "
                        "8). Add @bounded_loop(max_iterations=N) to the function.")


def _position_error(fn: ast.AsyncFunctionDef, node: ast.AST, why: str) -> ActorRejected:
    return ActorRejected(getattr(node, "lineno", fn.lineno), "continuation_await_position", f"{fn.name!r}: {why}")


def check_positions(fn: ast.AsyncFunctionDef) -> None:
    """Refuse awaits this lowering does not place, and statements whose effect a resume leg could not restore."""
    for node in _own_nodes(list(fn.body)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom
                      | ast.Global | ast.Nonlocal):
            raise ActorRejected(node.lineno, "continuation_invalid",
                                f"{fn.name!r}: a continuation awaiting in a loop cannot hold def/class/import/"
                                "global/nonlocal statements (their bindings are not restored after an await)")
        if isinstance(node, ast.Name) and node.id.startswith(_PREFIX):
            raise ActorRejected(node.lineno, "continuation_invalid",
                                f"{fn.name!r}: names starting with {_PREFIX!r} are reserved for the lowering")
    _check_block(fn, fn.body, in_loop=False)


def _check_block(fn: ast.AsyncFunctionDef, stmts: list[ast.stmt], *, in_loop: bool) -> None:
    for s in stmts:
        if isinstance(s, ast.Assign | ast.Expr) and isinstance(s.value, ast.Await):
            value = s.value
            if _has_await([value.value]) or (isinstance(s, ast.Assign) and _has_await(list(s.targets))):
                raise _position_error(fn, s, "an await may not hold another await")
        elif isinstance(s, ast.AsyncWith):
            raise ActorRejected(s.lineno, "continuation_taskgroup",
                                f"{fn.name!r}: a TaskGroup is not lowered in a continuation that awaits in a loop")
        elif isinstance(s, ast.For | ast.While) and _has_await(s.body):
            header: list[ast.AST] = [s.target, s.iter] if isinstance(s, ast.For) else [s.test]
            if _has_await(header):
                raise _position_error(fn, s, "an await in a loop header is unsupported")
            if s.orelse:
                raise _position_error(fn, s, "a loop holding an await cannot have an else clause")
            _check_block(fn, s.body, in_loop=True)
        elif isinstance(s, ast.If) and _has_await([*s.body, *s.orelse]):
            if not in_loop:
                raise _position_error(fn, s, "an await in a branch is lowered only inside a loop body; outside "
                                             "loops, awaits must be top-level statements")
            if _has_await([s.test]):
                raise _position_error(fn, s, "an await in a condition is unsupported")
            _check_block(fn, s.body, in_loop=True)
            _check_block(fn, s.orelse, in_loop=True)
        elif _has_await([s]):
            raise _position_error(fn, s, "await must be a whole statement (x = await runner.<job>(...) or await "
                                         "runner.<job>(...)) at the top level, in a loop body or in a branch "
                                         "inside a loop; awaits in with/try blocks, loop else clauses or "
                                         "expressions are unsupported")


def _local_names(fn: ast.AsyncFunctionDef, capture_var: str | None) -> list[str]:
    """Names of the function's locals a resume leg must get back (sorted: record bytes are canonical anyway)."""
    a = fn.args
    params = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    names = set(params[1:] if a.posonlyargs or a.args else params)
    for node in _own_nodes(list(fn.body)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
    names.discard(capture_var or "")
    return sorted(names)


def _capture_var(body: list[ast.stmt]) -> str | None:
    """The ``X`` of a top-level ``X = capture()`` before the first statement holding an await."""
    for stmt in body:
        if _has_await([stmt]):
            return None
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Call) and not stmt.value.args
                and _sdk_compiler._get_name(stmt.value.func) == "capture"):
            return stmt.targets[0].id
    return None


def _stmts(src: str, **slots: ast.AST) -> list[ast.stmt]:
    """``src`` parsed, each Name ``SLOT_<k>`` replaced by a copy of ``slots[k]``."""
    tree = ast.parse(src)

    class Fill(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id.startswith("SLOT_"):
                return copy.deepcopy(slots[node.id[5:]])
            return node

    return Fill().visit(tree).body  # type: ignore[no-any-return]


def _expr(src: str, **slots: ast.AST) -> ast.expr:
    stmt = _stmts(src, **slots)[0]
    assert isinstance(stmt, ast.Expr)
    return stmt.value


_NOT_RESUMING = "_cowboy_resume is None"


class _Driver:
    """Builds the driver body shared by both legs (see the module docstring)."""

    def __init__(self, fn: ast.AsyncFunctionDef, compiler: Any, bound: int, options: str,
                 capture_var: str | None) -> None:
        self.fn = fn
        self.compiler = compiler
        self.bound = bound
        self.options = options
        self.capture_var = capture_var
        self.resume = fn.name + "__resume"
        self.points: dict[int, int] = {}  # id(await statement) -> state
        self.loops: dict[int, int] = {}  # id(await-carrying loop) -> loop index
        self.inside: dict[int, tuple[int, ...]] = {}  # id(statement) -> the states it holds
        self._number(fn.body)
        params = [p.arg for p in fn.args.args]
        self.params = params
        loop_names = [f"{_PREFIX}_{kind}{i}" for i in range(len(self.loops)) for kind in ("it", "ix")]
        self.saved = [*_local_names(fn, capture_var), f"{_PREFIX}_n", *loop_names]

    def _number(self, stmts: list[ast.stmt]) -> list[int]:
        held: list[int] = []
        for s in stmts:
            mine: list[int] = []
            if _is_await_stmt(s):
                self.points[id(s)] = len(self.points)
                mine.append(self.points[id(s)])
            elif isinstance(s, ast.For | ast.While) and _has_await(s.body):
                self.loops[id(s)] = len(self.loops)
                mine.extend(self._number(s.body))
            elif isinstance(s, ast.If) and _has_await([*s.body, *s.orelse]):
                mine.extend(self._number(s.body))
                mine.extend(self._number(s.orelse))
            self.inside[id(s)] = tuple(mine)
            held.extend(mine)
        return held

    @property
    def states(self) -> int:
        return len(self.points)

    def _resuming_into(self, states: tuple[int, ...]) -> ast.expr:
        return _expr(f"{_NOT_RESUMING} or _cowboy_resume in {states!r}")

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        plain: list[ast.stmt] = []

        def flush() -> None:
            if plain:
                out.append(ast.If(test=_expr(_NOT_RESUMING), body=list(plain), orelse=[]))
                plain.clear()

        for s in stmts:
            states = self.inside[id(s)]
            if not states:
                plain.append(s)
                continue
            flush()
            if id(s) in self.points:
                out.extend(self._await(s, self.points[id(s)]))
            elif isinstance(s, ast.If):
                body_states = tuple(k for k in states if k in self._held(s.body))
                choose = _expr(f"SLOT_test if {_NOT_RESUMING} else _cowboy_resume in {body_states!r}", test=s.test)
                branch = ast.If(test=choose, body=self.block(s.body), orelse=self.block(s.orelse))
                out.append(ast.If(test=self._resuming_into(states), body=[branch], orelse=[]))
            else:
                assert isinstance(s, ast.For | ast.While)
                out.append(ast.If(test=self._resuming_into(states), body=self._loop(s), orelse=[]))
        flush()
        return out or [ast.Pass()]

    def _held(self, stmts: list[ast.stmt]) -> tuple[int, ...]:
        return tuple(k for s in stmts for k in self.inside[id(s)])

    def _count(self) -> list[ast.stmt]:
        msg = ast.Constant(_BOUND_MESSAGE.format(n=self.bound))
        return _stmts(f"{_PREFIX}_n += 1\nif {_PREFIX}_n > {self.bound}:\n    raise {_PREFIX}_LoopBound(SLOT_msg)",
                      msg=msg)

    def _loop(self, s: ast.For | ast.While) -> list[ast.stmt]:
        if isinstance(s, ast.While):
            advance = [*_stmts("if not SLOT_test:\n    break", test=s.test), *self._count()]
            init: list[ast.stmt] = []
        else:
            it, ix = f"{_PREFIX}_it{self.loops[id(s)]}", f"{_PREFIX}_ix{self.loops[id(s)]}"
            source = s.iter
            bounded = (isinstance(source, ast.Call) and _sdk_compiler._get_name(source.func) == "BoundedRange"
                       and len(source.args) == 1 and not source.keywords)
            if bounded:  # the loop is counted here; BoundedRange's own counter never sees a leg's context
                assert isinstance(source, ast.Call)
                source = source.args[0]
            init = _stmts(f"{it} = SLOT_iter", iter=source)
            if bounded:
                init += _stmts(f"if isinstance({it}, int):\n    {it} = range({it})")
            init += _stmts(f"if isinstance({it}, range):\n    {it} = {{'range': [{it}.start, {it}.stop, {it}.step]}}\n"
                           f"else:\n    {it} = {{'items': list({it})}}\n{ix} = 0")
            advance = _stmts(f"if 'range' in {it}:\n    {_PREFIX}_seq = range({it}['range'][0], {it}['range'][1], "
                             f"{it}['range'][2])\nelse:\n    {_PREFIX}_seq = {it}['items']\n"
                             f"if {ix} >= len({_PREFIX}_seq):\n    break")
            advance += self._count()
            advance += _stmts(f"SLOT_target = {_PREFIX}_seq[{ix}]\n{ix} += 1", target=s.target)
        body = [ast.If(test=_expr(_NOT_RESUMING), body=advance, orelse=[]), *self.block(s.body)]
        out: list[ast.stmt] = []
        if init:
            out.append(ast.If(test=_expr(_NOT_RESUMING), body=init, orelse=[]))
        out.append(ast.While(test=ast.Constant(True), body=body, orelse=[]))
        return out

    def _await(self, s: ast.stmt, state: int) -> list[ast.stmt]:
        value = s.value  # type: ignore[attr-defined]
        assert isinstance(value, ast.Await)
        point = self.compiler._try_extract_await(s, state, self.fn.name)  # the SDK's checks and job type
        call = value.value
        assert isinstance(call, ast.Call)
        kwargs = ast.Dict(keys=[None if kw.arg is None else ast.Constant(kw.arg) for kw in call.keywords],
                          values=[kw.value for kw in call.keywords])
        save = [f"{_PREFIX}_L = {{}}"]
        for name in self.saved:
            save.append(f"try:\n    {_PREFIX}_L[{name!r}] = {name}\nexcept NameError:\n    pass")
        save.append(f"_cowboy_cont.save_cont({_PREFIX}_cid, state={state}, ctx=_cowboy_runner.carry_locals("
                    f"{self.capture_var or 'None'}, {_PREFIX}_L), handler={self.resume!r}{self.options})")
        save.append(f"_cowboy_ph.send_message(_cowboy_runner.RUNNER_ADDRESS, _cowboy_codec.encode({{"
                    f"'kind': 'runner_job', 'job_type': {point.job_type!r}, 'payload': _cowboy_runner._job_payload("
                    f"{point.job_type!r}, SLOT_args, SLOT_kwargs), 'cid': {_PREFIX}_cid, "
                    f"'reply_handler': {self.resume!r}}}))")
        save.append("return None")
        suspend = _stmts("\n".join(save), args=ast.List(elts=list(call.args), ctx=ast.Load()), kwargs=kwargs)
        bound = _expr(_BOUND_RESULT_SRC(point, self.fn.body, self.params).replace(
            "_result", f"{_PREFIX}_result"))
        bind: ast.stmt = (ast.Assign(targets=list(s.targets), value=bound) if isinstance(s, ast.Assign)
                          else ast.Expr(value=bound))
        resumed = [*_stmts(f"{_PREFIX}_resume = None"), bind]
        return [ast.If(test=_expr(_NOT_RESUMING), body=suspend, orelse=[]),
                ast.If(test=_expr(f"_cowboy_resume == {state}"), body=resumed, orelse=[])]


_IMPORTS = ("from cowboy_sdk import continuation as _cowboy_cont\n"
            "from cowboy_sdk import codec as _cowboy_codec\n"
            "from cowboy_sdk import runner as _cowboy_runner\n"
            "import pvm_host as _cowboy_ph\n"
            f"from cowboy_sdk import LoopBoundExceeded as {_PREFIX}_LoopBound\n")


def lower(fn: ast.AsyncFunctionDef, compiler: Any, options: str) -> tuple[ast.FunctionDef, ast.FunctionDef, ast.expr]:
    """The initial and resume legs of ``fn`` (undecorated, with the SDK's module aliases) and the
    ``@bounded_loop`` decorator they replace. ``options`` is the ``save_cont`` keyword text
    (``_compiler._save_options_src``)."""
    check_positions(fn)
    bound, deco = max_iterations(fn)
    capture_var = _capture_var(fn.body)
    driver = _Driver(fn, compiler, bound, options, capture_var)
    body = driver.block(fn.body)
    self_name = fn.args.args[0].arg if fn.args.args else "self"

    initial = _stmts(_IMPORTS + f"{_PREFIX}_cid = _cowboy_cont.new_cid({self_name}, {fn.name!r})\n"
                                f"{_PREFIX}_resume = None\n{_PREFIX}_n = 0")
    restore = [f"{_PREFIX}_cid, {_PREFIX}_result = _cowboy_runner._extract_result({_PREFIX}_msg)",
               f"if _cowboy_runner._chain_failure_ends({_PREFIX}_cid, {_PREFIX}_result, "
               f"{tuple(range(driver.states))!r}):\n    return None",
               f"{_PREFIX}_record = _cowboy_cont.load_cont({_PREFIX}_cid)",
               f"{_PREFIX}_F, {_PREFIX}_L = _cowboy_runner.restore_locals({_PREFIX}_record['ctx'])"]
    if capture_var:
        restore.append(f"{capture_var} = _cowboy_cont.capture()\n{capture_var}.update({_PREFIX}_F)")
    restore.append(f"{_PREFIX}_resume = {_PREFIX}_record['state']")
    restore.append(f"_cowboy_cont.delete_cont({_PREFIX}_cid)")
    for name in driver.saved:
        restore.append(f"if {name!r} in {_PREFIX}_L:\n    {name} = {_PREFIX}_L[{name!r}]")
    resume_pre = _stmts(_IMPORTS + "\n".join(restore))

    init = ast.FunctionDef(name=fn.name, args=fn.args, body=[*initial, *body], decorator_list=[], returns=None,
                           type_comment=None)
    resume_args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=self_name), ast.arg(arg=f"{_PREFIX}_msg")],
                                vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    resume = ast.FunctionDef(name=driver.resume, args=resume_args, body=[*resume_pre, *copy.deepcopy(body)],
                             decorator_list=[], returns=None, type_comment=None)
    return init, resume, deco


__all__ = ["DEFAULT_MAX_ITERATIONS", "LOOP_KEY", "check_positions", "has_loop_await", "lower", "max_iterations"]

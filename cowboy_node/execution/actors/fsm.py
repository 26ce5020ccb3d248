"""Deploy-time lowering of ``@runner.continuation`` (cowboy-actor-sdk) into plain synchronous handlers.

The SDK compiles an ``async def`` decorated with ``@runner.continuation`` into a finite state
machine: an *initial leg* ``f`` that runs the code up to the first ``await runner.<job>(...)``,
saves a continuation record and sends a ``runner_job`` message to the Job Dispatcher, and a
*resume leg* ``f__resume(msg)`` that the node calls with the job's reply. In CPython the SDK does
this at import time with ``inspect``/``compile``/``exec`` — which the PVM can never allow — so,
like the reference network's trusted compile-time pass (``runtime.compile_time_fsm()``), the
node lowers the source *before* the policy check, and the generated code is then checked and
instrumented exactly like the actor's own code.

The generated text is the SDK's own (``cowboy_sdk._compiler.FSMCompiler``: same segments, same
``save_cont`` record, same cid, same request bytes). Two rewrites make it pass the policy: its
imports of ``continuation``/``codec``/``runner`` become the curated :data:`FSM_MODULE` view
(``sdk_bridge``), and its private attribute calls (``_cowboy_runner._job_payload``) lose their
leading underscore (``FSM_MODULE`` exposes those names). The initial leg keeps every other
decorator of the source function (``@public``...) and is marked as the SDK's ``@actor`` walk
expects (``_is_continuation``), the resume leg likewise (``_is_continuation_resume``).

What the SDK refuses is refused at deploy with rule ``continuation_invalid`` and the SDK's own
message (more than 8 awaits, ``yield``, awaits in nested functions, a non-literal
``timeout_blocks``...). Awaits must be direct top-level statements (``x = await ...`` or
``await ...``), as ``cowboy_sdk.bounded_loop`` documents: an await inside a branch, ``with`` or
``try`` is rule ``continuation_await_position``. A function awaiting inside a ``for``/``while`` loop
(``@bounded_loop(max_iterations=N)`` required, the SDK's rule 8) is lowered by the node instead
(``fsm_loops.py``: same leg shape, the loop's position and locals in the record).
A top-level ``async with TaskGroup() as tg:`` whose body only creates tasks
(``h = tg.create_task(runner.<job>(...))``) is one await point: every task
is sent at once (``TaskGroup._submit_all``'s bytes, ``task_index``/``total_tasks``), the replies are
gathered in the SDK's ``__taskgroup_barrier:<cid>`` state, and the leg after it runs once the last one
arrived, with ``h.result()`` the task's ``RunnerResult`` (creation order); any other shape is rule
``continuation_taskgroup``. The SDK's own compiler does not lower TaskGroups, so this is the node's
lowering (docs/actors.md §6). ``@actor.continuation`` (actor-to-actor awaits) is rule
``continuation_unsupported``.
"""

from __future__ import annotations

import ast
from typing import Any

from cowboy_sdk import _compiler as _sdk_compiler
from cowboy_sdk.errors import ContinuationLimitError, DeterminismError

from cowboy_node.execution.actors import fsm_loops
from cowboy_node.execution.pvm.pvm_errors import ActorRejected

FSM_MODULE = "pvm_fsm"
"""Name (in the actor's ``cowboy_sdk`` view) of the helpers the generated legs import."""
FSM_ALIAS = "_cowboy_fsm"
"""Module-level alias the lowering binds for the leg-marking decorators."""
RUNNER_ADDRESS_EXPR = "_cowboy_runner.RUNNER_ADDRESS"
"""Where the generated legs read the Job Dispatcher address (bound by their own preamble)."""
_SDK_MODULES = frozenset({"continuation", "codec", "runner"})
_GENERATED_ALIASES = frozenset({"_cowboy_cont", "_cowboy_codec", "_cowboy_runner"})


def _decorator_kind(node: ast.expr) -> str | None:
    """``runner`` for ``@runner.continuation`` / ``@runner.continuation(...)``, ``actor`` for
    ``@actor.continuation``, else None."""
    target = node.func if isinstance(node, ast.Call) else node
    if not (isinstance(target, ast.Attribute) and target.attr == "continuation"):
        return None
    base = target.value
    name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else None
    return name if name in ("runner", "actor") else None


def _literal_options(node: ast.expr, line: int) -> tuple[int, list[Any] | None]:
    """``timeout_blocks`` / ``guard_keys`` of a ``@runner.continuation(...)`` call; literals only (SDK rule)."""
    if not isinstance(node, ast.Call):
        return 0, None
    if node.args:
        raise ActorRejected(line, "continuation_invalid", "continuation decorator does not allow positional arguments")
    timeout, guards = 0, None
    for kw in node.keywords:
        if kw.arg == "timeout_blocks" and _sdk_compiler._is_int_literal(kw.value):
            timeout = ast.literal_eval(kw.value)
        elif kw.arg == "guard_keys" and _sdk_compiler._is_guard_keys_literal(kw.value):
            value = ast.literal_eval(kw.value)
            guards = None if value is None else list(value)
        else:
            raise ActorRejected(line, "continuation_invalid",
                                f"continuation option {kw.arg or '**'} must be timeout_blocks=<int literal> or "
                                "guard_keys=<list of str/bytes literals> (cowboy_sdk: options are not re-evaluated "
                                "across FSM states)")
    return timeout, guards


GROUP_VAR = "_cowboy_tg"
"""Local the lowering binds to a TaskGroup's results (the await point it stands for)."""
MAX_GROUP_TASKS = 8
"""Most tasks of one TaskGroup (``cowboy_sdk.taskgroup``)."""


def _is_taskgroup(expr: ast.expr) -> bool:
    f = expr.func if isinstance(expr, ast.Call) else None
    return isinstance(expr, ast.Call) and not expr.args and not expr.keywords and (
        (isinstance(f, ast.Name) and f.id == "TaskGroup") or (isinstance(f, ast.Attribute) and f.attr == "TaskGroup"))


def _group_await(fn: ast.AsyncFunctionDef, stmt: ast.AsyncWith) -> list[ast.stmt]:
    """``async with TaskGroup() as tg: h = tg.create_task(runner.<job>(...))...`` as one await point:
    ``_cowboy_tg = await runner.taskgroup(<job calls>)`` followed by ``h = _cowboy_runner.task_handle(_cowboy_tg, i)``.
    """
    def bad(why: str) -> ActorRejected:
        return ActorRejected(stmt.lineno, "continuation_taskgroup", f"{fn.name!r}: {why}")

    if len(stmt.items) != 1 or not _is_taskgroup(stmt.items[0].context_expr) or not isinstance(
            stmt.items[0].optional_vars, ast.Name):
        raise bad("only 'async with TaskGroup() as tg:' (no arguments) is lowered")
    tg = stmt.items[0].optional_vars.id
    calls: list[ast.expr] = []
    handles: list[tuple[str | None, int]] = []
    for i, inner in enumerate(stmt.body):
        value = inner.value if isinstance(inner, ast.Assign | ast.Expr) else None
        target = inner.targets[0] if isinstance(inner, ast.Assign) and len(inner.targets) == 1 else None
        ok = (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "create_task"
              and isinstance(value.func.value, ast.Name) and value.func.value.id == tg and len(value.args) == 1
              and not value.keywords and isinstance(value.args[0], ast.Call)
              and (target is None or isinstance(target, ast.Name)) and not isinstance(inner, ast.AugAssign))
        if not ok:
            raise bad(f"a TaskGroup body holds only 'name = {tg}.create_task(runner.<job>(...))' statements")
        assert isinstance(value, ast.Call)
        calls.append(value.args[0])
        handles.append((target.id if isinstance(target, ast.Name) else None, i))
    if not 1 <= len(calls) <= MAX_GROUP_TASKS:
        raise bad(f"a TaskGroup runs 1..{MAX_GROUP_TASKS} tasks")
    group = ast.Call(func=ast.Attribute(value=ast.Name(id="runner", ctx=ast.Load()), attr="taskgroup",
                                        ctx=ast.Load()), args=calls, keywords=[])
    out: list[ast.stmt] = [ast.Assign(targets=[ast.Name(id=GROUP_VAR, ctx=ast.Store())], value=ast.Await(value=group))]
    for name, i in handles:
        if name is not None:
            out.append(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Call(
                func=ast.Attribute(value=ast.Name(id="_cowboy_runner", ctx=ast.Load()), attr="task_handle",
                                   ctx=ast.Load()),
                args=[ast.Name(id=GROUP_VAR, ctx=ast.Load()), ast.Constant(i)], keywords=[])))
    for node in out:
        ast.copy_location(node, stmt)
    return [ast.fix_missing_locations(node) for node in out]


def _expand_taskgroups(fn: ast.AsyncFunctionDef) -> None:
    """Each top-level ``async with TaskGroup()`` becomes one await point (the rest are refused later)."""
    body: list[ast.stmt] = []
    for stmt in fn.body:
        if isinstance(stmt, ast.AsyncWith):
            body.extend(_group_await(fn, stmt))
        else:
            body.append(stmt)
    fn.body = body


def _is_group_send(stmt: ast.stmt) -> ast.List | None:
    """The job list of a generated ``send_message(..., encode({... 'job_type': 'taskgroup' ...}))``."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "send_message"
            and len(call.args) == 2 and isinstance(call.args[1], ast.Call) and call.args[1].args
            and isinstance(call.args[1].args[0], ast.Dict)):
        return None
    d = call.args[1].args[0]
    fields = {k.value: v for k, v in zip(d.keys, d.values, strict=True) if isinstance(k, ast.Constant)}
    kind = fields.get("job_type")
    payload = fields.get("payload")
    if not (isinstance(kind, ast.Constant) and kind.value == "taskgroup" and isinstance(payload, ast.Call)
            and len(payload.args) == 3 and isinstance(payload.args[1], ast.List)):
        return None
    return payload.args[1]


class _Groups(ast.NodeTransformer):
    """Generated TaskGroup await points: send every task (``send_group``) and gather the replies
    (``collect_group``, which returns None until the last one arrived: the leg then ends)."""

    def __init__(self, resume: str) -> None:
        self.resume = resume

    def _helper(self, name: str, *args: ast.expr) -> ast.Call:
        return ast.Call(func=ast.Attribute(value=ast.Name(id="_cowboy_runner", ctx=ast.Load()), attr=name,
                                           ctx=ast.Load()), args=list(args), keywords=[])

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        jobs = _is_group_send(node)
        if jobs is None:
            return node
        return ast.Expr(self._helper("send_group", jobs, ast.Name(id="_cid", ctx=ast.Load()),
                                     ast.Constant(self.resume)))

    def visit_Assign(self, node: ast.Assign) -> ast.AST | list[ast.stmt]:
        if not (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == GROUP_VAR):
            return node
        gather = ast.Assign(targets=[ast.Name(id=GROUP_VAR, ctx=ast.Store())],
                            value=self._helper("collect_group", ast.Name(id="_cid", ctx=ast.Load()),
                                               ast.Name(id="msg", ctx=ast.Load())))
        wait = ast.If(test=ast.Compare(left=ast.Name(id=GROUP_VAR, ctx=ast.Load()), ops=[ast.Is()],
                                       comparators=[ast.Constant(None)]),
                      body=[ast.Return(value=ast.Constant(None))], orelse=[])
        return [gather, wait]


def _check_await_positions(fn: ast.AsyncFunctionDef | ast.FunctionDef) -> None:
    """Every await must be the whole value of a top-level ``Assign``/``Expr`` (what the SDK lowers)."""
    allowed: set[int] = set()
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign | ast.Expr) and isinstance(stmt.value, ast.Await):
            allowed.add(id(stmt.value))
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.AsyncWith):
                raise ActorRejected(node.lineno, "continuation_taskgroup",
                                    f"{fn.name!r}: only a top-level 'async with TaskGroup() as tg:' is lowered")
            if isinstance(node, ast.Await) and id(node) not in allowed:
                raise ActorRejected(node.lineno, "continuation_await_position",
                                    f"{fn.name!r}: await must be a top-level statement of the continuation "
                                    "(x = await runner.<job>(...) or await runner.<job>(...)); awaits inside "
                                    "branches (outside a @bounded_loop loop), with/try blocks or expressions are "
                                    "unsupported (cowboy_sdk.bounded_loop)")


class _Rewrite(ast.NodeTransformer):
    """Point the generated preamble at the curated helpers and make its private calls public."""

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        if node.module == "cowboy_sdk":
            for alias in node.names:
                if alias.name in _SDK_MODULES and alias.asname in _GENERATED_ALIASES:
                    alias.name = FSM_MODULE
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if (isinstance(node.value, ast.Name) and node.value.id in _GENERATED_ALIASES
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            node.attr = node.attr[1:]
        return node


def _place(tree: ast.AST, anchor: ast.AST) -> None:
    """Give every generated node the source position of the continuation it came from."""
    line = getattr(anchor, "lineno", 1)
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            node.lineno = node.end_lineno = line  # type: ignore[attr-defined]
            node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]


def _mark(kind: str, *args: ast.expr) -> ast.expr:
    return ast.Call(func=ast.Attribute(value=ast.Name(id=FSM_ALIAS, ctx=ast.Load()), attr=kind, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _lower_one(fn: ast.AsyncFunctionDef | ast.FunctionDef, deco: ast.expr, source: str) -> list[ast.stmt]:
    """The initial and resume legs replacing one continuation function."""
    line = fn.lineno
    if not isinstance(fn, ast.AsyncFunctionDef):
        raise ActorRejected(line, "continuation_invalid",
                            f"@runner.continuation requires an async function, but {fn.name!r} is not async")
    timeout, guards = _literal_options(deco, line)
    compiler = _sdk_compiler.FSMCompiler()
    compiler._source = source
    try:
        if fsm_loops.has_loop_await(fn):
            compiler._validate(fn, fn.name)  # the SDK's rules first: 8 awaits at most, @bounded_loop present...
            options = _sdk_compiler._save_options_src(timeout, guards)
            init, resume, bound_deco = fsm_loops.lower(fn, compiler, options)
            kept = [d for d in fn.decorator_list if d is not deco and d is not bound_deco]  # the bound is lowered
            return _finish(fn, [_Rewrite().visit(init), _Rewrite().visit(resume)], kept, timeout, guards)
        _expand_taskgroups(fn)
        compiler._validate(fn, fn.name)
        _check_await_positions(fn)
        points = compiler._extract_await_points(fn.body, fn.name)
        options = _sdk_compiler._save_options_src(timeout, guards)
        kept = [d for d in fn.decorator_list if d is not deco]
        if not points:  # no await: the SDK leaves the function as it is (here: a plain def)
            plain = ast.FunctionDef(name=fn.name, args=fn.args, body=fn.body, decorator_list=kept,
                                    returns=None, type_comment=None)
            return [ast.copy_location(plain, fn)]
        args = compiler._get_args_list(fn)
        init_src = compiler._gen_initial(fn.name, args, fn.body, points, RUNNER_ADDRESS_EXPR, options)
        resume_src = compiler._gen_resume(fn.name, args, fn.body, points, RUNNER_ADDRESS_EXPR, options)
    except (ContinuationLimitError, DeterminismError) as e:
        raise ActorRejected(line, "continuation_invalid", str(e)) from None
    try:
        legs = ast.parse(init_src + "\n" + resume_src).body
    except SyntaxError as e:  # a construct the SDK's generator cannot re-emit
        raise ActorRejected(line, "continuation_invalid", f"{fn.name!r}: cannot lower: {e.msg}") from None
    return _finish(fn, [_Groups(fn.name + "__resume").visit(_Rewrite().visit(leg)) for leg in legs], kept, timeout,
                   guards)


def _finish(fn: ast.AsyncFunctionDef, legs: list[ast.stmt], kept: list[ast.expr], timeout: int,
            guards: list[Any] | None) -> list[ast.stmt]:
    """Mark the (rewritten) legs and give them the function's position."""
    init, resume = legs
    assert isinstance(init, ast.FunctionDef) and isinstance(resume, ast.FunctionDef)
    guards_node: ast.expr = ast.Constant(None) if guards is None else ast.List(
        elts=[ast.Constant(g) for g in guards], ctx=ast.Load())
    # Decorators apply bottom-up: the mark first, then the author's own (@public...) on the marked leg.
    init.decorator_list = [*kept, _mark("initial_leg", ast.Constant(timeout), guards_node)]
    resume.decorator_list = [_mark("resume_leg", ast.Constant(fn.name))]
    for leg in legs:
        _place(leg, fn)
    return [init, resume]


def _lower_body(body: list[ast.stmt], source: str) -> tuple[list[ast.stmt], bool]:
    out: list[ast.stmt] = []
    lowered = False
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            stmt.body, inner = _lower_body(stmt.body, source)
            lowered |= inner
        if isinstance(stmt, ast.AsyncFunctionDef | ast.FunctionDef):
            decos = [(d, _decorator_kind(d)) for d in stmt.decorator_list]
            for _, kind in decos:
                if kind == "actor":
                    raise ActorRejected(stmt.lineno, "continuation_unsupported",
                                        "@actor.continuation (actor-to-actor awaits) is not supported by this node")
            found = [d for d, kind in decos if kind == "runner"]
            if len(found) > 1:
                raise ActorRejected(stmt.lineno, "continuation_invalid", f"{stmt.name!r}: two continuation decorators")
            if found:
                out.extend(_lower_one(stmt, found[0], source))
                lowered = True
                continue
        out.append(stmt)
    return out, lowered


def lower_continuations(tree: ast.Module, source: str) -> ast.Module:
    """Replace every ``@runner.continuation`` function of ``tree`` (module level or in a module-level class)
    by its initial and resume legs; raises :class:`ActorRejected` for what cannot be lowered."""
    body, lowered = _lower_body(tree.body, source)
    if lowered:
        binding = ast.ImportFrom(module="cowboy_sdk", names=[ast.alias(name=FSM_MODULE, asname=FSM_ALIAS)], level=0)
        _place(binding, tree.body[0] if tree.body else binding)
        at = next((i for i, s in enumerate(body)
                   if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")), len(body))
        body.insert(at, binding)
    tree.body = body
    return ast.fix_missing_locations(tree)


__all__ = ["FSM_ALIAS", "FSM_MODULE", "lower_continuations"]

"""AST rewriting: metering, recursion depth, and guarded operations.

Runs after the policy check, on a tree the policy accepted.  Inserted names start with
``_pvm_`` (single underscore: never name-mangled in class bodies); actor code cannot
name them because the policy refuses identifiers that start with an underscore.

* every block of statements starts with ``_pvm_charge(cost)``, where ``cost`` is the
  static cost of the block's statements (``costs.STMT`` each plus ``costs.CALL`` per
  call written in their own expressions); loop bodies add ``costs.LOOP_ITER``;
* functions start with ``_pvm_d = _pvm_enter(FUNC_ENTRY + body cost)`` and restore the
  depth in a ``finally``; lambdas are wrapped in ``_pvm_lam_out(_pvm_lam_in(cost), body)``;
* comprehension clauses get a ``_pvm_tick(cost)`` condition (charged per iteration);
* arithmetic, comparisons, subscripts, starred values, slices, f-strings, imports,
  attribute stores and the methods of :data:`GUARDED_METHOD_NAMES` call runtime helpers;
* annotations are dropped (never evaluated).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from cowboy_node.execution.pvm import costs
from cowboy_node.execution.pvm.methods import GUARDED_METHOD_NAMES

BINOP_HELPERS: dict[type[ast.operator], str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
    ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift", ast.BitOr: "bitor", ast.BitAnd: "bitand",
    ast.BitXor: "bitxor",
}
COMPARE_HELPERS: dict[type[ast.cmpop], str] = {
    ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "lte", ast.Gt: "gt", ast.GtE: "gte",
    ast.In: "in", ast.NotIn: "notin",
}
_SAFE_KEY_TYPES = (str, bytes, bool, type(None))
_SCOPES = (ast.Lambda, ast.ListComp, ast.DictComp, ast.GeneratorExp, ast.SetComp)


def _name(helper: str) -> ast.Name:
    return ast.Name(id=f"_pvm_{helper}", ctx=ast.Load())


def _call(helper: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=_name(helper), args=list(args), keywords=[])


def _const(value: str | bytes | bool | int | float | None) -> ast.Constant:
    return ast.Constant(value=value)


def calls(node: ast.AST | None) -> int:
    """Call expressions evaluated with ``node`` (not inside lambdas or comprehension bodies)."""
    if node is None:
        return 0
    count = 0
    stack: list[ast.AST] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call):
            count += 1
        if isinstance(n, ast.Lambda):
            stack.extend(n.args.defaults)
            stack.extend(d for d in n.args.kw_defaults if d is not None)
        elif isinstance(n, ast.ListComp | ast.DictComp | ast.GeneratorExp | ast.SetComp):
            stack.append(n.generators[0].iter)
        else:
            stack.extend(ast.iter_child_nodes(n))
    return count


def _calls_all(nodes: list[ast.expr] | list[ast.expr | None]) -> int:
    return sum(calls(n) for n in nodes)


def stmt_cost(s: ast.stmt) -> int:
    """Static cost of one statement, excluding the statements of its sub-blocks."""
    n = 0
    if isinstance(s, ast.FunctionDef):
        n = len(s.decorator_list) + _calls_all(s.decorator_list) + _calls_all(s.args.defaults)
        n += _calls_all(s.args.kw_defaults)
    elif isinstance(s, ast.ClassDef):
        n = 1 + len(s.decorator_list) + _calls_all(s.decorator_list) + _calls_all(s.bases)
    elif isinstance(s, ast.Return | ast.Expr):
        n = calls(s.value)
    elif isinstance(s, ast.Delete):
        n = _calls_all(s.targets)
    elif isinstance(s, ast.Assign):
        n = _calls_all(s.targets) + calls(s.value)
    elif isinstance(s, ast.AugAssign):
        n = calls(s.target) + calls(s.value)
    elif isinstance(s, ast.AnnAssign):
        n = calls(s.target) + calls(s.value) if s.value is not None else 0
    elif isinstance(s, ast.For):
        n = calls(s.target) + calls(s.iter)
    elif isinstance(s, ast.While | ast.If):
        n = calls(s.test)
    elif isinstance(s, ast.Raise):
        n = calls(s.exc) + calls(s.cause)
    elif isinstance(s, ast.Try):
        n = sum(calls(h.type) for h in s.handlers)
    elif isinstance(s, ast.Assert):
        n = calls(s.test) + calls(s.msg)
    return costs.STMT + costs.CALL * n


def block_cost(stmts: list[ast.stmt]) -> int:
    return sum(stmt_cost(s) for s in stmts)


@dataclass
class _Scope:
    kind: str  # "module" | "function" | "class" | "lambda" | "comprehension"
    depth: ast.expr


class Instrumenter(ast.NodeTransformer):
    """Rewrites a policy-checked module in place."""

    def __init__(self) -> None:
        self.scopes: list[_Scope] = [_Scope("module", _const(0))]
        self.counter = 0

    def temp(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"_pvm_{prefix}{self.counter}"

    def depth_expr(self) -> ast.expr:
        for scope in reversed(self.scopes):
            if scope.kind in ("module", "function"):
                return scope.depth
        return _const(0)

    # --- blocks -----------------------------------------------------------------------
    def run(self, tree: ast.Module) -> ast.Module:
        body = [s for s in tree.body if not (isinstance(s, ast.ImportFrom) and s.module == "__future__")]
        tree.body = self.block(body, 0)
        return ast.fix_missing_locations(tree)

    def block(self, stmts: list[ast.stmt], extra: int, helper: str = "charge") -> list[ast.stmt]:
        cost = extra + block_cost(stmts)
        out: list[ast.stmt] = [ast.Expr(_call(helper, _const(cost)))]
        if stmts:
            ast.copy_location(out[0], stmts[0])
        for s in stmts:
            out.extend(self.statement(s))
        return out

    def statement(self, s: ast.stmt) -> list[ast.stmt]:
        method = getattr(self, f"stmt_{type(s).__name__}", None)
        result: list[ast.stmt] = method(s) if method is not None else [self.visit(s)]
        for r in result:
            ast.copy_location(r, s)
        return result

    # --- statements ---------------------------------------------------------------------
    def stmt_FunctionDef(self, s: ast.FunctionDef) -> list[ast.stmt]:
        s.decorator_list = [self.visit(d) for d in s.decorator_list]
        self._arguments(s.args)
        s.returns = None
        cost = costs.FUNC_ENTRY + block_cost(s.body)
        self.scopes.append(_Scope("function", ast.Name(id="_pvm_d", ctx=ast.Load())))
        body: list[ast.stmt] = []
        for stmt in s.body:
            body.extend(self.statement(stmt))
        self.scopes.pop()
        enter = ast.Assign(targets=[ast.Name(id="_pvm_d", ctx=ast.Store())], value=_call("enter", _const(cost)))
        leave = ast.Expr(_call("exit", ast.Name(id="_pvm_d", ctx=ast.Load())))
        s.body = [enter, ast.Try(body=body, handlers=[], orelse=[], finalbody=[leave])]
        return [s]

    def _arguments(self, args: ast.arguments) -> None:
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [self.visit(d) if d is not None else None for d in args.kw_defaults]
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                a.annotation = None

    def stmt_ClassDef(self, s: ast.ClassDef) -> list[ast.stmt]:
        s.bases = [self.visit(b) for b in s.bases]
        s.decorator_list = [self.visit(d) for d in s.decorator_list] + [_name("class")]
        self.scopes.append(_Scope("class", self.depth_expr()))
        s.body = self.block(s.body, 0)
        self.scopes.pop()
        return [s]

    def stmt_Delete(self, s: ast.Delete) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for target in s.targets:
            out.extend(self._delete(target))
        return out

    def _delete(self, t: ast.expr) -> list[ast.stmt]:
        if isinstance(t, ast.Tuple | ast.List):
            return [d for elt in t.elts for d in self._delete(elt)]
        if isinstance(t, ast.Subscript):
            key = self._slice_call(t.slice) if isinstance(t.slice, ast.Slice) else self.visit(t.slice)
            return [ast.Expr(_call("delitem", self.visit(t.value), key))]
        return [ast.Delete(targets=[self.target(t)])]

    def _slice_call(self, s: ast.Slice) -> ast.Call:
        parts = [self.visit(p) if p is not None else _const(None) for p in (s.lower, s.upper, s.step)]
        return _call("slice", *parts)

    def stmt_Assign(self, s: ast.Assign) -> list[ast.stmt]:
        value = self.visit(s.value)
        if any(self._has_star(t) for t in s.targets):
            value = _call("seq", value)
        slices = [t for t in s.targets if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Slice)]
        if not slices:
            return [ast.Assign(targets=[self.target(t) for t in s.targets], value=value)]
        tmp = self.temp()
        out: list[ast.stmt] = [ast.Assign(targets=[ast.Name(id=tmp, ctx=ast.Store())], value=value)]
        for t in s.targets:
            if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Slice):
                sl = t.slice
                parts = [self.visit(p) if p is not None else _const(None) for p in (sl.lower, sl.upper, sl.step)]
                call = _call("setslice", self.visit(t.value), *parts, ast.Name(id=tmp, ctx=ast.Load()))
                out.append(ast.Expr(call))
            else:
                out.append(ast.Assign(targets=[self.target(t)], value=ast.Name(id=tmp, ctx=ast.Load())))
        return out

    @staticmethod
    def _has_star(t: ast.expr) -> bool:
        return isinstance(t, ast.Tuple | ast.List) and any(
            isinstance(e, ast.Starred) or Instrumenter._has_star(e) for e in t.elts
        )

    def stmt_AugAssign(self, s: ast.AugAssign) -> list[ast.stmt]:
        helper = BINOP_HELPERS.get(type(s.op))
        if helper is None:
            target: Any = self.target(s.target)
            return [ast.AugAssign(target=target, op=s.op, value=self.visit(s.value))]
        t = s.target
        if isinstance(t, ast.Name):
            load = ast.Name(id=t.id, ctx=ast.Load())
            value = _call(f"i{helper}", load, self.visit(s.value))
            return [ast.Assign(targets=[ast.Name(id=t.id, ctx=ast.Store())], value=value)]
        obj = self.temp()
        out: list[ast.stmt] = []
        if isinstance(t, ast.Attribute):
            out.append(ast.Assign(targets=[ast.Name(id=obj, ctx=ast.Store())],
                                  value=_call("wobj", self.visit(t.value))))
            current = self.visit(ast.Attribute(value=ast.Name(id=obj, ctx=ast.Load()), attr=t.attr, ctx=ast.Load()))
            store: ast.expr = ast.Attribute(value=ast.Name(id=obj, ctx=ast.Load()), attr=t.attr, ctx=ast.Store())
        else:
            assert isinstance(t, ast.Subscript)
            key = self.temp()
            out.append(ast.Assign(targets=[ast.Name(id=obj, ctx=ast.Store())], value=self.visit(t.value)))
            out.append(ast.Assign(targets=[ast.Name(id=key, ctx=ast.Store())], value=self._key(self.visit(t.slice))))
            current = ast.Subscript(value=ast.Name(id=obj, ctx=ast.Load()), slice=ast.Name(id=key, ctx=ast.Load()),
                                    ctx=ast.Load())
            store = ast.Subscript(value=ast.Name(id=obj, ctx=ast.Load()), slice=ast.Name(id=key, ctx=ast.Load()),
                                  ctx=ast.Store())
        out.append(ast.Assign(targets=[store], value=_call(f"i{helper}", current, self.visit(s.value))))
        return out

    def stmt_AnnAssign(self, s: ast.AnnAssign) -> list[ast.stmt]:
        if s.value is None:
            return []
        return [ast.Assign(targets=[self.target(s.target)], value=self.visit(s.value))]

    def stmt_For(self, s: ast.For) -> list[ast.stmt]:
        s.target = self.target(s.target)
        s.iter = self.visit(s.iter)
        s.body = self.block(s.body, costs.LOOP_ITER)
        s.orelse = self.block(s.orelse, 0) if s.orelse else []
        return [s]

    def stmt_While(self, s: ast.While) -> list[ast.stmt]:
        extra = costs.LOOP_ITER + costs.CALL * calls(s.test)
        s.test = self.visit(s.test)
        s.body = self.block(s.body, extra)
        s.orelse = self.block(s.orelse, 0) if s.orelse else []
        return [s]

    def stmt_If(self, s: ast.If) -> list[ast.stmt]:
        s.test = self.visit(s.test)
        s.body = self.block(s.body, 0)
        s.orelse = self.block(s.orelse, 0) if s.orelse else []
        return [s]

    def stmt_Try(self, s: ast.Try) -> list[ast.stmt]:
        s.body = self.block(s.body, 0)
        for h in s.handlers:
            if h.type is not None:
                h.type = self.visit(h.type)
            if h.name is None:
                h.name = self.temp("e")
            cost = block_cost(h.body)
            caught = ast.Expr(_call("caught", self.depth_expr(), ast.Name(id=h.name, ctx=ast.Load()), _const(cost)))
            body: list[ast.stmt] = [ast.copy_location(caught, h)]
            for stmt in h.body:
                body.extend(self.statement(stmt))
            h.body = body
        s.orelse = self.block(s.orelse, 0) if s.orelse else []
        s.finalbody = self.block(s.finalbody, 0) if s.finalbody else []
        return [s]

    def stmt_Import(self, s: ast.Import) -> list[ast.stmt]:
        return [
            ast.Assign(targets=[ast.Name(id=a.asname or a.name, ctx=ast.Store())],
                       value=_call("import", _const(a.name)))
            for a in s.names
        ]

    def stmt_ImportFrom(self, s: ast.ImportFrom) -> list[ast.stmt]:
        if s.module == "__future__":
            return []
        return [
            ast.Assign(targets=[ast.Name(id=a.asname or a.name, ctx=ast.Store())],
                       value=_call("import_from", _const(s.module), _const(a.name)))
            for a in s.names
        ]

    # --- targets ------------------------------------------------------------------------
    def target(self, t: ast.expr) -> ast.expr:
        if isinstance(t, ast.Attribute):
            return ast.copy_location(ast.Attribute(value=_call("wobj", self.visit(t.value)), attr=t.attr, ctx=t.ctx), t)
        if isinstance(t, ast.Subscript):
            return ast.copy_location(ast.Subscript(value=self.visit(t.value), slice=self._key(self.visit(t.slice)),
                                                   ctx=t.ctx), t)
        if isinstance(t, ast.Tuple | ast.List):
            t.elts = [self.target(e) for e in t.elts]
            return t
        if isinstance(t, ast.Starred):
            t.value = self.target(t.value)
            return t
        return t

    @staticmethod
    def _key(k: ast.expr) -> ast.expr:
        if isinstance(k, ast.Constant) and (
            isinstance(k.value, _SAFE_KEY_TYPES) or (type(k.value) is int and abs(k.value) < 1 << 60)
        ):
            return k
        return ast.copy_location(_call("key", k), k)

    # --- expressions --------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        left, right = self.visit(node.left), self.visit(node.right)
        helper = BINOP_HELPERS.get(type(node.op))
        if helper is None:
            node.left, node.right = left, right
            return node
        return ast.copy_location(_call(helper, left, right), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.Invert):
            return ast.copy_location(_call("invert", operand), node)
        node.operand = operand
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        left = self.visit(node.left)
        comparators = [self.visit(c) for c in node.comparators]
        if len(node.ops) == 1:
            return ast.copy_location(self._compare(left, node.ops[0], comparators[0]), node)
        parts: list[ast.expr] = []
        current = left
        for i, (op, right) in enumerate(zip(node.ops, comparators, strict=True)):
            last = i == len(node.ops) - 1
            if last or isinstance(right, ast.Name | ast.Constant):
                parts.append(self._compare(current, op, right))
                current = right
            else:
                tmp = self.temp("c")
                bound = ast.NamedExpr(target=ast.Name(id=tmp, ctx=ast.Store()), value=right)
                parts.append(self._compare(current, op, bound))
                current = ast.Name(id=tmp, ctx=ast.Load())
        return ast.copy_location(ast.BoolOp(op=ast.And(), values=parts), node)

    @staticmethod
    def _compare(left: ast.expr, op: ast.cmpop, right: ast.expr) -> ast.expr:
        helper = COMPARE_HELPERS.get(type(op))
        if helper is None:
            return ast.Compare(left=left, ops=[op], comparators=[right])
        return _call(helper, left, right)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        args = [self.visit(a) for a in node.args]
        keywords = [self.visit(k) for k in node.keywords]
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in GUARDED_METHOD_NAMES:
            call = ast.Call(func=_name("callm"), args=[self.visit(func.value), _const(func.attr), *args],
                            keywords=keywords)
            return ast.copy_location(call, node)
        node.func = self.visit(func)
        node.args = args
        node.keywords = keywords
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        value = self.visit(node.value)
        if not isinstance(node.ctx, ast.Load):
            node.value = _call("wobj", value)
            return node
        if node.attr in GUARDED_METHOD_NAMES:
            return ast.copy_location(_call("attr", value, _const(node.attr)), node)
        if node.attr == "__init__":
            return ast.copy_location(_call("init", value), node)
        node.value = value
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        node.value = self.visit(node.value)
        if isinstance(node.slice, ast.Slice):
            node.slice = self.visit(node.slice)
            if isinstance(node.ctx, ast.Load):
                return ast.copy_location(_call("sized", node), node)
            return node
        key = self.visit(node.slice)
        if isinstance(node.ctx, ast.Load):
            if self._key(key) is key:  # a constant key: no check needed
                node.slice = key
                return node
            return ast.copy_location(_call("getitem", node.value, key), node)
        node.slice = self._key(key)
        return node

    def visit_Starred(self, node: ast.Starred) -> ast.expr:
        if isinstance(node.ctx, ast.Load):
            node.value = _call("seq", self.visit(node.value))
        else:
            node.value = self.target(node.value)
        return node

    def visit_Dict(self, node: ast.Dict) -> ast.expr:
        values = [self.visit(v) for v in node.values]
        node.values = [v if k is not None else _call("mapping", v) for k, v in zip(node.keys, values, strict=True)]
        node.keys = [self._key(self.visit(k)) if k is not None else None for k in node.keys]
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.keyword:
        node.value = self.visit(node.value)
        if node.arg is None:
            node.value = _call("mapping", node.value)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.expr:
        parts: list[ast.expr] = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                spec = self.visit(v.format_spec) if v.format_spec is not None else _const(None)
                parts.append(ast.copy_location(_call("fmt", self.visit(v.value), _const(v.conversion), spec), v))
            else:
                parts.append(v)
        return ast.copy_location(_call("fjoin", ast.Tuple(elts=parts, ctx=ast.Load())), node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.expr:
        self._arguments(node.args)
        cost = costs.FUNC_ENTRY + costs.CALL * calls(node.body)
        self.scopes.append(_Scope("lambda", _const(0)))
        body = self.visit(node.body)
        self.scopes.pop()
        node.body = _call("lam_out", _call("lam_in", _const(cost)), body)
        return node

    def _comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.DictComp, elts: list[ast.expr]) -> None:
        gens = node.generators
        ticks = []
        for i, g in enumerate(gens):
            n = _calls_all(g.ifs)
            if i + 1 < len(gens):
                n += calls(gens[i + 1].iter)
            else:
                n += _calls_all(elts)
            ticks.append(costs.LOOP_ITER + costs.CALL * n)
        gens[0].iter = self.visit(gens[0].iter)
        self.scopes.append(_Scope("comprehension", _const(0)))
        for i, g in enumerate(gens):
            g.target = self.target(g.target)
            if i:
                g.iter = self.visit(g.iter)
            g.ifs = [_call("tick", _const(ticks[i])), *(self.visit(c) for c in g.ifs)]

    def visit_ListComp(self, node: ast.ListComp) -> ast.expr:
        self._comprehension(node, [node.elt])
        node.elt = self.visit(node.elt)
        self.scopes.pop()
        return node

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.expr:
        self._comprehension(node, [node.elt])
        node.elt = self.visit(node.elt)
        self.scopes.pop()
        return node

    def visit_DictComp(self, node: ast.DictComp) -> ast.expr:
        self._comprehension(node, [node.key, node.value])
        node.key = self._key(self.visit(node.key))
        node.value = self.visit(node.value)
        self.scopes.pop()
        return node


def instrument(tree: ast.Module) -> ast.Module:
    """Rewrite ``tree`` (in place) for execution in the sandbox."""
    return Instrumenter().run(tree)

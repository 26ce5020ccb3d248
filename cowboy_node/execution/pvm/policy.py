"""Deploy-time AST policy: what actor source may contain.

:func:`check_source` parses the source and either returns the tree with the list of
handlers and imported modules, or raises :class:`ActorRejected` naming the first
violation (in source order) by line and rule.  The rules are listed in ``docs/pvm.md``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cowboy_node.execution.pvm import grammar
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.pvm_errors import ActorRejected

#: Pure modules the PVM itself provides (curated wrappers, see ``stdlib.py``).
STDLIB_MODULES = frozenset({"json", "math", "typing"})
#: Host module names accepted when ``compile_actor`` is given no ``allowed_modules``.
DEFAULT_HOST_MODULES = frozenset({"pvm_host", "cowboy_sdk"})
#: Deepest accepted AST (deploy time).  Keeps every recursive pass far from the stack limit.
MAX_AST_DEPTH = 100

#: Builtins that must never be named (when the module does not bind the name itself).
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "open", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "hasattr", "dir", "type", "super", "breakpoint", "input", "print", "memoryview",
    "id", "help", "object", "classmethod", "staticmethod", "property", "hash", "set", "frozenset",
    "exit", "quit", "copyright", "credits", "license", "aiter", "anext", "complex",
    "BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit", "slice",
})
#: Attribute names that reach formatting machinery or interpreter internals.
FORBIDDEN_ATTRIBUTES = frozenset({
    "format", "format_map", "mro", "with_traceback", "throw", "cell_contents",
    "mapping",  # dict_view.mapping: a mappingproxy whose methods bypass the dict guards
    "fget", "fset", "fdel",  # property internals: host functions (cowboy_sdk's @actor installs properties)
})
#: Attribute prefixes of frame/code/traceback/generator internals (and Python 2 aliases).
FORBIDDEN_ATTRIBUTE_PREFIXES = ("co_", "f_", "tb_", "gi_", "cr_", "ag_", "func_", "im_")
#: Names the instrumenter inserts (``instrument.py``); actor code may not bind or read them.
RESERVED_NAME_PREFIX = "_pvm"
#: Exception classes whose handlers could swallow sandbox halts.
BASE_EXCEPTION_NAMES = frozenset({"BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit"})

_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.FunctionDef, ast.ClassDef, ast.Return, ast.Delete, ast.Assign, ast.AugAssign,
    ast.AnnAssign, ast.For, ast.While, ast.If, ast.Raise, ast.Try, ast.Assert, ast.Import,
    ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Expr, ast.Pass, ast.Break, ast.Continue,
    ast.BoolOp, ast.NamedExpr, ast.BinOp, ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Dict,
    ast.ListComp, ast.DictComp, ast.GeneratorExp, ast.Compare, ast.Call, ast.FormattedValue,
    ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Starred, ast.Name, ast.List,
    ast.Tuple, ast.Slice, ast.expr_context, ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
    ast.comprehension, ast.ExceptHandler, ast.arguments, ast.arg, ast.keyword, ast.alias,
)
_FORBIDDEN_NODES: dict[type[ast.AST], tuple[str, str]] = {
    ast.AsyncFunctionDef: ("async", "async functions are forbidden"),
    ast.AsyncFor: ("async", "async for is forbidden"),
    ast.AsyncWith: ("async", "async with is forbidden"),
    ast.Await: ("async", "await is forbidden"),
    ast.Yield: ("yield", "generators are forbidden (yield)"),
    ast.YieldFrom: ("yield", "generators are forbidden (yield from)"),
    ast.With: ("with_statement", "with statements are forbidden"),
    ast.Match: ("match_statement", "match statements are forbidden"),
    ast.TryStar: ("except_star", "except* is forbidden"),
    ast.Set: ("set_literal", "set displays are forbidden (iteration order depends on the hash seed)"),
    ast.SetComp: ("set_literal", "set comprehensions are forbidden (iteration order depends on the hash seed)"),
}


@dataclass(frozen=True)
class CheckedSource:
    """Result of a successful policy check."""

    tree: ast.Module
    handlers: tuple[str, ...]
    imports: tuple[str, ...]
    #: The module's single ``@actor``-decorated class, whose methods are handlers too (or None).
    actor_class: str | None = None
    #: The handlers (a suffix of ``handlers``) that are methods of ``actor_class``.
    class_handlers: tuple[str, ...] = ()


def _ast_depth(tree: ast.AST) -> int:
    depth = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, d = stack.pop()
        if d > depth:
            depth = d
            if depth > MAX_AST_DEPTH:
                return depth
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return depth


def parse_source(source: str, limits: Limits) -> ast.Module:
    """Parse with size and nesting limits; syntax problems become ``ActorRejected``."""
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > limits.max_source_bytes:
        raise ActorRejected(0, "source_too_large", f"source is {size} bytes, limit {limits.max_source_bytes}")
    try:
        tree = grammar.parse(source)  # Python 3.11's grammar whatever the interpreter (pvm_version 1)
    except SyntaxError as exc:
        raise ActorRejected(exc.lineno or 0, "syntax_error", exc.msg) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ActorRejected(0, "too_complex" if not isinstance(exc, ValueError) else "syntax_error",
                            type(exc).__name__) from None
    if _ast_depth(tree) > MAX_AST_DEPTH:
        raise ActorRejected(0, "too_complex", f"syntax tree deeper than {MAX_AST_DEPTH}")
    newer = grammar.check(source, tree)
    if newer is not None:
        raise ActorRejected(*newer)
    return tree


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the module binds anywhere (any scope)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _mentions(expr: ast.AST, names: frozenset[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


class _Checker(ast.NodeVisitor):
    def __init__(self, limits: Limits, allowed_modules: frozenset[str], bound: set[str]) -> None:
        self.limits = limits
        self.allowed_modules = allowed_modules
        self.bound = bound
        self.violations: list[tuple[int, int, str, str]] = []
        self.imports: list[str] = []
        self._class_body_defs: set[int] = set()

    def bad(self, node: ast.AST, rule: str, message: str) -> None:
        self.violations.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), rule, message))

    def name(self, node: ast.AST, name: str, what: str) -> None:
        if name.startswith("__") or name.startswith(RESERVED_NAME_PREFIX):
            self.bad(node, "underscore_name", f"{what} {name!r} starts with '__' or '{RESERVED_NAME_PREFIX}'")

    def generic_visit(self, node: ast.AST) -> None:
        forbidden = _FORBIDDEN_NODES.get(type(node))
        if forbidden is not None:
            self.bad(node, *forbidden)
            return
        if not isinstance(node, _ALLOWED_NODES):
            self.bad(node, "forbidden_syntax", f"{type(node).__name__} is not allowed")
            return
        super().generic_visit(node)

    # --- names ---------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        self.name(node, node.id, "name")
        if isinstance(node.ctx, ast.Load) and node.id in FORBIDDEN_NAMES and node.id not in self.bound:
            self.bad(node, "forbidden_name", f"{node.id!r} is not available in the PVM")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("__"):
            if not (attr == "__init__" and isinstance(node.ctx, ast.Load)):
                self.bad(node, "dunder_attribute", f"attribute access to {attr} is forbidden")
        elif attr.startswith("_"):
            self.bad(node, "private_attribute", f"attribute access to {attr} is forbidden")
        elif attr in FORBIDDEN_ATTRIBUTES or attr.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
            self.bad(node, "forbidden_attribute", f"attribute access to {attr} is forbidden")
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self.name(node, node.arg, "argument")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg is not None:
            self.name(node, node.arg, "keyword")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for n in node.names:
            self.name(node, n, "name")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        for n in node.names:
            self.name(node, n, "name")

    # --- definitions -----------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if not (node.name == "__init__" and id(node) in self._class_body_defs):
            self.name(node, node.name, "function")
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.name(node, node.name, "class")
        if node.keywords:
            self.bad(node, "class_keywords", "class keywords (metaclass=...) are forbidden")
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                self._class_body_defs.add(id(stmt))
        self.generic_visit(node)

    # --- imports ---------------------------------------------------------------------
    def _module(self, node: ast.AST, module: str) -> None:
        if module not in self.allowed_modules:
            self.bad(node, "import_not_allowed", f"import of {module!r} is not allowed")
        else:
            self.imports.append(module)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname is not None:
                self.name(node, alias.asname, "import alias")
            elif "." in alias.name:
                self.bad(node, "import_form", f"'import {alias.name}' needs an alias ('as name')")
            self._module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.bad(node, "relative_import", "relative imports are forbidden")
            return
        module = node.module or ""
        if module == "__future__":
            if [a.name for a in node.names] != ["annotations"]:
                self.bad(node, "import_not_allowed", "only 'from __future__ import annotations' is allowed")
            return
        for alias in node.names:
            if alias.name == "*":
                self.bad(node, "star_import", "star imports are forbidden")
                continue
            self.name(node, alias.name, "imported name")
            if alias.asname is not None:
                self.name(node, alias.asname, "import alias")
        self._module(node, module)

    # --- control flow ----------------------------------------------------------------
    def visit_Try(self, node: ast.Try) -> None:
        for handler in node.handlers:
            if handler.type is None:
                self.bad(handler, "bare_except", "bare 'except:' is forbidden; catch Exception")
            elif _mentions(handler.type, BASE_EXCEPTION_NAMES):
                self.bad(handler, "catch_base_exception", "only Exception subclasses may be caught")
            if handler.name is not None:
                self.name(handler, handler.name, "exception name")
        for stmt in node.finalbody:
            self._check_finally(stmt, in_loop=False)
        self.generic_visit(node)

    def _check_finally(self, node: ast.AST, in_loop: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Lambda):
            return
        if isinstance(node, ast.Return) or (isinstance(node, ast.Break | ast.Continue) and not in_loop):
            self.bad(node, "finally_control_flow", "return/break/continue inside finally is forbidden")
        loop = isinstance(node, ast.For | ast.While)
        for child in ast.iter_child_nodes(node):
            self._check_finally(child, in_loop or (loop and child not in getattr(node, "orelse", ())))

    def visit_For(self, node: ast.For) -> None:
        self._targets(node.target, allow_slice=False)
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if node.is_async:
            self.bad(node.target, "async", "async comprehensions are forbidden")
        self._targets(node.target, allow_slice=False)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Tuple | ast.List):
                for elt in target.elts:
                    self._targets(elt, allow_slice=False, allow_star=True)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Subscript) and isinstance(node.target.slice, ast.Slice):
            self.bad(node, "slice_target", "augmented assignment to a slice is forbidden")
        self.generic_visit(node)

    def _targets(self, target: ast.AST, allow_slice: bool, allow_star: bool = False) -> None:
        if isinstance(target, ast.Starred):
            if not allow_star:
                self.bad(target, "starred_target", "starred targets are only allowed in assignments")
            self._targets(target.value, allow_slice=False)
        elif isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self._targets(elt, allow_slice=False, allow_star=allow_star)
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice) and not allow_slice:
            self.bad(target, "slice_target", "slice assignment is only allowed as a plain assignment target")

    # --- literals --------------------------------------------------------------------
    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, complex):
            self.bad(node, "complex_literal", "complex numbers are forbidden")
        elif isinstance(value, int) and value.bit_length() > self.limits.max_int_bits:
            self.bad(node, "int_too_large", f"integer literal over {self.limits.max_int_bits} bits")

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self.generic_visit(node)


def _handlers(tree: ast.Module) -> tuple[str, ...]:
    names: list[str] = []
    for stmt in tree.body:
        # ``_helper`` is a private helper (the SDK's convention): never a handler a caller can name.
        if isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("_") and stmt.name not in names:
            names.append(stmt.name)
    return tuple(names)


def _is_actor_decorator(node: ast.expr) -> bool:
    """``@actor`` or ``@<module>.actor`` (the SDK's class decorator; run-time checked too)."""
    return (isinstance(node, ast.Name) and node.id == "actor") or (
        isinstance(node, ast.Attribute) and node.attr == "actor" and isinstance(node.value, ast.Name))


def actor_class(tree: ast.Module) -> ast.ClassDef | None:
    """The module-level class decorated with ``actor`` when there is exactly one, else None."""
    found = [stmt for stmt in tree.body
             if isinstance(stmt, ast.ClassDef) and any(_is_actor_decorator(d) for d in stmt.decorator_list)]
    return found[0] if len(found) == 1 else None


def _class_handlers(cls: ast.ClassDef, taken: tuple[str, ...]) -> tuple[str, ...]:
    """Public methods written in the class body, in source order (module-level defs win)."""
    names: list[str] = []
    for stmt in cls.body:
        if (isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("_")
                and stmt.name not in taken and stmt.name not in names):
            names.append(stmt.name)
    return tuple(names)


def check_source(source: str, limits: Limits, allowed_modules: Iterable[str],
                 transform: Callable[[ast.Module, str], ast.Module] | None = None) -> CheckedSource:
    """Parse and validate ``source``; raise :class:`ActorRejected` on the first violation.

    ``transform`` (e.g. the cowboy_sdk continuation lowering) rewrites the parsed tree before the
    rules run, so everything it generates is checked like the actor's own code.
    """
    tree = parse_source(source, limits)
    if transform is not None:
        tree = transform(tree, source)
    allowed = frozenset(allowed_modules) | STDLIB_MODULES
    checker = _Checker(limits, allowed, _bound_names(tree))
    checker.visit(tree)
    if checker.violations:
        line, _col, rule, message = min(checker.violations)
        raise ActorRejected(line, rule, message)
    handlers = _handlers(tree)
    cls = actor_class(tree)
    methods = _class_handlers(cls, handlers) if cls is not None else ()
    return CheckedSource(tree, handlers + methods, tuple(dict.fromkeys(checker.imports)),
                         cls.name if cls is not None else None, methods)

"""Structure walks: the cost of comparing data, and which values may be dict keys.

CPython compares and hashes containers in C, recursively and without metering: a
comparison of two shared-structure lists can take 10**12 steps, and a comparison or
hash of a deeply nested structure can exhaust the C stack or raise a RecursionError
whose threshold depends on the host's stack.  Before any such operation the runtime
walks the operands here: the walk charges ``ITEM`` per node visited (plus
``len >> CMP_SHIFT`` per str/bytes) and halts with ``recursion_limit`` past
``max_nesting_depth`` levels, so the C operation that follows is both paid for and
shallow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cowboy_node.execution.pvm import costs

if TYPE_CHECKING:
    from cowboy_node.execution.pvm.ctx import Ctx

NoneType = type(None)
DictKeys: type = type({}.keys())
DictValues: type = type({}.values())
DictItems: type = type({}.items())
_OBJECT_HASH: Any = object.__hash__

#: Values whose comparison with anything is O(1) (ints are bounded by ``max_int_bits``).
SCALARS: frozenset[type] = frozenset({int, float, bool, NoneType})
STRLIKE: frozenset[type] = frozenset({str, bytes, bytearray})
_FLAT: frozenset[type] = SCALARS | STRLIKE
DICT_VIEWS: frozenset[type] = frozenset({DictKeys, DictValues, DictItems})

#: Integer dict keys must satisfy ``-KEY_INT_BOUND < k < KEY_INT_BOUND``: below the hash
#: modulus 2**61 - 1 distinct ints have distinct hashes, so no key set can be built to
#: collide (a dict with colliding keys costs O(n**2) unmetered probes).
KEY_INT_BOUND = 1 << 60


def _flat_cost(seq: Any) -> int:
    """Cost of a flat sequence whose items are all scalars or str/bytes."""
    extra = 0
    for item in seq:
        if type(item) in STRLIKE:
            extra += len(item) >> costs.CMP_SHIFT
    return len(seq) * costs.ITEM + extra


def _children(o: Any) -> Any:
    if isinstance(o, dict):
        return [*o.keys(), *o.values()]
    if isinstance(o, list | tuple):
        return o
    return list(o)  # dict views


def weight(ctx: Ctx, obj: Any, cap: int) -> int:
    """Nodes of ``obj`` counted with multiplicity, or some value above ``cap``.

    Halts with ``recursion_limit`` when a container deeper than ``max_nesting_depth``
    is reached (cyclic structures included).  Nothing is charged here: callers charge
    the weight they use.
    """
    max_depth = ctx.limits.max_nesting_depth
    total = 0
    stack: list[tuple[Any, int]] = [(obj, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        o, d = pop()
        t = type(o)
        total += costs.ITEM
        if t in SCALARS:
            continue
        if t in STRLIKE:
            total += len(o) >> costs.CMP_SHIFT
        elif t is list or t is tuple or t is dict or t in DICT_VIEWS or isinstance(o, list | tuple | dict):
            if d >= max_depth:
                ctx.halt("recursion_limit", f"data nested deeper than {max_depth} levels")
            if len(o) > cap - total:
                return cap + 1
            items = _children(o)
            kinds = set(map(type, items))
            if kinds <= _FLAT:
                total += _flat_cost(items) if kinds & STRLIKE else len(items) * costs.ITEM
            else:
                for item in items:
                    push((item, d + 1))
        # any other object compares by identity: actor classes cannot define __eq__
        if total > cap:
            return total
    return total


def charge_compare(ctx: Ctx, a: Any, b: Any) -> None:
    """Charge the worst-case cost of comparing containers ``a`` and ``b``."""
    budget = ctx.remaining() + 1
    wa = weight(ctx, a, budget)
    wb = weight(ctx, b, min(wa, budget))
    ctx.charge(min(wa, wb))


def charge_scan(ctx: Ctx, needle: Any, seq: Any) -> None:
    """Charge comparing ``needle`` with every item of the list/tuple ``seq``."""
    n = len(seq)
    budget = ctx.remaining() + 1
    t = type(needle)
    if t in SCALARS:
        cost = n * costs.ITEM
    elif t in STRLIKE:
        cost = n * costs.ITEM + ((n * len(needle)) >> costs.CMP_SHIFT)
    else:
        cost = n * weight(ctx, needle, budget)
        cost = min(cost, weight(ctx, seq, min(cost, budget)))
    ctx.charge(min(cost, budget))


def charge_items(ctx: Ctx, items: Any) -> None:
    """Walk and charge every item of a materialized sequence (before sorting, min/max...)."""
    ctx.charge(weight(ctx, items, ctx.remaining() + 1))


def check_key(ctx: Ctx, key: Any) -> Any:
    """Return ``key`` if it may be hashed into a dict, else raise ``TypeError``.

    Allowed: str, bytes, bool, None, ints with ``|k| < 2**60`` and identity-hashed
    objects (instances of actor classes, functions, classes).  Tuples, floats, ranges,
    bound methods and large ints are refused: their hashes are predictable (colliding
    key sets) or recursive (deep tuples overflow the C stack).
    """
    t = type(key)
    if t is str or t is bytes or t is bool or key is None:
        return key
    if t is int:
        if -KEY_INT_BOUND < key < KEY_INT_BOUND:
            return key
        raise TypeError("PVM dict keys: int keys must be smaller than 2**60 in magnitude")
    hash_slot: Any = t.__hash__
    if hash_slot is _OBJECT_HASH:
        return key
    raise TypeError(f"PVM dict keys: unsupported key type {t.__name__}")

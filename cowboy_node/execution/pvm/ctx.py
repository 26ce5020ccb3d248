"""The per-call sandbox context: meter, limits, depth and the sticky halt."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, NoReturn

from cowboy_node.execution.meter import Meter
from cowboy_node.execution.pvm import costs
from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.pvm_errors import PvmHalt
from cowboy_node.execution.validity_errors import TxFailed


class Ctx:
    """State of one ``call_handler`` invocation (a reused context is :meth:`reset` for each one).

    Once a halt has been raised it is *sticky*: every later charge raises it again, so a
    ``finally`` block run during the unwinding cannot keep the actor going.
    """

    __slots__ = ("actor_classes", "depth", "halted", "int_bound", "limits", "meter", "modules")

    def __init__(self, meter: Meter, limits: Limits, modules: Mapping[str, object] | None = None) -> None:
        self.meter = meter
        #: The host modules of this call (trusted host code may look up ``pvm_host`` here).
        self.modules: Mapping[str, object] = modules if modules is not None else {}
        self.limits = limits
        self.depth = 0
        self.halted: tuple[str, str] | None = None
        #: Classes created by the actor during this call (their instances are actor-owned).
        self.actor_classes: dict[int, type] = {}
        #: Integers must satisfy ``-int_bound < v < int_bound``.
        self.int_bound = 1 << limits.max_int_bits

    def reset(self, meter: Meter, limits: Limits, modules: Mapping[str, object]) -> None:
        """Make this context the fresh context of a new call (``runtime.Sandbox`` reuses its Ctx):
        every field is set exactly as ``__init__`` sets it."""
        self.meter = meter
        self.modules = modules
        self.limits = limits
        self.depth = 0
        self.halted = None
        self.actor_classes = {}
        self.int_bound = 1 << limits.max_int_bits

    def halt(self, code: str, message: str = "") -> NoReturn:
        if self.halted is None:
            self.halted = (code, message)
        raise PvmHalt(*self.halted)

    def charge(self, n: int) -> None:
        if self.halted is not None:
            raise PvmHalt(*self.halted)
        if n > 0:
            try:
                self.meter.charge_cycles(n)
            except TxFailed as exc:
                self.halt(exc.code, str(exc))

    def remaining(self) -> int:
        return max(0, self.meter.cycles_limit - self.meter.cycles_used)

    def check_items(self, n: int) -> None:
        """Charge producing ``n`` collection items, halting past ``max_collection_items``."""
        if n > self.limits.max_collection_items:
            self.halt("memory_limit", f"{n} items exceed max_collection_items {self.limits.max_collection_items}")
        self.charge(costs.items_cost(n))

    def check_bytes(self, n: int) -> None:
        """Charge producing ``n`` bytes/code points, halting past ``max_bytes_object``."""
        if n > self.limits.max_bytes_object:
            self.halt("memory_limit", f"{n} bytes exceed max_bytes_object {self.limits.max_bytes_object}")
        self.charge(costs.bytes_cost(n))

    def limit_items(self, total: int) -> None:
        """Halt if a collection would grow past ``max_collection_items`` (nothing charged)."""
        if total > self.limits.max_collection_items:
            self.halt("memory_limit", f"{total} items exceed max_collection_items {self.limits.max_collection_items}")

    def limit_bytes(self, total: int) -> None:
        """Halt if a str/bytes object would grow past ``max_bytes_object`` (nothing charged)."""
        if total > self.limits.max_bytes_object:
            self.halt("memory_limit", f"{total} bytes exceed max_bytes_object {self.limits.max_bytes_object}")

    def check_size(self, obj: Any) -> None:
        """Charge/limit an object just produced (str/bytes by length, containers by items)."""
        t = type(obj)
        if t is str or t is bytes or t is bytearray:
            self.check_bytes(len(obj))
        elif t is list or t is tuple or t is dict:
            self.check_items(len(obj))

    def int_result(self, value: int) -> int:
        bound = self.int_bound
        if -bound < value < bound:
            return value
        self.halt("int_too_large", f"integer of {value.bit_length()} bits exceeds {self.limits.max_int_bits}")


#: The sandbox context of the handler running on this thread (innermost frame), so that
#: trusted host code reached without a ``Ctx`` argument (the SDK's ``sys.modules["pvm_host"]``
#: lookups, ``cowboy_sdk`` entry points) can charge and halt the right call.
ACTIVE: ContextVar[Ctx | None] = ContextVar("pvm_active_ctx", default=None)


def active() -> Ctx | None:
    """The :class:`Ctx` of the innermost handler running in this thread/context, if any."""
    return ACTIVE.get()

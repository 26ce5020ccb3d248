"""The actor sandbox (PVM): deterministic, metered execution of Python actors.

See ``docs/pvm.md`` for the policy, the cost table and the limits.
"""

from cowboy_node.execution.pvm.limits import Limits
from cowboy_node.execution.pvm.pvm_errors import HALT_CODES, ActorRejected, PvmError
from cowboy_node.execution.pvm.sandbox import CompiledActor, call_handler, compile_actor, describe_exception

__all__ = [
    "HALT_CODES",
    "ActorRejected",
    "CompiledActor",
    "Limits",
    "PvmError",
    "call_handler",
    "compile_actor",
    "describe_exception",
]

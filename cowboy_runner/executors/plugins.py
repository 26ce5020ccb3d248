"""Executor plugins (docs/runner-executors.md "Plugins"): an installed package adds an executor through the entry
point group :data:`ENTRY_POINT_GROUP`, and ``runner.toml`` chooses which job kinds it serves.

A plugin package declares, e.g. in its ``pyproject.toml``::

    [project.entry-points."cowboy_runner.executors"]
    my-agent = "my_package.executor:make_executor"

where ``make_executor(options, *, max_output_bytes)`` returns an object with the :class:`~cowboy_runner.executors.
base.Executor` method ``async execute(job, bounds, *, deadline_s) -> ExecutionResult`` (raising
``ExecutorError`` with a stable code on failure). The operator enables it::

    [executors.plugins.agents]
    entry_point = "my-agent"
    kinds = ["agent"]
    options = { model = "…" }          # handed to the factory as-is
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

from cowboy_protocol.types.runner import JOB_KIND_NAMES
from cowboy_runner.executors.base import Executor

ENTRY_POINT_GROUP = "cowboy_runner.executors"
"""Entry point group of executor plugins."""


class ExecutorFactory(Protocol):
    """What a plugin's entry point loads to."""

    def __call__(self, options: Mapping[str, Any], *, max_output_bytes: int) -> Executor:
        """Build the executor from the operator's ``options``."""
        ...


class PluginError(ValueError):
    """A configured plugin cannot be loaded (missing entry point, import error, not a factory)."""


@dataclass(frozen=True)
class PluginConfig:
    """One enabled plugin."""

    entry_point: str
    """Name of the entry point in :data:`ENTRY_POINT_GROUP`."""
    kinds: tuple[str, ...]
    """Job kinds it serves (``capabilities.job_types`` names)."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Handed to the factory unchanged."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(self.kinds))
        unknown = [k for k in self.kinds if k not in JOB_KIND_NAMES.values()]
        if not self.kinds or unknown:
            raise ValueError(f"plugin kinds must be job types ({', '.join(sorted(JOB_KIND_NAMES.values()))}), "
                             f"got {list(self.kinds)!r}")


def load_factory(name: str) -> ExecutorFactory:
    """The factory behind entry point ``name`` of :data:`ENTRY_POINT_GROUP`; :class:`PluginError` otherwise."""
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        available = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
        raise PluginError(f"no installed package provides the {ENTRY_POINT_GROUP!r} entry point {name!r} "
                          f"(installed: {', '.join(available) or 'none'})")
    try:
        factory = found[0].load()
    except Exception as e:  # an import error in the plugin is the operator's to see, with its cause
        raise PluginError(f"entry point {name!r} ({found[0].value}) failed to load: {type(e).__name__}: {e}") \
            from None
    if not callable(factory):
        raise PluginError(f"entry point {name!r} ({found[0].value}) is not callable")
    return factory  # type: ignore[no-any-return]


def build_plugin(name: str, config: PluginConfig, *, max_output_bytes: int) -> Executor:
    """Load and build one configured plugin; :class:`PluginError` when it cannot be."""
    executor = load_factory(config.entry_point)(config.options, max_output_bytes=max_output_bytes)
    if not callable(getattr(executor, "execute", None)):
        raise PluginError(f"plugin {name!r}: the factory returned {type(executor).__name__}, which has no execute()")
    return executor

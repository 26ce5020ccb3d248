"""``runner.toml``'s ``[executors.*]`` sections (docs/runner.md "[executors.*]", docs/runner-executors.md
"Configuration"): parsed into :class:`ExecutorSettings`, which ``cowboy_runner.executor_settings`` turns into the
executors' own configuration.

Kept apart from ``cowboy_runner.config`` (which calls :func:`parse_executors` and re-exports the settings types) so
the executor keys live next to the executors. Every problem is a :class:`SettingError` naming the exact key
(``executors.custom.0x…: expected …``); unknown keys are errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cowboy_protocol.types.runner import JOB_KINDS
from cowboy_runner.executors.adapter import AdapterConfig
from cowboy_runner.executors.config import (
    CustomExecutorConfig,
    HttpLimits,
    LlmLimits,
    McpLimits,
    McpServerConfig,
    SandboxSettings,
)
from cowboy_runner.executors.plugins import PluginConfig
from cowboy_runner.settings_schema import (
    SettingError,
    check_bool,
    check_hash_key,
    check_int,
    check_known,
    check_seconds,
    check_str,
    check_string_map,
    check_strings,
    check_table,
    check_url,
    integer,
    keys,
    optional_integer,
    read,
    seconds,
    table,
    text,
    url,
)


# -- settings ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlotLimits:
    """``max_concurrent`` / ``queue``, keys of every ``[executors.<kind>]`` section."""

    max_concurrent: int | None = optional_integer("Executions of this kind at once (unset: only "
                                                  "``capabilities.max_concurrent_jobs``).")
    queue: int = integer(0, "Accepted jobs of this kind that may wait for a slot (only with ``max_concurrent``).",
                         minimum=0)


@dataclass(frozen=True)
class HttpExecutorSettings(HttpLimits, SlotLimits):
    """``[executors.http]`` (the keys: :class:`SlotLimits`, ``executors.config.HttpLimits``)."""


def _models(value: object, key: str) -> dict[bytes, str]:
    models: dict[bytes, str] = {}
    for name, model in sorted(check_table(value, key).items()):
        model_id = check_hash_key(name, key)
        if not isinstance(model, str) or not model:
            raise SettingError(f"{key}.{name}", f"expected the endpoint's model name, got {model!r}")
        if model_id in models:
            raise SettingError(f"{key}.{name}", "the same model_id is listed twice")
        models[model_id] = model
    return models


@dataclass(frozen=True)
class _LlmKeys(SlotLimits):
    """``[executors.llm]`` keys of the TOML side only (the endpoint and its key), declared before the shared
    limits so that ``unknown key; allowed: …`` lists them in the order it always has."""

    base_url: str | None = url("OpenAI-compatible API root (``…/v1``); unset: llm jobs are not served (required "
                               "once models are listed).")
    api_key: str | None = text(None, "Bearer token sent to ``base_url`` (one of api_key, api_key_env, "
                                     "api_key_file).")
    api_key_env: str | None = text(None, "Environment variable holding the API key (read by ``executor_settings`` "
                                         "at start-up, not here).")
    api_key_file: str | None = text(None, "File holding the API key (relative to the home directory; mode 0600 or "
                                          "stricter, else start-up fails).")


@dataclass(frozen=True)
class LlmExecutorSettings(LlmLimits, _LlmKeys):
    """``[executors.llm]`` and ``[executors.llm.models]`` (the limits: ``executors.config.LlmLimits``)."""

    models: dict[bytes, str] = table(_models, "``\"<model_id: 64 hex digits, 0x optional>\" = \"<model name at "
                                              "the endpoint>\"``.", "table")


def _mcp_servers(value: object, key: str) -> dict[str, McpServerConfig]:
    return {name: _mcp_server(v, f"{key}.{name}") for name, v in sorted(check_table(value, key).items())}


@dataclass(frozen=True)
class _McpKeys(SlotLimits):
    """``[executors.mcp]`` keys of the TOML side only, declared before the shared limits (the order of
    ``unknown key; allowed: …``)."""

    timeout_s: float = seconds(30.0, "Per tool call: the default for a job without ``timeout_seconds`` and a cap "
                                     "on one asking for more.")
    servers: dict[str, McpServerConfig] = table(_mcp_servers, "``<server name used by jobs> = \"<streamable HTTP "
                                                              "URL>\"``, or a table (``url``/``headers`` or "
                                                              "``command``/``env``, ``tools``, ``reuse_session``).",
                                                "table")


@dataclass(frozen=True)
class McpExecutorSettings(McpLimits, _McpKeys):
    """``[executors.mcp]`` and ``[executors.mcp.servers]`` (the limits: ``executors.config.McpLimits``)."""


@dataclass(frozen=True)
class _CustomKeys(SlotLimits):
    """``[executors.custom]`` limits of the TOML side only, declared before the sandbox's (the order of
    ``unknown key; allowed: …``)."""

    time_limit_s: float = seconds(60.0, "Wall time before the process group is killed (the job's "
                                        "``max_wall_time_seconds`` when shorter).")
    memory_limit_mb: int = integer(512, "Memory limit of the process in MiB: the smaller of this and the job's "
                                        "``max_memory_mb``.")
    max_output_bytes: int = integer(262_144, "Largest stdout kept (the chain's result limit is 256 KiB).")


@dataclass(frozen=True)
class CustomExecutorSettings(SandboxSettings, _CustomKeys):
    """``[executors.custom]``: limits (the sandbox's: ``executors.config.SandboxSettings``), and
    ``"<executor_hash>" = [argv…]`` (or a table) entries."""

    programs: dict[bytes, CustomExecutorConfig] = field(default_factory=dict)
    """``executor_hash`` (32 bytes) → the local command (the ``"<executor_hash>"`` keys of the section)."""

    @property
    def commands(self) -> dict[bytes, tuple[str, ...]]:
        """``executor_hash`` → argv (a view of :attr:`programs`)."""
        return {h: p.argv for h, p in self.programs.items()}


@dataclass(frozen=True)
class ExecutorSettings:
    """``[executors.*]``."""

    http: HttpExecutorSettings = HttpExecutorSettings()
    """HTTP jobs."""
    llm: LlmExecutorSettings = LlmExecutorSettings()
    """LLM jobs."""
    mcp: McpExecutorSettings = McpExecutorSettings()
    """MCP tool calls."""
    custom: CustomExecutorSettings = CustomExecutorSettings()
    """Custom executors."""
    health_interval_s: float = seconds(30.0, "Seconds between executor health probes (the first runs at start).")
    adapters: dict[str, AdapterConfig] = field(default_factory=dict)
    """``[executors.adapters.<name>]``: external adapters by name."""
    plugins: dict[str, PluginConfig] = field(default_factory=dict)
    """``[executors.plugins.<name>]``: executor plugins by name."""


# -- sections ---------------------------------------------------------------------------------
SECTIONS = ("http", "llm", "mcp", "custom", "adapters", "plugins")
"""Tables under ``[executors]``."""


def parse_executors(ex: dict[str, Any]) -> ExecutorSettings:
    """The ``[executors]`` table of a parsed ``runner.toml``; raises :class:`SettingError`."""
    ex = check_table(ex, "executors")
    check_known(ex, "executors", (*SECTIONS, *keys(ExecutorSettings)))
    return ExecutorSettings(http=_http(ex), llm=_llm(ex), mcp=_mcp(ex), custom=_custom(ex),
                            **read(ExecutorSettings, ex, "executors", known=False),
                            adapters=_adapters(ex), plugins=_plugins(ex))


def _kinds(value: object, key: str) -> tuple[str, ...]:
    kinds = check_strings(value, key, allow_empty=False)
    for kind in kinds:
        if kind not in JOB_KINDS:
            raise SettingError(key, f"{kind!r} is not a job type ({', '.join(sorted(JOB_KINDS))})")
    return kinds


def _entry(ex: dict[str, Any], section: str, allowed: tuple[str, ...], required: tuple[str, ...]
           ) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, where, table) of every ``[executors.<section>.<name>]``, its keys checked."""
    out = []
    for name, value in sorted(check_table(ex.get(section, {}), f"executors.{section}").items()):
        w = f"executors.{section}.{name}"
        t = check_table(value, w)
        check_known(t, w, allowed)
        for key in required:
            if key not in t:
                raise SettingError(f"{w}.{key}", "required key is missing")
        out.append((name, w, t))
    return out


def _adapters(ex: dict[str, Any]) -> dict[str, AdapterConfig]:
    out = {}
    for name, w, t in _entry(ex, "adapters", ("url", "kinds", "headers", "timeout_s", "max_response_bytes"),
                             ("url", "kinds")):
        given: dict[str, Any] = {}  # absent keys: AdapterConfig's defaults
        if "timeout_s" in t:
            given["timeout_s"] = check_seconds(t["timeout_s"], f"{w}.timeout_s")
        if "max_response_bytes" in t:
            given["max_response_bytes"] = check_int(t["max_response_bytes"], f"{w}.max_response_bytes")
        out[name] = AdapterConfig(check_url(t["url"], f"{w}.url"), _kinds(t["kinds"], f"{w}.kinds"),
                                  headers=check_string_map(t.get("headers", {}), f"{w}.headers"), **given)
    return out


def _plugins(ex: dict[str, Any]) -> dict[str, PluginConfig]:
    out = {}
    for name, w, t in _entry(ex, "plugins", ("entry_point", "kinds", "options"), ("entry_point", "kinds")):
        out[name] = PluginConfig(check_str(t["entry_point"], f"{w}.entry_point"), _kinds(t["kinds"], f"{w}.kinds"),
                                 options=dict(check_table(t.get("options", {}), f"{w}.options")))
    return out


def _section(ex: dict[str, Any], name: str, cls: type) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(where, table, declared values) of ``[executors.<name>]``; ``queue`` only with ``max_concurrent``."""
    w = f"executors.{name}"
    t = check_table(ex.get(name, {}), w)
    check_known(t, w, keys(cls))
    if "queue" in t and "max_concurrent" not in t:
        raise SettingError(f"{w}.queue", "needs max_concurrent (a queue in front of unlimited slots is empty)")
    return w, t, read(cls, t, w, known=False)


def _http(ex: dict[str, Any]) -> HttpExecutorSettings:
    return HttpExecutorSettings(**_section(ex, "http", HttpExecutorSettings)[2])


def _llm(ex: dict[str, Any]) -> LlmExecutorSettings:
    w = "executors.llm"
    t = check_table(ex.get("llm", {}), w)
    check_known(t, w, keys(LlmExecutorSettings))
    given = [k for k in ("api_key", "api_key_env", "api_key_file") if k in t]
    if len(given) > 1:
        raise SettingError(f"{w}.{given[1]}", "set one of api_key, api_key_env, api_key_file, not several")
    values = _section(ex, "llm", LlmExecutorSettings)[2]
    if values.get("models") and "base_url" not in t:
        raise SettingError(f"{w}.base_url", "required when models are configured")
    return LlmExecutorSettings(**values)


_MCP_SERVER_KEYS = ("url", "headers", "command", "env", "tools", "reuse_session")


def _mcp_server(value: object, key: str) -> McpServerConfig:
    if isinstance(value, str):  # the short form: name = "URL"
        return McpServerConfig(check_url(value, key))
    if not isinstance(value, dict):
        raise SettingError(key, f"expected an http:// or https:// URL string or a table with url, got {value!r}")
    check_known(value, key, _MCP_SERVER_KEYS)
    if ("url" in value) == ("command" in value):
        raise SettingError(f"{key}.url", "set exactly one of url (streamable HTTP) or command (stdio)")
    tools = check_strings(value["tools"], f"{key}.tools") if "tools" in value else None
    common: dict[str, Any] = {"tools": tools}  # reuse_session absent: McpServerConfig's default
    if "reuse_session" in value:
        common["reuse_session"] = check_bool(value["reuse_session"], f"{key}.reuse_session")
    if "command" in value:
        if "headers" in value:
            raise SettingError(f"{key}.headers", "only for url servers (stdio has no HTTP headers)")
        return McpServerConfig(command=check_strings(value["command"], f"{key}.command", allow_empty=False),
                               env=check_string_map(value.get("env", {}), f"{key}.env"), **common)
    if "env" in value:
        raise SettingError(f"{key}.env", "only for command (stdio) servers")
    return McpServerConfig(check_url(value["url"], f"{key}.url"),
                           headers=check_string_map(value.get("headers", {}), f"{key}.headers"), **common)


def _mcp(ex: dict[str, Any]) -> McpExecutorSettings:
    return McpExecutorSettings(**_section(ex, "mcp", McpExecutorSettings)[2])


_CUSTOM_PROGRAM_KEYS = ("argv", "env", "cwd", "network", "ro_paths", "image")
_ARGV_TEXT = "expected a non-empty array of non-empty strings (the command's argv) or a table with argv"


def _program(value: object, key: str) -> CustomExecutorConfig:
    if isinstance(value, list):
        try:
            return CustomExecutorConfig(check_strings(value, key, allow_empty=False))
        except SettingError:
            raise SettingError(key, _ARGV_TEXT) from None
    if not isinstance(value, dict):
        raise SettingError(key, _ARGV_TEXT)
    check_known(value, key, _CUSTOM_PROGRAM_KEYS)
    if "argv" not in value:
        raise SettingError(f"{key}.argv", "required key is missing")
    env = check_string_map(value["env"], f"{key}.env") if "env" in value else None
    ro_paths = check_strings(value.get("ro_paths", []), f"{key}.ro_paths")
    for path in ro_paths:
        if not path.startswith("/"):
            raise SettingError(f"{key}.ro_paths", f"expected absolute paths, got {path!r}")
    return CustomExecutorConfig(check_strings(value["argv"], f"{key}.argv", allow_empty=False), env=env,
                                cwd=check_str(value["cwd"], f"{key}.cwd") if "cwd" in value else None,
                                network=check_bool(value["network"], f"{key}.network") if "network" in value
                                else CustomExecutorConfig.network,
                                ro_paths=ro_paths,
                                image=check_str(value["image"], f"{key}.image") if "image" in value else None)


def _custom(ex: dict[str, Any]) -> CustomExecutorSettings:
    w = "executors.custom"
    t = check_table(ex.get("custom", {}), w)
    limits = keys(CustomExecutorSettings)
    programs: dict[bytes, CustomExecutorConfig] = {}
    for name, value in sorted(t.items()):
        if name in limits:
            continue
        if not (name.startswith("0x") or len(name) == 64):
            raise SettingError(f"{w}.{name}", f"unknown key; allowed: {', '.join(limits)} "
                                              "or an executor hash (64 hex digits)")
        executor_hash = check_hash_key(name, w)
        program = _program(value, f"{w}.{name}")
        if executor_hash in programs:
            raise SettingError(f"{w}.{name}", "the same executor hash is listed twice")
        programs[executor_hash] = program
    values = _section({"custom": {k: v for k, v in t.items() if k in limits}}, "custom", CustomExecutorSettings)[2]
    isolation = values.get("isolation", "bwrap")
    if isolation in ("podman", "docker"):
        for name, value in sorted(t.items()):
            if name not in limits and not (isinstance(value, dict) and "image" in value):
                raise SettingError(f"{w}.{name}.image", f'isolation = "{isolation}" runs every program in a '
                                                        "container: give it an image (the table form)")
    return CustomExecutorSettings(**values, programs=programs)

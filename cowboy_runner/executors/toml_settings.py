"""``runner.toml``'s ``[executors.*]`` sections (docs/runner.md "[executors.*]", docs/runner-executors.md
"Configuration"): parsed into :class:`ExecutorSettings`, which ``cowboy_runner.executor_settings`` turns into the
executors' own configuration.

Kept apart from ``cowboy_runner.config`` (which calls :func:`parse_executors` and re-exports the settings types) so
the executor keys live next to the executors. Every problem is a :class:`SettingError` naming the exact key
(``executors.custom.0x…: expected …``); unknown keys are errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cowboy_protocol.http_client import normalize_url
from cowboy_protocol.types.jobspec import HTTP_METHODS
from cowboy_protocol.types.runner import JOB_KINDS
from cowboy_runner.executors.adapter import AdapterConfig
from cowboy_runner.executors.config import CREDENTIAL_HEADERS, CustomExecutorConfig, McpServerConfig
from cowboy_runner.executors.plugins import PluginConfig


class SettingError(Exception):
    """An invalid executor key; ``key`` is its full dotted name (``executors.llm.timeout_s``)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        """Full dotted key."""
        self.message = message
        """What is wrong with it."""


# -- settings ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class HttpExecutorSettings:
    """``[executors.http]``."""

    max_concurrent: int | None = None
    """Executions of this kind at once (None: only capabilities.max_concurrent_jobs)."""
    queue: int = 0
    """Accepted jobs of this kind that may wait for a slot."""

    max_response_bytes: int = 1_048_576
    """Largest response body read; the job fails with ``response_too_large`` beyond it."""
    connect_timeout_s: float = 10.0
    """TCP/TLS connect timeout."""
    request_timeout_s: float = 30.0
    """Whole-request timeout (the job's own wall-time bound still applies if shorter)."""
    allow_private_addresses: bool = False
    """Let HTTP jobs reach loopback/private/link-local addresses (off: SSRF protection; on for local devnets)."""
    max_redirects: int = 5
    """Most redirects followed per job (0: none)."""
    user_agent: str = "cowboy-runner"
    """User-Agent sent unless the job sets one."""
    allowed_methods: tuple[str, ...] = HTTP_METHODS
    """Methods HTTP jobs may use; another is ``method_not_allowed``."""
    credential_headers: tuple[str, ...] = CREDENTIAL_HEADERS
    """Job headers dropped when a redirect leaves the job URL's origin."""


@dataclass(frozen=True, slots=True)
class LlmExecutorSettings:
    """``[executors.llm]`` and ``[executors.llm.models]``."""

    max_concurrent: int | None = None
    """Executions of this kind at once (None: only capabilities.max_concurrent_jobs)."""
    queue: int = 0
    """Accepted jobs of this kind that may wait for a slot."""

    base_url: str | None = None
    """OpenAI-compatible API root (``…/v1``); None: llm jobs are not served."""
    api_key: str | None = None
    """Bearer token sent to ``base_url`` (or taken from the ``api_key_env`` variable)."""
    api_key_env: str | None = None
    """Environment variable holding the API key (read by ``executor_settings``, not here)."""
    default_temperature: float = 0.0
    """Temperature when the job gives none."""
    timeout_s: float = 120.0
    """Request timeout."""
    models: dict[bytes, str] = field(default_factory=dict)
    """``model_id`` (32 bytes) → the endpoint's model name."""
    response_format: str = "json_schema"
    """``json_schema`` or ``json_object``: how structured output is requested."""
    max_response_bytes: int = 4 << 20
    """Largest endpoint response read."""
    api_key_file: str | None = None
    """File holding the API key (relative to the home directory; mode 0600 or stricter, else start-up fails)."""
    max_tokens: int = 4096
    """Cap on ``max_tokens`` sent, also for a job without bounds."""
    max_retries: int = 2
    """Extra attempts after HTTP 429/5xx."""
    retry_base_delay_s: float = 0.5
    """First backoff delay when the endpoint sends no Retry-After."""
    retry_max_delay_s: float = 10.0
    """Longest wait before a retry (a longer Retry-After ends the job)."""
    max_chars_per_token: float = 6.0
    """Characters per token assumed by the input-token check made before the call."""


@dataclass(frozen=True, slots=True)
class McpExecutorSettings:
    """``[executors.mcp]`` and ``[executors.mcp.servers]``."""

    max_concurrent: int | None = None
    """Executions of this kind at once (None: only capabilities.max_concurrent_jobs)."""
    queue: int = 0
    """Accepted jobs of this kind that may wait for a slot."""

    timeout_s: float = 30.0
    """Per tool call."""
    servers: dict[str, McpServerConfig] = field(default_factory=dict)
    """Server name (the job's ``mcp.server``) → server."""
    protocol_version: str = "2025-06-18"
    """MCP protocol revision offered in ``initialize``."""
    max_response_bytes: int = 4 << 20
    """Largest response read from a server per request."""


@dataclass(frozen=True, slots=True)
class CustomExecutorSettings:
    """``[executors.custom]``: limits, and ``"<executor_hash>" = [argv…]`` (or a table) entries."""

    max_concurrent: int | None = None
    """Executions of this kind at once (None: only capabilities.max_concurrent_jobs)."""
    queue: int = 0
    """Accepted jobs of this kind that may wait for a slot."""

    time_limit_s: float = 60.0
    """Wall time before the process group is killed."""
    memory_limit_mb: int = 512
    """Memory limit of the process."""
    max_output_bytes: int = 262_144
    """Largest stdout kept (the chain's result limit is 256 KiB)."""
    stderr_tail_bytes: int = 2048
    """How much of the end of stderr is kept for ``process_failed`` reports."""
    enforce_memory_limit: bool = True
    """False: no memory limit at all."""
    isolation: str = "bwrap"
    """``bwrap`` (a bubblewrap sandbox; start-up fails when it cannot run), ``podman``/``docker`` (a container of
    each program's ``image``) or ``none`` (development only)."""
    max_processes: int = 64
    """Sandbox RLIMIT_NPROC."""
    max_file_mb: int = 64
    """Sandbox RLIMIT_FSIZE in MiB."""
    scratch_mb: int = 64
    """Size of the sandbox's tmpfs /tmp in MiB."""
    cpu_time_s: int | None = None
    """Sandbox RLIMIT_CPU in seconds (None: ceil(time_limit_s))."""
    sandbox_uid_base: int = 200_000
    """First uid commands run as when the runner runs as root."""
    bwrap: str = "bwrap"
    """The bubblewrap executable."""
    cgroup: bool = True
    """Give each sandboxed job its own cgroup when possible (memory limit on resident memory, pids.max)."""
    cgroup_parent: str | None = None
    """Delegated cgroup v2 directory for job cgroups (None: the v1 memory/pids hierarchies when writable)."""
    engine: str | None = None
    """Container isolation: the engine executable (None: podman or docker as isolation says)."""
    programs: dict[bytes, CustomExecutorConfig] = field(default_factory=dict)
    """``executor_hash`` (32 bytes) → the local command."""

    @property
    def commands(self) -> dict[bytes, tuple[str, ...]]:
        """``executor_hash`` → argv (a view of :attr:`programs`)."""
        return {h: p.argv for h, p in self.programs.items()}


@dataclass(frozen=True, slots=True)
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
    health_interval_s: float = 30.0
    """Seconds between executor health probes (the first runs at start)."""
    adapters: dict[str, AdapterConfig] = field(default_factory=dict)
    """``[executors.adapters.<name>]``: external adapters by name."""
    plugins: dict[str, PluginConfig] = field(default_factory=dict)
    """``[executors.plugins.<name>]``: executor plugins by name."""


# -- value checks -----------------------------------------------------------------------------
def _table(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SettingError(key, "expected a table")
    return value


def _known(table: dict[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    for k in sorted(table):
        if k not in allowed:
            raise SettingError(f"{where}.{k}", f"unknown key; allowed: {', '.join(allowed)}")


def _int(table: dict[str, Any], where: str, key: str, default: int, *, minimum: int = 1) -> int:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise SettingError(f"{where}.{key}", f"expected an integer >= {minimum}, got {v!r}")
    return v


def _seconds(table: dict[str, Any], where: str, key: str, default: float) -> float:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise SettingError(f"{where}.{key}", f"expected a positive number of seconds, got {v!r}")
    return float(v)


def _bool(table: dict[str, Any], where: str, key: str, default: bool) -> bool:
    v = table.get(key, default)
    if not isinstance(v, bool):
        raise SettingError(f"{where}.{key}", f"expected true or false, got {v!r}")
    return v


def _str(table: dict[str, Any], where: str, key: str, default: str | None) -> str | None:
    v = table.get(key, default)
    if v is not None and (not isinstance(v, str) or not v):
        raise SettingError(f"{where}.{key}", f"expected a non-empty string, got {v!r}")
    return v


def _choice(table: dict[str, Any], where: str, key: str, default: str, choices: tuple[str, ...]) -> str:
    v = table.get(key, default)
    if v not in choices:
        raise SettingError(f"{where}.{key}", f"expected one of {list(choices)}, got {v!r}")
    return str(v)


def _strings(value: object, key: str, *, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(a, str) and a and "\x00" not in a for a in value) \
            or (not value and not allow_empty):
        raise SettingError(key, f"expected {'an' if allow_empty else 'a non-empty'} array of non-empty strings "
                                f"without NUL, got {value!r}")
    return tuple(value)


def _string_map(value: object, key: str) -> dict[str, str]:
    t = _table(value, key)
    for k, v in t.items():
        if not isinstance(v, str) or "\x00" in v or "\x00" in k:
            raise SettingError(f"{key}.{k}", f"expected a string without NUL, got {v!r}")
    return dict(sorted(t.items()))


def _url(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise SettingError(key, f"expected an http:// or https:// URL string, got {value!r}")
    try:
        return normalize_url(value)
    except ValueError as e:
        raise SettingError(key, str(e)) from None


def _hash_key(text: str, where: str) -> bytes:
    body = text[2:] if text.startswith("0x") else text
    if len(body) != 64 or any(c not in "0123456789abcdefABCDEF" for c in body):
        raise SettingError(f"{where}.{text}", "expected a 32-byte hash: 64 hex digits, optionally 0x-prefixed")
    return bytes.fromhex(body)


# -- sections ---------------------------------------------------------------------------------
SECTIONS = ("http", "llm", "mcp", "custom", "adapters", "plugins")
"""Tables under ``[executors]``."""


def parse_executors(ex: dict[str, Any]) -> ExecutorSettings:
    """The ``[executors]`` table of a parsed ``runner.toml``; raises :class:`SettingError`."""
    ex = _table(ex, "executors")
    _known(ex, "executors", (*SECTIONS, "health_interval_s"))
    return ExecutorSettings(http=_http(ex), llm=_llm(ex), mcp=_mcp(ex), custom=_custom(ex),
                            health_interval_s=_seconds(ex, "executors", "health_interval_s", 30.0),
                            adapters=_adapters(ex), plugins=_plugins(ex))


def _kinds(value: object, key: str) -> tuple[str, ...]:
    kinds = _strings(value, key, allow_empty=False)
    for kind in kinds:
        if kind not in JOB_KINDS:
            raise SettingError(key, f"{kind!r} is not a job type ({', '.join(sorted(JOB_KINDS))})")
    return kinds


def _adapters(ex: dict[str, Any]) -> dict[str, AdapterConfig]:
    out = {}
    for name, value in sorted(_table(ex.get("adapters", {}), "executors.adapters").items()):
        w = f"executors.adapters.{name}"
        t = _table(value, w)
        _known(t, w, ("url", "kinds", "headers", "timeout_s", "max_response_bytes"))
        for required in ("url", "kinds"):
            if required not in t:
                raise SettingError(f"{w}.{required}", "required key is missing")
        out[name] = AdapterConfig(_url(t["url"], f"{w}.url"), _kinds(t["kinds"], f"{w}.kinds"),
                                  headers=_string_map(t.get("headers", {}), f"{w}.headers"),
                                  timeout_s=_seconds(t, w, "timeout_s", 60.0),
                                  max_response_bytes=_int(t, w, "max_response_bytes", 1 << 20))
    return out


def _plugins(ex: dict[str, Any]) -> dict[str, PluginConfig]:
    out = {}
    for name, value in sorted(_table(ex.get("plugins", {}), "executors.plugins").items()):
        w = f"executors.plugins.{name}"
        t = _table(value, w)
        _known(t, w, ("entry_point", "kinds", "options"))
        for required in ("entry_point", "kinds"):
            if required not in t:
                raise SettingError(f"{w}.{required}", "required key is missing")
        entry_point = _str(t, w, "entry_point", None)
        assert entry_point is not None
        out[name] = PluginConfig(entry_point, _kinds(t["kinds"], f"{w}.kinds"),
                                 options=dict(_table(t.get("options", {}), f"{w}.options")))
    return out


_LIMIT_KEYS = ("max_concurrent", "queue")


def _limits(t: dict[str, Any], where: str) -> dict[str, Any]:
    """``max_concurrent`` (absent: no per-kind limit) and ``queue`` (only with max_concurrent) of a section."""
    if "queue" in t and "max_concurrent" not in t:
        raise SettingError(f"{where}.queue", "needs max_concurrent (a queue in front of unlimited slots is empty)")
    return {"max_concurrent": _int(t, where, "max_concurrent", 1) if "max_concurrent" in t else None,
            "queue": _int(t, where, "queue", 0, minimum=0)}


_HTTP_KEYS = (*_LIMIT_KEYS, "max_response_bytes", "connect_timeout_s", "request_timeout_s", "allow_private_addresses",
              "max_redirects", "user_agent", "allowed_methods", "credential_headers")


def _http(ex: dict[str, Any]) -> HttpExecutorSettings:
    w = "executors.http"
    t = _table(ex.get("http", {}), w)
    _known(t, w, _HTTP_KEYS)
    methods = tuple(m.upper() for m in _strings(t.get("allowed_methods", list(HTTP_METHODS)),
                                                 f"{w}.allowed_methods", allow_empty=False))
    for m in methods:
        if m not in HTTP_METHODS:
            raise SettingError(f"{w}.allowed_methods", f"{m!r} is not one of {', '.join(HTTP_METHODS)}")
    user_agent = _str(t, w, "user_agent", "cowboy-runner")
    assert user_agent is not None
    return HttpExecutorSettings(
        **_limits(t, w), max_response_bytes=_int(t, w, "max_response_bytes", 1_048_576),
        connect_timeout_s=_seconds(t, w, "connect_timeout_s", 10.0),
        request_timeout_s=_seconds(t, w, "request_timeout_s", 30.0),
        allow_private_addresses=_bool(t, w, "allow_private_addresses", False),
        max_redirects=_int(t, w, "max_redirects", 5, minimum=0), user_agent=user_agent, allowed_methods=methods,
        credential_headers=_strings(t.get("credential_headers", list(CREDENTIAL_HEADERS)),
                                    f"{w}.credential_headers"))


_LLM_KEYS = (*_LIMIT_KEYS, "base_url", "api_key", "api_key_env", "api_key_file", "default_temperature", "timeout_s",
             "models", "response_format", "max_response_bytes", "max_tokens", "max_retries", "retry_base_delay_s",
             "retry_max_delay_s", "max_chars_per_token")


def _llm(ex: dict[str, Any]) -> LlmExecutorSettings:
    w = "executors.llm"
    t = _table(ex.get("llm", {}), w)
    _known(t, w, _LLM_KEYS)
    given = [k for k in ("api_key", "api_key_env", "api_key_file") if k in t]
    if len(given) > 1:
        raise SettingError(f"{w}.{given[1]}", "set one of api_key, api_key_env, api_key_file, not several")
    temp = t.get("default_temperature", 0.0)
    if isinstance(temp, bool) or not isinstance(temp, int | float) or not 0.0 <= temp <= 2.0:
        raise SettingError(f"{w}.default_temperature", f"expected a number in 0..2, got {temp!r}")
    models: dict[bytes, str] = {}
    for name, value in sorted(_table(t.get("models", {}), f"{w}.models").items()):
        model_id = _hash_key(name, f"{w}.models")
        if not isinstance(value, str) or not value:
            raise SettingError(f"{w}.models.{name}", f"expected the endpoint's model name, got {value!r}")
        if model_id in models:
            raise SettingError(f"{w}.models.{name}", "the same model_id is listed twice")
        models[model_id] = value
    if models and "base_url" not in t:
        raise SettingError(f"{w}.base_url", "required when models are configured")
    return LlmExecutorSettings(
        **_limits(t, w), base_url=_url(t["base_url"], f"{w}.base_url") if "base_url" in t else None,
        api_key=_str(t, w, "api_key", None), api_key_env=_str(t, w, "api_key_env", None),
        default_temperature=float(temp), timeout_s=_seconds(t, w, "timeout_s", 120.0), models=models,
        response_format=_choice(t, w, "response_format", "json_schema", ("json_schema", "json_object")),
        max_response_bytes=_int(t, w, "max_response_bytes", 4 << 20), api_key_file=_str(t, w, "api_key_file", None),
        max_tokens=_int(t, w, "max_tokens", 4096), max_retries=_int(t, w, "max_retries", 2, minimum=0),
        retry_base_delay_s=_seconds(t, w, "retry_base_delay_s", 0.5),
        retry_max_delay_s=_seconds(t, w, "retry_max_delay_s", 10.0),
        max_chars_per_token=_seconds(t, w, "max_chars_per_token", 6.0))


_MCP_KEYS = (*_LIMIT_KEYS, "timeout_s", "servers", "protocol_version", "max_response_bytes")
_MCP_SERVER_KEYS = ("url", "headers", "command", "env", "tools", "reuse_session")


def _mcp_server(value: object, key: str) -> McpServerConfig:
    if isinstance(value, str):  # the short form: name = "URL"
        return McpServerConfig(_url(value, key))
    if not isinstance(value, dict):
        raise SettingError(key, f"expected an http:// or https:// URL string or a table with url, got {value!r}")
    _known(value, key, _MCP_SERVER_KEYS)
    if ("url" in value) == ("command" in value):
        raise SettingError(f"{key}.url", "set exactly one of url (streamable HTTP) or command (stdio)")
    tools = _strings(value["tools"], f"{key}.tools") if "tools" in value else None
    common: dict[str, Any] = {"tools": tools, "reuse_session": _bool(value, key, "reuse_session", True)}
    if "command" in value:
        if "headers" in value:
            raise SettingError(f"{key}.headers", "only for url servers (stdio has no HTTP headers)")
        return McpServerConfig(command=_strings(value["command"], f"{key}.command", allow_empty=False),
                               env=_string_map(value.get("env", {}), f"{key}.env"), **common)
    if "env" in value:
        raise SettingError(f"{key}.env", "only for command (stdio) servers")
    return McpServerConfig(_url(value["url"], f"{key}.url"),
                           headers=_string_map(value.get("headers", {}), f"{key}.headers"), **common)


def _mcp(ex: dict[str, Any]) -> McpExecutorSettings:
    w = "executors.mcp"
    t = _table(ex.get("mcp", {}), w)
    _known(t, w, _MCP_KEYS)
    servers = {name: _mcp_server(value, f"{w}.servers.{name}")
               for name, value in sorted(_table(t.get("servers", {}), f"{w}.servers").items())}
    version = _str(t, w, "protocol_version", "2025-06-18")
    assert version is not None
    return McpExecutorSettings(**_limits(t, w), timeout_s=_seconds(t, w, "timeout_s", 30.0), servers=servers,
                               protocol_version=version, max_response_bytes=_int(t, w, "max_response_bytes", 4 << 20))


_CUSTOM_LIMITS = (*_LIMIT_KEYS, "time_limit_s", "memory_limit_mb", "max_output_bytes", "stderr_tail_bytes",
                  "enforce_memory_limit", "isolation", "max_processes", "max_file_mb", "scratch_mb", "cpu_time_s",
                  "sandbox_uid_base", "bwrap", "cgroup", "cgroup_parent", "engine")
_CUSTOM_PROGRAM_KEYS = ("argv", "env", "cwd", "network", "ro_paths", "image")
_ARGV_TEXT = "expected a non-empty array of non-empty strings (the command's argv) or a table with argv"


def _program(value: object, key: str) -> CustomExecutorConfig:
    if isinstance(value, list):
        try:
            return CustomExecutorConfig(_strings(value, key, allow_empty=False))
        except SettingError:
            raise SettingError(key, _ARGV_TEXT) from None
    if not isinstance(value, dict):
        raise SettingError(key, _ARGV_TEXT)
    _known(value, key, _CUSTOM_PROGRAM_KEYS)
    if "argv" not in value:
        raise SettingError(f"{key}.argv", "required key is missing")
    env = _string_map(value["env"], f"{key}.env") if "env" in value else None
    ro_paths = _strings(value.get("ro_paths", []), f"{key}.ro_paths")
    for path in ro_paths:
        if not path.startswith("/"):
            raise SettingError(f"{key}.ro_paths", f"expected absolute paths, got {path!r}")
    return CustomExecutorConfig(_strings(value["argv"], f"{key}.argv", allow_empty=False), env=env,
                                cwd=_str(value, key, "cwd", None), network=_bool(value, key, "network", False),
                                ro_paths=ro_paths, image=_str(value, key, "image", None))


def _custom(ex: dict[str, Any]) -> CustomExecutorSettings:
    w = "executors.custom"
    t = _table(ex.get("custom", {}), w)
    programs: dict[bytes, CustomExecutorConfig] = {}
    for name, value in sorted(t.items()):
        if name in _CUSTOM_LIMITS:
            continue
        if not (name.startswith("0x") or len(name) == 64):
            raise SettingError(f"{w}.{name}", f"unknown key; allowed: {', '.join(_CUSTOM_LIMITS)} "
                                              "or an executor hash (64 hex digits)")
        executor_hash = _hash_key(name, w)
        program = _program(value, f"{w}.{name}")
        if executor_hash in programs:
            raise SettingError(f"{w}.{name}", "the same executor hash is listed twice")
        programs[executor_hash] = program
    isolation = _choice(t, w, "isolation", "bwrap", ("bwrap", "podman", "docker", "none"))
    if isolation in ("podman", "docker"):
        for name, value in sorted(t.items()):
            if name not in _CUSTOM_LIMITS and not (isinstance(value, dict) and "image" in value):
                raise SettingError(f"{w}.{name}.image", f'isolation = "{isolation}" runs every program in a '
                                                        "container: give it an image (the table form)")
    return CustomExecutorSettings(**_limits(t, w), time_limit_s=_seconds(t, w, "time_limit_s", 60.0),
                                  memory_limit_mb=_int(t, w, "memory_limit_mb", 512),
                                  max_output_bytes=_int(t, w, "max_output_bytes", 262_144),
                                  stderr_tail_bytes=_int(t, w, "stderr_tail_bytes", 2048, minimum=0),
                                  enforce_memory_limit=_bool(t, w, "enforce_memory_limit", True), programs=programs,
                                  isolation=isolation, engine=_str(t, w, "engine", None),
                                  max_processes=_int(t, w, "max_processes", 64),
                                  max_file_mb=_int(t, w, "max_file_mb", 64), scratch_mb=_int(t, w, "scratch_mb", 64),
                                  cpu_time_s=_int(t, w, "cpu_time_s", 1) if "cpu_time_s" in t else None,
                                  sandbox_uid_base=_int(t, w, "sandbox_uid_base", 200_000),
                                  bwrap=_str(t, w, "bwrap", "bwrap") or "bwrap", cgroup=_bool(t, w, "cgroup", True),
                                  cgroup_parent=_str(t, w, "cgroup_parent", None))

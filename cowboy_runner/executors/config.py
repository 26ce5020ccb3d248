"""Executor configuration: plain dataclasses the runner daemon's TOML loader builds (docs/runner-executors.md).

Hex keys (model ids, executor hashes) are accepted as 64 hex digits with or without ``0x``, any case, and
normalised to ``bytes`` on construction; a malformed one raises ``ValueError`` at load time, not at job time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from cowboy_protocol.types.job_instructions import MAX_RESULT_BYTES
from cowboy_protocol.types.jobspec import HTTP_METHODS
from cowboy_runner.settings_schema import (
    SettingError,
    boolean,
    choice,
    integer,
    number_in,
    optional_integer,
    positive,
    seconds,
    strings,
    text,
)

HASH_LEN = 32
CREDENTIAL_HEADERS: tuple[str, ...] = ("Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key",
                                       "X-Auth-Token")
"""Default :attr:`HttpConfig.credential_headers`: the headers that carry credentials in common APIs."""


def parse_hex32(text: str | bytes, what: str) -> bytes:
    """32 bytes from ``0x``-optional hex text (or bytes already 32 long); ``ValueError`` otherwise."""
    if isinstance(text, bytes):
        raw = text
    else:
        digits = text[2:] if text[:2].lower() == "0x" else text
        try:
            raw = bytes.fromhex(digits) if digits.isascii() and len(digits) == 2 * HASH_LEN else b""
        except ValueError:
            raw = b""
    if len(raw) != HASH_LEN:
        raise ValueError(f"{what}: expected 32 bytes as 64 hex digits, got {text!r}")
    return raw


def _check_positive(value: float, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")


def operator_deadline(deadline_s: float, limit_s: float | None) -> float:
    """The execution deadline under an operator limit: ``min(deadline_s, limit_s)`` (None: no limit)."""
    return deadline_s if limit_s is None else min(deadline_s, limit_s)


def _hex_keyed(value: Mapping[Any, Any], what: str) -> Mapping[bytes, Any]:
    out: dict[bytes, Any] = {}
    for k, v in value.items():
        key = parse_hex32(k, what)
        if key in out:
            raise ValueError(f"{what}: {k!r} is listed twice")
        out[key] = v
    return MappingProxyType(out)


def _methods(methods: tuple[str, ...], key: str) -> tuple[str, ...]:
    """Upper-cased HTTP methods, each one of the job spec's."""
    out = tuple(m.upper() for m in methods)
    for m in out:
        if m not in HTTP_METHODS:
            raise SettingError(key, f"{m!r} is not one of {', '.join(HTTP_METHODS)}")
    return out


@dataclass(frozen=True)
class HttpLimits:
    """The HTTP executor's operator limits: keys of ``runner.toml``'s ``[executors.http]`` declared once here,
    shared by :class:`HttpConfig` and ``toml_settings.HttpExecutorSettings``."""

    max_response_bytes: int = integer(1 << 20, "Largest response body read (after content decoding); more is "
                                               "``response_too_large``.")
    connect_timeout_s: float = seconds(10.0, "Operator limit on establishing one connection (DNS, TCP, TLS); past "
                                             "it the job fails with ``timeout`` (``detail[\"phase\"] == "
                                             "\"connect\"``).")
    request_timeout_s: float = seconds(30.0, "Operator limit on the whole request, redirects included: the "
                                             "execution deadline is ``min(job deadline, request_timeout_s)``.")
    allow_private_addresses: bool = boolean(False, "Allow targets that are (or resolve to) loopback, private, "
                                                   "link-local or otherwise non-global addresses. Off by default so "
                                                   "a ``*`` allow-list cannot reach the runner's own network (SSRF).")
    max_redirects: int = integer(5, "Most redirects followed per job (0: none).", minimum=0)
    user_agent: str = text("cowboy-runner", "User-Agent sent unless the job sets one.")
    allowed_methods: tuple[str, ...] = strings(HTTP_METHODS, "Methods HTTP jobs may use (a subset of the job "
                                               "spec's methods); another is ``method_not_allowed``. Checked again "
                                               "for the method a redirect continues with.", allow_empty=False,
                                               then=_methods)
    credential_headers: tuple[str, ...] = strings(CREDENTIAL_HEADERS, "Job headers dropped when a redirect leaves "
                                                  "the job URL's origin (scheme, host, port), case-insensitive.")


@dataclass(frozen=True)
class HttpConfig(HttpLimits):
    """HTTP job executor settings (the operator limits: :class:`HttpLimits`)."""

    allowed_domains: tuple[str, ...] = ()
    """Hosts HTTP jobs may reach — the runner's registered ``capabilities.http_domains`` (``example.com``
    exactly, ``*.example.com`` strict subdomains, ``*`` any host), matched like the on-chain capability filter.
    Redirect targets must match too."""

    def __post_init__(self) -> None:
        _check_positive(self.connect_timeout_s, "http.connect_timeout_s")
        _check_positive(self.request_timeout_s, "http.request_timeout_s")
        object.__setattr__(self, "allowed_methods", tuple(m.upper() for m in self.allowed_methods))
        for m in self.allowed_methods:
            if m not in HTTP_METHODS:
                raise ValueError(f"http.allowed_methods: {m!r} is not one of {', '.join(HTTP_METHODS)}")
        object.__setattr__(self, "credential_headers", tuple(self.credential_headers))


RESPONSE_FORMATS = ("json_schema", "json_object")
"""Values of ``executors.llm.response_format``."""


@dataclass(frozen=True)
class LlmLimits:
    """The LLM executor's operator limits: keys of ``runner.toml``'s ``[executors.llm]`` declared once here,
    shared by :class:`LlmConfig` and ``toml_settings.LlmExecutorSettings``."""

    default_temperature: float = number_in(0.0, 0.0, 2.0, "Temperature used when the job leaves it null.")
    timeout_s: float = seconds(120.0, "Operator limit on one job, retries included: the execution deadline is "
                                      "``min(job deadline, timeout_s)``.")
    response_format: Literal["json_schema", "json_object"] = choice(
        "json_schema", RESPONSE_FORMATS, "How structured output is requested when the job has a "
        "``response_model``: ``json_schema`` sends the schema (OpenAI structured outputs); ``json_object`` asks only "
        "for JSON, for servers without schema support. The reply is validated against the schema either way.")
    max_response_bytes: int = integer(4 << 20, "Largest endpoint response read.")
    max_tokens: int = integer(4096, "Operator cap on ``max_tokens`` sent: ``min(job max_tokens, "
                                    "bounds.max_output_tokens, max_tokens)``, so a job without bounds cannot ask "
                                    "for an unbounded completion.")
    max_retries: int = integer(2, "Extra attempts after an HTTP 429 or 5xx answer (0: none); each waits "
                                  "``Retry-After`` when the endpoint sends one, else ``retry_base_delay_s · "
                                  "2^attempt``.", minimum=0)
    retry_base_delay_s: float = seconds(0.5, "First backoff delay without ``Retry-After``.")
    retry_max_delay_s: float = seconds(10.0, "Longest wait before a retry; a ``Retry-After`` over it (or past the "
                                             "deadline) ends the job at once.")
    max_chars_per_token: float = positive(6.0, "Characters per token assumed by the pre-call input check: a prompt "
                                          "(system + user) of more than ``bounds.max_input_tokens × "
                                          "max_chars_per_token`` characters is refused before the endpoint is paid. "
                                          "Common tokenizers average 3-4.5 characters per token on prose, so the "
                                          "default refuses only prompts that are surely too long; the endpoint's "
                                          "``usage.prompt_tokens`` is checked again after the call.")


@dataclass(frozen=True, kw_only=True)
class LlmConfig(LlmLimits):
    """LLM job executor settings: one OpenAI-compatible chat-completions endpoint (the operator limits:
    :class:`LlmLimits`)."""

    base_url: str
    """API base including the version segment, e.g. ``https://api.openai.com/v1`` or
    ``http://127.0.0.1:8000/v1``; requests go to ``{base_url}/chat/completions``."""
    models: Mapping[Any, str] = field(default_factory=dict)
    """Job ``model_id`` → model name sent to the endpoint; keys are 32 bytes or hex text, stored as bytes."""
    api_key: str | None = None
    """Sent as ``Authorization: Bearer <api_key>`` when set; redacted from every error message and detail."""
    price: tuple[int, int] | None = None
    """(base_price, price_per_unit) of the runner's ``[rate_card.llm]``, for the per-model price metric."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", _hex_keyed(self.models, "llm.models"))
        _check_positive(self.timeout_s, "llm.timeout_s")
        _check_positive(self.retry_base_delay_s, "llm.retry_base_delay_s")
        _check_positive(self.retry_max_delay_s, "llm.retry_max_delay_s")
        _check_positive(self.max_chars_per_token, "llm.max_chars_per_token")
        for name in ("max_tokens", "max_retries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "max_tokens" else 0):
                raise ValueError(f"llm.{name} must be a non-negative integer (max_tokens >= 1), got {value!r}")
        if self.response_format not in RESPONSE_FORMATS:
            raise ValueError("llm.response_format must be 'json_schema' or 'json_object'")


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: streamable HTTP (``url``) or a local program speaking the stdio transport (``command``)."""

    url: str | None = None
    """The server's streamable-HTTP endpoint, e.g. ``http://127.0.0.1:9000/mcp``."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP: extra request headers, e.g. ``Authorization`` (configurable authentication)."""
    command: tuple[str, ...] | None = None
    """stdio: the server program and its arguments (no shell), started once and kept for every job."""
    env: Mapping[str, str] = field(default_factory=dict)
    """stdio: the program's environment besides ``PATH`` (the runner's own environment is not passed on)."""
    tools: tuple[str, ...] | None = None
    """Tool names jobs may call on this server (None: any tool the server offers); another is
    ``tool_not_allowed`` before the server is contacted."""
    reuse_session: bool = True
    """HTTP: keep the MCP session (``Mcp-Session-Id``) for later jobs instead of one session per job (a server
    that forgot it answers 404 and a new one is started). stdio sessions always live as long as the process."""

    def __post_init__(self) -> None:
        if (self.url is None) == (self.command is None):
            raise ValueError("an MCP server needs exactly one of url (streamable HTTP) or command (stdio)")
        if self.command is not None:
            object.__setattr__(self, "command", tuple(self.command))
            if not self.command:
                raise ValueError("an MCP server command must not be empty")
        if self.tools is not None:
            object.__setattr__(self, "tools", tuple(self.tools))


@dataclass(frozen=True)
class McpLimits:
    """The MCP executor's limits: keys of ``runner.toml``'s ``[executors.mcp]`` declared once here, shared by
    :class:`McpConfig` and ``toml_settings.McpExecutorSettings``."""

    protocol_version: str = text("2025-06-18", "MCP protocol revision offered in ``initialize``.")
    max_response_bytes: int = integer(4 << 20, "Largest response read from a server per request.")


@dataclass(frozen=True)
class McpConfig(McpLimits):
    """MCP job executor settings (the limits: :class:`McpLimits`)."""

    servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    """Server name (the job's ``server`` field, exact) → server."""
    default_timeout_seconds: float = 30.0
    """Call timeout when the job's ``timeout_seconds`` is null (the job's wall-time bound still applies)."""
    max_timeout_seconds: float | None = None
    """Operator cap on one tool call whatever the job's ``timeout_seconds`` asks (None: no cap beyond the job's
    deadline); ``runner.toml``'s ``executors.mcp.timeout_s`` sets both this and ``default_timeout_seconds``."""

    def __post_init__(self) -> None:
        _check_positive(self.default_timeout_seconds, "mcp.default_timeout_seconds")
        if self.max_timeout_seconds is not None:
            _check_positive(self.max_timeout_seconds, "mcp.max_timeout_seconds")


@dataclass(frozen=True)
class CustomExecutorConfig:
    """One local command serving a custom ``executor_hash``."""

    argv: tuple[str, ...]
    """Command and arguments (no shell). The job's ``params`` arrive on stdin; stdout is the result."""
    env: Mapping[str, str] | None = None
    """Environment of the process. Sandboxed: these variables only (plus ``PATH``, ``HOME``, ``TMPDIR``); with
    ``isolation = "none"``, None inherits the runner's whole environment."""
    cwd: str | None = None
    """Working directory (sandboxed: bound read-only; None: the scratch ``/tmp``; unsandboxed: the runner's)."""
    network: bool = False
    """Sandboxed: share the host's network (False: a private namespace with only a down loopback)."""
    ro_paths: tuple[str, ...] = ()
    """Sandboxed: extra host paths visible read-only (data, a runtime outside ``/usr``)."""
    image: str | None = None
    """Container isolation (podman/docker): the image the command runs in (``argv[0]`` is the entrypoint);
    required there, unused otherwise."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "ro_paths", tuple(self.ro_paths))
        for path in self.ro_paths:
            if not os.path.isabs(path):
                raise ValueError(f"custom executor ro_paths must be absolute paths, got {path!r}")
        if not self.argv:
            raise ValueError("custom executor argv must not be empty")


ISOLATIONS = ("bwrap", "podman", "docker", "none")
"""Values of ``executors.custom.isolation``."""
Isolation = Literal["bwrap", "podman", "docker", "none"]


@dataclass(frozen=True)
class SandboxSettings:
    """The custom executor's isolation and process limits: keys of ``runner.toml``'s ``[executors.custom]``
    declared once here, shared by :class:`CustomConfig` and ``toml_settings.CustomExecutorSettings``."""

    stderr_tail_bytes: int = integer(2048, "How much of the end of stderr is kept for ``process_failed`` reports.",
                                     minimum=0)
    enforce_memory_limit: bool = boolean(True, "Apply a memory limit to the process: the smaller of the job's "
                                               "``max_memory_mb`` and ``memory_limit_mb`` (``RLIMIT_AS``, or the "
                                               "job cgroup's). False: no limit at all.")
    isolation: Isolation = choice("bwrap", ISOLATIONS, "``bwrap``: every command runs in a bubblewrap sandbox "
                                  "(``executors/sandbox.py``; start-up fails when it cannot run); ``podman``/"
                                  "``docker``: in a fresh container of its program's ``image``; ``none``: a plain "
                                  "subprocess of the runner's user with its environment (development only; the "
                                  "runner warns at start).")
    max_processes: int = integer(64, "Sandboxed: RLIMIT_NPROC of the sandbox uid (and the job cgroup's pids.max).")
    max_file_mb: int = integer(64, "Sandboxed: RLIMIT_FSIZE in MiB, the largest file a command may write.")
    scratch_mb: int = integer(64, "Sandboxed: size in MiB of the tmpfs ``/tmp`` (scratch and home).")
    cpu_time_s: int | None = optional_integer("Sandboxed: RLIMIT_CPU in seconds (unset: ``ceil(time_limit_s)``, or "
                                              "none without a time limit).")
    sandbox_uid_base: int = integer(200_000, "Sandboxed, runner started as root: commands run as uid/gid "
                                             "``base + n`` (one per job, 4096 cycled).")
    bwrap: str = text("bwrap", "The bubblewrap executable.")
    cgroup: bool = boolean(True, "Sandboxed: give each job its own cgroup when one can be created "
                                 "(``executors/cgroups.py``): the memory limit is then the cgroup's (resident "
                                 "memory; no ``RLIMIT_AS``) and ``pids.max`` = ``max_processes``.")
    cgroup_parent: str | None = text(None, "A delegated cgroup v2 directory to create job cgroups in (unset: the "
                                           "cgroup v1 ``memory``/``pids`` hierarchies when writable).")
    engine: str | None = text(None, "Container isolation: the engine executable (unset: ``podman`` or ``docker`` "
                                    "as ``isolation`` says).")


@dataclass(frozen=True)
class CustomConfig(SandboxSettings):
    """Custom job executor settings (the isolation and process limits: :class:`SandboxSettings`)."""

    executors: Mapping[Any, CustomExecutorConfig] = field(default_factory=dict)
    """``executor_hash`` → command; keys are 32 bytes or hex text, stored as bytes."""
    max_stdout_bytes: int = MAX_RESULT_BYTES
    """Largest stdout accepted; more kills the process group (``output_too_large``)."""
    time_limit_s: float | None = 60.0
    """Operator limit on a command's wall time: the execution deadline is ``min(job deadline, time_limit_s)``,
    after which the process group is killed (None: the job's deadline alone)."""
    memory_limit_mb: int | None = 512
    """Operator address-space limit in MiB, applied even when the job allows more or gives no bounds (None: the
    job's ``max_memory_mb`` alone)."""

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"custom.isolation must be 'bwrap', 'podman', 'docker' or 'none', got {self.isolation!r}")
        object.__setattr__(self, "executors", _hex_keyed(self.executors, "custom.executors"))
        if self.isolation in ("podman", "docker"):
            for h, program in self.executors.items():
                if program.image is None:
                    raise ValueError(f"custom.executors.0x{h.hex()}: isolation {self.isolation!r} needs an image")
        if self.time_limit_s is not None:
            _check_positive(self.time_limit_s, "custom.time_limit_s")
        if self.memory_limit_mb is not None and (isinstance(self.memory_limit_mb, bool) or self.memory_limit_mb < 1):
            raise ValueError(f"custom.memory_limit_mb must be a positive integer, got {self.memory_limit_mb!r}")


@dataclass(frozen=True)
class ExecutorsConfig:
    """All executor settings; a None section means that job kind is not served."""

    http: HttpConfig | None = None
    """HTTP executor (None: HTTP jobs are refused)."""
    llm: LlmConfig | None = None
    """LLM executor."""
    mcp: McpConfig | None = None
    """MCP executor."""
    custom: CustomConfig | None = None
    """Custom executor."""
    max_output_bytes: int = MAX_RESULT_BYTES
    """Largest result an executor returns (the ``JobResultSubmit`` result cap)."""
    adapters: Mapping[str, Any] = field(default_factory=dict)
    """External adapters by name (``adapter.AdapterConfig``): services that jobs of their kinds are POSTed to."""
    plugins: Mapping[str, Any] = field(default_factory=dict)
    """Executor plugins by name (``plugins.PluginConfig``), loaded from the ``cowboy_runner.executors`` entry
    points."""

"""``runner.toml``: the runner daemon's settings, and ``init_home`` which writes a commented one.

Every problem is a :class:`ConfigError` whose text names the exact TOML key
(``runner.toml: executors.custom.0x…: expected an array of strings``). Unknown sections and keys are errors: a
typo must not silently fall back to a default. Relative paths are relative to the home directory. The section
and key reference is ``docs/runner.md``; :func:`render_template` is the file ``init`` writes, commented line by
line.
"""

from __future__ import annotations

import tomllib
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cowboy_protocol.http_client import normalize_url
from cowboy_protocol.netaddr import parse_host_port
from cowboy_protocol.types.runner import JOB_KIND_NAMES, Capabilities, RateCard
from cowboy_protocol.types.runner_json import CAPABILITY_KEYS, capabilities_from_json, rate_card_from_json
from cowboy_protocol.types.validation_errors import ValidationError
from cowboy_runner import settings_schema
from cowboy_runner.executors.toml_settings import CustomExecutorSettings as CustomExecutorSettings
from cowboy_runner.executors.toml_settings import ExecutorSettings, parse_executors
from cowboy_runner.executors.toml_settings import HttpExecutorSettings as HttpExecutorSettings
from cowboy_runner.executors.toml_settings import LlmExecutorSettings as LlmExecutorSettings
from cowboy_runner.executors.toml_settings import McpExecutorSettings as McpExecutorSettings
from cowboy_runner.keyfile import create_key, load_key
from cowboy_runner.schedule import DEFAULT_SAFETY_MARGIN_BLOCKS
from cowboy_runner.settings_schema import (
    SettingError,
    boolean,
    check_hash_key,
    check_host_port,
    check_known,
    check_table,
    choice,
    default_text,
    host_port,
    integer,
    optional_integer,
    read,
    seconds,
    text,
    url,
)

CONFIG_FILE = "runner.toml"
"""Name of the settings file in the home directory."""
DEFAULT_KEY_FILE = "keys/runner.key"
"""Default key file, relative to home."""
DEFAULT_JOURNAL = "data/journal.sqlite3"
"""Default journal database, relative to home."""
DEFAULT_QUIC_PORT = 4433
"""Port of the validator's CIP-11 QUIC transport when ``runner.quic_endpoint`` is not set (the node's
``quic.addr`` default)."""
DEFAULT_METRICS_ADDR = "127.0.0.1:9465"
"""Runner metrics listen address (next to the node's 9464)."""
LOG_FORMATS = ("console", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
MAX_CHAIN_ID_CHARS = 64
"""Longest chain id (the transaction decoder's limit)."""


class ConfigError(Exception):
    """An invalid ``runner.toml``; the text is ``runner.toml: <key>: <message>`` and is shown as-is."""

    def __init__(self, key: str | None, message: str, *, file: str = CONFIG_FILE) -> None:
        super().__init__(f"{file}: {key}: {message}" if key else f"{file}: {message}")
        self.key = key
        self.message = message
        self.file = file


# -- settings ---------------------------------------------------------------------------------
# Every key is a field of one of the dataclasses below or of the [executors.*] ones
# (cowboy_runner/executors/toml_settings.py, re-exported here): its type, bounds, default and doc are declared
# there once (cowboy_runner/settings_schema.py); docs/runner-settings.md is generated from them.
@dataclass(frozen=True)
class RunnerKeys:
    """``[runner]`` as written (:class:`RunnerSettings` holds the resolved values)."""

    validator_rpc: str = url("HTTP API of the validator (``http://`` or ``https://``): transactions, queries, the "
                             "poll fallback.", required=True)
    quic_endpoint: tuple[str, int] | None = host_port(None, "``HOST:PORT`` (``[V6]:PORT``) of the validator's "
                                                            "CIP-11 QUIC transport (the node's ``quic.addr``); unset: "
                                                            f"the RPC host, port {DEFAULT_QUIC_PORT}.")
    chain_id: str | None = text(None, "Expected chain id; unset: read from the validator's ``/status``.",
                                max_chars=MAX_CHAIN_ID_CHARS)
    key_file: str = text(DEFAULT_KEY_FILE, "The runner's secp256k1 key, relative to the home directory.")
    journal: str = text(DEFAULT_JOURNAL, "The result-obligation journal (SQLite), relative to the home directory.")
    poll_interval_s: float = seconds(2.0, "Poll interval of ``GET /runner/{address}/jobs`` while no QUIC session "
                                          "is up.")


@dataclass(frozen=True, slots=True)
class HeartbeatSettings:
    """``[heartbeat]``."""

    quic_interval_blocks: int | None = optional_integer(
        "QUIC HeartbeatPing every N new block heights; unset: the chain's governed CIP-11 HEARTBEAT_BLOCKS "
        "(``GET /params`` ``cip11_params``, default 1).")
    onchain_cadence_blocks: int = integer(0, "On-chain heartbeat cadence; 0: ``HEARTBEAT_TIMEOUT_BLOCKS − "
                                             "safety_margin_blocks`` (§6.6).", minimum=0)
    safety_margin_blocks: int = integer(DEFAULT_SAFETY_MARGIN_BLOCKS, "Blocks kept between the cadence and the "
                                                                      "floor timeout (inclusion delay, congestion).")


@dataclass(frozen=True, slots=True)
class ResultSettings:
    """``[results]``: rebroadcast of retained result transactions (§10.3)."""

    inclusion_grace_blocks: int | None = optional_integer(
        "Wait this long after sending before self-submitting; unset: the chain's governed "
        "RESULT_TX_INCLUSION_GRACE_BLOCKS (default 2).")
    rebroadcast_interval_blocks: int | None = optional_integer(
        "Then rebroadcast this often until inclusion or expiry; unset: the governed "
        "RESULT_TX_REBROADCAST_INTERVAL_BLOCKS (default 2).")


@dataclass(frozen=True, slots=True)
class FeeSettings:
    """``[fees]``: fee fields of the runner's transactions, from the node's current basefees."""

    max_fee_multiplier: int = integer(2, "Max fee per unit = multiplier × basefee.")
    priority_fee_per_cycle: int = integer(1_000, "Tip per cycle (capped at the max fee).", minimum=0)
    priority_fee_per_cell: int = integer(1_000, "Tip per cell (capped at the max fee).", minimum=0)


@dataclass(frozen=True)
class MetricsKeys:
    """``[metrics]`` as written (:attr:`RunnerSettings.metrics_addr` is the result)."""

    addr: tuple[str, int] = host_port(parse_host_port(DEFAULT_METRICS_ADDR, key="metrics.addr"),
                                      "Prometheus exposition at ``http://ADDR/metrics``.")
    enabled: bool = boolean(True, "false: no metrics port.")


@dataclass(frozen=True)
class LogKeys:
    """``[log]`` as written."""

    format: str = choice("console", LOG_FORMATS, "``console`` for humans, ``json`` for log shippers.")
    level: str = choice("info", LOG_LEVELS, "Least severe level logged.")


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """Parsed ``runner.toml``."""

    home: Path
    """Home directory (holds runner.toml, the key, the journal)."""
    validator_rpc: str
    """HTTP API of the validator (normalised, no trailing slash)."""
    quic_endpoint: tuple[str, int]
    """(host, port) of the validator's QUIC transport."""
    chain_id: str | None
    """Expected chain id; None: taken from the validator's ``/status``."""
    key_file: Path
    """Absolute key file path."""
    journal_path: Path
    """Absolute journal database path."""
    poll_interval_s: float
    """Poll fallback interval (``GET /runner/{address}/jobs``) while no session is up."""
    capabilities: Capabilities
    """What ``register`` announces and what the executors accept."""
    rate_card: RateCard
    """Prices ``register`` announces."""
    heartbeat: HeartbeatSettings
    """Heartbeat cadences."""
    results: ResultSettings
    """Result-tx rebroadcast."""
    fees: FeeSettings
    """Fee policy."""
    metrics_addr: tuple[str, int] | None
    """Prometheus listen address; None when disabled."""
    log_format: str
    """console or json."""
    log_level: str
    """debug, info, warning or error."""
    executors: ExecutorSettings
    """Executor sections."""
    validator_endpoints: dict[bytes, tuple[str, int]] = field(default_factory=dict)
    """``[validators]``: QUIC (host, port) of other validators by raw Ed25519 peer_pubkey, for the sessions of
    a multi-validator ``Sub(R)`` (§5.1); the validator behind ``validator_rpc`` uses ``quic_endpoint``."""


SCHEMA: tuple[tuple[str, type], ...] = (
    ("runner", RunnerKeys), ("heartbeat", HeartbeatSettings), ("results", ResultSettings), ("fees", FeeSettings),
    ("metrics", MetricsKeys), ("log", LogKeys), ("executors", ExecutorSettings),
    ("executors.http", HttpExecutorSettings), ("executors.llm", LlmExecutorSettings),
    ("executors.mcp", McpExecutorSettings), ("executors.custom", CustomExecutorSettings))
"""Every section of ``runner.toml`` whose keys are declared fields, by name (``[capabilities]``/``[rate_card]``
are the shared wire schema's, ``cowboy_protocol.types.runner_json``; ``[validators]`` and the per-entry tables
of adapters, plugins, MCP servers and custom programs are keyed by name)."""


def reference() -> str:
    """The Markdown key reference, ``docs/runner-settings.md``'s generated part."""
    return settings_schema.reference(SCHEMA)


# -- sections ---------------------------------------------------------------------------------
_SECTIONS = ("runner", "capabilities", "rate_card", "heartbeat", "results", "fees", "metrics", "log", "executors",
             "validators")


def _section(doc: dict[str, Any], name: str, cls: type) -> dict[str, Any]:
    return read(cls, check_table(doc.get(name, {}), name), name)


def _runner(doc: dict[str, Any], home: Path) -> dict[str, Any]:
    if "runner" not in doc:
        raise ConfigError("runner", "required section is missing")
    r = RunnerKeys(**_section(doc, "runner", RunnerKeys))
    quic = r.quic_endpoint or (urllib.parse.urlsplit(r.validator_rpc).hostname or "", DEFAULT_QUIC_PORT)
    return {"validator_rpc": r.validator_rpc, "quic_endpoint": quic, "chain_id": r.chain_id,
            "key_file": home / r.key_file, "journal_path": home / r.journal, "poll_interval_s": r.poll_interval_s}


def _capabilities(doc: dict[str, Any]) -> tuple[Capabilities, RateCard]:
    if "capabilities" not in doc:
        raise ConfigError("capabilities", "required section is missing")
    caps_t = check_table(doc["capabilities"], "capabilities")
    check_known(caps_t, "capabilities", CAPABILITY_KEYS)
    if "rate_card" not in doc:
        raise ConfigError("rate_card", "required section is missing (one [rate_card.<job type>] per job type)")
    card_t = check_table(doc["rate_card"], "rate_card")
    try:
        caps = capabilities_from_json(caps_t, where="capabilities")
        card = rate_card_from_json(card_t, where="rate_card")
    except ValidationError as e:
        raise _validation(e) from None
    for kind, _rate in card.rates:
        if kind not in caps.job_kinds:
            name = JOB_KIND_NAMES[kind]
            raise ConfigError(f"rate_card.{name}", f"job type {name!r} is priced but not in capabilities.job_types")
    for kind in caps.job_kinds:
        if card.rate_for(kind) is None:
            name = JOB_KIND_NAMES[kind]
            raise ConfigError(f"rate_card.{name}", f"job type {name!r} is served but has no price")
    return caps, card


def _validation(e: ValidationError) -> ConfigError:
    key = e.field or "capabilities"
    return ConfigError(key, e.message.removeprefix(f"{key}: "))


def _small_sections(doc: dict[str, Any]) -> dict[str, Any]:
    heartbeat = HeartbeatSettings(**_section(doc, "heartbeat", HeartbeatSettings))
    results = ResultSettings(**_section(doc, "results", ResultSettings))
    fees = FeeSettings(**_section(doc, "fees", FeeSettings))
    metrics = MetricsKeys(**_section(doc, "metrics", MetricsKeys))
    log = LogKeys(**_section(doc, "log", LogKeys))
    return {"heartbeat": heartbeat, "results": results, "fees": fees,
            "metrics_addr": metrics.addr if metrics.enabled else None, "log_format": log.format,
            "log_level": log.level}


def _validators(doc: dict[str, Any]) -> dict[bytes, tuple[str, int]]:
    t = check_table(doc.get("validators", {}), "validators")
    out: dict[bytes, tuple[str, int]] = {}
    for text_key in sorted(t):
        key = check_hash_key(text_key, "validators", "a validator Ed25519 peer key")
        if key in out:
            raise ConfigError(f"validators.{text_key}", "the same validator is listed twice")
        out[key] = check_host_port(t[text_key], f"validators.{text_key}")
    return out


# -- loading ----------------------------------------------------------------------------------
def parse_settings(source: str, home: Path) -> RunnerSettings:
    """Parse the text of a ``runner.toml`` belonging to ``home``; raises :class:`ConfigError`."""
    try:
        doc = tomllib.loads(source)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(None, f"not valid TOML: {e}") from None
    for section in sorted(doc):
        if section not in _SECTIONS:
            raise ConfigError(section, f"unknown section; allowed: {', '.join(_SECTIONS)}")
    try:
        runner = _runner(doc, home)
        caps, card = _capabilities(doc)
        return RunnerSettings(home=home, **runner, capabilities=caps, rate_card=card, **_small_sections(doc),
                              executors=parse_executors(doc.get("executors", {})),
                              validator_endpoints=_validators(doc))
    except SettingError as e:
        raise ConfigError(e.key, e.message) from None


def load_settings(home: Path | str) -> RunnerSettings:
    """Read ``home/runner.toml``; raises :class:`ConfigError`."""
    h = Path(home)
    path = h / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(None, f"{path} not found; run `cowboy-runner init --home {h}` first") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(None, f"cannot read {path}: {e}") from None
    return parse_settings(text, h)


# -- init -------------------------------------------------------------------------------------
def render_template(validator_rpc: str) -> str:
    """The commented ``runner.toml`` written by ``cowboy-runner init`` (every line explained)."""
    rpc = normalize_url(validator_rpc)
    return "\n".join([
        _template_preamble(),
        _template_runner(rpc),
        _template_capabilities(),
        _template_chain_duties(),
        _template_observability(),
        _template_executors(),
        _template_validators(),
    ])


def _default(cls: type, name: str) -> str:
    """The declared default of ``cls.name`` as the template writes it (TOML)."""
    return default_text(next(f for f, _spec in settings_schema.specs(cls) if f.name == name))


def _template_preamble() -> str:
    """Opening comment: where the keys are documented and how relative paths resolve."""
    return """\
# cowboy-runner configuration (docs/runner.md). Unknown keys are errors; relative paths are relative to
# the home directory that holds this file.
"""


def _template_runner(rpc: str) -> str:
    """``[runner]``: the given validator RPC, and a commented QUIC endpoint on that RPC's host (bracketed if IPv6)."""
    host = urllib.parse.urlsplit(rpc).hostname or "127.0.0.1"
    quic_host = f"[{host}]" if ":" in host else host
    return f"""\
[runner]
# HTTP API of your validator (transactions, chain queries, the poll fallback).
validator_rpc = "{rpc}"
# The validator's CIP-11 QUIC transport, HOST:PORT (default: the RPC host and port {DEFAULT_QUIC_PORT}).
# quic_endpoint = "{quic_host}:{DEFAULT_QUIC_PORT}"
# Expected chain id; when unset it is read from the validator's /status at start-up.
# chain_id = "cowboy-devnet-1"
# The runner's secp256k1 key (mode 0600; `init` created it). Its address is the runner identity.
key_file = "{DEFAULT_KEY_FILE}"
# Durable journal of result obligations (SQLite). Keep it: it holds signed result transactions.
journal = "{DEFAULT_JOURNAL}"
# Seconds between polls of GET /runner/{{address}}/jobs while no QUIC session is up.
poll_interval_s = {_default(RunnerKeys, "poll_interval_s")}
"""


def _template_capabilities() -> str:
    """``[capabilities]`` and the ``[rate_card.http]`` its default job type needs: what is served, at what price."""
    return """\
[capabilities]
# Job types served: llm, http, mcp, custom (each needs a [rate_card.<type>] below).
job_types = ["http"]
# Regions you operate in (matched against jobs that ask for one).
regions = []
# Hosts HTTP jobs may reach: "example.com" exactly, "*.example.com" any subdomain, "*" any host.
http_domains = ["example.com"]
# Most jobs in flight at once; at this limit the runner signals backpressure.
max_concurrent_jobs = 4
# TEE attestations offered (e.g. "sgx", "sev-snp", "tdx"); empty: none.
tee_types = []
# Runner pools you are entitled to serve (0x-hex ids).
pools = []

[rate_card.http]
# Price of one http job before usage, in the smallest unit (decimal string).
base_price = "1000"
# Price per reported usage unit.
price_per_unit = "0"
"""


def _template_chain_duties() -> str:
    """``[heartbeat]``, ``[results]`` and ``[fees]``: when the runner sends heartbeats and results, and what it pays."""
    return f"""\
[heartbeat]
# QUIC HeartbeatPing every N new blocks; unset: the chain's governed CIP-11 HEARTBEAT_BLOCKS (GET /params).
# quic_interval_blocks = 1
# On-chain heartbeat cadence in blocks; 0 = HEARTBEAT_TIMEOUT_BLOCKS - safety_margin_blocks.
onchain_cadence_blocks = {_default(HeartbeatSettings, "onchain_cadence_blocks")}
# Blocks kept between the cadence and the eligibility timeout (inclusion delay, congestion).
safety_margin_blocks = {_default(HeartbeatSettings, "safety_margin_blocks")}

[results]
# Blocks to wait for a sent result transaction before resubmitting it yourself; unset: the chain's governed
# RESULT_TX_INCLUSION_GRACE_BLOCKS.
# inclusion_grace_blocks = 2
# Then resubmit every N blocks until it is included or the job ends; unset: RESULT_TX_REBROADCAST_INTERVAL_BLOCKS.
# rebroadcast_interval_blocks = 2

[fees]
# Max fee per cycle/cell = this multiple of the current basefee.
max_fee_multiplier = {_default(FeeSettings, "max_fee_multiplier")}
# Tips to the block proposer per cycle and per cell (capped at the max fee).
priority_fee_per_cycle = {_default(FeeSettings, "priority_fee_per_cycle")}
priority_fee_per_cell = {_default(FeeSettings, "priority_fee_per_cell")}
"""


def _template_observability() -> str:
    """``[metrics]`` and ``[log]``: the Prometheus listener and the log format/level."""
    return f"""\
[metrics]
# Prometheus exposition at http://ADDR/metrics.
addr = {_default(MetricsKeys, "addr")}
# false: no metrics port.
enabled = {_default(MetricsKeys, "enabled")}

[log]
# "console" for humans, "json" for log shippers.
format = {_default(LogKeys, "format")}
# debug | info | warning | error
level = {_default(LogKeys, "level")}
"""


def _template_executors() -> str:
    """``[executors.*]``: limits of the http/llm/mcp/custom executors, with empty model/server/program tables."""
    return f"""\
[executors.http]
# Largest response body read (bytes); larger responses fail the job.
max_response_bytes = {_default(HttpExecutorSettings, "max_response_bytes")}
# Connect and whole-request timeouts in seconds (a job's own wall-time bound can be shorter).
connect_timeout_s = {_default(HttpExecutorSettings, "connect_timeout_s")}
request_timeout_s = {_default(HttpExecutorSettings, "request_timeout_s")}
# Let HTTP jobs reach loopback/private addresses (keep false on public runners: SSRF protection).
allow_private_addresses = {_default(HttpExecutorSettings, "allow_private_addresses")}

[executors.llm]
# OpenAI-compatible endpoint serving llm jobs (needed once models are listed).
# base_url = "http://127.0.0.1:8000/v1"
# API key, or the name of an environment variable holding it (not both).
# api_key_env = "OPENAI_API_KEY"
# Temperature when the job sets none.
default_temperature = {_default(LlmExecutorSettings, "default_temperature")}
# Request timeout in seconds.
timeout_s = {_default(LlmExecutorSettings, "timeout_s")}

[executors.llm.models]
# "<model_id: 64 hex digits>" = "<model name at the endpoint>"

[executors.mcp]
# Seconds per tool call.
timeout_s = {_default(McpExecutorSettings, "timeout_s")}

[executors.mcp.servers]
# <server name used by jobs> = "<streamable HTTP URL>"

[executors.custom]
# Wall time (seconds), address-space limit (MiB) and stdout cap (bytes) of custom executor processes.
time_limit_s = {_default(CustomExecutorSettings, "time_limit_s")}
memory_limit_mb = {_default(CustomExecutorSettings, "memory_limit_mb")}
max_output_bytes = {_default(CustomExecutorSettings, "max_output_bytes")}
# Programs run in a bubblewrap sandbox (no runner home, no environment, no network); start-up fails if bwrap
# cannot run here. "none" runs them unsandboxed, for development only.
isolation = {_default(CustomExecutorSettings, "isolation")}
# "<executor_hash: 64 hex digits>" = ["/path/to/program", "arg"]
# Every executor key (per-kind max_concurrent/queue, LLM retries and api_key_file, MCP stdio servers and tool
# allow-lists, adapters, plugins): docs/runner-executors.md "Configuration".
"""


def _template_validators() -> str:
    """Commented-out ``[validators]``: only multi-validator networks need the other validators' QUIC endpoints."""
    return f"""\
# Multi-validator networks only. The runner keeps one session with each validator of its CIP-11 subset Sub(R)
# (with one validator: that validator). The validator behind validator_rpc is reached at runner.quic_endpoint;
# list the QUIC endpoints of the others by Ed25519 peer key (GET /status -> validator_set.validators).
# [validators]
# "0x<64 hex digits>" = "host:{DEFAULT_QUIC_PORT}"
"""


def init_home(home: Path, validator_rpc: str, *, force: bool = False) -> Path:
    """Create ``home`` with a new key (mode 0600) and a commented ``runner.toml``; returns the runner.toml path.

    An existing key is never overwritten: without ``force`` an existing key or runner.toml is an error
    (FileExistsError); with ``force`` runner.toml is rewritten and an existing key is kept (after checking it
    loads). An invalid ``validator_rpc`` raises ValueError before anything is written.
    """

    text = render_template(validator_rpc)  # validates the URL first
    home = Path(home)
    config = home / CONFIG_FILE
    key = home / DEFAULT_KEY_FILE
    if not force:
        for p in (config, key):
            if p.exists() or p.is_symlink():
                raise FileExistsError(f"{p} already exists; refusing to overwrite it (use --force to rewrite "
                                      f"{CONFIG_FILE}; the key is never replaced)")
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if key.exists() or key.is_symlink():
        load_key(key)
    else:
        create_key(key)
    tmp = config.with_name(f".{CONFIG_FILE}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(config)
    return config

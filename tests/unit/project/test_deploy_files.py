"""Static checks of the files that build, run and deploy the node (no Docker engine needed).

The validators below return a list of problems; each is run on the real file
(must be empty) and on deliberately broken copies (must name the defect), so a
check that cannot fail is caught here too. Docker behaviour is approximated
conservatively: the Dockerfile grammar (instructions, line continuations,
exec/shell forms, COPY flags), `.dockerignore` patterns (`**`, `!`), and the
Compose file schema subset this project uses.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]

README_COMMANDS = [
    "make devnet    # set up .venv and start a local single-validator devnet",
    "make testnet   # set up .venv and start four validators on this machine (./testnet-home)",
    "make test      # set up .venv and run the whole test suite",
]

# ---------------------------------------------------------------------------------------------
# The cowboy-node command-line contract: command path -> (flags taking a value, boolean flags,
# number of positional arguments).
CLI: dict[tuple[str, ...], tuple[frozenset[str], frozenset[str], int]] = {
    ("init",): (frozenset({"--home", "--chain-id", "--rpc-addr", "--quic-addr", "--metrics-addr",
                           "--block-time-ms", "--cip11-phase"}), frozenset(), 0),
    ("run",): (frozenset({"--home"}), frozenset(), 0),
    ("status",): (frozenset({"--rpc"}), frozenset({"--json"}), 0),
    ("keys", "new"): (frozenset({"--out"}), frozenset(), 0),
    ("keys", "show"): (frozenset(), frozenset(), 1),
    ("tx", "transfer"): (frozenset({"--key", "--to", "--amount", "--rpc"}), frozenset({"--wait"}), 0),
    ("query", "account"): (frozenset({"--rpc"}), frozenset(), 1),
    ("query", "block"): (frozenset({"--rpc"}), frozenset(), 1),
    ("query", "tx"): (frozenset({"--rpc"}), frozenset(), 1),
    ("query", "runner"): (frozenset({"--rpc"}), frozenset(), 1),
}
REQUIRED_ARGS: dict[tuple[str, ...], frozenset[str]] = {
    ("init",): frozenset({"--home"}),
    ("run",): frozenset({"--home"}),
    ("keys", "new"): frozenset({"--out"}),
    ("tx", "transfer"): frozenset({"--key", "--to", "--amount"}),
}


# The cowboy-runner command-line contract (issue 6; docs/runner.md), same shape as CLI.
RUNNER_CLI: dict[tuple[str, ...], tuple[frozenset[str], frozenset[str], int]] = {
    ("init",): (frozenset({"--home", "--validator-rpc"}), frozenset({"--force"}), 0),
    ("register",): (frozenset({"--home", "--stake", "--timeout"}), frozenset(), 0),
    ("run",): (frozenset({"--home"}), frozenset(), 0),
    ("status",): (frozenset({"--home"}), frozenset({"--json"}), 0),
    ("drain",): (frozenset({"--home", "--wait"}), frozenset(), 0),
    ("deregister",): (frozenset({"--home", "--timeout"}), frozenset(), 0),
}
RUNNER_REQUIRED_ARGS: dict[tuple[str, ...], frozenset[str]] = {
    **{path: frozenset({"--home"}) for path in RUNNER_CLI},
    ("init",): frozenset({"--home", "--validator-rpc"}),
    ("register",): frozenset({"--home", "--stake"}),
}


def cli_problems(argv: list[str], program: str = "cowboy-node") -> list[str]:
    """Problems of ``PROGRAM ARGV`` against that program's CLI contract (cowboy-node or cowboy-runner)."""
    contract, required = (RUNNER_CLI, RUNNER_REQUIRED_ARGS) if program == "cowboy-runner" else (CLI, REQUIRED_ARGS)
    for path, (valued, boolean, n_positional) in sorted(contract.items(), key=lambda kv: -len(kv[0])):
        if tuple(argv[:len(path)]) != path:
            continue
        problems: list[str] = []
        seen: set[str] = set()
        positional: list[str] = []
        rest = argv[len(path):]
        i = 0
        while i < len(rest):
            arg = rest[i]
            if arg.startswith("--"):
                flag, eq, _ = arg.partition("=")
                if flag in boolean and not eq:
                    seen.add(flag)
                elif flag in valued:
                    if not eq:
                        if i + 1 >= len(rest) or rest[i + 1].startswith("--"):
                            problems.append(f"{program} {' '.join(path)}: {flag} needs a value")
                        i += 1
                    seen.add(flag)
                else:
                    problems.append(f"{program} {' '.join(path)}: unknown flag {flag}")
            else:
                positional.append(arg)
            i += 1
        if len(positional) != n_positional:
            problems.append(f"{program} {' '.join(path)}: expected {n_positional} positional argument(s), "
                            f"got {positional}")
        missing = required.get(path, frozenset()) - seen
        if missing:
            problems.append(f"{program} {' '.join(path)}: missing {sorted(missing)}")
        return problems
    return [f"{program}: unknown subcommand {argv[:2]}"]


# ---------------------------------------------------------------------------------------------
# Dockerfile

DOCKERFILE_INSTRUCTIONS = frozenset({
    "ADD", "ARG", "CMD", "COPY", "ENTRYPOINT", "ENV", "EXPOSE", "FROM", "HEALTHCHECK", "LABEL",
    "MAINTAINER", "ONBUILD", "RUN", "SHELL", "STOPSIGNAL", "USER", "VOLUME", "WORKDIR",
})


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form instruction, else None."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments removed (Docker's rules)."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comments and blank lines are dropped, also inside a continuation
        if not buf:
            start = n
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        joined = " ".join(buf)
        buf = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    if buf:
        out.append(Instruction("<unterminated continuation>", " ".join(buf), start))
    return out


def split_flags(args: str) -> tuple[dict[str, str], str]:
    """Leading ``--flag=value`` options of COPY/ADD/HEALTHCHECK and the remainder."""
    flags: dict[str, str] = {}
    rest = args.strip()
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        name, _, value = token[2:].partition("=")
        flags[name] = value
        rest = rest.strip()
    return flags, rest


def read_dockerignore(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.exists():
        return []
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:[^/]+/)*"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def dockerignored(rel_path: str, patterns: list[str]) -> bool:
    """Whether ``rel_path`` (relative to the build context) is excluded; a matched parent excludes children."""
    parts = Path(rel_path).as_posix().strip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for pat in patterns:
        negate = pat.startswith("!")
        body = os.path.normpath(pat[1:] if negate else pat).lstrip("/")
        rx = _pattern_regex(body)
        if any(rx.match(p) for p in prefixes):
            excluded = not negate
    return excluded


def copy_sources(ins: Instruction) -> tuple[dict[str, str], list[str], str]:
    flags, rest = split_flags(ins.args)
    parts = Instruction(ins.keyword, rest, ins.line).exec_form() or shlex.split(rest)
    return flags, parts[:-1], parts[-1] if parts else ""


def dockerfile_problems(instructions: list[Instruction], context: Path) -> list[str]:
    """Generic problems: grammar, base image first, sources present and not ignored, non-root user."""
    problems: list[str] = []
    ignore = read_dockerignore(context)
    for ins in instructions:
        if ins.keyword not in DOCKERFILE_INSTRUCTIONS:
            problems.append(f"line {ins.line}: unknown instruction {ins.keyword}")
    leading = [i for i in instructions if i.keyword != "ARG"]
    if not leading or leading[0].keyword != "FROM":
        problems.append("the first instruction (after ARGs) must be FROM")
    for ins in instructions:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        flags, sources, dest = copy_sources(ins)
        if not sources or not dest:
            problems.append(f"line {ins.line}: {ins.keyword} needs a source and a destination")
        if "from" in flags:
            continue  # copies from another stage/image
        for src in sources:
            if re.match(r"^[a-z]+://", src):
                continue
            matches = list(context.glob(src)) if any(c in src for c in "*?[") else [context / src]
            if not any(m.exists() for m in matches):
                problems.append(f"line {ins.line}: {ins.keyword} source {src!r} does not exist in the build context")
            elif dockerignored(src, ignore):
                problems.append(f"line {ins.line}: {ins.keyword} source {src!r} is excluded by .dockerignore")
    users = [i for i in instructions if i.keyword == "USER"]
    if not users:
        problems.append("no USER: the container would run as root")
    elif users[-1].args.split(":")[0] in ("root", "0"):
        problems.append(f"line {users[-1].line}: final USER is root")
    return problems


def exposed_ports(instructions: list[Instruction]) -> set[str]:
    ports: set[str] = set()
    for ins in instructions:
        if ins.keyword == "EXPOSE":
            for p in ins.args.split():
                ports.add(p if "/" in p else f"{p}/tcp")
    return ports


def project_scripts() -> dict[str, str]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        scripts: dict[str, str] = tomllib.load(f)["project"]["scripts"]
    return scripts


def dockerfile() -> list[Instruction]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


def last(instructions: list[Instruction], keyword: str) -> Instruction | None:
    found = [i for i in instructions if i.keyword == keyword]
    return found[-1] if found else None


# ---------------------------------------------------------------------------------------------
# docker-compose.yml

COMPOSE_TOP_LEVEL = frozenset({"version", "name", "services", "networks", "volumes", "configs", "secrets",
                               "include"})
SERVICE_KEYS = frozenset({
    "annotations", "attach", "blkio_config", "build", "cap_add", "cap_drop", "cgroup", "cgroup_parent", "command",
    "configs", "container_name", "cpu_count", "cpu_percent", "cpu_period", "cpu_quota", "cpu_rt_period",
    "cpu_rt_runtime", "cpu_shares", "cpus", "cpuset", "depends_on", "deploy", "develop", "device_cgroup_rules",
    "devices", "dns", "dns_opt", "dns_search", "domainname", "entrypoint", "env_file", "environment", "expose",
    "extends", "external_links", "extra_hosts", "group_add", "healthcheck", "hostname", "image", "init", "ipc",
    "isolation", "labels", "links", "logging", "mac_address", "mem_limit", "mem_reservation", "mem_swappiness",
    "memswap_limit", "network_mode", "networks", "oom_kill_disable", "oom_score_adj", "pid", "pids_limit",
    "platform", "ports", "privileged", "profiles", "pull_policy", "read_only", "restart", "runtime", "scale",
    "secrets", "security_opt", "shm_size", "stdin_open", "stop_grace_period", "stop_signal", "storage_opt",
    "sysctls", "tmpfs", "tty", "ulimits", "user", "userns_mode", "uts", "volumes", "volumes_from", "working_dir"
})
DEPENDS_CONDITIONS = frozenset({"service_started", "service_healthy", "service_completed_successfully"})
RESTART_POLICIES = re.compile(r"^(no|always|unless-stopped|on-failure(:\d+)?)$")
DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$")
PORT = re.compile(r"^(?:(?P<ip>\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):)?(?:(?P<host>\d+(?:-\d+)?):)?"
                  r"(?P<container>\d+(?:-\d+)?)(?:/(?P<proto>tcp|udp|sctp))?$")
DEVNET_SCRIPT = "deploy/devnet.sh"
DEVNET_MODES = ("init", "run")
RUNNER_SCRIPT = "deploy/devnet-runner.sh"
RUNNER_SCRIPT_MODES = ("setup", "run")
COMPOSE_SCRIPT = "deploy/compose/cowboy-compose.sh"
COMPOSE_MODES = ("genesis", "validator", "runner", "demo", "http")


def _as_argv(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return []


def port_problems(service: str, entry: Any) -> list[str]:
    if isinstance(entry, dict):
        if not isinstance(entry.get("target"), int):
            return [f"{service}: long-syntax port needs an integer target: {entry!r}"]
        return []
    if not isinstance(entry, str):
        return [f"{service}: port {entry!r} must be a quoted string (YAML reads 4000:4000 as a number)"]
    entry = re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", entry)  # compose interpolation, with its default
    m = PORT.match(entry)
    if not m:
        return [f"{service}: malformed port {entry!r}"]
    numbers = [int(n) for g in ("host", "container") if m.group(g) for n in m.group(g).split("-")]
    if any(not 1 <= n <= 65535 for n in numbers):
        return [f"{service}: port out of range in {entry!r}"]
    return []


def named_volumes_used(service: dict[str, Any]) -> list[str]:
    names = []
    for v in service.get("volumes", []) or []:
        if isinstance(v, dict):
            if v.get("type", "volume") == "volume" and v.get("source"):
                names.append(str(v["source"]))
            continue
        parts = str(v).split(":")
        if len(parts) >= 2 and not parts[0].startswith(("/", ".", "~", "$")):
            names.append(parts[0])
    return names


def compose_problems(doc: Any, base: Path) -> list[str]:
    """Structural problems of a parsed compose file whose directory is ``base``."""
    if not isinstance(doc, dict):
        return ["the compose file is not a mapping"]
    problems = [f"unknown top-level key {k!r}" for k in doc if k not in COMPOSE_TOP_LEVEL and not k.startswith("x-")]
    services = doc.get("services")
    if not isinstance(services, dict) or not services:
        return [*problems, "no services"]
    declared_volumes = doc.get("volumes") or {}
    if not isinstance(declared_volumes, dict):
        problems.append("top-level volumes must be a mapping")
        declared_volumes = {}
    built_images: dict[str, Path] = {}
    for svc in services.values():
        if isinstance(svc, dict) and "build" in svc and "image" in svc:
            built_images[str(svc["image"])] = _dockerfile_of(svc["build"], base)
    for name, svc in services.items():
        if not isinstance(svc, dict):
            problems.append(f"{name}: service is not a mapping")
            continue
        problems += [f"{name}: unknown key {k!r}" for k in svc if k not in SERVICE_KEYS and not k.startswith("x-")]
        if "build" not in svc and "image" not in svc:
            problems.append(f"{name}: needs build or image")
        dockerfile_path: Path | None = None
        if "build" in svc:
            build = svc["build"]
            context = base / (build if isinstance(build, str) else str(build.get("context", ".")))
            if not context.is_dir():
                problems.append(f"{name}: build context {context} does not exist")
            dockerfile_path = _dockerfile_of(build, base)
            if not dockerfile_path.is_file():
                problems.append(f"{name}: dockerfile {dockerfile_path} does not exist")
        elif str(svc.get("image")) in built_images:
            dockerfile_path = built_images[str(svc["image"])]
        for vol in named_volumes_used(svc):
            if vol not in declared_volumes:
                problems.append(f"{name}: named volume {vol!r} is not declared under top-level volumes")
        for entry in svc.get("ports", []) or []:
            problems += port_problems(name, entry)
        deps = svc.get("depends_on", {}) or {}
        dep_items = {d: {} for d in deps} if isinstance(deps, list) else deps
        for dep, spec in dep_items.items():
            if dep not in services or dep == name:
                problems.append(f"{name}: depends_on {dep!r} is not another service")
            cond = (spec or {}).get("condition", "service_started") if isinstance(spec, dict) else None
            if cond not in DEPENDS_CONDITIONS:
                problems.append(f"{name}: depends_on {dep!r} has invalid condition {cond!r}")
        if "restart" in svc and not RESTART_POLICIES.match(str(svc["restart"])):
            problems.append(f"{name}: invalid restart policy {svc['restart']!r}")
        if "stop_signal" in svc and not re.match(r"^SIG[A-Z0-9]+$", str(svc["stop_signal"])):
            problems.append(f"{name}: invalid stop_signal {svc['stop_signal']!r}")
        for key in ("stop_grace_period",):
            if key in svc and not DURATION.match(str(svc[key])):
                problems.append(f"{name}: {key} is not a duration: {svc[key]!r}")
        hc = svc.get("healthcheck")
        if hc is not None:
            test = hc.get("test") if isinstance(hc, dict) else None
            if not (isinstance(test, str) or (isinstance(test, list) and test
                                               and test[0] in ("CMD", "CMD-SHELL", "NONE"))):
                problems.append(f"{name}: healthcheck.test must be a string or [CMD|CMD-SHELL|NONE, ...]")
            for key in ("interval", "timeout", "start_period", "start_interval"):
                if isinstance(hc, dict) and key in hc and not DURATION.match(str(hc[key])):
                    problems.append(f"{name}: healthcheck.{key} is not a duration: {hc[key]!r}")
        if dockerfile_path is not None and dockerfile_path.is_file():
            problems += _command_problems(name, svc, dockerfile_path)
    return problems


def _dockerfile_of(build: Any, base: Path) -> Path:
    if isinstance(build, str):
        return base / build / "Dockerfile"
    return base / str(build.get("context", ".")) / str(build.get("dockerfile", "Dockerfile"))


def _command_problems(name: str, svc: dict[str, Any], dockerfile_path: Path) -> list[str]:
    """The effective entrypoint + command must be cowboy-node with a contract subcommand, or the devnet script."""
    instructions = parse_dockerfile(dockerfile_path.read_text())
    ep_ins, cmd_ins = last(instructions, "ENTRYPOINT"), last(instructions, "CMD")
    entrypoint = _as_argv(svc.get("entrypoint"))
    if entrypoint is None:
        entrypoint = (ep_ins.exec_form() or shlex.split(ep_ins.args)) if ep_ins else []
        command = _as_argv(svc.get("command"))
        if command is None:
            command = (cmd_ins.exec_form() or shlex.split(cmd_ins.args)) if cmd_ins else []
    else:
        command = _as_argv(svc.get("command")) or []  # an overridden entrypoint drops the image's CMD
    if entrypoint == ["cowboy-entrypoint"]:  # runs a program of the image, else a cowboy-node subcommand
        entrypoint, command = (command[:1], command[1:]) if command and (
            command[0] in ("cowboy-node", "cowboy-runner") or command[0].startswith("cowboy-")) else (
            ["cowboy-node"], command)
    if entrypoint in (["cowboy-node"], ["cowboy-runner"]):
        return [f"{name}: {p}" for p in cli_problems(command, entrypoint[0])]
    if len(entrypoint) == 1:
        entrypoint = [e if e.startswith("/") else f"/usr/local/bin/{e}" for e in entrypoint]
        copies = {dest: srcs for i in instructions if i.keyword in ("COPY", "ADD")
                  for _, srcs, dest in [copy_sources(i)]}
        sources = copies.get(entrypoint[0])
        if sources == [DEVNET_SCRIPT]:
            if not command or command[0] not in DEVNET_MODES:
                return [f"{name}: {DEVNET_SCRIPT} takes a mode {DEVNET_MODES}, got {command}"]
            return [f"{name}: {p}" for p in cli_problems(["init", "--home", "/data", *command[1:]])]
        if sources == [COMPOSE_SCRIPT]:
            if len(command) != 1 or command[0] not in COMPOSE_MODES:
                return [f"{name}: {COMPOSE_SCRIPT} takes one mode {COMPOSE_MODES}, got {command}"]
            return []
        if sources == [RUNNER_SCRIPT]:
            if len(command) > 1 or (command and command[0] not in RUNNER_SCRIPT_MODES):
                return [f"{name}: {RUNNER_SCRIPT} takes only a mode {RUNNER_SCRIPT_MODES}, got {command}"]
            return []
        return [f"{name}: entrypoint {entrypoint} is neither cowboy-node, cowboy-runner nor a script the "
                f"Dockerfile copies from {DEVNET_SCRIPT} or {RUNNER_SCRIPT}"]
    return [f"{name}: unsupported entrypoint {entrypoint}"]


def compose_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


# =============================================================================================
# Tests: Dockerfile


def test_dockerfile_is_well_formed_and_its_sources_exist() -> None:
    assert dockerfile_problems(dockerfile(), ROOT) == []


def test_dockerfile_base_image_user_ports_and_per_process_healthcheck() -> None:
    ins = dockerfile()
    arg = ins[0]
    assert arg.keyword == "ARG" and arg.args.startswith("BASE_IMAGE=python:3.11-slim-bookworm@sha256:")
    assert re.fullmatch(r"BASE_IMAGE=python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", arg.args)  # pinned by digest
    assert ins[1].keyword == "FROM" and ins[1].args == "${BASE_IMAGE}"  # a build argument overrides it
    assert {"4000/tcp", "4433/udp", "9464/tcp"} <= exposed_ports(ins)
    assert not [i for i in ins if i.keyword == "VOLUME"]  # no anonymous volume behind every container
    hc = last(ins, "HEALTHCHECK")
    assert hc is not None and hc.args.endswith('CMD ["cowboy-healthcheck"]')
    assert _script_copied_to("/usr/local/bin/cowboy-healthcheck") == ["deploy/container/healthcheck.py"]
    user = last(ins, "USER")
    assert user is not None and user.args not in ("root", "0")


def test_dockerfile_entrypoint_raises_the_fd_limit_then_runs_cowboy_node_by_default() -> None:
    ins = dockerfile()
    ep, cmd = last(ins, "ENTRYPOINT"), last(ins, "CMD")
    assert ep is not None and cmd is not None
    assert ep.exec_form() == ["cowboy-entrypoint"]
    assert _script_copied_to("/usr/local/bin/cowboy-entrypoint") == ["deploy/container/entrypoint.sh"]
    assert project_scripts()["cowboy-node"] == "cowboy_node.cli.main:main"
    assert cmd.exec_form() == ["run", "--home", "/data"]  # the entrypoint prefixes cowboy-node
    assert cli_problems(cmd.exec_form() or []) == []


def test_dockerfile_checks_catch_broken_dockerfiles() -> None:
    good = (ROOT / "Dockerfile").read_text()
    cases = {
        "RUNN echo hi\n": "unknown instruction RUNN",
        "COPY no_such_file.txt /x\n": "'no_such_file.txt' does not exist",
        "COPY .venv /venv\n": "excluded by .dockerignore",
        "USER root\n": "final USER is root",
        "RUN echo \\\n": "unknown instruction <unterminated",
    }
    for extra, expected in cases.items():
        problems = dockerfile_problems(parse_dockerfile(good + extra), ROOT)
        assert any(expected in p for p in problems), (extra, problems)
    no_user = "\n".join(ln for ln in good.splitlines() if not ln.startswith("USER"))
    assert "no USER: the container would run as root" in dockerfile_problems(parse_dockerfile(no_user), ROOT)
    assert "the first instruction (after ARGs) must be FROM" in dockerfile_problems(
        parse_dockerfile("RUN true\n" + good), ROOT)
    assert exposed_ports(parse_dockerfile("FROM x\nEXPOSE 4000 4433\n")) == {"4000/tcp", "4433/tcp"}


def test_dockerfile_parser_joins_continuations_and_drops_comments() -> None:
    ins = parse_dockerfile("# c\nFROM a\nRUN one \\\n  # inner comment\n  two\ncmd [\"x\"]\n")
    assert [(i.keyword, i.args, i.line) for i in ins] == [("FROM", "a", 2), ("RUN", "one  two", 3),
                                                          ("CMD", '["x"]', 6)]


def test_dockerignore_excludes_venv_git_and_node_data_but_not_the_sources() -> None:
    patterns = read_dockerignore(ROOT)
    for path in (".venv", ".venv/bin/python", ".git", ".git/HEAD", "data", "data/LOCK", "devnet-home",
                 "devnet-home/keys/faucet.key", "cowboy_node/__pycache__/x.pyc"):
        assert dockerignored(path, patterns), path
    for path in ("pyproject.toml", "README.md", "cowboy_node/cli/main.py", "cowboy_runner", "deploy/devnet.sh"):
        assert not dockerignored(path, patterns), path
    assert dockerignored("a/b/c.key", ["**/*.key"]) and not dockerignored("x.key", ["*.key", "!x.key"])


def test_no_file_the_image_needs_is_dockerignored() -> None:
    patterns = read_dockerignore(ROOT)
    for ins in dockerfile():
        if ins.keyword in ("COPY", "ADD"):
            for src in copy_sources(ins)[1]:
                base = ROOT / src
                files = [base] if base.is_file() else [p for p in base.rglob("*") if p.is_file()]
                for f in files:
                    rel = f.relative_to(ROOT).as_posix()
                    if "__pycache__" not in rel:
                        assert not dockerignored(rel, patterns), rel


# =============================================================================================
# Tests: docker-compose.yml


def test_compose_file_is_structurally_valid() -> None:
    assert compose_problems(compose_doc(), ROOT) == []


def test_compose_checks_catch_broken_compose_files() -> None:
    good = compose_doc()

    def broken(mutate: Any) -> list[str]:
        doc = copy.deepcopy(good)
        mutate(doc)
        return compose_problems(doc, ROOT)

    v0 = "validator-0"
    cases: list[tuple[Any, str]] = [
        (lambda d: d.pop("volumes"), "named volume 'validator-0-home' is not declared"),
        (lambda d: d.update(servicez={}), "unknown top-level key 'servicez'"),
        (lambda d: d["services"][v0].update(ports=[240000]), "must be a quoted string"),
        (lambda d: d["services"][v0].update(ports=["4000:4000/tpc"]), "malformed port"),
        (lambda d: d["services"][v0].update(ports=["70000:4000"]), "out of range"),
        (lambda d: d["services"][v0].update(depends_on=["genesys"]), "depends_on 'genesys' is not another service"),
        (lambda d: d["services"][v0].update(depends_on={"genesis": {"condition": "done"}}), "invalid condition"),
        (lambda d: d["services"][v0].update(command=["start", "--home", "/data"]), "unknown subcommand"),
        (lambda d: d["services"][v0].update(command=["run", "--data", "/data"]), "unknown flag --data"),
        (lambda d: d["services"][v0].update(command=["cowboy-compose", "validatr"]), "takes one mode"),
        (lambda d: d["services"]["genesis"].update(command=["cowboy-compose"]), "takes one mode"),
        (lambda d: d["services"]["genesis"].update(entrypoint=["/bin/sh"]), "is neither cowboy-node"),
        (lambda d: d["services"]["genesis"]["build"].update(dockerfile="Dockerfile.missing"), "does not exist"),
        (lambda d: d["services"][v0].pop("image"), "needs build or image"),
        (lambda d: d["services"][v0].update(restart="sometimes"), "invalid restart policy"),
        (lambda d: d["services"][v0].update(stop_grace_period="thirty"), "not a duration"),
        (lambda d: d["services"][v0].update(helthcheck={}), "unknown key 'helthcheck'"),
        (lambda d: d["services"]["runner-0"].update(command=["cowboy-runner", "serve", "--home", "/runner"]),
         "cowboy-runner: unknown subcommand"),
        (lambda d: d["services"]["runner-0"].update(command=["cowboy-runner", "run"]),
         "cowboy-runner run: missing ['--home']"),
        (lambda d: d["services"][v0].update(ports=["4001:4001/quic"]), "malformed port"),
    ]
    for mutate, expected in cases:
        problems = broken(mutate)
        assert any(expected in p for p in problems), (expected, problems)


def _port_mappings(service: dict[str, Any]) -> list[tuple[int, int, str]]:
    """(host port, container port, protocol) of a service's short-syntax single-port mappings."""
    out = []
    for entry in service.get("ports", []):
        m = PORT.match(entry)
        assert m and m.group("host"), entry
        out.append((int(m.group("host")), int(m.group("container")), m.group("proto") or "tcp"))
    return out


def _addr_flag(argv: list[str], flag: str) -> tuple[str, int]:
    host, _, port = argv[argv.index(flag) + 1].rpartition(":")
    return host, int(port)


def _script_copied_to(path: str) -> list[str]:
    """Sources of the Dockerfile COPY whose destination is ``path``."""
    for ins in dockerfile():
        if ins.keyword in ("COPY", "ADD"):
            _, sources, dest = copy_sources(ins)
            if dest == path:
                return sources
    return []


def _volume_at(service: dict[str, Any], target: str) -> tuple[str, str] | None:
    """(named volume, mode) mounted at ``target`` in a service, if any."""
    for v in service.get("volumes", []):
        parts = str(v).split(":")
        if len(parts) >= 2 and parts[1] == target:
            return parts[0], parts[2] if len(parts) > 2 else "rw"
    return None


def test_runner_cli_contract_matches_the_real_cowboy_runner_parser() -> None:
    # The compose file and the scripts are checked against RUNNER_CLI; it must describe the real CLI.
    from cowboy_runner.cli import build_parser

    for path, (valued, boolean, _) in RUNNER_CLI.items():
        argv = [*path, *(a for flag in sorted(valued) for a in (flag, "1")), *sorted(boolean)]
        args = build_parser().parse_args(argv)
        assert args.command == path[0] and args.home == "1", argv
        for flag in sorted(RUNNER_REQUIRED_ARGS[path]):
            i = argv.index(flag)
            with pytest.raises(SystemExit):
                build_parser().parse_args(argv[:i] + argv[i + 2:])
        with pytest.raises(SystemExit):
            build_parser().parse_args([*argv, "--no-such-flag"])


def test_cli_contract_checker() -> None:
    assert cli_problems(["init", "--home", "/d", "--chain-id", "c", "--rpc-addr", "0.0.0.0:4000"]) == []
    assert cli_problems(["tx", "transfer", "--key", "k", "--to", "0xab", "--amount", "1", "--wait"]) == []
    assert cli_problems(["query", "block", "7", "--rpc", "http://x"]) == []
    assert cli_problems(["status", "--json"]) == []
    assert cli_problems(["run"]) == ["cowboy-node run: missing ['--home']"]
    assert cli_problems(["keys", "show"]) != []
    assert cli_problems(["status", "--rpc"]) == ["cowboy-node status: --rpc needs a value"]
    assert cli_problems(["serve"]) == ["cowboy-node: unknown subcommand ['serve']"]
    assert cli_problems(["init", "--home", "h", "--validator-rpc", "http://x"], "cowboy-runner") == []
    assert cli_problems(["status", "--home", "h", "--json"], "cowboy-runner") == []
    assert cli_problems(["register", "--home", "h"], "cowboy-runner") == [
        "cowboy-runner register: missing ['--stake']"]
    assert "cowboy-node status: unknown flag --home" in cli_problems(["status", "--home", "h"])


# =============================================================================================
# Tests: Makefile, .ci/run, devnet script

MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="GNU make not installed")


def makefile_targets(text: str) -> set[str]:
    targets: set[str] = set()
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.$()/ -]+?)\s*:(?![=])", line)
        if m and not line.startswith("\t"):
            targets.update(m.group(1).split())
    return targets


def test_makefile_declares_the_targets_and_defaults_to_help() -> None:
    text = (ROOT / "Makefile").read_text()
    targets = makefile_targets(text)
    for t in ("help", "venv", "install", "lint", "typecheck", "test", "devnet", "fuzz", "bench", "clean"):
        assert t in targets, t
    assert re.search(r"^\.DEFAULT_GOAL\s*:=\s*help\s*$", text, re.M)
    assert re.search(r"^PY \?= python3\s*$", text, re.M)
    assert makefile_targets("a b: c\n\trecipe: no\nX := 1\n") == {"a", "b"}


def _make_n(target: str, venv: Path, **variables: str) -> str:
    assert MAKE is not None
    args = [MAKE, "-n", "-C", str(ROOT), target, f"VENV={venv}", *(f"{k}={v}" for k, v in variables.items())]
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PY", "VENV")}
    res = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout


@needs_make
def test_make_test_on_a_fresh_machine_creates_the_venv_installs_then_lints_typechecks_and_tests(
        tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    out = _make_n("test", venv, PY="python3.11")
    steps = [
        "python3.11 -m venv",
        f"{venv}/bin/python -m pip install --disable-pip-version-check -q --require-hashes -r requirements-dev.lock",
        f"{venv}/bin/python -m pip install --disable-pip-version-check -q --no-deps -e .",
        f"touch {venv}/.installed-stamp",
        f"{venv}/bin/python -m ruff check",
        f"{venv}/bin/python -m mypy",
        f"{venv}/bin/python -m pytest -q",
    ]
    positions = [out.find(s) for s in steps]
    assert all(p >= 0 for p in positions), (steps, out)
    assert positions == sorted(positions), out


@needs_make
def test_make_reinstalls_only_when_pyproject_or_the_lock_is_newer_than_the_stamp(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    stamp = venv / ".installed-stamp"
    stamp.touch()
    inputs = [(ROOT / name).stat().st_mtime for name in ("pyproject.toml", "requirements-dev.lock")]
    newer = max(inputs) + 10
    os.utime(stamp, (newer, newer))
    out = _make_n("test", venv)
    assert "pip install" not in out and "-m venv" not in out and "pytest -q" in out
    older = (ROOT / "pyproject.toml").stat().st_mtime - 10
    os.utime(stamp, (older, older))
    assert "pip install" in _make_n("lint", venv)
    between = (ROOT / "requirements-dev.lock").stat().st_mtime - 1  # a regenerated lock alone reinstalls too
    if between > (ROOT / "pyproject.toml").stat().st_mtime:
        os.utime(stamp, (between, between))
        assert "--require-hashes -r requirements-dev.lock" in _make_n("lint", venv)


@needs_make
def test_make_devnet_fuzz_and_bench_commands(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    assert "deploy/devnet.sh" in _make_n("devnet", venv)
    assert f"COWBOY_NODE='{venv}/bin/cowboy-node'" in _make_n("devnet", venv)
    assert f"{venv}/bin/python tests/fuzz/fuzz_cbor.py --seconds 300" in _make_n("fuzz", venv)
    assert "tests/fuzz/fuzz_cbor.py --seconds 7" in _make_n("fuzz", venv, FUZZ_SECONDS="7")
    assert f"{venv}/bin/python bench/chain_throughput.py" in _make_n("bench", venv)


def test_ci_run_is_executable_and_runs_make_test() -> None:
    path = ROOT / ".ci" / "run"
    assert os.access(path, os.X_OK)
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert path.read_text().startswith("#!/usr/bin/env bash\n") or path.read_text().startswith("#!/bin/bash\n")
    assert "set -euo pipefail" in lines
    assert lines[-1] == "exec make test"


STUB_NODE = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$STUB_LOG"
if [[ "$1" == init ]]; then
    home="$3"
    mkdir -p "$home/keys"
    printf '[node]\\nchain_id = "x"\\n[rpc]\\naddr = "0.0.0.0:4100"\\n[metrics]\\naddr = "127.0.0.1:9500"\\n' \\
        > "$home/config.toml"
fi
"""


def _run_devnet(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    stub = tmp_path / "bin" / "cowboy-node"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(STUB_NODE)
    stub.chmod(0o755)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    env = {**os.environ, "COWBOY_NODE": str(stub), "DEVNET_HOME": str(tmp_path / "home"), "STUB_LOG": str(log)}
    for var in ("DEVNET_CHAIN_ID", "DEVNET_RUNNER", "DEVNET_RUNNER_HOME", "COWBOY_RUNNER"):
        env.pop(var, None)
    res = subprocess.run(["bash", str(ROOT / DEVNET_SCRIPT), *args], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls


def test_devnet_script_initialises_once_then_execs_run_and_prints_how_to_use_it(tmp_path: Path) -> None:
    assert os.access(ROOT / DEVNET_SCRIPT, os.X_OK)
    home = tmp_path / "home"
    res, calls = _run_devnet(tmp_path)
    assert res.returncode == 0, res.stderr
    assert calls == [f"init --home {home} --chain-id cowboy-devnet-1", f"run --home {home}"]
    out = res.stdout
    assert "http://127.0.0.1:4100" in out  # the configured RPC address, wildcard shown as loopback
    assert "http://127.0.0.1:9500/metrics" in out
    assert f"{home}/keys/faucet.key" in out
    stub = str(tmp_path / "bin" / "cowboy-node")
    printed = [shlex.split(ln.strip())[1:] for ln in out.splitlines() if ln.strip().startswith(stub + " ")]
    assert any(argv[:2] == ["tx", "transfer"] and "--wait" in argv and "1000" in argv for argv in printed), out
    for argv in printed:
        assert cli_problems(argv) == [], argv

    res, calls = _run_devnet(tmp_path)
    assert res.returncode == 0, res.stderr
    assert calls == [f"run --home {home}"]  # an existing home is never re-initialised


def test_devnet_script_init_mode_passes_flags_and_does_not_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res, calls = _run_devnet(tmp_path, "init", "--rpc-addr", "0.0.0.0:4000")
    assert res.returncode == 0, res.stderr
    assert calls == [f"init --home {home} --chain-id cowboy-devnet-1 --rpc-addr 0.0.0.0:4000"]
    res, calls = _run_devnet(tmp_path, "bogus")
    assert res.returncode == 2 and calls == []


STUB_TOOL = """#!/usr/bin/env bash
# A stand-in for cowboy-node / cowboy-runner: logs "<program> <argv>" and plays the part the test sets.
printf '%s %s\\n' "$STUB_NAME" "$*" >> "$STUB_LOG"
case "$STUB_NAME $1" in
    "node init")
        mkdir -p "$3/keys" && touch "$3/keys/faucet.key"
        printf '[node]\\nchain_id = "x"\\n[rpc]\\naddr = "0.0.0.0:4100"\\n[quic]\\naddr = "0.0.0.0:4101"\\n' \\
            > "$3/config.toml" ;;
    "node keys") echo 0x00000000000000000000000000000000000000aa ;;
    "node query") exit "${STUB_QUERY_RUNNER_RC:-1}" ;;
    "node run")
        if [[ -n "${STUB_NODE_WAITS:-}" ]]; then  # run until SIGTERM
            sleep 60 & sleeper=$!
            trap 'kill $sleeper; echo "node got SIGTERM" >> "$STUB_LOG"; exit 0' TERM
            wait
        fi
        # With a runner: stay up until its daemon has started (bounded); then exit with a distinctive status.
        if [[ -n "${STUB_RUNNER_WAITS:-}" ]]; then
            for _ in $(seq 300); do [[ -f "$STUB_DIR/runner-started" ]] && break; sleep 0.1; done
        fi
        exit 3 ;;
    "runner init")
        mkdir -p "$3/keys" && touch "$3/keys/runner.key"
        printf '[runner]\\n# quic_endpoint = "127.0.0.1:4433"\\nkey_file = "k"\\n' > "$3/runner.toml" ;;
    "runner register")
        printf '%s\\n' "${STUB_REGISTER_OUT:-registered}"
        exit "${STUB_REGISTER_RC:-0}" ;;
    "runner run")
        if [[ -n "${STUB_RUNNER_WAITS:-}" ]]; then
            sleep 60 & sleeper=$!
            # A slow goodbye: if the node were signalled at the same time, its note would come first.
            trap 'kill $sleeper; sleep 0.3; echo "runner got SIGTERM" >> "$STUB_LOG"; exit 0' TERM
            touch "$STUB_DIR/runner-started"
            wait
        fi ;;
esac
exit 0
"""


def _stub_tools(tmp_path: Path) -> dict[str, str]:
    """Write stub cowboy-node / cowboy-runner executables; returns the environment that selects them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    env: dict[str, str] = {}
    for name, var in (("node", "COWBOY_NODE"), ("runner", "COWBOY_RUNNER")):
        path = bin_dir / f"cowboy-{name}"
        path.write_text(f"#!/usr/bin/env bash\nSTUB_NAME={name} exec bash {bin_dir}/stub.sh \"$@\"\n")
        path.chmod(0o755)
        env[var] = str(path)
    (bin_dir / "stub.sh").write_text(STUB_TOOL)
    return env


def _run_script(tmp_path: Path, script: str, *args: str, **extra: str) -> tuple[subprocess.CompletedProcess[str],
                                                                                 list[list[str]]]:
    """Run a deploy script against the stubs; returns the result and the stub calls as [program, *argv]."""
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVNET_", "RUNNER_", "COWBOY_", "STUB_"))}
    env.update(_stub_tools(tmp_path), STUB_LOG=str(log), STUB_DIR=str(tmp_path), **extra)
    res = subprocess.run(["bash", str(ROOT / script), *args], capture_output=True, text=True, env=env,
                         timeout=60, check=False)
    calls = [ln.split(" ") for ln in log.read_text().splitlines()] if log.exists() else []
    return res, calls


def _runner_setup_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"RUNNER_HOME": str(tmp_path / "rhome"), "RUNNER_VALIDATOR_RPC": "http://127.0.0.1:4100",
            "RUNNER_FAUCET_KEY": str(tmp_path / "faucet.key"), **extra}


def _assert_calls_follow_the_contracts(calls: list[list[str]]) -> None:
    for program, *argv in calls:
        if argv != ["got", "SIGTERM"]:  # the stub's own note, not an invocation
            assert cli_problems(argv, f"cowboy-{program}") == [], (program, argv)


def test_runner_script_setup_inits_funds_from_the_faucet_and_registers_then_stops(tmp_path: Path) -> None:
    (tmp_path / "faucet.key").touch()
    rhome, rpc, addr = tmp_path / "rhome", "http://127.0.0.1:4100", "0x00000000000000000000000000000000000000aa"
    res, calls = _run_script(tmp_path, RUNNER_SCRIPT, "setup", **_runner_setup_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert calls == [
        ["node", "status", "--rpc", rpc],
        ["runner", "init", "--home", str(rhome), "--validator-rpc", rpc],
        ["node", "keys", "show", f"{rhome}/keys/runner.key"],
        ["node", "query", "runner", addr, "--rpc", rpc],
        ["node", "tx", "transfer", "--key", str(tmp_path / "faucet.key"), "--to", addr,
         "--amount", "2000000000000000000", "--rpc", rpc, "--wait"],
        ["runner", "register", "--home", str(rhome), "--stake", "1000000000000000000"],
    ]
    _assert_calls_follow_the_contracts(calls)
    assert '# quic_endpoint = "127.0.0.1:4433"' in (rhome / "runner.toml").read_text()  # template untouched


def test_runner_script_setup_is_idempotent_for_an_initialised_registered_runner(tmp_path: Path) -> None:
    (tmp_path / "rhome").mkdir()
    (tmp_path / "rhome" / "runner.toml").touch()
    res, calls = _run_script(tmp_path, RUNNER_SCRIPT, "setup", STUB_QUERY_RUNNER_RC="0",
                             **_runner_setup_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert [c[:2] for c in calls] == [["node", "status"], ["node", "keys"], ["node", "query"]]
    assert "already registered" in res.stdout


def test_runner_script_tolerates_already_registered_but_not_other_register_failures(tmp_path: Path) -> None:
    res, calls = _run_script(tmp_path, RUNNER_SCRIPT, "setup", STUB_REGISTER_RC="1",
                             STUB_REGISTER_OUT="error: runner_already_registered: a registration exists",
                             **_runner_setup_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert not [c for c in calls if c[1] == "tx"]  # no faucet key file: the account must be funded already
    res, calls = _run_script(tmp_path, RUNNER_SCRIPT, "setup", STUB_REGISTER_RC="1",
                             STUB_REGISTER_OUT="error: stake below runners.min_runner_stake",
                             **_runner_setup_env(tmp_path))
    assert res.returncode == 1 and "register failed" in res.stderr
    assert "min_runner_stake" in res.stdout


def test_runner_script_run_mode_sets_up_then_runs_the_daemon_and_rejects_arguments(tmp_path: Path) -> None:
    res, calls = _run_script(tmp_path, RUNNER_SCRIPT, **_runner_setup_env(tmp_path))
    assert res.returncode == 0, res.stderr
    assert calls[-2][:2] == ["runner", "register"]
    assert calls[-1] == ["runner", "run", "--home", str(tmp_path / "rhome")]
    _assert_calls_follow_the_contracts(calls)
    assert os.access(ROOT / RUNNER_SCRIPT, os.X_OK)
    for bad in (["serve"], ["setup", "--stake", "5"]):
        res, calls = _run_script(tmp_path, RUNNER_SCRIPT, *bad, **_runner_setup_env(tmp_path))
        assert res.returncode == 2 and calls == [], bad
    res, calls = _run_script(tmp_path, RUNNER_SCRIPT, "setup", **_runner_setup_env(tmp_path, RUNNER_STAKE="1e18"))
    assert res.returncode == 2 and calls == []


def test_devnet_script_starts_a_runner_only_when_asked_and_stops_it_with_the_node(tmp_path: Path) -> None:
    home = tmp_path / "home"
    res, calls = _run_script(tmp_path, DEVNET_SCRIPT, DEVNET_HOME=str(home))
    assert res.returncode == 3, res.stderr  # the node stub's status, from exec
    assert [c[0] for c in calls] == ["node", "node"]  # default: init + run, no runner at all

    res, calls = _run_script(tmp_path, DEVNET_SCRIPT, DEVNET_HOME=str(home), DEVNET_RUNNER="1",
                             STUB_RUNNER_WAITS="1")
    assert res.returncode == 3, res.stderr  # the node's exit status is the script's
    rhome, rpc = home / "runner", "http://127.0.0.1:4100"  # the node's configured RPC, wildcard → loopback
    assert ["node", "run", "--home", str(home)] in calls
    assert ["runner", "init", "--home", str(rhome), "--validator-rpc", rpc] in calls
    assert ["node", "query", "runner", "0x00000000000000000000000000000000000000aa", "--rpc", rpc] in calls
    transfer = next(c for c in calls if c[1:3] == ["tx", "transfer"])
    assert transfer[transfer.index("--key") + 1] == f"{home}/keys/faucet.key"
    assert ["runner", "run", "--home", str(rhome)] in calls
    assert calls[-1] == ["runner", "got", "SIGTERM"]  # the runner is stopped once the node has exited
    _assert_calls_follow_the_contracts(calls)
    assert f"cowboy-runner status --home {rhome}" in res.stdout
    # The runner dials the node's configured QUIC port (wildcard shown as loopback), not the 4433 default.
    toml = (rhome / "runner.toml").read_text().splitlines()
    assert 'quic_endpoint = "127.0.0.1:4101"' in toml and not [ln for ln in toml if "4433" in ln]
    assert 'key_file = "k"' in toml


def test_devnet_script_with_a_runner_stops_the_runner_before_the_node_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVNET_", "RUNNER_", "COWBOY_", "STUB_"))}
    env.update(_stub_tools(tmp_path), STUB_LOG=str(log), STUB_DIR=str(tmp_path), DEVNET_HOME=str(tmp_path / "h"),
               DEVNET_RUNNER="1", STUB_RUNNER_WAITS="1", STUB_NODE_WAITS="1")
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as err:
        proc = subprocess.Popen(["bash", str(ROOT / DEVNET_SCRIPT)], env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(600):  # until the runner daemon runs (bounded; not a timing assertion)
            if (tmp_path / "runner-started").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert (tmp_path / "runner-started").exists(), stderr.read_text()
        proc.terminate()
        assert proc.wait(timeout=30) == 0  # the node's status (the stub exits 0 on SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    notes = [ln for ln in log.read_text().splitlines() if ln.endswith("got SIGTERM")]
    assert notes == ["runner got SIGTERM", "node got SIGTERM"]


# =============================================================================================
# Tests: README and configuration reference


def test_readme_opens_with_exactly_the_local_commands() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert lines[0].startswith("# ")
    body = lines[1:]
    first = next(i for i, ln in enumerate(body) if ln.strip())
    assert body[first].startswith("```"), "the first thing after the title must be the code block"
    end = body.index("```", first + 1)
    assert body[first + 1:end] == README_COMMANDS


def test_readme_documents_every_route_and_cli_command() -> None:
    text = (ROOT / "README.md").read_text()
    for route in ("POST /submit", "POST /submit/batch", "/health", "/status", "/height", "/block/{height}",
                  "/tx/{hash}", "/tx/{hash}/receipt", "/account/{address}", "/state/proof?key="):
        assert route in text, route
    for path in CLI:
        assert "cowboy-node " + " ".join(path) in text, path


def test_readme_documents_the_cip11_phases_the_udp_port_and_runner_commands_of_the_contract() -> None:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Runners (CIP-11)"):text.index("## CLI")]
    for phase, flag in ((1, "CIP11_TRANSPORT_ENABLED"), (2, "CIP11_PRESENT_FIRST_ENABLED"), (3, "CIP11_POLL_DISABLED")):
        assert re.search(rf"^\| {phase} \|[^\n]*{flag}", section, re.M), phase
    assert re.search(r"^\| 0 \| none \|", section, re.M)
    assert "--cip11-phase" in section and "4433" in section and "UDP" in section and "410" in section
    commands = [shlex.split(ln.split("#")[0]) for ln in section.splitlines() if ln.startswith("cowboy-runner ")]
    assert [c[1] for c in commands] == ["init", "register", "run", "status"]  # init -> register -> run
    for argv in commands:
        assert cli_problems(argv[1:], "cowboy-runner") == [], argv


CONFIG_KEYS = {
    "node": {"chain_id", "block_time_ms", "data_dir"},
    "storage": {"retain_blocks"},
    "snapshot": {"interval_blocks", "keep"},
    "rpc": {"addr", "max_body_bytes", "max_submit_batch",
            "max_connections", "max_connections_per_ip", "header_timeout_ms", "idle_timeout_ms", "fd_reserve",
            "read_max_concurrent", "read_max_queue", "read_max_wait_ms", "read_call_timeout_ms",
            "read_budget_ms_per_s", "read_per_client_rps", "subscription_max", "subscription_buffer_bytes",
            "subscription_send_timeout_ms", "subscription_max_lag_blocks", "subscription_replay_per_s"},
    "quic": {"addr"},
    "metrics": {"addr", "enabled"},
    "log": {"format", "level"},
    "mempool": {"max_txs", "max_bytes", "max_txs_per_sender", "max_nonce_gap", "replacement_bump_percent",
                "max_queued", "max_queued_per_sender", "queued_lifetime_s", "journal"},
    "p2p": {"addr", "peers", "max_message_bytes"},
    "consensus": {"delta_ms", "election", "skip_timeout_views"},
}


def test_config_example_documents_every_key_with_its_default() -> None:
    doc = tomllib.loads((ROOT / "configs" / "config.example.toml").read_text())
    assert {s: set(body) for s, body in doc.items()} == CONFIG_KEYS
    assert doc["rpc"]["addr"] == "127.0.0.1:4000" and doc["quic"]["addr"] == "127.0.0.1:4433"
    assert doc["metrics"] == {"addr": "127.0.0.1:9464", "enabled": True}
    assert doc["log"] == {"format": "console", "level": "info"}
    assert doc["node"]["block_time_ms"] == 1000 and doc["node"]["data_dir"] == "data"
    assert doc["rpc"]["max_body_bytes"] == 1048576 and doc["rpc"]["max_submit_batch"] == 1000
    assert {k: doc["rpc"][k] for k in ("max_connections", "max_connections_per_ip", "header_timeout_ms",
                                       "idle_timeout_ms", "fd_reserve")} == {
        "max_connections": 1024, "max_connections_per_ip": 64, "header_timeout_ms": 10000, "idle_timeout_ms": 30000,
        "fd_reserve": 256}
    assert {k: v for k, v in doc["rpc"].items() if k.startswith("read_")} == {
        "read_max_concurrent": 1, "read_max_queue": 32, "read_max_wait_ms": 5000, "read_call_timeout_ms": 1000,
        "read_budget_ms_per_s": 250, "read_per_client_rps": 10}
    assert {k: v for k, v in doc["rpc"].items() if k.startswith("subscription_")} == {
        "subscription_max": 1000, "subscription_buffer_bytes": 262144, "subscription_send_timeout_ms": 5000,
        "subscription_max_lag_blocks": 1000, "subscription_replay_per_s": 2000}
    assert doc["mempool"] == {"max_txs": 10000, "max_bytes": 33554432, "max_txs_per_sender": 64,
                              "max_nonce_gap": 64, "replacement_bump_percent": 10, "max_queued": 1024,
                              "max_queued_per_sender": 16, "queued_lifetime_s": 600, "journal": True}
    assert doc["p2p"] == {"addr": "127.0.0.1:26602", "peers": [], "max_message_bytes": 8388608}
    assert doc["consensus"] == {"delta_ms": 0, "election": "random", "skip_timeout_views": 10}


def test_config_example_is_accepted_by_the_node_and_matches_what_init_writes(tmp_path: Path) -> None:
    from cowboy_node.node.config import NodeConfig, load_config, render_config

    (tmp_path / "config.toml").write_text((ROOT / "configs" / "config.example.toml").read_text())
    cfg = load_config(tmp_path)
    assert cfg == NodeConfig(home=tmp_path, chain_id="cowboy-devnet-1", block_time_ms=1000)
    written = tomllib.loads(render_config(chain_id="c", rpc_addr="127.0.0.1:4000", quic_addr="127.0.0.1:4433",
                                          metrics_addr="127.0.0.1:9464", block_time_ms=1000))
    assert {s: set(body) for s, body in written.items()} == CONFIG_KEYS

"""runner.toml's settings are declared once (issue 32 item 4): every key is one field of a settings dataclass
(``cowboy_runner/settings_schema.py``), from which the loader's checks, the defaults and the key reference
``docs/runner-settings.md`` come; the keys the executors share with runner.toml (the custom executor's sandbox,
the HTTP/LLM/MCP limits) are declared in one class each, not once per side."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from cowboy_runner import config as runner_config
from cowboy_runner.config import SCHEMA, ConfigError, RunnerSettings, parse_settings, reference, render_template
from cowboy_runner.executor_settings import executors_config
from cowboy_runner.executors.config import (
    CustomConfig,
    HttpConfig,
    HttpLimits,
    LlmConfig,
    LlmLimits,
    McpConfig,
    McpLimits,
    SandboxSettings,
)
from cowboy_runner.executors.toml_settings import (
    CustomExecutorSettings,
    ExecutorSettings,
    HttpExecutorSettings,
    LlmExecutorSettings,
    McpExecutorSettings,
)
from cowboy_runner.settings_schema import SPEC, default_text, specs

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
RUNNER = '[runner]\nvalidator_rpc = "http://127.0.0.1:4000"\n'
REST = '\n[capabilities]\njob_types = ["http"]\nmax_concurrent_jobs = 2\n[rate_card.http]\nbase_price = "1"\n' \
       'price_per_unit = "0"\n'
SHARED = ((SandboxSettings, (CustomConfig, CustomExecutorSettings)), (HttpLimits, (HttpConfig, HttpExecutorSettings)),
          (LlmLimits, (LlmConfig, LlmExecutorSettings)), (McpLimits, (McpConfig, McpExecutorSettings)))
"""Each class of keys the executors share with runner.toml, and the two sides that inherit it."""


def _toml(section: str, lines: str) -> str:
    """A whole runner.toml with ``lines`` in ``[section]``."""
    if section == "runner":
        return RUNNER + lines + REST
    return RUNNER + REST + f"[{section}]\n{lines}"


def _parse(text: str) -> RunnerSettings:
    return parse_settings(text, Path("/home/r"))


def _all_keys() -> list[str]:
    return [f"{section}.{spec.key or f.name}" for section, cls in SCHEMA for f, spec in specs(cls)]


# -- declared once ----------------------------------------------------------------------------
def test_every_key_is_declared_once() -> None:
    keys = _all_keys()
    assert len(keys) == len(set(keys))
    assert len(keys) > 60  # every section's keys, not an empty schema
    for _section, cls in SCHEMA:  # every field of a section is a declared key, with a default or required
        for f in dataclasses.fields(cls):
            if SPEC not in f.metadata:
                assert f.name in ("http", "llm", "mcp", "custom", "adapters", "plugins", "programs"), f.name
            elif not f.metadata[SPEC].required:
                assert f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


@pytest.mark.parametrize(("limits", "sides"), SHARED, ids=[s[0].__name__ for s in SHARED])
def test_shared_keys_are_declared_in_one_class_only(limits: type, sides: tuple[type, ...]) -> None:
    names = {f.name for f in dataclasses.fields(limits)}
    for side in sides:
        assert issubclass(side, limits)
        assert not names & set(inspect.get_annotations(side)), side  # no second declaration


def test_the_sandbox_keys_are_declared_nowhere_else() -> None:
    """No class of the settings modules but ``SandboxSettings`` declares a sandbox key (they were declared twice:
    in ``CustomExecutorSettings`` and in ``CustomConfig``)."""
    modules = ("cowboy_runner/config.py", "cowboy_runner/executor_settings.py", "cowboy_runner/executors/config.py",
               "cowboy_runner/executors/toml_settings.py", "cowboy_runner/executors/custom.py")
    names = {f.name for f in dataclasses.fields(SandboxSettings)}
    declared: dict[str, list[str]] = {}
    for module in modules:
        for node in ast.walk(ast.parse((ROOT / module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                            and stmt.target.id in names:
                        declared.setdefault(stmt.target.id, []).append(node.name)
    assert declared == {name: ["SandboxSettings"] for name in names}


def test_the_executors_get_the_declared_defaults() -> None:
    """The executors' defaults and the loader's are the same declaration (a minimal runner.toml → the
    executors' dataclass defaults)."""
    text = RUNNER + REST.replace('["http"]', '["http", "custom"]') + '[rate_card.custom]\nbase_price = "1"\n' \
        'price_per_unit = "0"\n[executors.custom]\n"' + "ab" * 32 + '" = ["/bin/true"]\n'
    cfg = executors_config(_parse(text))
    assert cfg.custom is not None and cfg.http is not None
    for limits, side in ((SandboxSettings, cfg.custom), (HttpLimits, cfg.http)):
        for f in dataclasses.fields(limits):
            assert getattr(side, f.name) == f.default, f.name


# -- the reference page -----------------------------------------------------------------------
def test_the_reference_page_is_the_generated_one() -> None:
    text = (DOCS / "runner-settings.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- BEGIN GENERATED: cowboy_runner.config.reference\(\) -->\n(.*)<!-- END GENERATED -->",
                  text, re.S)
    assert m is not None
    assert m.group(1) == reference(), "regenerate docs/runner-settings.md (command at its top)"
    for key in _all_keys():
        section, _, name = key.rpartition(".")
        assert f"### [{section}]" in text and f"| `{name}` |" in text


def test_keys_the_operator_guide_names_are_declared() -> None:
    """Every key of docs/runner.md's §2 tables is a declared key of its section."""
    guide = (DOCS / "runner.md").read_text(encoding="utf-8")
    section_text = guide[guide.index("## 2. runner.toml"):guide.index("## 3. Key file")]
    known = set(_all_keys())
    section = last = ""
    found = 0
    for line in section_text.splitlines():
        if m := re.match(r"### \[([a-z_.]+)", line):
            section = m.group(1).rstrip(".")
        elif line.startswith("| `"):
            cell = line.split("|")[1]
            for key in re.findall(r"`([a-z_.\"<>]+)`", cell):
                if key.startswith("executors.") and key.count(".") >= 2:
                    last = key.rsplit(".", 1)[0]
                elif key.startswith("executors."):
                    continue
                else:
                    key = f"{last if section == 'executors' else section}.{key}"
                if "<" in key or '"' in key:
                    continue
                assert key in known, key
                found += 1
    assert found >= 25


# -- parsing comes from the declarations ------------------------------------------------------
def _bad_value(kind: str) -> str:
    if m := re.match(r"integer >= (\d+)", kind):
        return str(int(m.group(1)) - 1)
    if m := re.match(r"number in [\d.]+\.\.([\d.]+)", kind):
        return str(float(m.group(1)) + 1)
    return {"seconds > 0": "0", "number > 0": "0", "boolean": '"yes"', "string": '""', "array of strings": "[1]",
            "URL": "1", "HOST:PORT": "1", "table": "1"}.get(kind, '"nope"')


CASES = [(section, spec.key or f.name, spec.kind) for section, cls in SCHEMA for f, spec in specs(cls)]


@pytest.mark.parametrize(("section", "key", "kind"), CASES, ids=[f"{s}.{k}" for s, k, _ in CASES])
def test_a_value_out_of_its_declared_bounds_is_refused_naming_the_key(section: str, key: str, kind: str) -> None:
    if section == "runner" and key == "validator_rpc":
        text = RUNNER.replace('"http://127.0.0.1:4000"', _bad_value(kind)) + REST
    else:
        text = _toml(section, f"{key} = {_bad_value(kind)}\n")
    with pytest.raises(ConfigError) as info:
        _parse(text)
    assert info.value.key == f"{section}.{key}", str(info.value)


def _written_default(f: dataclasses.Field[Any]) -> str | None:
    """The field's default as a TOML value (None: nothing to write: unset, required or a table)."""
    shown = default_text(f)
    return None if shown in ("unset", "required", "empty") else shown


@pytest.mark.parametrize(("section", "cls"), SCHEMA[1:], ids=[s for s, _ in SCHEMA[1:]])
def test_writing_every_default_out_means_the_same_as_leaving_it_out(section: str, cls: type) -> None:
    lines = "".join(f"{spec.key or f.name} = {v}\n" for f, spec in specs(cls)
                    if (v := _written_default(f)) is not None and f.name != "queue")
    assert _parse(_toml(section, lines)) == _parse(RUNNER + REST + f"[{section}]\n")


def test_the_schema_module_is_what_config_re_exports() -> None:
    assert runner_config.HttpExecutorSettings is HttpExecutorSettings
    assert runner_config.CustomExecutorSettings is CustomExecutorSettings
    assert ExecutorSettings() == _parse(RUNNER + REST).executors


def test_the_init_template_writes_the_declared_defaults() -> None:
    """``cowboy-runner init``'s runner.toml sets each key it writes to the declared default (no third copy)."""
    declared = {section: {spec.key or f.name: default_text(f) for f, spec in specs(cls)} for section, cls in SCHEMA}
    section, checked = "", 0
    for line in render_template("http://127.0.0.1:4000").splitlines():
        if m := re.fullmatch(r"\[([a-z_.]+)\]", line):
            section = m.group(1)
        elif " = " in line and not line.startswith("#") and section in declared and line != \
                'validator_rpc = "http://127.0.0.1:4000"':
            key, value = line.split(" = ", 1)
            assert declared[section][key] == value, (section, key)
            checked += 1
    assert checked >= 20

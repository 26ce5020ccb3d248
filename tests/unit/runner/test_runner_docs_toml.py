"""Every runner.toml example in the docs loads (issue 21 item 7): each ```toml block of docs/runner*.md, and any
other doc block with an ``[executors`` table (not a plugin's ``pyproject.toml``), is parsed by the real loader
(unknown keys are errors there, so a key the docs show but the loader lacks fails this test) and mapped onto the
executors' configuration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cowboy_runner.config import ConfigError, parse_settings
from cowboy_runner.executor_settings import executors_config

DOCS = Path(__file__).resolve().parents[3] / "docs"
BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
BASE = """
[runner]
validator_rpc = "http://127.0.0.1:4000"

[capabilities]
job_types = ["http", "llm", "mcp", "custom"]
http_domains = ["api.example.com"]
max_concurrent_jobs = 2

[rate_card.http]
base_price = "1"
price_per_unit = "0"
[rate_card.llm]
base_price = "1"
price_per_unit = "0"
[rate_card.mcp]
base_price = "1"
price_per_unit = "0"
[rate_card.custom]
base_price = "1"
price_per_unit = "0"
"""
"""Sections an executor-only example needs around it to be a whole runner.toml."""


def _examples() -> list[tuple[str, str]]:
    found = []
    for doc in sorted(DOCS.glob("*.md")):
        for i, m in enumerate(BLOCK.finditer(doc.read_text(encoding="utf-8"))):
            text = m.group(1)
            if "[project." in text:  # a plugin package's pyproject.toml, not a runner.toml
                continue
            if doc.name.startswith("runner") or "[executors" in text:
                found.append((f"{doc.name}#{i}", text))
    return found


EXAMPLES = _examples()


def test_the_docs_have_runner_toml_examples() -> None:
    assert any(name.startswith("runner-executors.md") for name, _ in EXAMPLES)


@pytest.mark.parametrize(("name", "text"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_docs_toml_example_loads(name: str, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    whole = text if "[runner]" in text else BASE + text
    settings = parse_settings(whole, Path("/home/r"))
    executors_config(settings)


def test_executors_example_reaches_the_executors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (text,) = [t for n, t in EXAMPLES if n.startswith("runner-executors.md") and "[executors.custom" in t]
    cfg = executors_config(parse_settings(BASE + text, Path("/home/r")))
    assert cfg.http is not None and cfg.llm is not None and cfg.mcp is not None and cfg.custom is not None
    assert cfg.http.max_redirects == 5 and cfg.http.user_agent == "cowboy-runner"
    assert "Cookie" in cfg.http.credential_headers and cfg.http.allowed_methods[0] == "GET"
    assert cfg.llm.api_key == "sk-test" and cfg.llm.response_format == "json_schema"
    assert dict(cfg.mcp.servers["search"].headers) == {"Authorization": "Bearer …"}
    assert cfg.mcp.servers["weather"].url == "http://127.0.0.1:9001/mcp"
    three = cfg.custom.executors[bytes.fromhex("00" * 31 + "03")]
    assert three.env == {"LANG": "C.UTF-8"} and three.cwd == "/srv/executor"
    assert cfg.custom.executors[bytes.fromhex("00" * 31 + "02")].argv == ("/usr/local/bin/short-form", "--json")
    assert cfg.custom.stderr_tail_bytes == 2048 and cfg.custom.enforce_memory_limit is True


@pytest.mark.parametrize(("extra", "key"), [
    ("[executors.http]\nallowed_methods = [\"TRACE\"]\n", "executors.http.allowed_methods"),
    ("[executors.http]\nmax_redirects = -1\n", "executors.http.max_redirects"),
    ("[executors.llm]\nresponse_format = \"xml\"\n", "executors.llm.response_format"),
    ("[executors.mcp.servers.s]\nheaders = {}\n", "executors.mcp.servers.s.url"),
    ("[executors.mcp.servers.s]\nurl = \"http://h/mcp\"\ncolour = 1\n", "executors.mcp.servers.s.colour"),
    ("[executors.custom.\"" + "ab" * 32 + "\"]\nenv = {}\n", "executors.custom." + "ab" * 32 + ".argv"),
    ("[executors.custom.\"" + "ab" * 32 + "\"]\nargv = [\"/x\"]\nenv = { A = 1 }\n",
     "executors.custom." + "ab" * 32 + ".env.A"),
])
def test_new_keys_are_checked_and_errors_name_them(extra: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(BASE + extra, Path("/home/r"))
    assert str(info.value).startswith(f"runner.toml: {key}: ")

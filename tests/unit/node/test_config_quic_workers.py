"""config.toml ``[quic] workers``: default 1 (QUIC in the validator process), bounds, errors naming the key,
and the value reaching the transport's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.node.config import load_config, render_config


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "config.toml").write_text(text)
    return tmp_path


def test_default_is_one_worker(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "")).quic_workers == 1


def test_workers_is_read(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "[quic]\nworkers = 3\n")).quic_workers == 3


@pytest.mark.parametrize("value", ["0", "65", "-1", '"2"', "2.0"])
def test_out_of_range_or_mistyped_is_refused_naming_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(_write(tmp_path, f"[quic]\nworkers = {value}\n"))
    assert e.value.key == "quic.workers"


def test_rendered_config_documents_the_key_and_keeps_the_default(tmp_path: Path) -> None:
    text = render_config(chain_id="c", rpc_addr="127.0.0.1:4000", quic_addr="127.0.0.1:4433",
                         metrics_addr="127.0.0.1:9464", block_time_ms=1000)
    assert "# workers = 1" in text
    assert load_config(_write(tmp_path, text)).quic_workers == 1

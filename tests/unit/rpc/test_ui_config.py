"""``config.toml`` ``[ui]``: ``peers`` and ``cors_origins`` are origins (``http(s)://HOST[:PORT]``), at most 16
each; anything else stops start-up with an error naming the file and the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from cowboy_node.chain.config_errors import ConfigError
from cowboy_node.node.config import load_config


def _load(tmp_path: Path, body: str) -> object:
    (tmp_path / "config.toml").write_text(body)
    return load_config(tmp_path)


def test_ui_defaults_to_no_peers_and_no_cross_origin_reader(tmp_path: Path) -> None:
    cfg = _load(tmp_path, "")
    assert (cfg.ui_peers, cfg.ui_cors_origins) == ((), ())  # type: ignore[attr-defined]


def test_ui_peers_and_cors_origins_are_read(tmp_path: Path) -> None:
    cfg = _load(tmp_path, '[ui]\npeers = ["http://10.0.0.2:4000", "HTTPS://V3.example"]\n'
                          'cors_origins = ["http://10.0.0.1:4000"]\n')
    assert cfg.ui_peers == ("http://10.0.0.2:4000", "https://v3.example")  # type: ignore[attr-defined]
    assert cfg.ui_cors_origins == ("http://10.0.0.1:4000",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("body", "key"), [
    ('[ui]\ncors_origins = ["*"]\n', "ui.cors_origins[0]"),
    ('[ui]\npeers = ["http://a:1", "http://a:1/status"]\n', "ui.peers[1]"),
    ('[ui]\npeers = [4000]\n', "ui.peers[0]"),
    ('[ui]\npeers = "http://a:1"\n', "ui.peers"),
    ('[ui]\npeers = [' + ", ".join(f'"http://a:{i}"' for i in range(1, 18)) + "]\n", "ui.peers"),
    ('[ui]\ncolour = "red"\n', "ui.colour"),
])
def test_a_bad_ui_entry_names_the_file_and_the_key(tmp_path: Path, body: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, body)
    assert f"config.toml: {key}:" in str(info.value), str(info.value)

"""The rendered config.toml is pinned byte for byte (``cowboy-node init`` and ``testnet`` write it).

The two files under ``tests/vectors/config/`` were generated once from ``render_config`` before it was split into
sections (issue 32): a refactor that changes one byte of what operators get fails here. Regenerate them only for
a deliberate change of the file, and say so in the CHANGELOG.
"""

from __future__ import annotations

from pathlib import Path

from cowboy_node.node.config import PeerAddress, load_config, render_config

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "config"


def _default() -> str:
    return render_config(chain_id="cowboy-devnet", rpc_addr="127.0.0.1:8545", quic_addr="0.0.0.0:4433",
                         metrics_addr="127.0.0.1:9100", block_time_ms=None)


def _testnet() -> str:
    others = ["http://127.0.0.1:8602", "http://127.0.0.1:8603"]
    return render_config(chain_id="cowboy-testnet", rpc_addr="127.0.0.1:8601", quic_addr="127.0.0.1:4501",
                         metrics_addr="127.0.0.1:9601", block_time_ms=500, p2p_addr="127.0.0.1:26601",
                         p2p_peers=[PeerAddress(bytes(range(32)), "127.0.0.1", 26602),
                                    PeerAddress(bytes([7]) * 32, "::1", 26603)],
                         ui_peers=others, ui_cors_origins=others)


def test_the_default_rendered_config_is_byte_identical_to_the_golden_file() -> None:
    assert _default().encode() == (VECTORS / "default.toml").read_bytes()


def test_a_testnet_rendered_config_with_peers_and_ui_is_byte_identical_to_the_golden_file() -> None:
    assert _testnet().encode() == (VECTORS / "testnet.toml").read_bytes()


def test_the_golden_configs_load(tmp_path: Path) -> None:
    """The pinned files are valid configs (what ``cowboy-node run`` reads back)."""
    for name in ("default.toml", "testnet.toml"):
        home = tmp_path / name.removesuffix(".toml")
        home.mkdir()
        (home / "config.toml").write_bytes((VECTORS / name).read_bytes())
        load_config(home)

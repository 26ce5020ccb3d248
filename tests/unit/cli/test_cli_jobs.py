"""Job CLI commands against a real in-process node producing blocks in a background thread.

``tx register-runner`` with the example capabilities, ``tx submit-job --spec configs/examples/job-http.json``
as is (``--wait``), ``query job`` (record, ``--status``, ``--results`` after a scripted runner reveals). A spec
that fails its checks exits 2 and submits nothing; a job nobody can serve is a failed receipt and exit 1.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cowboy_protocol.crypto.address import to_checksum_address
from cowboy_protocol.types.job_instructions import JobResultSubmit
from cowboy_protocol.types.jobspec import derive_job_id
from cowboy_protocol.types.transaction import Transaction
from tests.helpers import ALICE, ALICE_SK, make_tx
from tests.unit.node_harness import (
    CAPS_EXAMPLE,
    JOB_EXAMPLE,
    RUNNER_SKS,
    RUNNERS,
    STAKE,
    LiveNode,
    run_cli,
    serving,
    write_keys,
)

WAIT_S = 60.0
"""Upper bound on waits for blocks (not asserted: only a guard against hanging)."""


@pytest.fixture(scope="module")
def live() -> Iterator[LiveNode]:
    with serving(LiveNode(block_time_ms=50)) as n:
        yield n


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_keys(tmp_path_factory.mktemp("keys"), {"alice": ALICE_SK, "runner": RUNNER_SKS[0]})


@pytest.fixture(scope="module")
def registered(live: LiveNode, keys: dict[str, Path]) -> bytes:
    """RUNNERS[0] registered with configs/examples/runner-capabilities.json (through the CLI)."""
    capsys = _Capture()
    rc, out, err = capsys.run(["tx", "register-runner", "--key", str(keys["runner"]), "--stake", str(STAKE),
                               "--capabilities", str(CAPS_EXAMPLE), "--wait", "--rpc", live.url,
                               "--timeout", str(WAIT_S)])
    assert rc == 0 and out["receipt"]["status"] == "success", (err, out)
    return RUNNERS[0]


class _Capture:
    """run_cli for module fixtures (no capsys there): capture stdout/stderr by hand."""

    def run(self, argv: list[str]) -> tuple[int, Any, str]:
        import contextlib
        import io

        from cowboy_node.cli.main import build_parser

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                args = build_parser().parse_args(argv)
                rc: int = args.func(args)
            except SystemExit as e:
                rc = int(e.code or 0)
        text = out.getvalue()
        return rc, json.loads(text) if text.strip() else None, err.getvalue()


def _mempool_and_nonce(live: LiveNode) -> tuple[int, int]:
    return len(live.node.mempool), live.node.api.account(ALICE)["next_pending_nonce"]


def _send(live: LiveNode, tx: Transaction) -> None:
    live.node.api.submit_transaction(tx.to_bytes())


def _wait_for(predicate: Any) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def test_submit_the_example_job_wait_query_and_read_the_results(
        live: LiveNode, keys: dict[str, Path], registered: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    rpc = ["--rpc", live.url]
    rc, out, err = run_cli(["tx", "submit-job", "--key", str(keys["alice"]), "--spec", str(JOB_EXAMPLE), "--wait",
                            "--timeout", str(WAIT_S), *rpc], capsys)
    assert rc == 0, err
    assert out["receipt"]["status"] == "success"
    assert "job.submitted" in [e["topic"] for e in out["receipt"]["events"]]
    # The job id is derived from the transaction hash and index 0, so it is known at submission.
    job_id = bytes.fromhex(out["job_id"][2:])
    assert job_id == derive_job_id(bytes.fromhex(out["tx_hash"][2:]), 0)
    assert out["job"]["status"] == "assigned" and out["job"]["committee"] == [to_checksum_address(registered)]
    assert out["job"]["assignment_height"] == out["height"]
    assert out["job"]["deadline_block"] == out["height"] + 100

    rc, doc, err = run_cli(["query", "job", out["job_id"], *rpc], capsys)
    assert rc == 0, err
    assert doc["job_id"] == out["job_id"] and doc["status"] == "assigned"
    assert doc["spec"]["job_type"]["url"] == "https://example.com/data.json"
    assert (doc["spec"]["submitter"], doc["escrow"]) == (to_checksum_address(ALICE), "1000000")

    # The scripted runner reveals (M == 1, no commit needed); the job settles in that block.
    _send(live, make_tx(RUNNER_SKS[0], 1, JobResultSubmit(job_id, b'{"price": 7}', b"", 0),
                        cycles_limit=1_000_000, cells_limit=20_000))
    _wait_for(lambda: live.node.api.job_status(job_id)["status"] == "completed")  # type: ignore[index]
    rc, res, err = run_cli(["query", "job", out["job_id"], "--results", *rpc], capsys)
    assert rc == 0, err
    assert res["outcome"] == {"ok": True, "reason": "verified", "result": "0x" + b'{"price": 7}'.hex(),
                              "is_json": True, "result_json": {"price": 7}}
    rc, st, err = run_cli(["query", "job", out["job_id"], "--status", *rpc], capsys)
    assert rc == 0 and st["status"] == "completed" and st["revealed"] == [to_checksum_address(registered)]


def test_submit_without_wait_prints_the_job_id_at_once(live: LiveNode, keys: dict[str, Path], registered: bytes,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(["tx", "submit-job", "--key", str(keys["alice"]), "--spec", str(JOB_EXAMPLE),
                            "--no-wait", "--rpc", live.url], capsys)
    assert rc == 0, err
    assert set(out) == {"job_id", "tx_hash"}
    assert out["job_id"] == "0x" + derive_job_id(bytes.fromhex(out["tx_hash"][2:]), 0).hex()
    job_id = bytes.fromhex(out["job_id"][2:])
    _wait_for(lambda: live.node.api.job(job_id))


def test_job_nobody_can_serve_is_a_failed_receipt_and_exit_3(
        live: LiveNode, keys: dict[str, Path], registered: bytes, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "elsewhere.json"
    doc = json.loads(JOB_EXAMPLE.read_text())
    doc["job_type"]["url"] = "https://elsewhere.net/x"
    spec.write_text(json.dumps(doc))
    rc, out, err = run_cli(["tx", "submit-job", "--key", str(keys["alice"]), "--spec", str(spec), "--wait",
                            "--timeout", str(WAIT_S), "--rpc", live.url], capsys)
    assert rc == 3
    assert (out["receipt"]["status"], out["receipt"]["error_code"]) == ("failed", "no_eligible_runner")
    assert out["error"]["code"] == "no_eligible_runner" and "no_eligible_runner" in err
    rc, _, err = run_cli(["query", "job", out["job_id"], "--rpc", live.url], capsys)
    assert rc == 1 and "job_not_found" in err


@pytest.mark.parametrize("mutate,expected", [
    (lambda d: d.update(gpus=8), "invalid_job_spec: gpus: unknown key"),
    (lambda d: d["job_type"].update(method=7), "job_type.method"),
    (lambda d: d.pop("max_price"), "max_price: missing"),
    (lambda d: d["verification"].update(runners="one"), "verification.runners"),
    (lambda d: d.update(timeout_blocks=5), "job_timeout_invalid"),
    (lambda d: d.update(max_price="0"), "job_price_invalid"),
])
def test_bad_spec_exits_2_names_the_field_and_submits_nothing(
        live: LiveNode, keys: dict[str, Path], tmp_path: Path, mutate: Any, expected: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(JOB_EXAMPLE.read_text())
    mutate(doc)
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps(doc))
    before = _mempool_and_nonce(live)
    rc, out, err = run_cli(["tx", "submit-job", "--key", str(keys["alice"]), "--spec", str(spec),
                            "--rpc", live.url], capsys)
    assert rc == 2 and out is None, err
    assert "--spec" in err and expected in err
    assert _mempool_and_nonce(live) == before


@pytest.mark.parametrize("content", ["{not json", "[]", ""])
def test_unusable_spec_files_exit_2(keys: dict[str, Path], tmp_path: Path, content: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(content)
    # No node at this address: the file is refused before anything is sent.
    rc, _, err = run_cli(["tx", "submit-job", "--key", str(keys["alice"]), "--spec", str(spec),
                          "--rpc", "http://127.0.0.1:9"], capsys)
    assert rc == 2 and "--spec" in err


def test_missing_spec_file_exits_2(keys: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["tx", "submit-job", "--key", str(keys["alice"]), "--spec", str(tmp_path / "nope.json"),
                          "--rpc", "http://127.0.0.1:9"], capsys)
    assert rc == 2 and "cannot read" in err


def test_query_job_with_a_bad_or_unknown_id(live: LiveNode, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = run_cli(["query", "job", "0x1234", "--rpc", live.url], capsys)
    assert rc == 2 and "job id" in err
    rc, _, err = run_cli(["query", "job", "0x" + "42" * 32, "--rpc", live.url], capsys)
    assert rc == 1 and "job_not_found" in err
    rc, _, _ = run_cli(["query", "job", "0x" + "42" * 32, "--status", "--results"], capsys)
    assert rc == 2


def _signed_cells_limit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, int]:
    """Run a ``--sign-only`` command; (cells_limit of the printed transaction, its instruction's encoded size)."""
    from cowboy_node.cli.main import build_parser
    from cowboy_protocol.codec import encode
    from cowboy_protocol.types.instructions import instruction_to_cbor

    args = build_parser().parse_args(argv)
    assert args.func(args) == 0
    line = capsys.readouterr().out.strip()
    tx = Transaction.from_bytes(bytes.fromhex(line[2:]))
    return tx.cells_limit, len(encode(instruction_to_cbor(tx.instruction)))


def test_default_cells_limit_of_an_m_3_job_pays_for_its_candidate_snapshot(
        live: LiveNode, keys: dict[str, Path], registered: bytes, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Block S stores the candidate snapshot of an M > 1 job, charged by its size (CIP-11 §9.2): the default
    cells limit is the documented 2 × instruction bytes + 256 per seat + 4,096, plus 128 per registered runner
    (the /runners/active count) when M > 1; an M == 1 job adds nothing for a snapshot."""
    doc = json.loads(JOB_EXAMPLE.read_text())
    doc["verification"] = {"mode": "majority_vote", "runners": 3, "threshold": 2}
    spec = tmp_path / "m3.json"
    spec.write_text(json.dumps(doc))
    with urllib.request.urlopen(f"{live.url}/runners/active?limit=1", timeout=5) as r:
        count = json.loads(r.read())["count"]
    assert count >= 1
    base = ["tx", "submit-job", "--key", str(keys["alice"]), "--sign-only", "--rpc", live.url, "--spec"]
    m3, size3 = _signed_cells_limit([*base, str(spec)], capsys)
    assert m3 == 2 * size3 + 256 * 3 + 4_096 + 128 * count
    m1, size1 = _signed_cells_limit([*base, str(JOB_EXAMPLE)], capsys)
    assert m1 == 2 * size1 + 256 * 1 + 4_096

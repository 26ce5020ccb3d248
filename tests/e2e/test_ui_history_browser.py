"""The network page remembers and shows (issue 37 item 6), in a real headless Chromium against real processes:

* a testnet written by ``cowboy-node testnet`` works across its validators: validator-0's page reads validator-1's
  ``/status`` cross-origin (the generator sets ``[ui] peers`` and ``cors_origins``), and its charts (block
  interval, transactions/s, proposal→finalization, present runners) draw what the page has seen;
* a failed job keeps its reason on the page, and a transaction stays listed after the node's snapshot (the last
  30 transactions of the last 20 blocks) no longer holds it.

Skips like tests/integration/test_ui_browser.py when no Chromium binary exists.
"""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from playwright.sync_api import expect, sync_playwright

from cowboy_protocol.crypto.address import parse_address
from cowboy_protocol.keys import load_account_private_key
from cowboy_protocol.types.instructions import Transfer
from tests.helpers import make_tx
from tests.integration.nodeproc import BIN, cli, wait_for
from tests.integration.runnerproc import HttpServer, runner_world, submit_job_call
from tests.integration.test_ui_browser import CHROMIUM, NO_CHROMIUM

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM), pytest.mark.timeout(600)]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


def _rpc(home: Path) -> str:
    conf = (home / "config.toml").read_text().split("[rpc]", 1)[1]
    return "http://" + next(line.split('"')[1] for line in conf.splitlines() if line.startswith("addr"))


def test_testnet_pages_read_each_other_and_chart_the_last_minutes(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    out = tmp_path / "testnet-home"
    res = cli("testnet", "--validators", "2", "--output", str(out), "--base-port", "0", "--block-time-ms", "500",
              check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    homes = [out / "validator-0", out / "validator-1"]
    procs = [subprocess.Popen([str(BIN / "cowboy-node"), "run", "--home", str(h)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for h in homes]
    try:
        def finalizing() -> bool:
            try:
                return all(int(_get(_rpc(h) + "/status")["height"]) >= 2 for h in homes)
            except OSError:
                return False
        wait_for("both validators finalize", finalizing, timeout=90)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(_rpc(homes[0]) + "/ui")
                expect(page.locator("#conn")).to_have_text("live", timeout=15_000)
                other = _rpc(homes[1])
                expect(page.locator(f'#remote tr[data-remote="{other}"] td').nth(5)).to_have_text("live",
                                                                                                  timeout=15_000)
                for chart in ("chart-interval", "chart-rate", "chart-finality", "chart-present"):
                    svg = page.locator(f"#{chart}")
                    expect(svg.locator("path")).to_have_count(1, timeout=30_000)
                    assert int(svg.get_attribute("data-points") or 0) >= 1, chart
                assert errors == [], errors
            finally:
                browser.close()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)


class FailingServer(HttpServer):
    """The job target: every request answers HTTP 500, so the job fails with ``runner_error:http_status``."""

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        return web.Response(status=500, text="boom")


def test_failed_job_keeps_its_reason_and_transactions_outlive_the_snapshot(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    with runner_world(tmp_path) as (node, runner, actor), FailingServer() as server:
        runner.start()
        try:
            runner.wait_session()
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
                try:
                    page = browser.new_page()
                    page.goto(node.url + "/ui")
                    expect(page.locator("#conn")).to_have_text("live", timeout=15_000)
                    call = submit_job_call(node, actor, f"http://127.0.0.1:{server.port}/price")
                    job_id, tx_hash = call["result"], call["tx_hash"]
                    failed = page.locator(f'#failures tr[data-failed-job="{job_id}"] td').nth(1)
                    expect(failed).to_have_text("runner_error:http_status", timeout=60_000)
                    job = page.locator(f'#jobs tr[data-job-id="{job_id}"] td')
                    expect(job.nth(6)).to_have_text("runner_error:http_status")
                    expect(page.locator("#job-phases")).to_contain_text("1 failed")
                    expect(page.locator(f'#txs tr[data-tx="{tx_hash}"]')).to_have_count(1)

                    # 40 more transactions push the job's call out of the node's snapshot (30 at most)...
                    sk, me = load_account_private_key(node.home / "keys" / "faucet.key")
                    nonce = int(node.get(f"/account/0x{me.hex()}")["next_pending_nonce"])
                    to = parse_address(runner.address)
                    for i in range(40):
                        tx = make_tx(sk, nonce + i, Transfer(to=to, amount=1), chain_id="cowboy-it-1")
                        status, body = node.post_tx(tx.to_bytes())
                        assert status == 200, body
                    wait_for("the snapshot to drop the job's transaction", lambda: tx_hash not in {
                        t["hash"] for t in _get(node.url + "/ui/snapshot")["transactions"]}, timeout=60)
                    rows = page.locator("#txs tbody tr")
                    wait_for("the page to list more transactions than a snapshot holds", lambda: rows.count() > 30,
                             timeout=30)
                    # ...and the page still lists it, and the failure with its reason.
                    expect(page.locator(f'#txs tr[data-tx="{tx_hash}"]')).to_have_count(1)
                    expect(failed).to_have_text("runner_error:http_status")
                finally:
                    browser.close()
        finally:
            runner.stop()

"""The network page (``/ui``) in a real headless Chromium, driven by Playwright against real processes.

A ``cowboy-node`` (250 ms blocks, QUIC transport on) and a registered ``cowboy-runner run`` with a session: the
page loads with no console error, the height it shows increases, the runner shows a live session, an actor's
timer appears, a job submitted during the test appears and reaches ``settled``; then the node is stopped and
the page says its RPC is unreachable while staying responsive. Restarted with ``[ui] peers`` and
``cors_origins``, a page on an allowed origin reads the node's ``/status`` cross-origin, a page on another origin
is refused by the browser.

Chromium is Debian's ``chromium`` package (``apt-get install chromium``) or the binary ``COWBOY_CHROMIUM``
names; Playwright only drives it (no ``playwright install``). The test skips, naming what it looked for, only
when no such binary exists. ``COWBOY_UI_SCREENSHOT=docs/ui.png`` also saves the screenshot there.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

from tests.integration.nodeproc import cli
from tests.integration.runnerproc import HttpServer, runner_world, submit_job

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome")
"""Executables looked up on PATH when ``COWBOY_CHROMIUM`` is not set."""

TICKER = '''import pvm_host


def arm(payload):
    return pvm_host.schedule_timer(pvm_host.current_block() + 100000, b"later")


def handle_timer(payload):
    return b""
'''


def find_chromium() -> tuple[str | None, str]:
    """``COWBOY_CHROMIUM`` if set (it must be executable), else the first of :data:`CHROMIUM_NAMES` on PATH; and,
    when there is none, why."""
    explicit = os.environ.get("COWBOY_CHROMIUM")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit, ""
        return None, f"COWBOY_CHROMIUM={explicit!r} is not an executable file"
    found = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    return found, "" if found else (f"no Chromium binary: none of {', '.join(CHROMIUM_NAMES)} is on PATH "
                                    f"({os.environ.get('PATH', '')}); Debian: apt-get install chromium")


CHROMIUM, NO_CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)


def _deploy_ticker(node: Any, directory: Path) -> str:
    """Deploy an actor and have it schedule one far-future timer; returns its address."""
    faucet = str(node.home / "keys" / "faucet.key")
    src = directory / "ticker.py"
    src.write_text(TICKER)
    actor: str = json.loads(cli("tx", "deploy", "--key", faucet, "--source", str(src), "--rpc", node.url,
                                "--timeout", "30").stdout)["address"]
    armed = json.loads(cli("tx", "call", "--key", faucet, "--actor", actor, "--handler", "arm", "--rpc", node.url,
                           "--wait", "--timeout", "30").stdout)
    assert armed["receipt"]["status"] == "success", armed
    return actor


def _deploy_into(out: dict[str, Any], node: Any, directory: Path) -> None:
    """:func:`_deploy_ticker` for a thread: ``out["address"]``, or ``out["error"]``."""
    try:
        out["address"] = _deploy_ticker(node, directory)
    except BaseException as e:  # reported by the test when it reads the address
        out["error"] = e


def _until(cond: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _text(page: Page, selector: str) -> str:
    return page.locator(selector).inner_text(timeout=5000).strip()


def test_page_shows_the_network_live_and_says_when_the_node_is_unreachable(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    errors: list[str] = []

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            errors.append(f"{msg.text} @ {msg.location}")

    with runner_world(tmp_path) as (node, runner, actor), HttpServer() as server:
        runner.start()  # its session comes up while the browser starts; the page shows when it is up
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1100})
                    page.on("console", on_console)
                    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
                    page.goto(node.url + "/ui")
                    # Locators and expect() only: the page's CSP forbids eval, which wait_for_function uses.
                    expect(page.locator("#conn")).to_have_text("live", timeout=15_000)
                    # New blocks are pushed (GET /subscribe?topic=blocks): the page fetches the snapshot when one
                    # is announced instead of only on its one-second poll (issue 36 §2, "the live page uses it").
                    expect(page.locator("#conn")).to_have_attribute("data-push", "open", timeout=15_000)
                    # An actor called while the page watches (its timer shows), deployed meanwhile.
                    deployed: dict[str, Any] = {}
                    deployer = threading.Thread(target=_deploy_into, args=(deployed, node, tmp_path), daemon=True)
                    deployer.start()

                    first = int(_text(page, "#height"))
                    _until(lambda: int(_text(page, "#height")) > first, "the shown height to increase")

                    me = page.locator('#validators tr[data-validator="0"]')
                    expect(me).to_contain_text("this node")
                    expect(me).to_contain_text("leader")
                    row = page.locator(f'#runners tr[data-runner="{runner.address.lower()}"]')
                    expect(row.locator("td").nth(4)).to_have_text("yes", timeout=40_000)  # session here
                    deployer.join(90)
                    assert "address" in deployed, f"deploying the timer actor failed: {deployed.get('error')!r}"
                    ticker = deployed["address"]
                    timer = page.locator(f'#timers tr[data-actor="{ticker.lower()}"][data-timer]')
                    expect(timer).to_have_count(1, timeout=15_000)
                    expect(timer.locator("td").nth(3)).to_have_text("handle_timer")

                    job_id = "0x" + submit_job(node, actor, f"http://127.0.0.1:{server.port}/price").hex()
                    job = page.locator(f'#jobs tr[data-job-id="{job_id}"]')
                    expect(job.locator(".phase")).to_have_text("settled", timeout=60_000)
                    history = job.locator("td").nth(5).inner_text()
                    steps = [step.split("@")[0] for step in history.split(" → ")]
                    # In chain order; a slow ack under load may add a re-selection (a second "assigned").
                    assert steps[0] == "submitted" and steps[-1] == "settled", history
                    assert steps.index("assigned") < steps.index("revealed") < len(steps) - 1, history
                    assert server.hits == 1
                    assert errors == [], errors  # every request so far answered: no console error at all

                    page.screenshot(path=str(tmp_path / "ui.png"), full_page=True)
                    target = os.environ.get("COWBOY_UI_SCREENSHOT")
                    if target:
                        shutil.copyfile(tmp_path / "ui.png", target)

                    shown = _text(page, "#height")
                    node.terminate()
                    expect(page.locator("#conn")).to_contain_text("unreachable", timeout=15_000)
                    age = _text(page, "#conn")
                    assert "retrying" in age, age
                    # Not frozen: scripts still run, the status line keeps counting, the last data stays shown
                    # (awaited by the browser, not raced against a fixed delay).
                    assert page.evaluate("1 + 1") == 2
                    expect(page.locator("#conn")).not_to_have_text(age, timeout=15_000)
                    assert _text(page, "#height") == shown

                    # [ui]: other validators on the page, read cross-origin only by origins they allow.
                    # "localhost" and "127.0.0.1" are two origins of this one node.
                    allowed = f"http://localhost:{node.rpc_port}"
                    with (node.home / "config.toml").open("a") as f:
                        f.write(f'\n[ui]\npeers = ["{node.url}"]\ncors_origins = ["{allowed}"]\n')
                    node.start()
                    outside = browser.new_page()  # on the allowed origin: reads 127.0.0.1's /status via CORS
                    outside.goto(f"{allowed}/ui")
                    expect(outside.locator(f'#remote tr[data-remote="{node.url}"] td').nth(5)).to_have_text(
                        "live", timeout=15_000)
                    # On 127.0.0.1, an origin the node does not list: its configured peer (itself) is same-origin,
                    # the same node as "localhost" is a cross-origin read the browser refuses, port 9 is closed.
                    dead = "http://127.0.0.1:9"
                    inside = browser.new_page()
                    inside.goto(f"{node.url}/ui#peers={allowed},{dead}")
                    expect(inside.locator(f'#remote tr[data-remote="{node.url}"] td').nth(5)).to_have_text(
                        "live", timeout=15_000)
                    for refused in (allowed, dead):
                        expect(inside.locator(f'#remote tr[data-remote="{refused}"] td').nth(5)).to_contain_text(
                            "unreachable", timeout=15_000)
                finally:
                    browser.close()
        finally:
            runner.stop()

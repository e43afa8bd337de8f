"""A page built with CopilotKit's `useInterrupt` (React, bundled from npm) approves a Sursis pending
call in headless Chromium: the hosted agent is the page's AG-UI agent.

`.ci/run` builds the page (`npm ci && npm run build` in tests/browser/copilotkit: React, CopilotKit
and the AG-UI client it is built on, bundled by esbuild); the page is served
from the app's own origin by Playwright's routing, its AG-UI requests go to the real app.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.async_api import Browser, Route, expect

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.ag_ui.helpers import REPLAY
from tests.api.live import serve
from tests.browser.conftest import ARTIFACTS
from tests.conftest import make_settings

BUNDLE = Path(
    os.environ.get("SURSIS_COPILOTKIT_BUNDLE", Path(__file__).parent / "copilotkit" / "dist" / "page.js")
)
PAGE = (
    b'<!doctype html><html><head><meta charset="utf-8"><title>CopilotKit + Sursis</title></head>'
    b'<body><div id="root"></div><script src="/copilotkit/page.js"></script></body></html>'
)


@pytest.fixture(scope="module")
def bundle() -> bytes:
    if not BUNDLE.is_file():
        pytest.fail(
            f"{BUNDLE} is missing: `npm ci && npm run build` in tests/browser/copilotkit (.ci/run does it)"
        )
    return BUNDLE.read_bytes()


async def test_a_copilotkit_page_approves_a_pending_call(
    seeded: str, admin_key: IssuedKey, browser: Browser, bundle: bytes, client: Any
) -> None:
    async with serve(create_app(make_settings(seeded))) as base:
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

        async def static(route: Route) -> None:
            if route.request.url.endswith("/page.js"):
                await route.fulfill(body=bundle, content_type="text/javascript")
            else:
                await route.fulfill(body=PAGE, content_type="text/html")

        await page.route(f"{base}/copilotkit/**", static)
        await page.goto(f"{base}/copilotkit/index.html#key={admin_key.secret}&message={quote(REPLAY)}")
        approve = page.locator("#approve")
        await expect(approve).to_be_visible(timeout=20_000)
        interrupt_text = await page.locator("#interrupt").inner_text()
        assert "replay_dlq_event" in interrupt_text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "copilotkit-interrupt.png"), full_page=True)
        await approve.click()
        await expect(page.locator("#answer")).to_contain_text("replayed", timeout=20_000)
        await expect(page.locator("#interrupt")).to_have_count(0)
        await page.screenshot(path=str(ARTIFACTS / "copilotkit-approved.png"), full_page=True)
        await page.close()
    pending = (await client.get("/v1/pending", params={"status": "approved"})).json()["items"]
    assert [p["tool_name"] for p in pending] == ["replay_dlq_event"], (pending, errors)

"""The operator inbox end to end: the real app on a loopback port, driven by headless Chromium.

The browser is Debian's `chromium` (`/usr/bin/chromium`, or `SURSIS_TEST_CHROMIUM`), driven by
Playwright; no browser is ever downloaded. A missing browser fails the tests, it never skips them.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from sursis.app.main import create_app
from tests.api.live import serve
from tests.conftest import KeyMaker, admin_headers, make_settings

CHROMIUM = Path(os.environ.get("SURSIS_TEST_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(
    os.environ.get("SURSIS_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")
)
KEY_STORAGE = "sursis.inbox.key"

expect.set_options(timeout=10_000)


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install chromium` (.ci/run does it)")
    return CHROMIUM


@pytest.fixture(scope="session")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(chromium))
        yield launched
        await launched.close()


@dataclass
class InboxApp:
    """The app on a real socket, an admin HTTP client to make work for operators, and browser pages."""

    base_url: str
    http: httpx.AsyncClient
    keys: KeyMaker
    browser: Browser
    requested: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)

    async def page(self, *, width: int = 1280, height: int = 900, block_stream: bool = False) -> Page:
        """A new browser context (its own session storage) on the inbox page, not signed in.

        `block_stream` makes the live stream fail to connect, as on a flaky network.
        """
        context = await self.browser.new_context(
            viewport={"width": width, "height": height}, base_url=self.base_url
        )
        page = await context.new_page()
        page.on("request", lambda request: self.requested.append(request.url))
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        if block_stream:
            await page.route("**/v1/pending/events", lambda route: route.abort())
        self.pages.append(page)
        await page.goto("/inbox")
        return page

    async def signed_in(self, key: str, **options: Any) -> Page:
        page = await self.page(**options)
        await sign_in(page, key)
        return page

    async def suspend(self, content: str, workspace: str = "default") -> dict[str, Any]:
        """A new conversation whose run waits for one decision: the pending call (with its run)."""
        created = await self.http.post("/v1/conversations", json={"agent": "ops", "workspace": workspace})
        assert created.status_code == 201, created.text
        posted = await self.http.post(
            f"/v1/conversations/{created.json()['id']}/messages",
            params={"wait": 10},
            json={"content": content},
        )
        run = posted.json()
        assert run["status"] == "suspended", run
        [pending] = run["pending"]
        return dict(pending)

    async def pending(self, correlation_id: str) -> dict[str, Any]:
        response = await self.http.get(f"/v1/pending/{correlation_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def run(self, run_id: str) -> dict[str, Any]:
        response = await self.http.get(f"/v1/runs/{run_id}", params={"wait": 10})
        assert response.status_code == 200, response.text
        return dict(response.json())


async def sign_in(page: Page, key: str) -> None:
    await page.get_by_label("Operator key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Awaiting a decision")).to_be_visible()
    await expect(page.locator("#live")).to_have_text("Live")


@pytest.fixture
async def inbox(seeded: str, keys: KeyMaker, browser: Browser) -> AsyncIterator[InboxApp]:
    """The inbox served by the real app. Afterwards: no page script failed, every request the pages
    made went to the app's own origin, and no URL carried a key."""
    settings = make_settings(seeded, events_poll_seconds=0.1)
    async with (
        serve(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, timeout=30, headers=await admin_headers(seeded)) as http,
    ):
        app = InboxApp(base_url=url, http=http, keys=keys, browser=browser)
        try:
            yield app
        finally:
            for page in app.pages:
                await page.context.close()
    assert app.page_errors == []
    assert [u for u in app.requested if not u.startswith(f"{url}/")] == []
    assert [u for u in app.requested if "srs_" in u] == []


def artifact(name: str) -> Path:
    """Where a test saves a file for people to look at (`test-artifacts/`, ignored by git)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name

"""Fixtures for tests that need the app on a real socket (event streams, webhooks)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from sursis.app.main import create_app
from sursis.app.settings import Settings
from tests.api.live import serve
from tests.conftest import admin_headers, make_settings


@dataclass
class Live:
    base_url: str
    http: httpx.AsyncClient
    settings: Settings


LiveFactory = Callable[..., AbstractAsyncContextManager[Live]]


@pytest.fixture
def live(seeded: str) -> LiveFactory:
    """`async with live(**settings) as app:` the real app served on 127.0.0.1, with an HTTP client."""

    @asynccontextmanager
    async def start(**overrides: Any) -> AsyncIterator[Live]:
        values: dict[str, Any] = {"events_poll_seconds": 0.1, "webhook_poll_seconds": 0.1}
        values.update(overrides)
        settings = make_settings(seeded, **values)
        headers = await admin_headers(seeded)
        async with (
            serve(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, timeout=30, headers=headers) as http,
        ):
            yield Live(url, http, settings)

    return start

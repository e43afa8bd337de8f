"""The app with its Slack settings pointed at a local fake Slack, and helpers to talk as Slack."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.api.live import serve
from tests.channels.slack_fake import BOT_TOKEN, SIGNING_SECRET, TEAM, FakeSlack, sign
from tests.conftest import KeyMaker, bearer, make_settings


def slack_settings(database_url: str, slack_url: str, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "slack_signing_secret": SIGNING_SECRET,
        "slack_bot_token": BOT_TOKEN,
        "slack_api_url": slack_url + "/api/",
        "slack_agent": "ops",
        "channel_poll_seconds": 0.1,
        "webhook_backoff_seconds": 0.05,
        "webhook_backoff_max_seconds": 0.2,
        "public_url": "https://sursis.example",
    }
    values.update(overrides)
    return make_settings(database_url, **values)


@dataclass
class SlackWorld:
    """The app under test (`http`, with an admin key), the fake Slack, and the database URL."""

    http: AsyncTestClient[Any]
    slack: FakeSlack
    database_url: str
    keys: KeyMaker

    async def send_event(self, body: bytes, **headers: str) -> Any:
        return await self.http.post(
            "/v1/channels/slack/events",
            content=body,
            headers={"Content-Type": "application/json", **sign(body), **headers},
        )

    async def send_press(self, body: bytes) -> Any:
        return await self.http.post(
            "/v1/channels/slack/interactions",
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded", **sign(body)},
        )

    async def map_user(self, user_id: str, role: str, workspace: str | None = "default") -> IssuedKey:
        issued = await self.keys.issue(role, workspace, name=f"slack {user_id} ({role})")
        response = await self.http.put(
            f"/v1/channels/slack/users/{TEAM}/{user_id}", json={"key_id": str(issued.key.id)}
        )
        assert response.status_code == 200, response.text
        return issued


SlackWorldFactory = Callable[..., AbstractAsyncContextManager[SlackWorld]]


@pytest.fixture
def slack_world(seeded: str, keys: KeyMaker, admin_key: IssuedKey) -> SlackWorldFactory:
    @asynccontextmanager
    async def start(*, over_http: bool = True, **overrides: Any) -> AsyncIterator[SlackWorld]:
        """`over_http`: the app served on a socket too, for routes that call Slack while they answer
        (the test client would hold the loop the fake Slack answers on)."""
        fake = FakeSlack()
        async with serve(fake) as url:
            app = create_app(slack_settings(seeded, url, **overrides))
            if over_http:
                async with serve(app) as app_url, httpx.AsyncClient(base_url=app_url, timeout=30) as client:
                    client.headers.update(bearer(admin_key.secret))
                    yield SlackWorld(client, fake, seeded, keys)  # type: ignore[arg-type]
                return
            async with AsyncTestClient(app=app) as http:
                http.headers.update(bearer(admin_key.secret))
                yield SlackWorld(http, fake, seeded, keys)

    return start

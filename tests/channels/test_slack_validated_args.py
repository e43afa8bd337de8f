"""Slack shows what will run: an adopted agent's approval message gives pydantic-ai's validated
arguments (`args_summary`) and, when the model's own differ, those too, marked as the model's;
a call whose arguments pydantic-ai left as they were shows them once. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis import Service
from sursis.app.main import create_app
from sursis.domain.access import Role
from sursis.testing import ScriptedModel
from tests.agents.test_validated_args import GIVES_VALIDATED_ARGS, till
from tests.api.live import serve
from tests.channels.conftest import slack_settings
from tests.channels.slack_fake import TEAM, FakeSlack, event_body, sign
from tests.conftest import KeyMaker, bearer

MARK = "The model asked for (before validation)"


async def approval_blocks(database_url: str, keys: KeyMaker, **raw: Any) -> list[str]:
    """Start the till from Slack with the model calling `charge(**raw)`; the texts of the
    approval message's section blocks."""
    model = ScriptedModel().call("charge", **raw).text("Charged.")
    fake = FakeSlack()
    async with serve(fake) as url:
        settings = slack_settings(database_url, url, slack_agent="till")
        service = Service.from_settings(settings, agents=[till()], model=model.model)
        app = create_app(settings, service=service)
        async with AsyncTestClient(app=app) as http:
            http.headers.update(bearer(await keys.make(Role.ADMIN)))
            person = await keys.issue(Role.OPERATOR, "default", name="slack U1")
            linked = await http.put(
                f"/v1/channels/slack/users/{TEAM}/U1", json={"key_id": str(person.key.id)}
            )
            assert linked.status_code == 200, linked.text
            body = event_body("Ev1", "U1", "charge it", "1700000001.000100")
            sent = await http.post(
                "/v1/channels/slack/events",
                content=body,
                headers={"Content-Type": "application/json", **sign(body)},
            )
            assert sent.json()["outcome"] == "queued", sent.text
            [approval] = await fake.wait_for("chat.postMessage")
    blocks = approval["blocks"] if isinstance(approval["blocks"], list) else json.loads(approval["blocks"])
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


@pytest.mark.skipif(not GIVES_VALIDATED_ARGS, reason="pydantic-ai before 2.68 gives no validated arguments")
async def test_the_approval_shows_the_validated_arguments_and_the_models_own_beside_them(
    database_url: str, keys: KeyMaker
) -> None:
    _, shown, model = await approval_blocks(database_url, keys, order_id="A1", amount="5")
    assert json.loads(shown.strip("`")) == {"order_id": "A1", "amount": 5, "currency": "EUR"}
    assert model.startswith(f"_{MARK}:_")
    assert json.loads(model.split("\n", 1)[1].strip("`")) == {"order_id": "A1", "amount": "5"}


async def test_arguments_that_validation_left_alone_are_shown_once(database_url: str, keys: KeyMaker) -> None:
    sections = await approval_blocks(database_url, keys, order_id="A2", amount=3, currency="USD")
    assert len(sections) == 2 and not any(MARK in text for text in sections)
    assert json.loads(sections[1].strip("`")) == {"order_id": "A2", "amount": 3, "currency": "USD"}

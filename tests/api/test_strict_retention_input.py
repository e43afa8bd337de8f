"""Strict input for retention on every path: a workspace name is checked the same way on the
command line as in the API (`--workspace 'bad ws!'` is refused, exit 2), and a number of days is a
JSON number, never a string (`"30"` is 422) nor a fraction; nothing is stored either way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.cli import run
from sursis.infra.db.engine import create_engine
from tests.conftest import make_settings

BAD_WORKSPACES = ["bad ws!", "", "a" * 101, "semi;colon", "ünïcode"]


async def stored_policies(url: str) -> int:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return int(await conn.scalar(sa.text("SELECT count(*) FROM retention_policies")) or 0)
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    "argv",
    [
        *(["retention", "set", "--workspace", w, "--conversation-days", "30"] for w in BAD_WORKSPACES),
        ["retention", "get", "--workspace", "bad ws!"],
        ["retention", "plan", "--workspace", "bad ws!"],
        ["retention", "run", "--workspace", "bad ws!"],
        ["retention", "hold", "--workspace", "bad ws!", "--reason", "r"],
        ["retention", "hold", "--workspace", "default", "--reason", " "],
        ["retention", "holds", "--workspace", "bad ws!"],
        ["audit", "verify", "--workspace", "bad ws!"],
        ["retention", "set", "--workspace", "default", "--conversation-days", "30.5"],
        ["retention", "set", "--workspace", "default", "--conversation-days", "0"],
        ["retention", "set", "--workspace", "default", "--conversation-days", "-1"],
        ["retention", "set", "--workspace", "default", "--audit-days", "36501"],
        ["retention", "set", "--workspace", "default", "--audit-days", "thirty"],
    ],
)
async def test_the_command_line_refuses_what_the_api_refuses(
    database_url: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        await asyncio.to_thread(run, argv, make_settings(database_url))
    assert exited.value.code == 2
    assert "error: argument" in capsys.readouterr().err
    assert await stored_policies(database_url) == 0


@pytest.mark.parametrize(
    "body",
    [
        {"conversation_days": "30"},
        {"audit_days": "30"},
        {"conversation_days": 30.0},
        {"conversation_days": 30.5},
        {"conversation_days": True},
        {"conversation_days": 0},
        {"conversation_days": 30, "audit_days": "60"},
    ],
)
async def test_the_api_takes_days_only_as_whole_json_numbers(
    client: AsyncTestClient[Any], seeded: str, body: dict[str, Any]
) -> None:
    response = await client.put("/v1/retention/policies/default", json=body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "validation_failed"
    assert await stored_policies(seeded) == 0


async def test_the_api_refuses_a_bad_workspace_name_on_every_retention_path(
    client: AsyncTestClient[Any], seeded: str
) -> None:
    for method, path, kwargs in [
        ("PUT", "/v1/retention/policies/bad%20ws!", {"json": {"conversation_days": 30}}),
        ("GET", "/v1/retention/policies/bad%20ws!", {}),
        ("GET", "/v1/retention/plan", {"params": {"workspace": "bad ws!"}}),
        ("POST", "/v1/retention/run", {"params": {"workspace": "bad ws!"}}),
        ("POST", "/v1/retention/holds", {"json": {"workspace": "bad ws!", "reason": "r"}}),
        ("GET", "/v1/audit/verify", {"params": {"workspace": "bad ws!"}}),
    ]:
        response = await client.request(method, path, **kwargs)
        assert response.status_code in (400, 422), (method, path, response.text)
        assert response.json()["code"] in ("validation_failed", "bad_request"), response.text
    assert await stored_policies(seeded) == 0


async def test_a_whole_number_of_days_is_taken(client: AsyncTestClient[Any]) -> None:
    response = await client.put(
        "/v1/retention/policies/default", json={"conversation_days": 30, "audit_days": 60}
    )
    assert response.status_code == 200, response.text
    assert response.json()["conversation_days"] == 30

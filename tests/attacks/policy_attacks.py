"""What the policy attack tests share: the real app serving an adopted shop agent (`refund` and
`deploy`, both gated, each writing a line to `RAN` when it really runs), keys by name, and the calls
an attacker makes over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.app.settings import Settings
from sursis.domain.access import Role
from tests.conftest import KeyMaker, bearer, call, make_settings, script
from tests.integration.policy_kit import RAN, shop_agent

PROBLEM = "application/problem+json"


@dataclass
class Shop:
    """The app over HTTP, and the keys of the workspace `default` by name."""

    http: AsyncTestClient[Any]
    keys: KeyMaker
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    settings: Settings | None = None

    async def key(self, name: str, role: Role) -> dict[str, str]:
        issued = await self.keys.issue(role, "default", name=name)
        self.headers[name] = bearer(issued.secret)
        self.ids[name] = str(issued.key.id)
        return self.headers[name]

    async def put_policy(self, *rules: dict[str, Any], by: str = "admin") -> Any:
        return await self.http.put("/v1/policies", json={"rules": list(rules)}, headers=self.headers[by])

    async def group(self, name: str, *members: str) -> None:
        body = {"workspace": "default", "name": name, "members": [self.ids[m] for m in members]}
        created = await self.http.post("/v1/groups", json=body, headers=self.headers["admin"])
        assert created.status_code == 201, created.text

    async def conversation(self, by: str) -> str:
        created = await self.http.post("/v1/conversations", json={"agent": "shop"}, headers=self.headers[by])
        assert created.status_code == 201, created.text
        return str(created.json()["id"])

    async def ask(self, by: str, tool: str = "refund", conversation: str | None = None, **args: Any) -> Any:
        """`by` posts a message whose model calls `tool(**args)`; the run once it settles."""
        cid = conversation or await self.conversation(by)
        posted = await self.http.post(
            f"/v1/conversations/{cid}/messages?wait=10",
            json={"content": script(call(tool, **args))},
            headers=self.headers[by],
        )
        assert posted.status_code in (200, 202), posted.text
        run = posted.json()
        if run["status"] not in ("suspended", "completed", "failed"):
            run = await self.run(run["id"], by)
        return run

    async def run(self, run_id: str, by: str = "admin") -> Any:
        got = await self.http.get(f"/v1/runs/{run_id}?wait=10", headers=self.headers[by])
        assert got.status_code == 200, got.text
        return got.json()

    async def resolve(self, by: str, correlation_id: str, decision: str = "approve") -> Any:
        return await self.http.post(
            f"/v1/pending/{correlation_id}/resolve", json={"decision": decision}, headers=self.headers[by]
        )


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


def refunds() -> list[dict[str, Any]]:
    return [args for tool, args in RAN if tool == "refund"]


@asynccontextmanager
async def open_shop(seeded: str, keys: KeyMaker, **settings_overrides: Any) -> AsyncIterator[Shop]:
    """The app over `seeded` with an admin key named `admin` (each test file's `shop` fixture)."""
    RAN.clear()
    settings = make_settings(seeded, agents=["assistant"], run_worker=True, **settings_overrides)
    service = Service.from_settings(settings, agents=[shop_agent()])
    async with AsyncTestClient(app=create_app(settings, service=service)) as http:
        people = Shop(http, keys, settings=settings)
        await people.key("admin", Role.ADMIN)
        yield people

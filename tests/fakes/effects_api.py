"""A fake business API for the adopted agents' tools: orders to look up, and side effects (refunds,
cancellations, closed tickets) applied once per `Idempotency-Key`, as a real payments API does.

`GET /orders/{id}` answers an order; `POST /{kind}` with an `Idempotency-Key` header applies the
effect the first time the key is seen and answers the same body again for a repeated key. Every
attempt is kept (`attempts`), every applied effect once (`applied`), so a test counts both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.threaded import serving


@dataclass
class Effect:
    kind: str
    key: str
    body: dict[str, Any]


@dataclass
class FakeEffectsApi:
    attempts: list[Effect] = field(default_factory=list)
    applied: dict[str, Effect] = field(default_factory=dict)

    def effects(self, kind: str) -> list[Effect]:
        return [e for e in self.applied.values() if e.kind == kind]

    def tries(self, kind: str) -> list[Effect]:
        return [e for e in self.attempts if e.kind == kind]

    @contextmanager
    def serve(self) -> Iterator[str]:
        app = web.Application()
        app.router.add_get("/orders/{order_id}", self._order)
        app.router.add_post("/{kind}", self._effect)
        with serving(app) as url:
            yield url

    async def _order(self, request: web.Request) -> web.Response:
        return web.json_response({"order_id": request.match_info["order_id"], "total": 40, "currency": "EUR"})

    async def _effect(self, request: web.Request) -> web.Response:
        key = request.headers.get("Idempotency-Key")
        if not key:
            return web.json_response({"error": "an Idempotency-Key header is required"}, status=400)
        effect = Effect(request.match_info["kind"], key, await request.json())
        self.attempts.append(effect)
        first = self.applied.setdefault(key, effect)
        return web.json_response({"applied": first is effect, "kind": first.kind, **first.body})

"""The drill's clients: approval turns over HTTP, as a careful client makes them through an outage.

A 503 is waited out for its `Retry-After` and sent again, as is a request that got no answer at all.
A message whose answer was lost may have been stored: a `run_active` answer to the retry means it
was, and the client follows that run. A decision whose answer was lost may have been committed: a
`stale` answer to the retry is checked (the call approved, by this client's key) and the turn goes
on. Only a 200 to the decision itself counts as acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

GATED_TURN = "approve a replay\nSCRIPT: " + json.dumps(
    [[{"tool": "replay_dlq_event", "args": {"event_id": "evt_1001", "reason": "drill"}}], "replayed"]
)


@dataclass
class Turn:
    client: int
    started: float
    ended: float | None = None
    status: str | None = None


@dataclass
class Tally:
    """What the clients saw."""

    acknowledged: list[str] = field(default_factory=list)
    """Correlation ids of decisions answered 200."""
    confirmed_after_retry: list[str] = field(default_factory=list)
    """Decisions whose answer was lost and that a later read showed approved by this client."""
    turns: list[Turn] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    transport_errors: int = 0
    retry_after_missing: int = 0

    def completed(self) -> list[Turn]:
        return [t for t in self.turns if t.status == "completed" and t.ended is not None]


class DrillClient:
    """One client with its own conversation, sending to the API processes in turn."""

    def __init__(
        self, bases: list[str], headers: dict[str, str], tally: Tally, key_id: str, number: int = 0
    ) -> None:
        self.number = number
        self._bases = bases
        self._next = 0
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(40.0))
        self._tally = tally
        self._key_id = key_id

    async def close(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        """The answer other than 503 (waited out for `Retry-After`) or no answer (retried)."""
        while True:
            base = self._bases[self._next % len(self._bases)]
            self._next += 1
            try:
                answer = await self._http.request(method, f"{base}{path}", **options)
            except httpx.TransportError:
                self._tally.transport_errors += 1
                await asyncio.sleep(0.5)
                continue
            self._tally.statuses[answer.status_code] += 1
            if answer.status_code != 503:
                return answer
            wait = answer.headers.get("Retry-After")
            if wait is None:
                self._tally.retry_after_missing += 1
            await asyncio.sleep(float(wait or 1))

    async def run_until(self, stop: asyncio.Event, turns: int | None = None) -> None:
        """Turns until `stop` is set, or `turns` of them."""
        created = await self.request("POST", "/v1/conversations", json={"agent": "ops"})
        created.raise_for_status()
        conversation = created.json()["id"]
        while not stop.is_set() and (turns is None or turns > 0):
            turns = None if turns is None else turns - 1
            turn = Turn(client=self.number, started=time.monotonic())
            self._tally.turns.append(turn)
            turn.status = await self.turn(conversation)
            turn.ended = time.monotonic()

    async def turn(self, conversation: str) -> str:
        posted = await self.request(
            "POST", f"/v1/conversations/{conversation}/messages", json={"content": GATED_TURN}
        )
        if posted.status_code == 409 and posted.json().get("code") == "run_active":
            # The first attempt was stored although its answer was lost: follow that run.
            detail = (await self.request("GET", f"/v1/conversations/{conversation}")).json()
            run_id = detail["active_run"]["id"]
        else:
            posted.raise_for_status()
            run_id = posted.json()["id"]
        run = await self.settle(run_id)
        if run["status"] == "suspended":
            [pending] = [p for p in run["pending"] if p["status"] == "awaiting"]
            correlation = pending["correlation_id"]
            decided = await self.request(
                "POST", f"/v1/pending/{correlation}/resolve", json={"decision": "approve"}
            )
            if decided.status_code == 200:
                self._tally.acknowledged.append(correlation)
            elif decided.status_code == 409:
                call = (await self.request("GET", f"/v1/pending/{correlation}")).json()
                if call["status"] == "approved" and call["resolved_by"] == self._key_id:
                    self._tally.confirmed_after_retry.append(correlation)
            else:
                decided.raise_for_status()
            run = await self.settle(run_id)
        return str(run["status"])

    async def settle(self, run_id: str) -> dict[str, Any]:
        """Long-poll the run until it is suspended with an awaiting call, or has ended."""
        while True:
            answer = await self.request("GET", f"/v1/runs/{run_id}", params={"wait": 10})
            answer.raise_for_status()
            run: dict[str, Any] = answer.json()
            if run["status"] in ("completed", "failed", "cancelled"):
                return run
            if run["status"] == "suspended" and any(p["status"] == "awaiting" for p in run["pending"]):
                return run

"""The framework-neutral half of every integration: file a call with Sursis, wait for its decision,
consume an approval once, report the outcome (`POST /v1/approvals` and its sub-resources, over
httpx). Each framework module turns a `Verdict` into its own answer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx

from sursis.domain.sanitize import args_hash

WAITING = "awaiting"
NOT_RUN = "The call was not run"


class ApprovalProtocolError(RuntimeError):
    """Sursis answered a filing or a wait in a way an integration cannot act on."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of one filed call: whether it may run now (its approval consumed by this
    process), and the message a model or a graph is told when it may not."""

    correlation_id: str
    approved: bool
    message: str
    deciders: tuple[str, ...]
    args: dict[str, Any]
    """The arguments to run (the approved ones)."""


@dataclass
class ApprovalsClient:
    """Sursis's approval requests for one agent, under one key."""

    url: str
    key: str
    agent: str
    expires_in: timedelta = timedelta(hours=1)
    poll_seconds: float = 30.0
    transport: httpx.AsyncBaseTransport | None = None

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=self.poll_seconds + 30,
            transport=self.transport,
        )

    async def decide(
        self,
        http: httpx.AsyncClient,
        tool_name: str,
        args: dict[str, Any],
        *,
        idempotency_key: str,
        conversation: str | None = None,
    ) -> Verdict:
        """File the call (or find it filed under `idempotency_key`), wait for its decision and, when
        approved, consume it with the digest of `args`. An approval consumed already (by a process
        that died before it ran the call) is not handed out again: the call is not run."""
        digest = args_hash(tool_name, args)
        filing = {
            "tool_name": tool_name,
            "args": args,
            "agent": self.agent,
            "conversation": conversation,
            "idempotency_key": idempotency_key,
            "expires_in_seconds": int(self.expires_in.total_seconds()),
            "digest": digest,
        }
        request = _json(await http.post("/v1/approvals", json=filing))
        cid = request["correlation_id"]
        while request["state"] == WAITING:
            request = _json(await http.get(f"/v1/approvals/{cid}", params={"wait": self.poll_seconds}))
        deciders = tuple(request.get("answered_by") or ())
        if request["state"] != "approved":
            return Verdict(cid, False, _denial(request), deciders, args)
        consumed = await http.post(f"/v1/approvals/{cid}/consume", json={"digest": digest})
        if consumed.status_code != 200:
            problem = consumed.json() if consumed.content else {}
            message = f"{NOT_RUN}: {problem.get('detail') or problem.get('code')}"
            return Verdict(cid, False, message, deciders, args)
        return Verdict(cid, True, "approved", deciders, request.get("approved_args") or args)

    async def report(self, correlation_id: str, outcome: str, detail: str | None = None) -> None:
        """Close a consumed request: `ran`, `failed` or `not_run`."""
        async with self.http() as http:
            body = {"outcome": outcome, "detail": detail}
            _json(await http.post(f"/v1/approvals/{correlation_id}/outcome", json=body))


def _json(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 300:
        raise ApprovalProtocolError(f"Sursis answered {response.status_code}: {response.text[:500]}")
    body: dict[str, Any] = response.json()
    return body


def _denial(request: dict[str, Any]) -> str:
    """What the agent is told of a call that was not approved: whether a person or the policy refused
    it, or nobody decided in time, and the reason given."""
    state = request["state"]
    reason = (request.get("pending") or {}).get("reason")
    if state == "denied":
        return f"Denied by the approvers: {reason}" if reason else "Denied by the approvers."
    return f"{NOT_RUN}: the approval request is {state}" + (f" ({reason})" if reason else "")

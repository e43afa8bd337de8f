"""`AsyncClient`: the HTTP API of an Sursis service, typed, over httpx."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from sursis.client.errors import error_from
from sursis.client.models import (
    ApproverGroup,
    Conversation,
    ConversationDetail,
    Delegation,
    Event,
    Forked,
    PendingCall,
    PendingPage,
    ProvisioningRule,
    Resolved,
    Run,
)

M = TypeVar("M", bound=BaseModel)
Id = uuid.UUID | str

RECONNECT_ERRORS = (httpx.TransportError,)
"""A dropped or refused connection: the event stream reconnects after these."""


class AsyncClient:
    """`async with AsyncClient("http://127.0.0.1:8000", api_key) as client:`.

    Every error answer raises a subclass of `SursisError` chosen by its problem `code`
    (`NotFoundError`, `StaleError`, `RunActiveError`, ...). `http` replaces the underlying
    `httpx.AsyncClient` (its base URL and headers are then the caller's to set).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._http = http or httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._http.request(method, path, **kwargs)
        if response.is_error:
            raise _error(response)
        return response.json()

    async def _model(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        return model.model_validate(await self._request(method, path, **kwargs))

    # Conversations and runs

    async def create_conversation(self, agent: str, *, workspace: str | None = None) -> Conversation:
        body: dict[str, Any] = {"agent": agent}
        if workspace is not None:
            body["workspace"] = workspace
        return await self._model(Conversation, "POST", "/v1/conversations", json=body)

    async def get_conversation(self, conversation_id: Id) -> ConversationDetail:
        """The conversation with its messages and active run."""
        return await self._model(ConversationDetail, "GET", f"/v1/conversations/{conversation_id}")

    async def send(self, conversation_id: Id, content: str, *, wait: float = 0, stream: bool = True) -> Run:
        """Post a user message; the run it starts, after waiting up to `wait` seconds for it to settle.
        `stream=False`: the model is asked for whole responses (no text deltas while they arrive)."""
        return await self._model(
            Run,
            "POST",
            f"/v1/conversations/{conversation_id}/messages",
            json={"content": content} if stream else {"content": content, "stream": False},
            params={"wait": wait} if wait else None,
            timeout=self._timeout_for(wait),
        )

    async def fork(
        self, conversation_id: Id, at: int, *, message: str | None = None, wait: float = 0
    ) -> Forked:
        """Fork the conversation at the user message of seq `at`: a new conversation with the
        history before it, running `message` there (or the original's message when None)."""
        body: dict[str, Any] = {"at": at}
        if message is not None:
            body["message"] = message
        return await self._model(
            Forked,
            "POST",
            f"/v1/conversations/{conversation_id}/fork",
            json=body,
            params={"wait": wait} if wait else None,
            timeout=self._timeout_for(wait),
        )

    async def get_run(self, run_id: Id, *, wait: float = 0) -> Run:
        """The run; with `wait`, once it settles or after `wait` seconds (the server caps it)."""
        return await self._model(
            Run,
            "GET",
            f"/v1/runs/{run_id}",
            params={"wait": wait} if wait else None,
            timeout=self._timeout_for(wait),
        )

    async def wait_for_run(self, run_id: Id, *, within: float = 60.0) -> Run:
        """Long-poll until the run settles (suspended, completed, failed, cancelled) or `within`
        seconds have passed; returns the run as it is then."""
        deadline = time.monotonic() + within
        while True:
            remaining = deadline - time.monotonic()
            run = await self.get_run(run_id, wait=max(0.0, min(remaining, 30.0)))
            if run.settled or deadline - time.monotonic() <= 0:
                return run

    async def cancel_run(self, run_id: Id) -> Run:
        return await self._model(Run, "POST", f"/v1/runs/{run_id}/cancel")

    # Pending calls

    async def list_pending(
        self,
        *,
        status: str | None = "awaiting",
        kind: str | None = None,
        tool_name: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> PendingPage:
        """One page of the workspace's pending calls, newest first; `next_cursor` fetches the next.
        `status="all"` lists every status; None leaves it to the API (awaiting)."""
        params: dict[str, Any] = {"limit": limit}
        for name, value in (("status", status), ("kind", kind), ("tool_name", tool_name), ("cursor", cursor)):
            if value is not None:
                params[name] = value
        return await self._model(PendingPage, "GET", "/v1/pending", params=params)

    async def iter_pending(
        self, *, status: str | None = "awaiting", kind: str | None = None, tool_name: str | None = None
    ) -> AsyncIterator[PendingCall]:
        """Every pending call that matches, page after page."""
        cursor: str | None = None
        while True:
            page = await self.list_pending(status=status, kind=kind, tool_name=tool_name, cursor=cursor)
            for call in page.items:
                yield call
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_pending(self, correlation_id: Id) -> PendingCall:
        return await self._model(PendingCall, "GET", f"/v1/pending/{correlation_id}")

    async def resolve(
        self,
        correlation_id: Id,
        decision: str,
        *,
        reason: str | None = None,
        args: dict[str, Any] | None = None,
        result: Any = None,
        args_hash: str | None = None,
        wait: float = 0,
    ) -> Resolved:
        """Decide a pending call: `approve` (with edited `args`), `deny`, `revise` or `answer`
        (with `result`). A call decided already raises `StaleError`. With `wait`, the answer also
        carries the call's run (`.run`) once it settled, waiting up to `wait` seconds."""
        body: dict[str, Any] = {"decision": decision}
        for name, value in (("reason", reason), ("args", args), ("result", result), ("args_hash", args_hash)):
            if value is not None:
                body[name] = value
        return await self._model(
            Resolved,
            "POST",
            f"/v1/pending/{correlation_id}/resolve",
            json=body,
            params={"wait": wait} if wait else None,
        )

    async def reassign(self, correlation_id: Id, to: list[str]) -> PendingCall:
        """Put a routed call before other approvers (`group:NAME`, `key:KEY_ID`); admins."""
        return await self._model(
            PendingCall, "POST", f"/v1/pending/{correlation_id}/reassign", json={"to": to}
        )

    # Approver groups and delegations

    async def list_groups(self, *, workspace: str | None = None) -> list[ApproverGroup]:
        found = await self._request(
            "GET", "/v1/groups", params={"workspace": workspace} if workspace else None
        )
        return [ApproverGroup.model_validate(g) for g in found]

    async def create_group(
        self, workspace: str, name: str, *, members: list[str] | None = None, description: str | None = None
    ) -> ApproverGroup:
        body: dict[str, Any] = {"workspace": workspace, "name": name, "members": members or []}
        if description is not None:
            body["description"] = description
        return await self._model(ApproverGroup, "POST", "/v1/groups", json=body)

    async def get_group(self, workspace: str, name: str) -> ApproverGroup:
        return await self._model(ApproverGroup, "GET", f"/v1/groups/{workspace}/{name}")

    async def add_group_member(self, workspace: str, name: str, key_id: Id) -> ApproverGroup:
        return await self._model(
            ApproverGroup, "POST", f"/v1/groups/{workspace}/{name}/members", json={"key_id": str(key_id)}
        )

    async def remove_group_member(self, workspace: str, name: str, key_id: Id) -> ApproverGroup:
        return await self._model(ApproverGroup, "DELETE", f"/v1/groups/{workspace}/{name}/members/{key_id}")

    async def delete_group(self, workspace: str, name: str) -> None:
        response = await self._http.request("DELETE", f"/v1/groups/{workspace}/{name}")
        if response.is_error:
            raise _error(response)

    async def list_provisioning_rules(self) -> list[ProvisioningRule]:
        """Which identity-provider groups sign in as which role and workspace (admins)."""
        found = await self._request("GET", "/v1/oidc/provisioning")
        return [ProvisioningRule.model_validate(r) for r in found]

    async def set_provisioning_rule(
        self, group: str, role: str, *, workspace: str | None = None
    ) -> ProvisioningRule:
        """Members of `group` sign in as `role` of `workspace` (no workspace for `admin`)."""
        body: dict[str, Any] = {"role": role}
        if workspace is not None:
            body["workspace"] = workspace
        path = f"/v1/oidc/provisioning/{quote(group, safe='')}"
        return await self._model(ProvisioningRule, "PUT", path, json=body)

    async def remove_provisioning_rule(self, group: str) -> None:
        response = await self._http.request("DELETE", f"/v1/oidc/provisioning/{quote(group, safe='')}")
        if response.is_error:
            raise _error(response)

    async def create_delegation(
        self, delegate: Id, ends_at: str, *, starts_at: str | None = None, delegator: Id | None = None
    ) -> Delegation:
        """`delegate` votes for you (an admin: for `delegator`) until `ends_at` (ISO 8601 with a zone)."""
        body: dict[str, Any] = {"delegate": str(delegate), "ends_at": ends_at}
        if starts_at is not None:
            body["starts_at"] = starts_at
        if delegator is not None:
            body["delegator"] = str(delegator)
        return await self._model(Delegation, "POST", "/v1/delegations", json=body)

    async def list_delegations(self) -> list[Delegation]:
        return [Delegation.model_validate(d) for d in await self._request("GET", "/v1/delegations")]

    async def revoke_delegation(self, delegation_id: Id) -> Delegation:
        return await self._model(Delegation, "DELETE", f"/v1/delegations/{delegation_id}")

    # Events

    async def events(
        self,
        conversation_id: Id,
        *,
        after: int | None = None,
        reconnect_delay: float | None = None,
        max_reconnects: int | None = None,
    ) -> AsyncIterator[Event]:
        """The conversation's events, in order, live, until the caller stops iterating.

        A dropped connection is reopened with `Last-Event-ID` set to the last event received, so
        nothing is missed or repeated; between attempts it waits `reconnect_delay` seconds (by
        default what the server's `retry:` field says). `max_reconnects` reconnects in a row
        without an event raise the last transport error. Error answers raise at once.
        """
        last_id = after
        delay = reconnect_delay
        failures = 0
        while True:
            headers = {"Last-Event-ID": str(last_id)} if last_id is not None else {}
            try:
                async with self._http.stream(
                    "GET", f"/v1/conversations/{conversation_id}/events", headers=headers, timeout=None
                ) as response:
                    if response.is_error:
                        await response.aread()
                        raise _error(response)
                    async for name, value in _sse_messages(response):
                        if name == "retry" and reconnect_delay is None:
                            delay = int(value) / 1000
                        elif name == "event":
                            event = Event.model_validate_json(value)
                            last_id = event.id
                            failures = 0
                            yield event
            except RECONNECT_ERRORS:
                failures += 1
                if max_reconnects is not None and failures > max_reconnects:
                    raise
            else:  # the server ended the stream (a restart, a proxy's timeout): resume too
                failures += 1
                if max_reconnects is not None and failures > max_reconnects:
                    return
            await asyncio.sleep(delay if delay is not None else 2.0)

    def _timeout_for(self, wait: float) -> Any:
        """A long-poll's read timeout: the wait on top of the client's own."""
        if not wait:
            return httpx.USE_CLIENT_DEFAULT
        current = self._http.timeout
        return httpx.Timeout(
            current.connect, read=wait + (current.read or 30.0), write=current.write, pool=current.pool
        )


async def _sse_messages(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """`("event", data)` for each event of a server-sent event stream, `("retry", ms)` for its
    reconnection hint; comments (heartbeats) are skipped."""
    data: list[str] = []
    event_type: str | None = None
    async for line in response.aiter_lines():
        if line == "":
            if data and event_type is not None:
                yield "event", "\n".join(data)
            data, event_type = [], None
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            event_type = value
        elif field == "retry" and value.isdigit():
            yield "retry", value


def _error(response: httpx.Response) -> Exception:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    return error_from(response.status_code, body, response.text)

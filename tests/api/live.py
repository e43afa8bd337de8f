"""The real app over real HTTP (uvicorn on 127.0.0.1), an SSE reader, and a local webhook receiver.

The in-memory test client buffers whole responses, so an endless event stream needs a socket.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn

from sursis.app.http_protocols import ProblemH11Protocol


@asynccontextmanager
async def serve(
    app: Any, *, lifespan: str = "on", http: type[Any] = ProblemH11Protocol, port: int = 0
) -> AsyncIterator[str]:
    """Serve an ASGI app on a loopback port (`port`, or a free one); yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan=lifespan,  # type: ignore[arg-type]
        ws="none",
        http=http,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("server stopped before it started")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class SseMessage:
    id: int | None
    event: str | None
    data: Any
    comment: str | None

    @property
    def status(self) -> str | None:
        """`data.status` of `run.status` / `pending.resolved` events."""
        return self.data["data"].get("status") if isinstance(self.data, dict) else None

    @property
    def tool(self) -> str | None:
        return self.data["data"].get("tool_name") if isinstance(self.data, dict) else None


class EventStream:
    """Reads `GET /v1/conversations/{id}/events` (or another stream at `path`) message by message."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        conversation_id: str | None = None,
        last_event_id: int | None = None,
        after: int | None = None,
        *,
        path: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        sent = dict(headers or {})
        if last_event_id is not None:
            sent["Last-Event-ID"] = str(last_event_id)
        params = {"after": after} if after is not None else {}
        self._request = http.stream(
            "GET",
            path or f"/v1/conversations/{conversation_id}/events",
            headers=sent,
            params=params,
            timeout=None,
        )
        self.comments: list[str] = []

    async def __aenter__(self) -> EventStream:
        self.response = await self._request.__aenter__()
        assert self.response.status_code == 200, await self.response.aread()
        assert self.response.headers["content-type"].startswith("text/event-stream")
        self._lines = self.response.aiter_lines()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._request.__aexit__(None, None, None)

    async def next_message(self, within: float = 10.0) -> SseMessage:
        """The next message, comments included."""
        fields: dict[str, list[str]] = {}
        async with asyncio.timeout(within):
            async for line in self._lines:
                if line == "":
                    if fields:
                        break
                    continue
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value[1:] if value.startswith(" ") else value)
            else:
                raise AssertionError("the stream ended")
        comment = "\n".join(fields[""]) if "" in fields else None
        if comment is not None:
            self.comments.append(comment)
        data = "\n".join(fields["data"]) if "data" in fields else None
        return SseMessage(
            id=int(fields["id"][0]) if "id" in fields else None,
            event=fields["event"][0] if "event" in fields else None,
            data=json.loads(data) if data else None,
            comment=comment,
        )

    async def next_event(self, within: float = 10.0) -> SseMessage:
        while True:
            message = await self.next_message(within)
            if message.event is not None:
                return message

    async def until(self, done: Callable[[SseMessage], bool], within: float = 15.0) -> list[SseMessage]:
        """Events up to and including the first one for which `done` is true."""
        events: list[SseMessage] = []
        async with asyncio.timeout(within):
            while True:
                event = await self.next_event(within)
                events.append(event)
                if done(event):
                    return events


def is_event(event_type: str, status: str | None = None) -> Callable[[SseMessage], bool]:
    return lambda m: m.event == event_type and (status is None or m.status == status)


@dataclass
class Receiver:
    """A webhook receiver: records every request and the status it answered with (`status`)."""

    status: int = 200
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status = self.status
        self.requests.append((headers, body))
        self.answered.append(status)
        self.arrived.set()
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def wait_for(self, count: int, within: float = 15.0) -> None:
        async with asyncio.timeout(within):
            while len(self.requests) < count:
                self.arrived.clear()
                await self.arrived.wait()

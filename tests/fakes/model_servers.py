"""Local fake model providers speaking the real wire formats, for the real client libraries offline.

One aiohttp server on 127.0.0.1 (a free port, its own thread) answers

* `POST /v1/chat/completions`: OpenAI chat completions, whole or streamed (`data:` chunks, `[DONE]`);
* `POST /v1/responses`: the OpenAI Responses API, whole or streamed (typed `event:`s);
* `POST /v1/messages`: Anthropic Messages, whole or streamed (`message_start` ... `message_stop`).

What it answers is decided per request: the next of the steps queued with `then(...)`, else
`respond(request)` (by default: a text answer). A step is `Text`, `Call` (one tool call), `Fail`
(an HTTP error, e.g. a 429 with `retry-after`) or `Broken` (a stream cut off midway). Each request's
JSON body is kept in `requests`, by API, so a test can see what the client sent. `apis` narrows what
it speaks: `FakeModelServer(apis=("chat",))` is a chat-only OpenAI-compatible server (vLLM, Ollama,
LiteLLM setups), whose `/v1/responses` answers 404 as theirs do.

    with FakeModelServer() as server:
        server.then(Fail(429, retry_after="1"), Call("refund", {"order_id": "A1"}))
        ...  # AsyncAnthropic(base_url=server.url, ...) / OpenAIProvider(base_url=server.url + "/v1")
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.threaded import serving
from tests.fakes.wire_formats import STREAMED, WHOLE, Broken, Call, Fail, Request, Step, Text

__all__ = ["Broken", "Call", "Fail", "FakeModelServer", "Request", "Step", "Text", "call_then_answer"]


def _text_answer(_: Request) -> Step:
    return Text("fake answer")


@dataclass
class FakeModelServer:
    respond: Callable[[Request], Step] = _text_answer
    requests: list[Request] = field(default_factory=list)
    queued: list[Step] = field(default_factory=list)
    url: str = ""
    """`http://127.0.0.1:PORT` once started."""
    apis: tuple[str, ...] = ("chat", "responses", "messages")
    keep_alive: bool = True
    """False: every answer closes its connection, so a client nobody closes (the one pydantic-ai makes
    for an `Agent("openai:...")`) leaves no socket open when the test ends."""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def then(self, *steps: Step) -> FakeModelServer:
        self.queued.extend(steps)
        return self

    def of(self, api: str) -> list[Request]:
        return [r for r in self.requests if r.api == api]

    # The server, in a thread of its own

    def __enter__(self) -> FakeModelServer:
        app = web.Application()
        if not self.keep_alive:
            app.on_response_prepare.append(_close_after)
        paths = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
        for api in self.apis:
            app.router.add_post(paths[api], self._handler(api))
        self._serving = serving(app)
        self.url = self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)

    def _handler(self, api: str) -> Callable[[web.Request], Any]:
        async def handle(http: web.Request) -> web.StreamResponse:
            request = Request(api, await http.json())
            self.requests.append(request)
            step = self.queued.pop(0) if self.queued else self.respond(request)
            if isinstance(step, Fail):
                return self._failure(api, step)
            n = next(self._ids)
            if not request.streamed:
                if isinstance(step, Broken):
                    step = Text(step.text)
                return web.json_response(WHOLE[api](n, request, step))
            response = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await response.prepare(http)
            events = STREAMED[api](n, request, step)
            if isinstance(step, Broken):
                for event in events[: max(2, len(events) // 2)]:
                    await response.write(event.encode())
                await asyncio.sleep(0.05)
                assert http.transport is not None
                http.transport.abort()  # no end of the chunked body: the client's read fails
                return response
            for event in events:
                await response.write(event.encode())
            await response.write_eof()
            return response

        return handle

    @staticmethod
    def _failure(api: str, step: Fail) -> web.Response:
        headers = {"retry-after": step.retry_after} if step.retry_after is not None else {}
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(step.status, "api_error")
        if api == "messages":
            body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": step.message}}
        else:
            body = {"error": {"message": step.message, "type": kind, "code": None, "param": None}}
        return web.json_response(body, status=step.status, headers=headers)


async def _close_after(_: web.Request, response: web.StreamResponse) -> None:
    response.force_close()


def call_then_answer(name: str, args: dict[str, Any], answer: str) -> Callable[[Request], Step]:
    """A model that calls `name(args)` and, once it has seen the tool's result, answers `answer`:
    stateless, so a retried or repeated request gets the same answer."""

    def respond(request: Request) -> Step:
        return Text(answer) if request.has_tool_result() else Call(name, args)

    return respond

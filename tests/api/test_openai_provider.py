"""The OpenAI-compatible provider path against a local fake chat-completions server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from pydantic_ai import models

from sursis.app.main import create_app
from tests.api.http_calls import create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import admin_headers, make_settings


class FakeChatCompletions(BaseHTTPRequestHandler):
    """Speaks the chat-completions wire format: first a tool call, then text quoting the tool result."""

    requests: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers.get("authorization"), "body": body}
        )
        tool_results = [m for m in body["messages"] if m["role"] == "tool"]
        if tool_results:
            message: dict[str, Any] = {"role": "assistant", "content": f"done: {tool_results[-1]['content']}"}
            finish = "stop"
        else:
            arguments = json.dumps({"event_id": "evt_1002", "reason": "endpoint fixed"})
            call = {
                "id": "call_fake_1",
                "type": "function",
                "function": {"name": "replay_dlq_event", "arguments": arguments},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        usage = {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
        head = {
            "id": f"chatcmpl-{len(type(self).requests)}",
            "created": int(time.time()),
            "model": body["model"],
        }
        if body.get("stream"):
            self._stream(head, message, finish, usage)
            return
        payload = {
            **head,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage,
        }
        self._send(json.dumps(payload).encode(), "application/json")

    def _stream(
        self, head: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, int]
    ) -> None:
        """The streaming wire format: `chat.completion.chunk` server-sent events, then `[DONE]`."""
        deltas: list[dict[str, Any]] = []
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            deltas.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ],
                }
            )
            arguments = call["function"]["arguments"]
            for piece in (arguments[: len(arguments) // 2], arguments[len(arguments) // 2 :]):
                deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        else:
            text = message["content"]
            deltas.append({"role": "assistant", "content": text[:5]})
            deltas.append({"content": text[5:]})
        chunks = [{"index": 0, "delta": d, "finish_reason": None, "logprobs": None} for d in deltas]
        chunks.append({"index": 0, "delta": {}, "finish_reason": finish, "logprobs": None})
        events = [{**head, "object": "chat.completion.chunk", "choices": [c]} for c in chunks]
        events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(data.encode(), "text/event-stream")

    def _send(self, data: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fake_openai() -> Iterator[str]:
    FakeChatCompletions.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeChatCompletions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


async def test_openai_compatible_server_drives_a_suspend_and_resume(
    seeded: str, fake_openai: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)
    settings = make_settings(
        seeded, model="openai:fake-model", openai_base_url=fake_openai, openai_api_key="sk-test-key"
    )
    async with AsyncTestClient(app=create_app(settings)) as client:
        client.headers.update(await admin_headers(seeded))
        cid = await create_conversation(client)
        run = await post_message(client, cid, "evt_1002 failed, the endpoint is fixed now")
        assert run["status"] == "suspended"
        [pending] = run["pending"]
        assert pending["tool_call_id"] == "call_fake_1"
        assert pending["args_summary"]["event_id"] == "evt_1002"

        await resolve(client, pending["correlation_id"], decision="approve")
        done = await get_run(client, run["id"])
        assert done["status"] == "completed"
        assert done["output"].startswith("done: ")
        assert json.loads(done["output"].removeprefix("done: "))["result"]["event_id"] == "evt_1002"
        assert done["usage"]["requests"] == 2
        assert done["usage"]["input_tokens"] == 84
        assert [t["tool_name"] for t in await tool_calls(client, run["id"])] == ["replay_dlq_event"]

    first, second = FakeChatCompletions.requests
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer sk-test-key"
    assert first["body"]["model"] == "fake-model"
    assert first["body"]["stream"] is True
    offered = {t["function"]["name"] for t in first["body"]["tools"]}
    assert {"list_dlq_events", "replay_dlq_event", "ask_operator"} <= offered
    assert second["body"]["messages"][-1]["role"] == "tool"
    assert second["body"]["messages"][-1]["tool_call_id"] == "call_fake_1"

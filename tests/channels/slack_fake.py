"""A local Slack Web API: real HTTP on 127.0.0.1, checking the bot token and each method's request
shape as Slack does, and recording every call. Also signs requests the way Slack signs its own."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

BOT_TOKEN = "xoxb-test-token"
SIGNING_SECRET = "slack-signing-secret-for-tests"
TEAM = "T0TEAM"
CHANNEL = "C0CHAN"


def sign(body: bytes, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    """Slack's headers for `body`: `v0=` HMAC-SHA256 of `v0:{timestamp}:{body}` with the secret."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    mac = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={mac}"}


def event_body(
    event_id: str, user: str, text: str, ts: str, *, thread_ts: str | None = None, **extra: Any
) -> bytes:
    event: dict[str, Any] = {"type": "message", "channel": CHANNEL, "user": user, "text": text, "ts": ts}
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    event.update(extra)
    envelope = {
        "token": "legacy-verification-token",
        "team_id": TEAM,
        "api_app_id": "A0APP",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": event,
    }
    return json.dumps(envelope).encode()


def press_body(
    user: str, correlation_id: str, action: str, message_ts: str, *, trigger_id: str = "1337.42.abcdef"
) -> bytes:
    """An interactivity request: form-encoded `payload` of a `block_actions` press."""
    payload = {
        "type": "block_actions",
        "trigger_id": trigger_id,
        "team": {"id": TEAM, "domain": "example"},
        "user": {"id": user, "team_id": TEAM},
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
        "response_url": "https://hooks.slack.invalid/actions/1",
        "actions": [
            {
                "type": "button",
                "action_id": action,
                "block_id": f"sursis:{correlation_id}",
                "value": correlation_id,
                "action_ts": str(time.time()),
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


def submission_body(user: str, view: dict[str, Any], reason: str | None) -> bytes:
    """An interactivity request: the `view_submission` of a modal this service opened, with what
    the person typed in its text input (None: left empty)."""
    values = {
        block["block_id"]: {block["element"]["action_id"]: {"type": "plain_text_input", "value": reason}}
        for block in view["blocks"]
        if block["type"] == "input"
    }
    payload = {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "example"},
        "user": {"id": user, "team_id": TEAM},
        "trigger_id": "1338.42.abcdef",
        "view": {
            "id": "V0VIEW",
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view.get("private_metadata", ""),
            "state": {"values": values},
        },
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


REQUIRED = {
    "chat.postMessage": ("channel",),
    "chat.update": ("channel", "ts"),
    "chat.postEphemeral": ("channel", "user", "text"),
    "conversations.replies": ("channel", "ts"),
    "conversations.history": ("channel",),
    "views.open": ("trigger_id", "view"),
    "users.info": ("user",),
}
USERS = {"U0USER": {"display_name": "mara", "real_name": "Mara Lind"}}
"""The workspace's people `users.info` knows."""


@dataclass
class FakeSlack:
    """Answers like the Web API; `calls` holds (method, arguments) of every accepted call."""

    token: str = BOT_TOKEN
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    messages: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    fail_next: int = 0
    rate_limit_next: int = 0
    """Answer this many next calls 429 with `Retry-After: retry_after`, as Slack's rate limits do."""
    retry_after: int = 4
    attempted_at: list[tuple[str, float]] = field(default_factory=list)
    """(method, monotonic time) of every authenticated call, refused or not."""
    _clock: float = 1_700_000_000.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def of(self, method: str) -> list[dict[str, Any]]:
        return [args for name, args in self.calls if name == method]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        method = scope["path"].rsplit("/", 1)[-1]
        status, answer = self.answer(method, headers, scope.get("query_string", b"").decode(), body)
        extra = [(b"retry-after", str(self.retry_after).encode())] if status == 429 else []
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json; charset=utf-8"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})
        self.changed.set()

    def answer(self, method: str, headers: dict[str, str], query: str, body: bytes) -> tuple[int, Any]:
        if headers.get("authorization") != f"Bearer {self.token}":
            self.refused.append((method, "invalid_auth"))
            return 200, {"ok": False, "error": "invalid_auth"}
        if method not in REQUIRED:
            self.refused.append((method, "unknown_method"))
            return 404, {"ok": False, "error": "unknown_method"}
        args = self._arguments(headers, query, body)
        self.attempted_at.append((method, time.monotonic()))
        if self.rate_limit_next > 0:
            self.rate_limit_next -= 1
            self.calls.append((method + ":limited", args))
            return 429, {"ok": False, "error": "ratelimited"}
        missing = [name for name in REQUIRED[method] if not args.get(name)]
        if method in ("chat.postMessage", "chat.update") and not (args.get("text") or args.get("blocks")):
            missing.append("text")
        if missing:
            self.refused.append((method, f"missing {missing}"))
            return 200, {"ok": False, "error": "invalid_arguments", "missing": missing}
        if not self._blocks_are_valid(args.get("blocks")):
            self.refused.append((method, "invalid_blocks"))
            return 200, {"ok": False, "error": "invalid_blocks"}
        if self.fail_next > 0:
            self.fail_next -= 1
            self.calls.append((method + ":failed", args))
            return 500, {"ok": False, "error": "internal_error"}
        self.calls.append((method, args))
        return 200, getattr(self, "_" + method.replace(".", "_"))(args)

    @staticmethod
    def _arguments(headers: dict[str, str], query: str, body: bytes) -> dict[str, Any]:
        args: dict[str, Any] = {k: v[0] for k, v in parse_qs(query).items()}
        if headers.get("content-type", "").startswith("application/json") and body:
            args.update(json.loads(body))
        elif body:
            args.update({k: v[0] for k, v in parse_qs(body.decode()).items()})
        return args

    @staticmethod
    def _blocks_are_valid(blocks: Any) -> bool:
        if blocks is None:
            return True
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        return isinstance(blocks, list) and all(isinstance(b, dict) and "type" in b for b in blocks)

    def _next_ts(self) -> str:
        self._clock += 1
        return f"{self._clock:.6f}"

    def _chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        ts = self._next_ts()
        message = {"ts": ts, "text": args.get("text"), "bot_id": "B0BOT", "metadata": args.get("metadata")}
        self.messages[(args["channel"], ts)] = {**message, "thread_ts": args.get("thread_ts")}
        return {"ok": True, "channel": args["channel"], "ts": ts, "message": message}

    def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (args["channel"], args["ts"])
        if key not in self.messages:
            return {"ok": False, "error": "message_not_found"}
        self.messages[key].update(text=args.get("text"), blocks=args.get("blocks"))
        return {"ok": True, "channel": args["channel"], "ts": args["ts"]}

    def _chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "message_ts": self._next_ts()}

    def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args["view"] if isinstance(args["view"], dict) else json.loads(args["view"])
        if view.get("type") != "modal" or not view.get("title") or not view.get("blocks"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True, "view": {"id": "V0VIEW", **view}}

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        profile = USERS.get(args["user"])
        if profile is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": {"id": args["user"], "name": profile["display_name"], "profile": profile}}

    def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        thread = args["ts"]
        found = [
            m
            for (channel, ts), m in self.messages.items()
            if channel == args["channel"] and (ts == thread or m.get("thread_ts") == thread)
        ]
        return {"ok": True, "messages": found, "has_more": False}

    def _conversations_history(self, args: dict[str, Any]) -> dict[str, Any]:
        found = [
            m
            for (channel, _), m in self.messages.items()
            if channel == args["channel"] and not m.get("thread_ts")
        ]
        return {"ok": True, "messages": found[::-1], "has_more": False}

    async def wait_for(self, method: str, count: int = 1, within: float = 15.0) -> list[dict[str, Any]]:
        async with asyncio.timeout(within):
            while len(self.of(method)) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.of(method)

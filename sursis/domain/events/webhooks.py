"""Webhooks: a workspace's operators subscribe a URL to some events; deliveries are signed.

Signature format (header `Sursis-Signature`)::

    t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body bytes)>

The receiver recomputes the HMAC over the timestamp, a dot and the exact body bytes it
received, compares in constant time, and rejects timestamps too far from its clock.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from urllib.parse import urlsplit

from sursis.domain.access import Permission
from sursis.domain.errors import NotFound, ValidationFailed
from sursis.domain.events.events import WEBHOOK_EVENT_TYPES
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import Principal
from sursis.domain.records.event_records import Webhook

# The shape of every URL `check_url` admits: http(s), a host without credentials (no `@`), then an
# optional path, query or fragment; no spaces or control characters. The OpenAPI document carries it.
WEBHOOK_URL_PATTERN = r"^https?://[^\s/?#@\x00-\x1f\x7f]+(?:[/?#][^\s\x00-\x1f\x7f]*)?$"
_URL_SHAPE = re.compile(WEBHOOK_URL_PATTERN)

SIGNATURE_HEADER = "Sursis-Signature"
SIGNATURE_TOLERANCE_SECONDS = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The `Sursis-Signature` header value for one delivery."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(
    secret: str, header: str, body: bytes, *, now: int, tolerance: int = SIGNATURE_TOLERANCE_SECONDS
) -> bool:
    """What a receiver does with the header: True when it was made with `secret` for this body."""
    fields: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        fields.setdefault(key, []).append(value)
    try:
        timestamp = int(fields["t"][0])
    except (KeyError, ValueError):
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, timestamp, body).split("v1=", 1)[1]
    return any(hmac.compare_digest(expected, candidate) for candidate in fields.get("v1", []))


def is_private_host(host: str) -> bool:
    """Loopback, private, link-local and other non-public addresses (and `localhost`)."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return not address.is_global


def check_url(url: str, *, allow_private_hosts: bool) -> str:
    """A webhook URL must be http(s), parse, carry no credentials, have a port in 1-65535, and (by
    default) name a public host."""
    problem = _url_problem(url, allow_private_hosts=allow_private_hosts)
    if problem is not None:
        raise ValidationFailed(f"webhook url {problem}", extra={"errors": [{"loc": ["url"], "msg": problem}]})
    return url


def _url_problem(url: str, *, allow_private_hosts: bool) -> str | None:
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https") or not hostname:
        return "must be an absolute http or https URL"
    if any(ch.isspace() or not ch.isprintable() for ch in url):
        return "must not contain spaces or control characters"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "must have a port between 1 and 65535"
    if parts.username or parts.password:
        return "must not carry credentials"
    if not allow_private_hosts and is_private_host(hostname):
        return "must not point at a loopback or private address"
    if not _URL_SHAPE.fullmatch(url):
        return "must be an absolute http or https URL"
    return None


def check_events(events: Sequence[str]) -> tuple[str, ...]:
    allowed = sorted(t.value for t in WEBHOOK_EVENT_TYPES)
    unknown = [e for e in events if e not in allowed]
    if not events or unknown:
        raise ValidationFailed(
            "webhook events must be a non-empty list of " + ", ".join(allowed),
            extra={
                "errors": [
                    {"loc": ["events"], "msg": f"unknown event types: {unknown}" if unknown else "empty"}
                ]
            },
        )
    return tuple(dict.fromkeys(events))


def _may_manage(principal: Principal, workspace: str) -> None:
    if not principal.can_see(workspace):
        raise NotFound("workspace not found")
    principal.require(Permission.MANAGE_WEBHOOKS)


class WebhookService:
    """Register, list and delete a workspace's webhooks (operators and admins)."""

    def __init__(
        self, uow: UnitOfWorkFactory, *, clock: Callable[[], datetime], allow_private_hosts: bool
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._allow_private_hosts = allow_private_hosts

    async def create(
        self, principal: Principal, url: str, events: Sequence[str], workspace: str | None
    ) -> Webhook:
        """The new webhook, with its signing secret: the only time the secret is shown."""
        ws = workspace or principal.workspace or "default"
        _may_manage(principal, ws)
        webhook = Webhook(
            id=uuid.uuid4(),
            workspace=ws,
            url=check_url(url, allow_private_hosts=self._allow_private_hosts),
            events=check_events(events),
            secret="whsec_" + secrets.token_urlsafe(32),
            created_by=principal.id,
            created_at=self._clock(),
        )
        async with self._uow() as uow:
            await uow.webhooks.add(webhook)
            await uow.commit()
        return webhook

    async def list_webhooks(self, principal: Principal) -> list[Webhook]:
        principal.require(Permission.MANAGE_WEBHOOKS)
        async with self._uow() as uow:
            if principal.is_admin:
                return await uow.webhooks.for_workspace(None)
            return await uow.webhooks.for_workspace(principal.workspace) if principal.workspace else []

    async def delete(self, principal: Principal, webhook_id: uuid.UUID) -> None:
        """Deliveries still queued for it are dropped by the delivery loop."""
        async with self._uow() as uow:
            webhook = await uow.webhooks.get(webhook_id)
            if webhook is None or not principal.can_see(webhook.workspace):
                raise NotFound("webhook not found")
            _may_manage(principal, webhook.workspace)
            await uow.webhooks.delete(webhook_id)
            await uow.commit()

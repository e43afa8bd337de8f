"""A real SMTP server in the test's own event loop (`aiosmtpd`), keeping what it receives."""

from __future__ import annotations

import asyncio
import email
import email.policy
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session


@dataclass
class Mailbox:
    """Every message accepted, parsed with the standard `email` package."""

    envelopes: list[tuple[str, list[str], EmailMessage]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.envelopes.append((str(envelope.mail_from), list(envelope.rcpt_tos), message))
        self.arrived.set()
        return "250 Message accepted for delivery"

    @property
    def messages(self) -> list[EmailMessage]:
        return [m for _, _, m in self.envelopes]

    async def wait_for(self, count: int, within: float = 20.0) -> list[EmailMessage]:
        async with asyncio.timeout(within):
            while len(self.envelopes) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.messages


@asynccontextmanager
async def smtp_server() -> AsyncIterator[tuple[Mailbox, int]]:
    """An SMTP server on a free loopback port: its mailbox and its port."""
    mailbox = Mailbox()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: SMTP(mailbox, hostname="mail.test", ident="test smtpd"), "127.0.0.1", 0
    )
    port = int(server.sockets[0].getsockname()[1])
    try:
        yield mailbox, port
    finally:
        server.close()
        await server.wait_closed()


def bodies(message: EmailMessage) -> tuple[str, str]:
    """The plain-text and the HTML part."""
    text = message.get_body(preferencelist=("plain",))
    html = message.get_body(preferencelist=("html",))
    assert text is not None and html is not None
    return str(text.get_content()), str(html.get_content())


def header(message: EmailMessage, name: str) -> Any:
    return message[name]

"""Email digests: each email binding's notices of one window, sent as one message over SMTP.

Windows are aligned on multiples of the window length. When a window has ended, the items of each
binding from before its end are gathered into one digest row (unique per binding and window: one
digest per window, never an empty one). Sending is at most once: the row is claimed (`sending`)
and committed before SMTP is spoken to, and marked `sent` after; a process that dies between the
two leaves the row `sending`, which is later marked `unknown` and never sent again. A send the
server refused outright (nothing accepted) goes back to `pending` with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid

import aiosmtplib
import structlog

from sursis.domain.audit.audit import actor_names
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import PendingCall
from sursis.domain.records.channel_records import Digest, DigestEnd, DigestItem, DigestItemKind
from sursis.infra.faults import crash_point

log = structlog.get_logger("sursis.channels.email")

WAITING = "Waiting for you"
STILL_WAITING = "Still waiting from earlier digests"
DECIDED = "Decided before this digest was sent"
HEADINGS = {
    DigestItemKind.CONVERSATION_STARTED: "Conversations the service started",
    DigestItemKind.RUN_FAILED: "Runs that failed",
}
EARLIER_LIMIT = 50
"""How many of a binding's earlier waiting lines are looked at again for "still waiting"."""


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a digest as sent: the item and what is true of it at send time."""

    item: DigestItem
    note: str = ""


@dataclass(frozen=True, slots=True)
class DigestView:
    """A digest's sections as they stand when it is sent, in order, empty ones left out."""

    sections: tuple[tuple[str, tuple[Line, ...]], ...]

    @property
    def count(self) -> int:
        return sum(len(lines) for _, lines in self.sections)


@dataclass(frozen=True, slots=True)
class SmtpConfig:
    host: str | None
    port: int
    starttls: bool
    username: str | None
    password: str | None
    sender: str
    timeout: float


def window_end(now: datetime, window: timedelta) -> datetime:
    """The start of the window `now` is in, i.e. the end of the last finished one."""
    seconds = window.total_seconds()
    return datetime.fromtimestamp((now.timestamp() // seconds) * seconds, UTC)


def inbox_link(inbox: str, item: DigestItem) -> str:
    """A waiting call opens in the inbox (`#call=<correlation_id>`); anything else links the inbox."""
    correlation_id = item.data.get("correlation_id")
    return f"{inbox}#call={correlation_id}" if correlation_id else inbox


class DigestSender:
    """Opens the digests of finished windows and sends them. Safe in any number of processes."""

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        smtp: SmtpConfig,
        *,
        window: timedelta,
        clock: Callable[[], datetime],
        poll_seconds: float,
        inbox_url: str,
        max_attempts: int = 6,
        backoff: Callable[[int], timedelta] = lambda n: timedelta(seconds=min(300, 2**n)),
    ) -> None:
        self._uow = uow
        self._smtp = smtp
        self._window = window
        self._clock = clock
        self._poll = poll_seconds
        self._inbox_url = inbox_url
        self._max_attempts = max_attempts
        self._backoff = backoff

    async def run(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await self.run_once()
            except Exception:
                log.exception("digest.loop_error")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self._poll)

    async def run_once(self) -> int:
        """Open what finished windows hold, send what is due; returns how many digests were sent."""
        if self._smtp.host is None:
            return 0
        now = self._clock()
        async with self._uow() as uow:
            await uow.channels.abandon_stale_digests(now)
            await uow.channels.open_digests(window_end(now, self._window), now)
            digests = await uow.channels.claim_digests(
                now, now + timedelta(seconds=self._smtp.timeout * 3), 20
            )
            await uow.commit()
        sent = 0
        for digest in digests:
            sent += await self._send(digest)
        return sent

    async def as_it_stands(self, digest: Digest) -> DigestView:
        """The digest as true now: of its waiting calls, those still waiting and those decided
        since (with the decision and who made it), then the binding's calls listed by earlier
        digests that still wait ("waiting since ..."), then the other notices."""
        async with self._uow.reader() as uow:
            waiting: list[Line] = []
            decided: list[Line] = []
            listed: set[str] = set()
            for item in digest.items:
                if item.kind is not DigestItemKind.APPROVAL_WAITING:
                    continue
                listed.add(str(item.data.get("correlation_id")))
                call = await _call_of(uow, item)
                if call is None or call.status.value == "awaiting":
                    waiting.append(Line(item))
                else:
                    decided.append(Line(item, await _decision(uow, call)))
            still: list[Line] = []
            earlier = await uow.channels.listed_earlier(
                digest.binding.id, DigestItemKind.APPROVAL_WAITING, digest.id, EARLIER_LIMIT
            )
            for item in sorted(earlier, key=lambda i: i.created_at):
                key = str(item.data.get("correlation_id"))
                if key in listed:
                    continue
                listed.add(key)
                call = await _call_of(uow, item)
                if call is not None and call.status.value == "awaiting":
                    still.append(Line(item, f"waiting since {_when(item.created_at)}"))
        sections: list[tuple[str, tuple[Line, ...]]] = [
            (WAITING, tuple(waiting)),
            (STILL_WAITING, tuple(still)),
            (DECIDED, tuple(decided)),
        ]
        for kind, heading in HEADINGS.items():
            sections.append((heading, tuple(Line(i) for i in digest.items if i.kind is kind)))
        return DigestView(tuple((heading, lines) for heading, lines in sections if lines))

    async def _send(self, digest: Digest) -> int:
        crash_point("digest_claimed")
        error: str | None = None
        try:
            await aiosmtplib.send(
                self.compose(digest, await self.as_it_stands(digest)),
                hostname=self._smtp.host,
                port=self._smtp.port,
                start_tls=self._smtp.starttls,
                username=self._smtp.username,
                password=self._smtp.password,
                timeout=self._smtp.timeout,
            )
        except (aiosmtplib.SMTPException, OSError) as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        crash_point("digest_sent")
        now = self._clock()
        async with self._uow() as uow:
            if error is None:
                end = DigestEnd("sent")
            elif digest.attempts >= self._max_attempts:
                end = DigestEnd("failed", error)
            else:
                end = DigestEnd("pending", error, retry_at=now + self._backoff(digest.attempts))
            await uow.channels.finish_digest(digest.id, end, now)
            await uow.commit()
        log.info("digest.attempt", digest_id=str(digest.id), items=len(digest.items), error=error)
        return 1 if error is None else 0

    def compose(self, digest: Digest, view: DigestView) -> EmailMessage:
        """The digest as text and HTML, each line with a link to the inbox."""
        message = EmailMessage()
        count = view.count
        message["Subject"] = f"Sursis digest: {count} notice{'s' if count != 1 else ''}"
        message["From"] = self._smtp.sender
        message["To"] = digest.binding.email or ""
        message["Date"] = format_datetime(self._clock())
        message["Message-ID"] = make_msgid(idstring=digest.id.hex)
        message["X-Sursis-Digest-Id"] = str(digest.id)
        inbox = self._inbox_url
        sent_at = _when(self._clock())
        lines = [f"What happened until {digest.window_end.isoformat()}, as it stands at {sent_at}:", ""]
        parts = [
            f"<p>What happened until {html.escape(digest.window_end.isoformat())}, "
            f"as it stands at {html.escape(sent_at)}:</p>"
        ]
        for heading, section in view.sections:
            lines += [heading, "-" * len(heading)]
            parts.append(f"<h2>{html.escape(heading)}</h2><ul>")
            for line in section:
                link = inbox_link(inbox, line.item)
                summary = f"{line.item.summary} ({line.note})" if line.note else line.item.summary
                lines.append(f"* {summary}\n  {link}")
                anchor = f'<a href="{html.escape(link)}">open in the inbox</a>'
                parts.append(f"<li>{html.escape(summary)} — {anchor}</li>")
            lines.append("")
            parts.append("</ul>")
        lines.append(f"Inbox: {inbox}")
        parts.append(f'<p><a href="{html.escape(inbox)}">Open the inbox</a></p>')
        message.set_content("\n".join(lines))
        message.add_alternative("<html><body>" + "".join(parts) + "</body></html>", subtype="html")
        return message


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _call_of(uow: UnitOfWork, item: DigestItem) -> PendingCall | None:
    try:
        correlation_id = uuid.UUID(str(item.data.get("correlation_id")))
    except ValueError:
        return None
    return await uow.pending.get(correlation_id)


async def _decision(uow: UnitOfWork, call: PendingCall) -> str:
    """`approved by mara at ...`: what became of a call, by whom (a key's name), and when."""
    names = await actor_names(uow, [call.resolved_by])
    who = names.get(call.resolved_by or "") or call.resolved_by
    by = f" by {who}" if who else ""
    at = f" at {_when(call.resolved_at)}" if call.resolved_at else ""
    return f"{call.status.value}{by}{at}"

"""What the channels context needs from storage.

Beside the unit of work's other ports rather than in `channels/`: `ports.UnitOfWork` names
`ChannelRepository`, and the channels package imports `ports`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sursis.domain.records.channel_records import (
    ChannelBinding,
    Digest,
    DigestEnd,
    DigestItem,
    DigestItemKind,
    SlackAddress,
    SlackIdentity,
    SlackPost,
)


class ChannelRepository(Protocol):
    """Bindings, Slack identities, Slack event ids and posts, and email digests."""

    async def add_binding(self, binding: ChannelBinding) -> None: ...
    async def get_binding(self, binding_id: uuid.UUID) -> ChannelBinding | None: ...
    async def delete_binding(self, binding_id: uuid.UUID) -> bool: ...
    async def slack_binding(self, address: SlackAddress) -> ChannelBinding | None:
        """The binding of this Slack thread, if a conversation was started from it."""
        ...

    async def bindings_for(self, conversation_id: uuid.UUID, workspace: str) -> list[ChannelBinding]:
        """Every binding a conversation's notices go to: its own, and its workspace's."""
        ...

    async def start_thread(self, binding_id: uuid.UUID, thread_ts: str) -> None:
        """Record the `ts` of the message that opened a binding's thread."""
        ...

    async def list_bindings(
        self, workspace: str | None, conversation_id: uuid.UUID | None
    ) -> list[ChannelBinding]: ...

    async def map_slack_user(self, identity: SlackIdentity) -> None:
        """Insert or replace the mapping of `(team_id, user_id)`."""
        ...

    async def slack_identity(self, team_id: str, user_id: str) -> SlackIdentity | None: ...
    async def list_slack_users(self) -> list[SlackIdentity]: ...
    async def delete_slack_user(self, team_id: str, user_id: str) -> bool: ...
    async def remember_slack_event(self, event_id: str, now: datetime) -> bool:
        """Record an Events API `event_id`; False when it was recorded before (a retry or a replay)."""
        ...

    async def record_slack_post(self, delivery_id: int, post: SlackPost, now: datetime) -> None: ...

    async def slack_post_ts(self, delivery_id: int) -> str | None:
        """The `ts` of what delivery `delivery_id` posted, if it was recorded as posted."""
        ...

    async def approval_posts(self, correlation_id: uuid.UUID, binding_id: uuid.UUID) -> list[tuple[str, str]]:
        """`(channel_id, ts)` of the approval messages posted for a pending call to one binding."""
        ...

    async def add_digest_items(self, items: Sequence[DigestItem]) -> None: ...
    async def open_digests(self, window_end: datetime, now: datetime) -> int:
        """Gather each email binding's unlisted items from before `window_end` into one digest for
        that window (at most one per binding and window); returns how many digests were opened."""
        ...

    async def claim_digests(self, now: datetime, claimed_until: datetime, limit: int) -> list[Digest]:
        """Due digests moved to `sending` (attempts counted up) with their binding and items."""
        ...

    async def listed_earlier(
        self, binding_id: uuid.UUID, kind: DigestItemKind, digest_id: uuid.UUID, limit: int
    ) -> list[DigestItem]:
        """The newest `limit` items of `kind` a binding's other digests listed (earlier windows)."""
        ...

    async def finish_digest(self, digest_id: uuid.UUID, end: DigestEnd, now: datetime) -> None:
        """`sent`, `failed`, or back to `pending` until `retry_at` (a send refused before any of it
        was accepted)."""
        ...

    async def abandon_stale_digests(self, now: datetime) -> int:
        """Digests left in `sending` past their claim (the process died mid-send) become `unknown`
        and are never sent again (at most once); returns how many."""
        ...

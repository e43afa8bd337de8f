"""The conversations' port, and what a claim made in a later transaction than its read needs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sursis.domain.errors import Error
from sursis.domain.records import Conversation


class HeldConditionFailed(Error):
    """A conditional write the store held to the commit matched nothing: nothing was written."""

    code = "held_condition_failed"


@dataclass(frozen=True, slots=True)
class SeenConversation:
    """A conversation as a reader saw it (`ConversationRepository.seen`), for a claim in a later
    transaction that holds only while the row is that version. `version` and `log` are the store's."""

    conversation: Conversation
    version: object = None
    log: object = None


class ConversationRepository(Protocol):
    async def add(self, conversation: Conversation) -> None: ...
    async def get(self, conversation_id: uuid.UUID) -> Conversation | None: ...
    async def purged(self, conversation_id: uuid.UUID) -> str | None:
        """The workspace of a conversation retention purged (its tombstone); None otherwise."""
        ...

    async def forks(self, conversation_id: uuid.UUID) -> list[Conversation]:
        """The conversations forked from this one, oldest first."""
        ...

    async def claim_active_run(
        self,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID,
        now: datetime,
        *,
        log_after: int | None = None,
        seen: SeenConversation | None = None,
    ) -> bool:
        """Set the active run only if there is none; False when another run holds it. With
        `log_after` (the seq of its log the caller has read up to), the log after it may be read by
        the same statement, for this transaction's next `messages.read` of it. With `seen`, the
        claim may be held to the commit, as the transaction's first statement, holding only if the
        row is still the version `seen` read (the log read with it then current): True, and the
        commit raises `HeldConditionFailed` if it does not hold."""
        ...

    async def seen(self, conversation_id: uuid.UUID, log_after: int | None) -> SeenConversation | None:
        """The conversation (None: there is none), with its row's version and, with `log_after`, its
        log after it read in the same statement, for `claim_active_run(seen=)`."""
        ...

    async def release_active_run(
        self, conversation_id: uuid.UUID, run_id: uuid.UUID, now: datetime
    ) -> None: ...

"""The audit log as operators read it, and the names of the API keys that acted."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.access import Permission
from sursis.domain.paging import Page
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import AuditEntry, Principal


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Filters of the audit log (`actions`: any of them); rows come in id order, or newest first,
    and `after_id` is the keyset cursor: the id of the last row of the previous page."""

    conversation_id: uuid.UUID | None = None
    correlation_id: uuid.UUID | None = None
    actions: tuple[str, ...] = ()
    since: datetime | None = None
    after_id: int | None = None
    limit: int = 50
    newest_first: bool = False


@dataclass
class AuditService:
    """Read the audit log: the caller's workspace, or every workspace for an admin."""

    uow: UnitOfWorkFactory

    async def list_audit(self, principal: Principal, query: AuditQuery) -> Page[AuditEntry, int]:
        """Audit rows in the order they were written (or newest first): the caller's workspace, or
        all for an admin. Rows whose actor is an API key carry the key's name."""
        principal.require(Permission.READ_AUDIT)
        if not principal.is_admin and principal.workspace is None:
            return Page([], None)
        async with self.uow.reader() as uow:
            rows = await uow.audit.search(
                workspace=None if principal.is_admin else principal.workspace,
                conversation_id=query.conversation_id,
                correlation_id=query.correlation_id,
                actions=query.actions,
                since=query.since,
                after_id=query.after_id,
                limit=query.limit + 1,
                newest_first=query.newest_first,
            )
            page = Page.of(rows, query.limit, _row_id)
            names = await actor_names(uow, {row.actor for row in page.items})
        for row in page.items:
            row.actor_name = names.get(row.actor)
        return page


def _row_id(entry: AuditEntry) -> int:
    assert entry.id is not None, "a stored audit row has an id"
    return entry.id


async def actor_names(uow: UnitOfWork, actors: Iterable[str | None]) -> dict[str, str]:
    """The names of the actors that are API keys (by key id). The other actors (`cli`, `system:*`,
    `authorization:<id>`) are not keys and are left out: they name themselves."""
    by_id: dict[uuid.UUID, str] = {}
    for actor in actors:
        try:
            by_id[uuid.UUID(actor or "")] = actor or ""
        except ValueError:
            continue
    names = await uow.api_keys.names(list(by_id))
    return {by_id[key_id]: name for key_id, name in names.items()}

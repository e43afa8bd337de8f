"""The audit log as operators read it, and the names of the API keys that acted."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from sursis.domain.access import Permission
from sursis.domain.paging import Page
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import AuditEntry, AuditQuery, Principal


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
            workspace = None if principal.is_admin else principal.workspace
            rows = await uow.audit.search(workspace, replace(query, limit=query.limit + 1))
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

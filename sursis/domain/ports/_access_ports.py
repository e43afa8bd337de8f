"""Ports of who may act: API keys and pre-approvals in storage."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sursis.domain.records.access_records import ApiKey, Authorization


class ApiKeyRepository(Protocol):
    async def add(self, key: ApiKey) -> None: ...
    async def get(self, key_id: uuid.UUID) -> ApiKey | None: ...
    async def by_hash(self, key_hash: str) -> ApiKey | None: ...
    async def names(self, key_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of these keys (revoked ones included); unknown ids are left out."""
        ...

    async def search(self, *, include_revoked: bool) -> list[ApiKey]: ...
    async def count(self) -> int:
        """All keys ever made, revoked ones included."""
        ...

    async def revoke(self, key_id: uuid.UUID, now: datetime) -> bool:
        """Conditional write: only a key that is not revoked yet; False otherwise."""
        ...

    async def link_person(self, key_id: uuid.UUID, person: str | None) -> None:
        """Link the key to a person (None: unlink); every process forgets the key's cached principal."""
        ...


class AuthorizationRepository(Protocol):
    async def add(self, authorization: Authorization) -> None: ...
    async def get(self, authorization_id: uuid.UUID) -> Authorization | None: ...
    async def search(
        self, *, workspace: str | None, include_inactive: bool, now: datetime
    ) -> list[Authorization]: ...
    async def candidates(self, workspace: str, tool_name: str, now: datetime) -> list[Authorization]:
        """Not revoked, not expired, for this workspace and tool: the rules a call is checked against."""
        ...

    async def revoke(self, authorization_id: uuid.UUID, now: datetime) -> bool:
        """Conditional write: only an authorization that is not revoked yet; False otherwise."""
        ...

    async def unsealed(self) -> list[Authorization]:
        """Pre-approvals not revoked that carry no seal: made before decisions were sealed."""
        ...

    async def seal_stored(self, authorization: Authorization) -> bool:
        """Seal a pre-approval as it is stored (`sursis encryption seal-existing`); False when it
        was sealed meanwhile."""
        ...

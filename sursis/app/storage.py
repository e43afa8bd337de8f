"""What a command of the command line works with: the storage the API and the worker are built
with (`sursis.app.wiring.storage.wire_storage`), checked to be at the migrations' head and usable
with the keyring, and closed when the command is done."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

from sursis.app.settings import Settings
from sursis.app.wiring.storage import build_audit_chain as build_audit_chain
from sursis.app.wiring.storage import build_cipher as build_cipher
from sursis.app.wiring.storage import build_unit_of_work as build_unit_of_work
from sursis.app.wiring.storage import check_storage, wire_storage
from sursis.domain.identity.keys import KeyService
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.domain.retention.retention import RetentionService
from sursis.infra.db.encryption_state import EncryptionState
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.encryption import AesGcmCipher

T = TypeVar("T")


@dataclass
class Storage:
    """What a command of the command line works with: the same unit of work (and cipher) and the
    same services the API and the worker are built with."""

    settings: Settings
    uow: SqlUnitOfWorkFactory
    encryption: EncryptionState
    audit_chain: AuditChainService
    retention: RetentionService
    keys: KeyService

    @property
    def cipher(self) -> AesGcmCipher:
        cipher = self.uow.cipher
        assert isinstance(cipher, AesGcmCipher)
        return cipher


@asynccontextmanager
async def open_storage(settings: Settings) -> AsyncIterator[Storage]:
    """The storage of a command: checked to be at the migrations' head and usable with the
    keyring (else `DatabaseNotReady` / `EncryptionRefused`), closed on exit."""
    from sursis.infra.db.readiness import require_head

    parts = wire_storage(settings.storage)  # a malformed keyring is refused first, without a connection
    try:
        await require_head(settings.database_url)
        encryption = await check_storage(parts.uow)
        yield Storage(settings, parts.uow, encryption, parts.audit_chain, parts.retention, parts.keys)
    finally:
        await parts.uow.engine.dispose()


def with_storage(settings: Settings, use: Callable[[Storage], Awaitable[T]]) -> T:
    """Run `use` over the storage every command of the command line shares with the API and the
    worker (same cipher, same services); refused before anything is read or written when the
    database is not at head or may not be used with this keyring."""

    async def main() -> T:
        async with open_storage(settings) as storage:
            return await use(storage)

    return asyncio.run(main())

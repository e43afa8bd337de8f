"""The storage half of the composition root: the engine, the cipher, the unit of work and the
services over them, built the same way for the API, the worker, embedded use and every command
of the command line (none builds a unit of work of its own)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.app.settings import Settings
from sursis.domain.audit_verify import AuditChainService
from sursis.domain.clock import utcnow
from sursis.domain.keys import NO_WORKSPACE, KeyService
from sursis.domain.records import AuditEntry
from sursis.domain.retention import RetentionService
from sursis.infra.checkpoint_log import FileCheckpointLog
from sursis.infra.db.encryption_state import EncryptionState, check_encryption
from sursis.infra.db.engine import PoolLimits, create_engine
from sursis.infra.db.rotation import SealedValues
from sursis.infra.db.uow import EventsListener, PendingListener, RunsListener, SqlUnitOfWorkFactory
from sursis.infra.encryption import AesGcmCipher, load_keyring
from sursis.infra.encryption.signing import Ed25519Signer

log = structlog.get_logger("sursis.audit")
T = TypeVar("T")


def build_cipher(settings: Settings) -> AesGcmCipher:
    """The cipher over the keyring the settings name (no keys: encryption off)."""
    keys = settings.encryption_keys.get_secret_value() if settings.encryption_keys else None
    return AesGcmCipher(load_keyring(keys, settings.encryption_keys_file))


def build_signer(settings: Settings) -> Ed25519Signer | None:
    path = settings.audit_signing_key_file
    return Ed25519Signer.from_file(path) if path is not None else None


def pool_limits(settings: Settings) -> PoolLimits:
    """The process's share of the database's connections (docs/operations.md)."""
    return PoolLimits(
        size=settings.db_pool_size,
        overflow=settings.db_pool_overflow,
        timeout=settings.db_pool_timeout_seconds,
    )


def build_engine(settings: Settings) -> AsyncEngine:
    return create_engine(settings.database_url, limits=pool_limits(settings))


def build_unit_of_work(
    settings: Settings,
    engine: AsyncEngine | None = None,
    *,
    on_events: EventsListener | None = None,
    on_pending: PendingListener | None = None,
    on_runs: RunsListener | None = None,
) -> SqlUnitOfWorkFactory:
    engine = engine or build_engine(settings)
    return SqlUnitOfWorkFactory(
        engine, on_events=on_events, on_pending=on_pending, on_runs=on_runs, cipher=build_cipher(settings)
    )


def _signing_refused(workspace: str, reason: str) -> None:
    log.error("audit.checkpoint_refused", workspace=workspace, reason=reason)


def build_audit_chain(settings: Settings, uow: SqlUnitOfWorkFactory) -> AuditChainService:
    directory = settings.audit_checkpoint_dir
    return AuditChainService(
        uow,
        utcnow,
        signer=build_signer(settings),
        on_refused=_signing_refused,
        external=FileCheckpointLog(directory) if directory is not None else None,
    )


def build_retention(
    settings: Settings, uow: SqlUnitOfWorkFactory, chain: AuditChainService
) -> RetentionService:
    return RetentionService(uow, utcnow, batch=settings.retention_batch, chain=chain)


async def check_storage(uow: SqlUnitOfWorkFactory) -> EncryptionState:
    """Refuse (`EncryptionRefused`) a keyring the database may not be used with; see
    `infra/db/encryption_state.py`."""
    cipher = uow.cipher
    assert isinstance(cipher, AesGcmCipher)
    state = await check_encryption(uow.engine, cipher.keys, utcnow())
    cipher.refuses_plaintext = state.on  # an encrypted database serves no unsealed value
    if state.sealed_at_start is not None and state.sealed_at_start.rows:
        await record_sealed_existing(uow, "system:start", state.sealed_at_start)
    return state


async def record_sealed_existing(uow: SqlUnitOfWorkFactory, actor: str, sealed: SealedValues) -> None:
    """The audit row of values sealed as they were found (encryption turned on, or
    `sursis encryption seal-existing`): how many, in which columns, under which key."""
    key_id = uow.cipher.active_key_id if uow.cipher else None
    details: dict[str, Any] = {"key_id": key_id, "values": sealed.values, "columns": dict(sealed.columns)}
    async with uow() as work:
        await work.audit.append(
            AuditEntry("encryption.sealed_existing", actor, NO_WORKSPACE, details=details), utcnow()
        )
        await work.commit()


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

    uow = build_unit_of_work(settings)  # a malformed keyring is refused first, without a connection
    try:
        await require_head(settings.database_url)
        encryption = await check_storage(uow)
        chain = build_audit_chain(settings, uow)
        yield Storage(
            settings,
            uow,
            encryption,
            chain,
            build_retention(settings, uow, chain),
            KeyService(uow),
        )
    finally:
        await uow.engine.dispose()


def with_storage(settings: Settings, use: Callable[[Storage], Awaitable[T]]) -> T:
    """Run `use` over the storage every command of the command line shares with the API and the
    worker (same cipher, same services); refused before anything is read or written when the
    database is not at head or may not be used with this keyring."""

    async def main() -> T:
        async with open_storage(settings) as storage:
            return await use(storage)

    return asyncio.run(main())

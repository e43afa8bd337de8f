"""Storage: the engine, the cipher, the unit of work with its notifier and LISTEN connection, and the
services over stored rows that every entry point shares (the API, the worker, embedded use and
every command of the command line: none builds a unit of work of its own)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.app.context_settings import StorageSettings
from sursis.domain.audit.audit import AuditService
from sursis.domain.audit.audit_checkpoint import CheckpointLog, CheckpointLogUnusable, CheckpointSigner
from sursis.domain.clock import utcnow
from sursis.domain.identity.credential_cache import CredentialCache
from sursis.domain.identity.keys import NO_WORKSPACE, KeyService
from sursis.domain.identity.people import ProvisioningService, rules_from_setting
from sursis.domain.notified_cache import Invalidations
from sursis.domain.records import AuditEntry
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.domain.retention.retention import RetentionService
from sursis.infra.checkpoint_log import FileCheckpointLog
from sursis.infra.db import tables as t
from sursis.infra.db.encryption_state import EncryptionState, check_encryption
from sursis.infra.db.engine import PoolLimits, create_engine, is_sqlite
from sursis.infra.db.listen_connection import ListenConnection
from sursis.infra.db.listener import PgEventListener
from sursis.infra.db.rotation import SealedValues
from sursis.infra.db.uow import EventsListener, PendingListener, RunsListener, SqlUnitOfWorkFactory
from sursis.infra.db.urls import listen_url
from sursis.infra.encryption import AesGcmCipher, load_keyring
from sursis.infra.encryption.signing import Ed25519Signer, SigningKeyInvalid
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.pg_notify import PostgresRunNotifier
from sursis.infra.wakeup import Hearing

log = structlog.get_logger("sursis.audit")


@dataclass(slots=True, kw_only=True)
class StorageParts:
    """What `wire_storage` offers; the container is built on it (`Container` inherits these)."""

    uow: SqlUnitOfWorkFactory
    notifier: LocalRunNotifier
    """In-process wake-ups; on PostgreSQL also NOTIFY/LISTEN between processes."""
    listener: PgEventListener | None
    """Wakes this process's event streams on commits made elsewhere (PostgreSQL with LISTEN on)."""
    hearing: Hearing
    """What wakes the worker's background loops, and how long they may sleep (`wakeup.py`)."""
    credentials: CredentialCache | None
    keys: KeyService
    audit: AuditService
    audit_chain: AuditChainService
    retention: RetentionService
    provisioning: ProvisioningService
    """Which provider groups sign in as which role and workspace (`SURSIS_OIDC_GROUPS` and stored rules)."""


def wire_storage(settings: StorageSettings, *, changes: Invalidations | None = None) -> StorageParts:
    """The storage of one process. `changes` hears of pre-approval and policy changes made by other
    processes (the policy caches). One LISTEN connection per process is shared by every listener;
    nothing connects until the notifier or the listener is started."""
    engine = build_engine(settings)
    sqlite = is_sqlite(settings.database_url)
    listening = listen_url(settings.database_url, settings.database_listen_url)
    listen = None if listening is None or sqlite else ListenConnection(listening)
    notifier = (
        sqlite_notifier(settings, watch=listening is not None)
        if sqlite
        else PostgresRunNotifier(engine, listen, authorizations=changes)
    )
    uow = build_unit_of_work(
        settings,
        engine,
        on_events=notifier.conversations_changed,
        on_pending=notifier.pending_changed,
        on_runs=notifier.runs_notified,
    )
    credentials = (
        CredentialCache(settings.credential_cache_seconds, live=sqlite)
        if settings.credential_cache_seconds > 0
        else None
    )
    listener = (
        None
        if listen is None
        else PgEventListener(
            listen, notifier.conversations_changed, on_pending=notifier.pending_changed, keys=credentials
        )
    )
    chain = build_audit_chain(settings, uow)
    return StorageParts(
        uow=uow,
        notifier=notifier,
        listener=listener,
        hearing=Hearing(notifier, settings.idle_poll_seconds, hears_others(notifier, listener)),
        credentials=credentials,
        keys=KeyService(uow, cache=credentials),
        audit=AuditService(uow),
        audit_chain=chain,
        retention=build_retention(settings, uow, chain),
        provisioning=ProvisioningService(uow, utcnow, rules_from_setting(settings.oidc_groups)),
    )


def sqlite_notifier(settings: StorageSettings, *, watch: bool) -> LocalRunNotifier:
    """On an SQLite file, the watch of its `data_version` (`sqlite_watch.py`) unless wake-ups are
    off (`SURSIS_DATABASE_LISTEN_URL=off`); in memory, wake-ups inside the process only. (Imported
    here: a process on PostgreSQL loads no `sqlite3`.)"""
    from sursis.infra.db.sqlite_watch import SqliteRunNotifier, database_file

    path = database_file(settings.database_url)
    if path is None or not watch:
        return LocalRunNotifier()
    return SqliteRunNotifier(path, settings.worker_poll_seconds)


def hears_others(notifier: LocalRunNotifier, listener: PgEventListener | None) -> Callable[[], bool]:
    """Whether changes made by other processes reach this one now: on PostgreSQL both LISTEN
    subscriptions are up (the queue's, and the events' and pending calls'); on an SQLite file, the
    watch of its `data_version` reads it."""
    if isinstance(notifier, PostgresRunNotifier):
        if listener is None:
            return lambda: False
        return lambda: notifier.listening.is_set() and listener.listening.is_set()
    from sursis.infra.db.sqlite_watch import SqliteRunNotifier

    if isinstance(notifier, SqliteRunNotifier):
        return notifier.listening.is_set
    return lambda: False


def build_cipher(settings: StorageSettings) -> AesGcmCipher:
    """The cipher over the keyring the settings name (no keys: encryption off); its decision
    sealer works in the PKCS#11 token when `SURSIS_DECISION_SEAL_PKCS11_KEY` names a key there."""
    keys = settings.encryption_keys.get_secret_value() if settings.encryption_keys else None
    cipher = AesGcmCipher(load_keyring(keys, settings.encryption_keys_file))
    if settings.decision_seal_pkcs11_key is not None:
        from sursis.infra.encryption.pkcs11_seal import Pkcs11DecisionSealer

        module, token, pin = token_parts(settings)
        cipher.decision_sealer = Pkcs11DecisionSealer(
            cipher.keys, module, token, settings.decision_seal_pkcs11_key, pin
        )
    return cipher


def token_parts(settings: StorageSettings) -> tuple[Path, str, str]:
    """The PKCS#11 token's module, label and PIN; `SigningKeyInvalid` naming what is missing."""
    module = settings.audit_signing_pkcs11_module
    token, pin = settings.audit_signing_pkcs11_token, settings.audit_signing_pkcs11_pin
    missing = [n for n, v in (("MODULE", module), ("TOKEN", token), ("PIN", pin)) if not v]
    if module is None or token is None or pin is None or missing:
        names = ", ".join(f"SURSIS_AUDIT_SIGNING_PKCS11_{n}" for n in missing)
        raise SigningKeyInvalid(f"a key in a PKCS#11 token also needs {names}")
    return module, token, pin.get_secret_value()


def build_signer(settings: StorageSettings) -> CheckpointSigner | None:
    """The audit signing key: in a PKCS#11 token when one is configured, else the key file."""
    token_only_seals = settings.decision_seal_pkcs11_key is not None and not settings.audit_signing_pkcs11_key
    if settings.audit_signing_pkcs11_module is not None and not token_only_seals:
        return build_pkcs11_signer(settings)
    path = settings.audit_signing_key_file
    return Ed25519Signer.from_file(path) if path is not None else None


def pkcs11_parts(settings: StorageSettings) -> tuple[Path, str, str, str]:
    """The token's module, label, key label and PIN; `SigningKeyInvalid` naming what is missing."""
    module, token, pin = token_parts(settings)
    key = settings.audit_signing_pkcs11_key
    if not key:
        raise SigningKeyInvalid("a PKCS#11 audit signing key also needs SURSIS_AUDIT_SIGNING_PKCS11_KEY")
    if settings.audit_signing_key_file is not None:
        raise SigningKeyInvalid(
            "set SURSIS_AUDIT_SIGNING_PKCS11_MODULE or SURSIS_AUDIT_SIGNING_KEY_FILE, not both"
        )
    return module, token, key, pin


def build_pkcs11_signer(settings: StorageSettings) -> CheckpointSigner:
    from sursis.infra.encryption.pkcs11_signer import Pkcs11Signer

    return Pkcs11Signer(*pkcs11_parts(settings))


def pool_limits(settings: StorageSettings) -> PoolLimits:
    """The process's share of the database's connections (docs/operations.md)."""
    return PoolLimits(
        size=settings.db_pool_size,
        overflow=settings.db_pool_overflow,
        timeout=settings.db_pool_timeout_seconds,
    )


def build_engine(settings: StorageSettings) -> AsyncEngine:
    return create_engine(settings.database_url, limits=pool_limits(settings))


def build_unit_of_work(
    settings: StorageSettings,
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


def build_checkpoint_log(settings: StorageSettings) -> CheckpointLog | None:
    """Where signed checkpoints are also kept outside the database: a bucket, a directory, or none."""
    directory, bucket = settings.audit_checkpoint_dir, settings.audit_checkpoint_s3_bucket
    if bucket is not None and directory is not None:
        raise CheckpointLogUnusable(
            "set SURSIS_AUDIT_CHECKPOINT_S3_BUCKET or SURSIS_AUDIT_CHECKPOINT_DIR, not both"
        )
    if bucket is not None:
        from sursis.infra.s3_checkpoint_log import S3CheckpointLog

        return S3CheckpointLog(
            bucket,
            prefix=settings.audit_checkpoint_s3_prefix,
            endpoint_url=settings.audit_checkpoint_s3_endpoint_url,
            retention_days=settings.audit_checkpoint_s3_retention_days,
        )
    return FileCheckpointLog(directory) if directory is not None else None


def build_audit_chain(settings: StorageSettings, uow: SqlUnitOfWorkFactory) -> AuditChainService:
    return AuditChainService(
        uow,
        utcnow,
        signer=build_signer(settings),
        on_refused=_signing_refused,
        external=build_checkpoint_log(settings),
    )


def build_retention(
    settings: StorageSettings, uow: SqlUnitOfWorkFactory, chain: AuditChainService
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


async def unsealed_pre_approvals(uow: SqlUnitOfWorkFactory) -> int:
    """Pre-approvals not revoked that carry no seal (made before decisions were sealed): with a
    keyring they lift nothing until `sursis encryption seal-existing` seals them."""
    async with uow.engine.connect() as conn:
        c = t.authorizations.c
        query = sa.select(sa.func.count()).where(c.seal.is_(None), c.revoked_at.is_(None))
        return int(await conn.scalar(query) or 0)


async def seal_pre_approvals(uow: SqlUnitOfWorkFactory, actor: str) -> int:
    """Seal every unsealed pre-approval as it is stored, one audit row each
    (`authorization.sealed_existing`): the operator's deliberate step after upgrading."""
    sealed = 0
    async with uow() as work:
        for authorization in await work.authorizations.unsealed():
            if await work.authorizations.seal_stored(authorization):
                sealed += 1
                details = {"authorization_id": str(authorization.id), "tool_name": authorization.tool_name}
                entry = AuditEntry(
                    "authorization.sealed_existing", actor, authorization.workspace, details=details
                )
                await work.audit.append(entry, utcnow())
        await work.commit()
    return sealed


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

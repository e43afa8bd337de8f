"""Encryption as a property of the database: the key check values it stores, checked at start.

The first process that starts with a keyring stores the check value of each of its keys
(`encryption_keys`); from then on the database is encrypted, and a value not sealed is refused on
read. That first start is the moment encryption is turned on: it seals the values the database
held in plaintext until then (they were the real ones a moment before), and says so in the audit
log; a plaintext value found later is not the service's (`sursis encryption seal-existing` is the
deliberate way to seal such values). A process whose keyring is empty is
refused, and so is one holding a key whose bytes do not match the check value stored under its
id (a wrong key under the right id would seal new values nobody can open with the right key), and
one lacking a key the database still holds values under (a keyring holding only a new key would
otherwise start, store its check value for good and leave every older value unreadable).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from sursis.domain.encryption import EncryptionRefused, KeyManager, key_check_value
from sursis.infra.db.repositories.base import dialect_insert
from sursis.infra.db.retention_tables import encryption_keys
from sursis.infra.db.rotation import SealedValues, holds_sealed_values, keys_in_use, seal_existing
from sursis.infra.encryption.aesgcm import AesGcmCipher
from sursis.infra.encryption.keyring import FileKeyring, KeyringError

OFF_ON_AN_ENCRYPTED_DATABASE = (
    "this database holds encrypted values (keys {ids}) and no keyring is set: set "
    "SURSIS_ENCRYPTION_KEYS or SURSIS_ENCRYPTION_KEYS_FILE to its keys (docs/runbooks/encryption.md)"
)


@dataclass(frozen=True, slots=True)
class StoredKey:
    key_id: str
    check_value: str
    first_used_at: datetime


@dataclass(frozen=True, slots=True)
class EncryptionState:
    """What a process knows at start: whether encryption is on, its active key, and the key ids
    (with their check values) the database has used."""

    active_key_id: str | None
    stored: tuple[StoredKey, ...]
    sealed_at_start: SealedValues | None = None
    """When this start turned encryption on: the values it found in plaintext and sealed (to be
    audited)."""

    @property
    def on(self) -> bool:
        return self.active_key_id is not None

    def describe(self) -> str:
        """One line for the start banner and `/readyz`."""
        if not self.on:
            return "encryption: off"
        return f"encryption: on  active key: {self.active_key_id}"


def mismatches(keys: KeyManager, stored: dict[str, str]) -> list[str]:
    """The key ids of `keys` whose bytes do not match the check value stored under their id."""
    return [k for k in keys.key_ids if k in stored and key_check_value(keys.data_key(k)) != stored[k]]


def missing_message(key_ids: list[str]) -> str:
    named = ", ".join(repr(k) for k in key_ids)
    return (
        f"key {named} is not in the keyring but this database holds values under it: put it back "
        "in the keyring (a new key goes before the old one, not instead of it; the old one leaves "
        "after `sursis encryption rotate`)"
    )


async def missing_keys(engine: AsyncEngine, keys: KeyManager, stored: dict[str, str]) -> list[str]:
    """The key ids the database knows, holds values under, and `keys` lacks."""
    absent = [k for k in stored if k not in keys.key_ids]
    return await keys_in_use(engine, absent) if absent else []


def mismatch_message(key_ids: list[str]) -> str:
    named = ", ".join(repr(k) for k in key_ids)
    return (
        f"key {named} of the keyring is not the key this database used under that id (its check "
        "value differs): put the right key bytes back; a new key needs a new id"
    )


async def stored_keys(engine: AsyncEngine) -> list[StoredKey]:
    async with engine.connect() as conn:
        rows = await conn.execute(sa.select(encryption_keys).order_by(encryption_keys.c.first_used_at))
        return [StoredKey(**row._mapping) for row in rows]


async def check_encryption(engine: AsyncEngine, keys: KeyManager, now: datetime) -> EncryptionState:
    """Refuse (`EncryptionRefused`, one line) a keyring this database may not be used with; store
    the check value of every key used for the first time. Safe under concurrent starts."""
    stored = {s.key_id: s.check_value for s in await stored_keys(engine)}
    if not keys.key_ids:
        if stored:
            raise EncryptionRefused(OFF_ON_AN_ENCRYPTED_DATABASE.format(ids=", ".join(stored)))
        return EncryptionState(None, ())
    if wrong := mismatches(keys, stored):
        raise EncryptionRefused(mismatch_message(wrong))
    if missing := await missing_keys(engine, keys, stored):
        raise EncryptionRefused(missing_message(missing))
    new = [k for k in keys.key_ids if k not in stored]
    # Turning on: no key known and no value sealed. Sealed values without check values mean the
    # check values were removed: plaintext found then is not taken as real.
    turning_on = not stored and not await holds_sealed_values(engine)
    if new:
        async with engine.begin() as conn:
            insert = dialect_insert(encryption_keys, postgres=conn.dialect.name == "postgresql")
            await conn.execute(
                insert.on_conflict_do_nothing(),
                [
                    {"key_id": k, "check_value": key_check_value(keys.data_key(k)), "first_used_at": now}
                    for k in new
                ],
            )
        stored = {s.key_id: s.check_value for s in await stored_keys(engine)}
        if wrong := mismatches(keys, stored):  # another process stored other bytes first
            raise EncryptionRefused(mismatch_message(wrong))
    follow_reloads(keys, stored)
    sealed = await seal_existing(engine, AesGcmCipher(keys)) if turning_on else None
    return EncryptionState(keys.active_key_id, tuple(await stored_keys(engine)), sealed)


def follow_reloads(keys: KeyManager, stored: dict[str, str]) -> None:
    """A keyring file read again later must match the same check values (else the last good
    keyring stays in use)."""
    if isinstance(keys, FileKeyring):

        def check(candidate: KeyManager) -> None:
            if wrong := mismatches(candidate, stored):
                raise KeyringError(mismatch_message(wrong))

        keys.check = check

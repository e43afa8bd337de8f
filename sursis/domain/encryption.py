"""Encryption at rest: the ports repositories seal and open conversation content through.

The domain sees plaintext only. Repositories hand a value and its *address* (table, column, row)
to a `Cipher` on write and get the plaintext back on read; the address is the associated data, so
a value copied to another row, column or table does not open. Keys come from a `KeyManager`: the
local keyring is the first adapter, a KMS is another, and neither callers nor the cipher change.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sursis.domain.errors import ServiceError
from sursis.domain.records import AuditEntry


def _part(value: object) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class Address:
    """Where a value lives: its table, column and the values that name its row (formatted only
    when a value is actually sealed or opened). Bound to its ciphertext as associated data."""

    table: str
    column: str
    row: tuple[object, ...]

    def associated_data(self) -> bytes:
        row = "/".join(map(_part, self.row))
        return f"sursis/1\x1f{self.table}\x1f{self.column}\x1f{row}".encode()

    def describe(self) -> str:
        """`table.column row (names)`: where a refused value is, for an error or a finding (the row
        is named by plaintext ids and states only, never by content)."""
        return f"{self.table}.{self.column} row ({', '.join(map(_part, self.row))})"

    def details(self) -> dict[str, object]:
        """The address as an audit finding's details."""
        return {"table": self.table, "column": self.column, "row": [_part(p) for p in self.row]}


class EncryptionKeyUnavailable(ServiceError):
    """A stored value was sealed with a key the keyring does not hold (lost, or not configured)."""

    code = "encryption_key_unavailable"
    status = 500

    def __init__(self, key_id: str, address: Address | None = None) -> None:
        where = f" ({address.table}.{address.column})" if address else ""
        super().__init__(
            f"a stored value{where} is encrypted with key {key_id!r}, which the keyring does not hold",
            extra={"key_id": key_id},
        )
        self.key_id = key_id


class EncryptedValueUnreadable(ServiceError):
    """A sealed value failed authentication: it was altered, or moved from another row or column."""

    code = "encrypted_value_unreadable"
    status = 500

    def __init__(self, key_id: str, address: Address) -> None:
        super().__init__(
            f"a stored value ({address.describe()}) under key {key_id!r} does not "
            "authenticate: it was altered or copied from another row or column",
            extra={"key_id": key_id},
        )
        self.key_id = key_id
        self.address = address


class UnsealedValue(EncryptedValueUnreadable):
    """An encrypted column of an encrypted database holds a value that is not sealed: written by
    someone with SQL rights and no key, or left from before encryption was turned on (then
    `sursis encryption seal-existing` seals it, deliberately). Refused, never served as real; every
    reader of an unreadable value (the worker, the audit chain) refuses it the same way."""

    code = "unsealed_value"
    status = 409

    def __init__(self, address: Address) -> None:
        ServiceError.__init__(
            self,
            f"a stored value ({address.describe()}) is not sealed although this database is "
            "encrypted: it was written around the service and is not served; if the database is "
            "being moved to encryption, `sursis encryption seal-existing` seals the values written "
            "before (docs/runbooks/encryption.md)",
            extra={"table": address.table, "column": address.column},
        )
        self.key_id = ""
        self.address = address
        self.recorded = False

    def finding(
        self, workspace: str, conversation_id: uuid.UUID | None = None, run_id: uuid.UUID | None = None
    ) -> AuditEntry:
        """The audit row of this refusal: what was refused and where, never the value itself."""
        return AuditEntry(
            action=UNSEALED_FINDING,
            actor="system:integrity",
            workspace=workspace,
            conversation_id=conversation_id,
            run_id=run_id,
            details=self.address.details(),
        )


UNSEALED_FINDING = "integrity.unsealed_value"


class KeyringInvalid(ServiceError):
    """The configured keyring is malformed; the message never contains key material."""

    code = "keyring_invalid"


class EncryptionRefused(ServiceError):
    """The process may not use this database with its keyring: the database holds encrypted values
    and the keyring is empty, or a key's bytes are not the ones the database knows under its id."""

    code = "encryption_refused"


KEY_CHECK_CONTEXT = b"sursis key check value/1"


def key_check_value(key: bytes) -> str:
    """A key's check value: HMAC-SHA256 of a fixed text under the key. It tells two keys apart and
    reveals nothing about the key (recovering a key from it is recovering an HMAC key)."""
    return hmac.new(key, KEY_CHECK_CONTEXT, hashlib.sha256).hexdigest()


class KeyManager(Protocol):
    """The key-management port: names the active key and hands out data keys by id."""

    @property
    def active_key_id(self) -> str | None:
        """The key new values are sealed with; `None`: encryption is off."""
        ...

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key this manager can open values with, the active one first."""
        ...

    def data_key(self, key_id: str, address: Address | None = None) -> bytes:
        """The 32-byte data key named `key_id`; raises `EncryptionKeyUnavailable` (naming the
        value's `address` when given)."""
        ...


class Cipher(Protocol):
    """Seals and opens one stored value. Strings in, strings out: what a column stores."""

    @property
    def active_key_id(self) -> str | None: ...

    @property
    def key_ids(self) -> tuple[str, ...]: ...

    @property
    def refuses_plaintext(self) -> bool:
        """Whether a stored value that is not sealed is refused (`UnsealedValue`): true once the
        database is known to be encrypted (it holds key check values)."""
        ...

    def seal(self, plaintext: str, address: Address) -> str:
        """The stored form of `plaintext`: encrypted under the active key, or marked plain when
        encryption is off."""
        ...

    def open(self, stored: str, address: Address) -> str:
        """The plaintext of a stored value, whichever key (or none) it was sealed with."""
        ...

    def key_id_of(self, stored: str) -> str | None:
        """The key a stored value is sealed with; `None` for a plaintext value."""
        ...

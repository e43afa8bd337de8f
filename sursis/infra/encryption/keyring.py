"""The local keyring: named 32-byte keys from `SURSIS_ENCRYPTION_KEYS` or a file, the first active."""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path

from sursis.domain.encryption import Address, EncryptionKeyUnavailable, KeyringInvalid

KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,31}")
"""Key ids appear in every stored value and in `LIKE` patterns: letters, digits, `.` and `-`."""


KeyringError = KeyringInvalid


class LocalKeyring:
    """A `KeyManager` over keys held in memory; with no keys, encryption is off."""

    def __init__(self, keys: dict[str, bytes]) -> None:
        self._keys = dict(keys)
        self._ids = tuple(keys)

    @classmethod
    def parse(cls, text: str) -> LocalKeyring:
        """`KEY_ID:BASE64_32_BYTES` pairs separated by commas (or newlines), the first one active."""
        keys: dict[str, bytes] = {}
        for position, item in enumerate(re.split(r"[,\n]", text), start=1):
            item = item.strip()
            if not item or item.startswith("#"):
                continue
            key_id, sep, encoded = item.partition(":")
            key_id = key_id.strip()
            if not sep or not KEY_ID.fullmatch(key_id):
                raise KeyringError(
                    f"keyring entry {position}: expected KEY_ID:BASE64 with a key id of "
                    "letters, digits, '.' or '-' (at most 32)"
                )
            try:
                key = base64.b64decode(encoded.strip(), validate=True)
            except (binascii.Error, ValueError):
                raise KeyringError(f"keyring entry {position} ({key_id}): the key is not base64") from None
            if len(key) != 32:
                raise KeyringError(
                    f"keyring entry {position} ({key_id}): the key must be 32 bytes, not {len(key)}"
                )
            if key_id in keys:
                raise KeyringError(f"keyring entry {position}: key id {key_id!r} appears twice")
            keys[key_id] = key
        return cls(keys)

    @property
    def active_key_id(self) -> str | None:
        return self._ids[0] if self._ids else None

    @property
    def key_ids(self) -> tuple[str, ...]:
        return self._ids

    def data_key(self, key_id: str, address: Address | None = None) -> bytes:
        try:
            return self._keys[key_id]
        except KeyError:
            raise EncryptionKeyUnavailable(key_id, address) from None

    def __repr__(self) -> str:
        return f"LocalKeyring(key_ids={self._ids!r})"


def load_keyring(keys: str | None, keys_file: Path | None) -> LocalKeyring:
    """The keyring the settings name: the variable's text, else the file's, else none (off)."""
    if keys and keys.strip():
        return LocalKeyring.parse(keys)
    if keys_file is not None:
        try:
            return LocalKeyring.parse(keys_file.read_text())
        except OSError as exc:
            raise KeyringError(f"cannot read the keyring file {str(keys_file)!r}: {exc.strerror}") from None
    return LocalKeyring({})

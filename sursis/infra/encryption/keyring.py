"""The local keyring: named 32-byte keys from `SURSIS_ENCRYPTION_KEYS` or a file, the first active."""

from __future__ import annotations

import base64
import binascii
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from sursis.domain.encryption import Address, EncryptionKeyUnavailable, KeyringInvalid

log = structlog.get_logger("sursis.encryption")

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


EMPTY_KEYRING = (
    "the keyring holds no key: encryption cannot be turned off by an empty keyring; "
    "unset the setting to run without encryption on a database that never had it"
)


def parse_keys(text: str, where: str) -> LocalKeyring:
    """The keyring a configured setting holds; one that names no key at all (`","`, an empty or
    comments-only file) is refused rather than read as "encryption off"."""
    keys = LocalKeyring.parse(text)
    if not keys.key_ids:
        raise KeyringError(f"{where}: {EMPTY_KEYRING}")
    return keys


def check_file_mode(path: Path) -> None:
    """Refuse a keyring file other users may read or write; warn when its group may read it.

    Others: anyone with a shell on the host would hold every key. The group is only warned about:
    orchestrators mount secrets readable by the service's group (Kubernetes `fsGroup`, 0440)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise KeyringError(f"cannot read the keyring file {str(path)!r}: {exc.strerror}") from None
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise KeyringError(
            f"the keyring file {str(path)!r} is readable or writable by other users "
            f"(mode {stat.S_IMODE(mode):04o}): chmod 600 it"
        )
    if mode & (stat.S_IRGRP | stat.S_IWGRP):
        log.warning(
            "encryption.keyring_file_group_readable", path=str(path), mode=f"{stat.S_IMODE(mode):04o}"
        )


def _read(path: Path) -> LocalKeyring:
    check_file_mode(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise KeyringError(f"cannot read the keyring file {str(path)!r}: {exc.strerror}") from None
    return parse_keys(text, f"the keyring file {str(path)!r}")


KeyringCheck = Callable[[LocalKeyring], None]
"""Raises `KeyringInvalid` for a keyring that may not replace the current one (e.g. a key whose
bytes differ from the check value the database stores under its id)."""


class FileKeyring:
    """A `KeyManager` over a keyring file, read again when the file changes (looked at no more
    than once per `interval` seconds): a key added or made active is used without a restart.
    A file that no longer parses, names no key, or fails `check` leaves the last good keyring in
    place, and is logged as an error."""

    def __init__(
        self, path: Path, interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._path = path
        self._interval = interval
        self._clock = clock
        self._stamp = self._stat()
        self._keys = _read(path)
        self._next_look = clock() + interval
        self.check: KeyringCheck | None = None

    def _stat(self) -> tuple[int, int]:
        try:
            stat = self._path.stat()
        except OSError:
            return (0, 0)
        return (stat.st_mtime_ns, stat.st_size)

    def _current(self) -> LocalKeyring:
        now = self._clock()
        if now >= self._next_look:
            self._next_look = now + self._interval
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    keys = _read(self._path)
                    if self.check is not None:
                        self.check(keys)
                except KeyringInvalid as exc:
                    log.error(
                        "encryption.keyring_unreadable",
                        error=exc.message,
                        kept=list(self._keys.key_ids),
                    )
                else:
                    self._keys = keys
                    log.info("encryption.keyring_reloaded", key_ids=list(self._keys.key_ids))
        return self._keys

    @property
    def active_key_id(self) -> str | None:
        return self._current().active_key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        return self._current().key_ids

    def data_key(self, key_id: str, address: Address | None = None) -> bytes:
        return self._current().data_key(key_id, address)

    def __repr__(self) -> str:
        return f"FileKeyring({str(self._path)!r}, key_ids={self._keys.key_ids!r})"


def load_keyring(keys: str | None, keys_file: Path | None) -> LocalKeyring | FileKeyring:
    """The keyring the settings name: the variable's text, else the file's (followed as it
    changes), else none (off). A variable that is empty or blank counts as unset (compose's
    `${VAR:-}`); one that names no key otherwise (`","`, only comments) is refused."""
    if keys is not None and keys.strip():
        return parse_keys(keys, "SURSIS_ENCRYPTION_KEYS")
    if keys_file is not None:
        return FileKeyring(keys_file)
    return LocalKeyring({})

"""AES-256-GCM over a `KeyManager`: the cipher repositories seal conversation content with.

A stored value says what it is. `sursis:enc:1:<key id>:<base64(nonce | ciphertext | tag)>` is
sealed under that key, with the value's address (table, column, row) as associated data;
`sursis:plain:<text>` is a plaintext value that happened to start with `sursis:`; anything else is
plaintext written with encryption off, read as it is. Once the database is known to be encrypted
(`refuses_plaintext`, set at start), the repositories refuse an unsealed value instead
(`UnsealedValue`, see `infra/db/sealing.py`): the cipher itself only tells the forms apart.

`cryptography` (~8 MiB with OpenSSL's bindings) is imported when a key is first used: a service
without encryption keys never loads it.
"""

from __future__ import annotations

import binascii
import os
from typing import TYPE_CHECKING

from sursis.domain.encryption import Address, EncryptedValueUnreadable, KeyManager
from sursis.infra.encryption.decision_seal import DecisionSealer
from sursis.infra.encryption.keyring import LocalKeyring

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SEALED = "sursis:enc:1:"
PLAIN = "sursis:plain:"
_RESERVED = "sursis:"
_NONCE_BYTES = 12


class AesGcmCipher:
    """The `Cipher` port with AES-256-GCM; seals with the manager's active key, opens with any."""

    def __init__(self, keys: KeyManager, *, refuses_plaintext: bool = False) -> None:
        self._keys = keys
        self._aead: dict[str, AESGCM] = {}
        self.refuses_plaintext = refuses_plaintext
        self.decision_sealer = DecisionSealer(keys)
        """Seals decisions with keys derived from the same keyring (`decision_seal.py`)."""

    @property
    def keys(self) -> KeyManager:
        return self._keys

    @property
    def active_key_id(self) -> str | None:
        return self._keys.active_key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        return self._keys.key_ids

    def _aead_for(self, key_id: str, address: Address) -> AESGCM:
        aead = self._aead.get(key_id)
        if aead is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            aead = self._aead[key_id] = AESGCM(self._keys.data_key(key_id, address))
        return aead

    def seal(self, plaintext: str, address: Address) -> str:
        key_id = self._keys.active_key_id
        if key_id is None:
            return PLAIN + plaintext if plaintext.startswith(_RESERVED) else plaintext
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead_for(key_id, address).encrypt(nonce, plaintext.encode(), address.associated_data())
        return f"{SEALED}{key_id}:{binascii.b2a_base64(nonce + sealed, newline=False).decode('ascii')}"

    def open(self, stored: str, address: Address) -> str:
        if not stored.startswith(_RESERVED):
            return stored
        if stored.startswith(PLAIN):
            return stored[len(PLAIN) :]
        if not stored.startswith(SEALED):
            return stored
        key_id, _, encoded = stored[len(SEALED) :].partition(":")
        aead = self._aead_for(key_id, address)
        from cryptography.exceptions import InvalidTag

        try:
            raw = binascii.a2b_base64(encoded, strict_mode=True)
            return aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], address.associated_data()).decode()
        except (InvalidTag, binascii.Error, ValueError):
            raise EncryptedValueUnreadable(key_id, address) from None

    def key_id_of(self, stored: str) -> str | None:
        if not stored.startswith(SEALED):
            return None
        return stored[len(SEALED) :].partition(":")[0]


PLAINTEXT = AesGcmCipher(LocalKeyring({}))
"""Encryption off: values are stored as they are (and sealed ones still cannot be opened)."""

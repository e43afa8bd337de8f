"""The decision seal's key and MAC: HMAC-SHA256 under a key derived from the encryption keyring.

The keyring (`SURSIS_ENCRYPTION_KEYS` or its file) is already the service's key the database does
not hold, with key ids and rotation; a seal key is derived from each of its keys with HKDF-SHA256
under a label of its own, so a seal key never encrypts and a data key never seals. A seal names
the key id it was made under (`v1:<key id>:<base64 MAC>`): after a rotation, seals made under an
older key still check while that key stays in the keyring.

With no keyring (the embedded default) there is no such key: decisions are not sealed and not
checked (docs/audit.md says why that is the embedded mode's trust boundary).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from sursis.domain.approvals.decision_seal import canonical
from sursis.domain.encryption import Cipher, EncryptionKeyUnavailable, KeyManager
from sursis.infra.encryption.keyring import LocalKeyring

_LABEL = b"sursis/decision-seal/v1"
_PREFIX = "v1:"


class DecisionSealer:
    """Seals and checks the facts of an ask, a vote or a decision with the keyring's keys."""

    def __init__(self, keys: KeyManager) -> None:
        self._keys = keys
        self._derived: dict[str, bytes] = {}

    @classmethod
    def off(cls) -> DecisionSealer:
        """The sealer of a process without a keyring: it seals and checks nothing."""
        return _OFF

    @property
    def enabled(self) -> bool:
        """Whether this process seals (and so requires) decisions: it holds a keyring."""
        return self._keys.active_key_id is not None

    def _key(self, key_id: str) -> bytes:
        key = self._derived.get(key_id)
        if key is None:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_LABEL + b"/" + key_id.encode())
            key = self._derived[key_id] = hkdf.derive(self._keys.data_key(key_id))
        return key

    def seal(self, facts: Mapping[str, Any]) -> str | None:
        """The seal of `facts` under the active key; None with no keyring."""
        key_id = self._keys.active_key_id
        if key_id is None:
            return None
        mac = hmac.new(self._key(key_id), canonical(facts), hashlib.sha256).digest()
        return f"{_PREFIX}{key_id}:{base64.b64encode(mac).decode('ascii')}"

    def problem(self, facts: Mapping[str, Any], seal: object, what: str) -> str | None:
        """Why `seal` is not the service's seal of `facts` (`what` names the seal in the reason);
        None when it is."""
        if not isinstance(seal, str) or not seal:
            return f"the {what} carries no seal"
        if not seal.startswith(_PREFIX):
            return f"the {what} seal is not in a known form"
        key_id, _, encoded = seal[len(_PREFIX) :].partition(":")
        try:
            key = self._key(key_id)
        except EncryptionKeyUnavailable:
            return f"the {what} is sealed under key {key_id!r}, which this process does not hold"
        expected = hmac.new(key, canonical(facts), hashlib.sha256).digest()
        try:
            given = base64.b64decode(encoded, validate=True)
        except ValueError:
            return f"the {what} seal is not in a known form"
        if not hmac.compare_digest(expected, given):
            return f"the {what} seal does not match the stored {what}"
        return None


_OFF = DecisionSealer(LocalKeyring({}))


def sealer_of(cipher: Cipher) -> DecisionSealer:
    """The decision sealer over the keyring a unit of work's cipher holds (off for a cipher without one)."""
    sealer = getattr(cipher, "decision_sealer", None)
    return sealer if isinstance(sealer, DecisionSealer) else _OFF

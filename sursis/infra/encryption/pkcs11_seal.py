"""The decision-seal key in a PKCS#11 token: each seal an HMAC-SHA256 computed inside the token
(`CKM_SHA256_HMAC`) under a secret key that is not extractable, so neither the database nor this
process's memory ever holds it.

Beside the keyring-derived sealer (`decision_seal.py`), not instead of it: seals made under the
token's key are `v1:pkcs11-<label>:<MAC>`; seals made earlier under a keyring key still check
while that key stays in the keyring (turning the token on does not refuse calls approved before).
Selected by `SURSIS_DECISION_SEAL_PKCS11_KEY` (the secret key's label) in the token the audit
signing settings name (`SURSIS_AUDIT_SIGNING_PKCS11_MODULE`, `_TOKEN`, `_PIN`).
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sursis.domain.approvals.decision_seal import canonical
from sursis.domain.encryption import KeyManager
from sursis.infra.encryption.decision_seal import DecisionSealer
from sursis.infra.encryption.pkcs11_signer import pkcs11_module, token_session
from sursis.infra.encryption.signing import SigningKeyInvalid

_PREFIX = "v1:"


class Pkcs11DecisionSealer(DecisionSealer):
    """Seals with the token's secret key; checks its own seals there and older ones by the keyring."""

    def __init__(self, keys: KeyManager, module: Path, token: str, label: str, pin: str) -> None:
        super().__init__(keys)
        if not label or ":" in label:
            raise SigningKeyInvalid("SURSIS_DECISION_SEAL_PKCS11_KEY is a label without ':'")
        pkcs11 = pkcs11_module()
        try:
            session, self._lock = token_session(module, token, pin)
            with self._lock:
                self._secret = session.get_key(object_class=pkcs11.ObjectClass.SECRET_KEY, label=label)
        except (pkcs11.PKCS11Error, RuntimeError, OSError) as exc:
            raise SigningKeyInvalid(
                f"the PKCS#11 decision-seal key {label!r} in token {token!r} cannot be used: "
                f"{type(exc).__name__}"
            ) from None
        self._mechanism = pkcs11.Mechanism.SHA256_HMAC
        self._id = f"pkcs11-{label}"

    @property
    def enabled(self) -> bool:
        return True

    def _mac(self, facts: Mapping[str, Any]) -> bytes:
        with self._lock:
            return bytes(self._secret.sign(canonical(facts), mechanism=self._mechanism))

    def seal(self, facts: Mapping[str, Any]) -> str | None:
        return f"{_PREFIX}{self._id}:{base64.b64encode(self._mac(facts)).decode('ascii')}"

    def problem(self, facts: Mapping[str, Any], seal: object, what: str) -> str | None:
        own = f"{_PREFIX}{self._id}:"
        if not isinstance(seal, str) or not seal.startswith(own):
            return super().problem(facts, seal, what)
        try:
            given = base64.b64decode(seal[len(own) :], validate=True)
        except ValueError:
            return f"the {what} seal is not in a known form"
        if not hmac.compare_digest(self._mac(facts), given):
            return f"the {what} seal does not match the stored {what}"
        return None


def generate_pkcs11_seal_key(module: Path, token: str, label: str, pin: str) -> None:
    """Make a new 256-bit HMAC secret key labelled `label` in the token, sensitive and not
    extractable. Refused when an object of that label exists."""
    pkcs11 = pkcs11_module()
    try:
        session, lock = token_session(module, token, pin)
    except (pkcs11.PKCS11Error, RuntimeError, OSError) as exc:
        raise SigningKeyInvalid(f"token {token!r} cannot be opened: {type(exc).__name__}") from None
    with lock:
        if list(session.get_objects({pkcs11.Attribute.LABEL: label})):
            raise SigningKeyInvalid(f"token {token!r} already holds a key labelled {label!r}: never replaced")
        session.generate_key(
            pkcs11.KeyType.GENERIC_SECRET,
            256,
            label=label,
            store=True,
            template={
                pkcs11.Attribute.SIGN: True,
                pkcs11.Attribute.VERIFY: True,
                pkcs11.Attribute.SENSITIVE: True,
                pkcs11.Attribute.EXTRACTABLE: False,
            },
        )

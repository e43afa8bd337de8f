"""The audit signing key in a PKCS#11 token (an HSM, or SoftHSM2 for tests): Ed25519 (`CKM_EDDSA`)
signatures made inside the token, so the private key never enters this process's memory.

Selected by `SURSIS_AUDIT_SIGNING_PKCS11_MODULE` (the vendor's PKCS#11 library), `…_TOKEN` (the
token's label), `…_KEY` (the key pair's label) and `…_PIN` (the user PIN). The public key is read
from the token once: checking a signature needs no token, and the fingerprint is computed as for a
key file (`signing.py`), so a verifier holding only the public key PEM checks the same checkpoints.
`python-pkcs11` is imported only when a token is configured (`pip install 'sursis[hsm]'`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from pathlib import Path
from typing import Any

from sursis.infra.encryption.signing import SigningKeyInvalid

ED25519_CURVE_OID = "1.3.101.112"
"""The curve parameters (`CKA_EC_PARAMS`) of an Ed25519 key: the named curve edwards25519."""


def pkcs11_module() -> Any:
    try:
        import pkcs11
    except ImportError:
        raise SigningKeyInvalid(
            "a PKCS#11 audit signing key needs python-pkcs11: pip install 'sursis[hsm]'"
        ) from None
    return pkcs11


def _raw_public(point: bytes) -> bytes:
    """The 32 raw bytes of an Ed25519 public key from `CKA_EC_POINT` (a DER OCTET STRING, or the
    bare bytes with some tokens)."""
    if len(point) == 34 and point[0] == 0x04 and point[1] == 32:
        return point[2:]
    if len(point) == 32:
        return point
    raise SigningKeyInvalid("the token's key is not an Ed25519 key (CKA_EC_POINT is not 32 bytes)")


_OPEN: dict[tuple[str, str], tuple[Any, str, threading.Lock]] = {}
_OPENING = threading.Lock()


def token_session(module: Path, token: str, pin: str) -> tuple[Any, threading.Lock]:
    """The process's one logged-in session on `token`, and the lock its operations take. A token's
    login belongs to the whole process (a second login is refused by PKCS#11), so every signer of
    the process shares this session; a PIN other than the one it was opened with is refused."""
    pkcs11 = pkcs11_module()
    key = (str(module), token)
    digest = hashlib.sha256(pin.encode()).hexdigest()
    with _OPENING:
        if key in _OPEN:
            session, opened_with, lock = _OPEN[key]
            if not hmac.compare_digest(opened_with, digest):
                raise SigningKeyInvalid(f"token {token!r} is open in this process with another PIN")
            return session, lock
        found = pkcs11.lib(str(module)).get_token(token_label=token)
        try:
            session = found.open(user_pin=pin, rw=True)
        except pkcs11.UserAlreadyLoggedIn:
            session = found.open(rw=True)
        _OPEN[key] = (session, digest, threading.Lock())
        return session, _OPEN[key][2]


class Pkcs11Signer:
    """The `CheckpointSigner` port over a key pair in a PKCS#11 token."""

    def __init__(self, module: Path, token: str, key: str, pin: str) -> None:
        pkcs11 = pkcs11_module()
        try:
            session, self._lock = token_session(module, token, pin)
            with self._lock:
                self._private = session.get_key(
                    object_class=pkcs11.ObjectClass.PRIVATE_KEY, key_type=pkcs11.KeyType.EC_EDWARDS, label=key
                )
                public = session.get_key(
                    object_class=pkcs11.ObjectClass.PUBLIC_KEY, key_type=pkcs11.KeyType.EC_EDWARDS, label=key
                )
                point = bytes(public[pkcs11.Attribute.EC_POINT])
        except (pkcs11.PKCS11Error, RuntimeError, OSError) as exc:
            name = type(exc).__name__
            raise SigningKeyInvalid(
                f"the PKCS#11 audit signing key {key!r} in token {token!r} cannot be used: {name}"
            ) from None
        self._mechanism = pkcs11.Mechanism.EDDSA
        self._raw = _raw_public(point)
        self._fingerprint = hashlib.sha256(self._raw).hexdigest()[:32]
        self._errors = pkcs11.PKCS11Error

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def can_sign(self) -> bool:
        return True

    def sign(self, message: bytes) -> str:
        """Signed inside the token; one operation at a time on the process's session of the token."""
        try:
            with self._lock:
                signature = self._private.sign(message, mechanism=self._mechanism)
        except self._errors as exc:
            raise SigningKeyInvalid(f"the token refused to sign: {type(exc).__name__}") from None
        return base64.b64encode(bytes(signature)).decode("ascii")

    def verify(self, message: bytes, signature: str) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self._raw).verify(
                base64.b64decode(signature, validate=True), message
            )
        except (InvalidSignature, ValueError):
            return False
        return True

    def public_pem(self) -> str:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        public = Ed25519PublicKey.from_public_bytes(self._raw)
        pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return pem.decode("ascii")


def generate_pkcs11_key(module: Path, token: str, key: str, pin: str) -> str:
    """Make a new Ed25519 key pair labelled `key` in the token (the private half not extractable,
    never leaving it); its public key in PEM. Refused when a key of that label exists."""
    pkcs11 = pkcs11_module()
    from pkcs11.util.ec import encode_named_curve_parameters

    try:
        session, lock = token_session(module, token, pin)
    except (pkcs11.PKCS11Error, RuntimeError, OSError) as exc:
        raise SigningKeyInvalid(f"token {token!r} cannot be opened: {type(exc).__name__}") from None
    with lock:
        found = list(session.get_objects({pkcs11.Attribute.LABEL: key}))
        if found:
            raise SigningKeyInvalid(f"token {token!r} already holds a key labelled {key!r}: never replaced")
        params = session.create_domain_parameters(
            pkcs11.KeyType.EC_EDWARDS,
            {pkcs11.Attribute.EC_PARAMS: encode_named_curve_parameters(ED25519_CURVE_OID)},
            local=True,
        )
        params.generate_keypair(
            mechanism=pkcs11.Mechanism.EC_EDWARDS_KEY_PAIR_GEN,
            store=True,
            label=key,
            private_template={pkcs11.Attribute.EXTRACTABLE: False, pkcs11.Attribute.SENSITIVE: True},
        )
    return Pkcs11Signer(module, token, key, pin).public_pem()

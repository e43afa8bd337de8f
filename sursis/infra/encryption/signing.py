"""Ed25519 checkpoint signing over a key file the database never sees (`SURSIS_AUDIT_SIGNING_KEY_FILE`).

The file holds a PEM private key (a process that seals signs) or only the public key (a process
that verifies, e.g. an auditor's machine). `sursis audit keygen` writes a private key (mode 0600)
and prints the public one.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from sursis.domain.errors import ServiceError
from sursis.infra.encryption.keyring import check_file_mode

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class SigningKeyInvalid(ServiceError):
    code = "audit_signing_key_invalid"


class Ed25519Signer:
    """The `CheckpointSigner` port with Ed25519."""

    def __init__(self, public: Ed25519PublicKey, private: Ed25519PrivateKey | None = None) -> None:
        from cryptography.hazmat.primitives import serialization

        self._public = public
        self._private = private
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self._fingerprint = hashlib.sha256(raw).hexdigest()[:32]

    @classmethod
    def from_file(cls, path: Path) -> Ed25519Signer:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SigningKeyInvalid(
                f"cannot read the audit signing key {str(path)!r}: {exc.strerror}"
            ) from None
        if b"PRIVATE KEY" in data:
            check_file_mode(path)
            try:
                private = serialization.load_pem_private_key(data, password=None)
            except (ValueError, TypeError):
                raise SigningKeyInvalid(
                    f"{str(path)!r} is not a PEM private key without a password"
                ) from None
            if not isinstance(private, Ed25519PrivateKey):
                raise SigningKeyInvalid(f"{str(path)!r} is not an Ed25519 key")
            return cls(private.public_key(), private)
        try:
            public = serialization.load_pem_public_key(data)
        except ValueError:
            raise SigningKeyInvalid(f"{str(path)!r} holds neither a PEM private nor public key") from None
        if not isinstance(public, Ed25519PublicKey):
            raise SigningKeyInvalid(f"{str(path)!r} is not an Ed25519 key")
        return cls(public)

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def can_sign(self) -> bool:
        return self._private is not None

    def public_pem(self) -> str:
        """The public key in PEM: what an auditor checks an exported bundle with."""
        from cryptography.hazmat.primitives import serialization

        pem = self._public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return pem.decode("ascii")

    def sign(self, message: bytes) -> str:
        if self._private is None:
            raise SigningKeyInvalid("the audit signing key file holds only a public key: it cannot sign")
        return base64.b64encode(self._private.sign(message)).decode("ascii")

    def verify(self, message: bytes, signature: str) -> bool:
        from cryptography.exceptions import InvalidSignature

        try:
            self._public.verify(base64.b64decode(signature, validate=True), message)
        except (InvalidSignature, ValueError):
            return False
        return True


def write_signing_key(path: Path) -> str:
    """Write a new private key to `path` (mode 0600, never over an existing file); its public key
    in PEM, for machines that only verify."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(pem)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public.decode("ascii")

"""Encryption at rest: the local keyring and the AES-256-GCM cipher (docs/encryption.md)."""

from sursis.infra.encryption.aesgcm import PLAINTEXT, AesGcmCipher
from sursis.infra.encryption.keyring import FileKeyring, KeyringError, LocalKeyring, load_keyring

__all__ = ["PLAINTEXT", "AesGcmCipher", "FileKeyring", "KeyringError", "LocalKeyring", "load_keyring"]

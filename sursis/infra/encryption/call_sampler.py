"""The `sampled` rung's draw: HMAC-SHA256 under a key derived from the encryption keyring.

Like the decision seal's key (`decision_seal.py`), the sampling key is derived from the keyring's
active key with HKDF-SHA256 under a label of its own, so the agent (and anyone reading the database)
cannot compute which calls a `sampled` rung sends to people. A call is picked when the MAC of its
draw (workspace, tool, conversation, tool call id), read as a 64-bit number, is 0 modulo N.

With no keyring (the embedded default) the key is 32 random bytes drawn when the process starts:
still unknown to the agent, but another process may draw a redispatched call differently, and a
simulation's count is then an estimate of the rate rather than the exact calls.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from sursis.domain.approvals.decision_seal import canonical
from sursis.domain.encryption import Cipher, KeyManager
from sursis.domain.policy.policy_sampling import SampleDraw

_LABEL = b"sursis/call-sample/v1"


class KeyedCallSampler:
    """The `CallSampler` port over the keyring's active key (or a per-process random key)."""

    def __init__(self, keys: KeyManager | None = None, *, key: bytes | None = None) -> None:
        self._keys = keys
        self._fixed = key
        self._derived: dict[str, bytes] = {}
        self._random = os.urandom(32)

    @property
    def keyed(self) -> bool:
        """Whether the draw is the same in every process holding the keyring."""
        return self._fixed is not None or (self._keys is not None and self._keys.active_key_id is not None)

    def _key(self) -> bytes:
        if self._fixed is not None:
            return self._fixed
        key_id = self._keys.active_key_id if self._keys is not None else None
        if key_id is None or self._keys is None:
            return self._random
        key = self._derived.get(key_id)
        if key is None:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_LABEL + b"/" + key_id.encode())
            key = self._derived[key_id] = hkdf.derive(self._keys.data_key(key_id))
        return key

    @classmethod
    def of(cls, cipher: Cipher | None) -> KeyedCallSampler:
        """The sampler over the keyring a unit of work's cipher holds (a random key without one)."""
        keys = getattr(cipher, "keys", None)
        return cls(keys if keys is not None else None)

    def picks(self, draw: SampleDraw, one_in: int) -> bool:
        mac = hmac.new(self._key(), canonical(draw.to_json()), hashlib.sha256).digest()
        return int.from_bytes(mac[:8], "big") % one_in == 0

"""Signed checkpoints of an audit chain's head: `(workspace, seq, hash, anchor)` signed with a key
the database never holds (Ed25519, a file the service reads; `SURSIS_AUDIT_SIGNING_KEY_FILE`).

An insider with SQL rights can recompute every hash after editing a row and move the head; they
cannot sign the result. Each seal and each retention cut signs the new head; `verify` checks the
signature, that the chain still holds the signed row with the signed hash, and that the anchor is
the signed one (a cut signs the anchor it moves to, and only a cut moves it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sursis.domain.audit_chain import Breach, ChainHead, Finding


@dataclass(frozen=True, slots=True)
class Checkpoint:
    workspace: str
    seq: int
    hash: str
    anchor_seq: int
    anchor_hash: str
    signed_at: datetime
    signer: str
    """The signing key's fingerprint: which public key checks the signature."""
    signature: str

    @staticmethod
    def message(head: ChainHead, signed_at: datetime) -> bytes:
        """The bytes signed for `head` at `signed_at`."""
        return "\x1f".join(
            (
                "sursis-audit-checkpoint/1",
                head.workspace,
                str(head.seq),
                head.hash,
                str(head.anchor_seq),
                head.anchor_hash,
                signed_at.astimezone(UTC).isoformat(),
            )
        ).encode()

    def signed_head(self) -> ChainHead:
        return ChainHead(self.workspace, self.seq, self.hash, self.anchor_seq, self.anchor_hash)

    @property
    def anchor(self) -> tuple[int, str]:
        return (self.anchor_seq, self.anchor_hash)


class CheckpointSigner(Protocol):
    """Signs heads (when it holds the private key) and checks signatures (always)."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def can_sign(self) -> bool: ...

    def sign(self, message: bytes) -> str: ...

    def verify(self, message: bytes, signature: str) -> bool: ...


def sign_head(signer: CheckpointSigner, head: ChainHead, now: datetime) -> Checkpoint:
    signature = signer.sign(Checkpoint.message(head, now))
    return Checkpoint(
        head.workspace,
        head.seq,
        head.hash,
        head.anchor_seq,
        head.anchor_hash,
        now,
        signer.fingerprint,
        signature,
    )


def signature_holds(signer: CheckpointSigner, checkpoint: Checkpoint) -> bool:
    return checkpoint.signer == signer.fingerprint and signer.verify(
        Checkpoint.message(checkpoint.signed_head(), checkpoint.signed_at), checkpoint.signature
    )


def checkpoint_finding(
    signer: CheckpointSigner, head: ChainHead, checkpoint: Checkpoint | None
) -> Finding | None:
    """What is wrong with a chain's checkpoint, before its rows are walked (the walk then checks
    that the signed row still has the signed hash: `ChainVerifier.expect`)."""
    if checkpoint is None:
        if head.seq == 0:
            return None
        return Finding(
            Breach.CHECKPOINT,
            head.seq,
            None,
            "the chain has no signed checkpoint (deleted, or never made: `sursis audit checkpoint`)",
        )
    if not signature_holds(signer, checkpoint):
        return Finding(
            Breach.CHECKPOINT, checkpoint.seq, None, "the checkpoint's signature does not hold under the key"
        )
    if checkpoint.anchor != head.anchor:
        return Finding(
            Breach.ANCHOR,
            head.anchor_seq,
            None,
            f"the anchor is at seq {head.anchor_seq}, the signed checkpoint says {checkpoint.anchor_seq}",
        )
    if checkpoint.seq > head.seq:
        return Finding(
            Breach.DELETED,
            head.seq + 1,
            None,
            f"the signed head is at seq {checkpoint.seq}, the chain ends at {head.seq}",
        )
    return None

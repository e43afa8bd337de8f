"""Signed checkpoints of an audit chain's head: `(workspace, seq, hash, anchor)` signed with a key
the database never holds (Ed25519, a file the service reads; `SURSIS_AUDIT_SIGNING_KEY_FILE`).

An insider with SQL rights can recompute every hash after editing a row and move the head; they
cannot sign the result. Each seal and each retention cut signs the new head; `verify` checks the
signature, that the chain still holds the signed row with the signed hash, and that the anchor is
the signed one (a cut signs the anchor it moves to, and only a cut moves it).

A copy of the checkpoint row and the head row, put back after the newest rows were deleted, is a
consistent (older) signed state: only something the insider cannot reach tells it from the real
one. Each signed checkpoint is therefore also appended to an external log (`CheckpointLog`, e.g.
`SURSIS_AUDIT_CHECKPOINT_DIR`), after its transaction commits; `verify` checks the chain against
the newest entry there and names the sequence numbers the database no longer has.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from sursis.domain.audit.audit_chain import Breach, ChainHead, Finding
from sursis.domain.errors import ServiceError


class AuditSigningKeyRequired(ServiceError):
    """A process would seal audit rows unsigned on chains that carry signed checkpoints: refused
    at start, like a keyring the database may not be used with."""

    code = "audit_signing_key_required"


class CheckpointLogUnusable(ServiceError):
    """The external checkpoint log cannot be read or appended to (a `CheckpointLog` raises it)."""

    code = "audit_checkpoint_log_unusable"


SIGNING_KEY_REQUIRED = (
    "this database's audit chains carry signed checkpoints, and this process would seal audit rows "
    "without the private signing key: set SURSIS_AUDIT_SIGNING_KEY_FILE to it (docs/audit.md)"
)


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


class CheckpointLog(Protocol):
    """Signed checkpoints kept outside the database, append-only: each one is added after the
    transaction that stored it committed; nothing is ever rewritten. Both methods raise
    `CheckpointLogUnusable` when the log cannot be used."""

    @property
    def where(self) -> str:
        """Where the log is, for messages (a path, not a secret)."""
        ...

    async def append(self, checkpoint: Checkpoint) -> None: ...

    async def newest(self, workspace: str) -> Checkpoint | None:
        """The last checkpoint appended for `workspace` (None: none yet)."""
        ...


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


def external_finding(
    signer: CheckpointSigner | None, head: ChainHead, external: Checkpoint | None, where: str
) -> Finding | None:
    """What is wrong with the chain against the newest external checkpoint before the walk (the
    walk then checks that the chain still holds its seq with its hash): the chain ends before it
    (its newest rows were deleted, whatever the database's own checkpoint says), or its signature
    does not hold (checked when this process has the key)."""
    if external is None:
        return None
    if signer is not None and not signature_holds(signer, external):
        return Finding(
            Breach.EXTERNAL,
            external.seq,
            None,
            f"the external checkpoint's signature ({where}) does not hold under the key",
        )
    if external.seq > head.seq:
        return Finding(
            Breach.DELETED,
            head.seq + 1,
            None,
            f"seq {head.seq + 1} to {external.seq} missing: the external checkpoint ({where}) signed "
            f"seq {external.seq}, the chain ends at {head.seq}",
        )
    return None


def behind_external(previous: Checkpoint | None, external: Checkpoint | None) -> str | None:
    """Why a new head may not be signed on top of the database's checkpoint: it is older than (or
    differs from) the newest external one, so rows after it were deleted and the checkpoint put
    back. None: it may."""
    if external is None:
        return None
    if previous is None or previous.seq < external.seq:
        have = "no checkpoint" if previous is None else f"a checkpoint at seq {previous.seq}"
        return (
            f"the database holds {have}, the external checkpoint is at seq {external.seq}: "
            "rows were deleted and an older checkpoint put back"
        )
    if previous.seq == external.seq and previous.hash != external.hash:
        return f"the database's checkpoint at seq {previous.seq} differs from the external one"
    return None

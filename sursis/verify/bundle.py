"""The audit bundle's format: its files, and the bytes each signature and hash is computed over.

Imports only the standard library: `sursis.verify` runs where nothing but `cryptography` is
installed. The service's own definitions (`domain/audit/audit_chain.py`, `domain/audit/audit_checkpoint.py`,
`domain/approvals/decision_seal.py`) are the reference; the export tests check that a bundle built from a
real chain verifies here, so the two cannot drift apart unnoticed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

FORMAT = "sursis-audit-bundle/1"
MANIFEST = "bundle.json"
"""What the bundle holds: its workspace, head, counts, and the SHA-256 of every other file."""
MANIFEST_SIGNATURE = "bundle.sig"
"""The Ed25519 signature (base64) over `bundle.json`'s bytes, by the audit signing key."""
PUBLIC_KEY = "public_key.pem"
CHAIN = "chain.jsonl"
"""One sealed audit row per line, in `seq` order: `seq`, `prev_hash`, `hash`, `content` (exactly
the fields the row's hash covers)."""
CHECKPOINTS = "checkpoints.jsonl"
"""Signed checkpoints: the database's newest (`source: database`) and each one of the external log
(`source: external`)."""
POLICIES = "policies.jsonl"
SEALS = "seals.jsonl"
"""Decision seals: `kind` (ask, vote, decision), `facts`, `seal`, the service's `verdict` at export,
and `attestation`: the audit signing key's signature over all of them."""
FILES = (CHAIN, CHECKPOINTS, POLICIES, SEALS, PUBLIC_KEY)

GENESIS = "0" * 64
VALID = "valid"
"""The verdict of a seal the service found to be its own seal of the facts."""


def canonical(value: Any) -> bytes:
    """The one JSON form signed and hashed (sorted keys, no spaces, ASCII)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def row_hash(prev_hash: str, content: Mapping[str, Any]) -> str:
    """An audit row's link hash, as `domain/audit_chain.audit_row_hash` computes it."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(f"{prev_hash}\n{text}".encode()).hexdigest()


def checkpoint_message(checkpoint: Mapping[str, Any]) -> bytes:
    """The bytes a checkpoint signs, as `domain/audit_checkpoint.Checkpoint.message` builds them."""
    signed_at = datetime.fromisoformat(str(checkpoint["signed_at"]))
    return "\x1f".join(
        (
            "sursis-audit-checkpoint/1",
            str(checkpoint["workspace"]),
            str(int(checkpoint["seq"])),
            str(checkpoint["hash"]),
            str(int(checkpoint["anchor_seq"])),
            str(checkpoint["anchor_hash"]),
            signed_at.astimezone(UTC).isoformat(),
        )
    ).encode()


def attestation_message(workspace: str, record: Mapping[str, Any]) -> bytes:
    """The bytes the export signs for one seal record: the service vouches that, holding the seal
    key, it found `seal` to be (or not to be: `verdict`) its seal of `facts`."""
    body = {
        "workspace": workspace,
        "kind": record["kind"],
        "facts": record["facts"],
        "seal": record["seal"],
        "verdict": record["verdict"],
    }
    return b"sursis-seal-attestation/1\x1f" + canonical(body)


def seal_label(record: Mapping[str, Any]) -> str:
    """How a report names a seal record: its kind, call and (for a vote) approver."""
    facts = record.get("facts") if isinstance(record.get("facts"), Mapping) else {}
    assert isinstance(facts, Mapping)
    label = f"{record.get('kind')} seal of call {facts.get('correlation_id')}"
    return f"{label} (voter {facts['voter']})" if record.get("kind") == "vote" else label


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

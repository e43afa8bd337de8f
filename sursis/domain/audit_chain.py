"""The audit log's hash chain: one chain per workspace, in the order rows were sealed (`seq`).

A row is written without its link (writers take no workspace-wide lock); the sweeper seals rows
in batches under the workspace's chain head lock, giving each the next `seq` and
`hash = audit_row_hash(prev_hash, row)`. `verify_chain` walks the links in `seq` order and names
the first row edited, deleted or reordered. Retention cuts the chain at an anchor (the last
purged row's `seq` and `hash`); verification then starts from the anchor.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sursis.domain.records import AuditEntry

GENESIS = "0" * 64
"""The `prev_hash` of a workspace's first row."""


def _text(value: uuid.UUID | datetime | None) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, datetime) else str(value)


def audit_row_hash(prev_hash: str, entry: AuditEntry) -> str:
    """The one hash of the chain: SHA-256 over the previous row's hash and this row's plaintext
    canonical content (sorted-key JSON of every stored field but the link itself). Encryption
    at rest happens below this, so re-encrypting a row never changes its hash."""
    content: dict[str, Any] = {
        "id": entry.id,
        "at": _text(entry.at),
        "actor": entry.actor,
        "action": entry.action,
        "workspace": entry.workspace,
        "conversation_id": _text(entry.conversation_id),
        "run_id": _text(entry.run_id),
        "correlation_id": _text(entry.correlation_id),
        "details": entry.details,
        "trace_id": entry.trace_id,
    }
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(f"{prev_hash}\n{canonical}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainLink:
    """A sealed row as the chain sees it."""

    seq: int
    prev_hash: str
    hash: str
    entry: AuditEntry


@dataclass(frozen=True, slots=True)
class ChainHead:
    """A workspace's chain: the last sealed row and the retention anchor (rows up to `anchor_seq`
    were purged; `anchor_hash` is the hash of the last of them)."""

    workspace: str
    seq: int
    hash: str
    anchor_seq: int = 0
    anchor_hash: str = GENESIS


class Breach(StrEnum):
    EDITED = "edited"
    """The row's content (or its stored link) does not hash to its stored hash."""
    DELETED = "deleted"
    """A `seq` is missing: a row was deleted (or the newest rows, if the head is past the end)."""
    REORDERED = "reordered"
    """The row is intact but does not follow the row before it."""


@dataclass(frozen=True, slots=True)
class Finding:
    breach: Breach
    seq: int
    row_id: int | None
    detail: str


@dataclass
class ChainVerifier:
    """Walks one workspace's links in `seq` order, page by page; stops at the first breach."""

    head: ChainHead
    checked: int = 0
    finding: Finding | None = None
    _seq: int = field(init=False)
    _hash: str = field(init=False)

    def __post_init__(self) -> None:
        self._seq, self._hash = self.head.anchor_seq, self.head.anchor_hash

    @property
    def last_seq(self) -> int:
        return self._seq

    def feed(self, links: Iterable[ChainLink]) -> bool:
        """Check the next links; False once a breach is found (the rest need not be read)."""
        for link in links:
            if self.finding is not None:
                return False
            self.finding = self._check(link)
            if self.finding is None:
                self.checked += 1
                self._seq, self._hash = link.seq, link.hash
        return self.finding is None

    def _check(self, link: ChainLink) -> Finding | None:
        row_id = link.entry.id
        if link.seq > self._seq + 1:
            return Finding(
                Breach.DELETED, self._seq + 1, row_id, f"seq {self._seq + 1} to {link.seq - 1} missing"
            )
        if audit_row_hash(link.prev_hash, link.entry) != link.hash:
            return Finding(Breach.EDITED, link.seq, row_id, "content does not match its hash")
        if link.prev_hash != self._hash:
            return Finding(
                Breach.REORDERED, link.seq, row_id, "does not follow the row before it (moved or renumbered)"
            )
        return None

    def finish(self) -> Finding | None:
        """The breach found, or a missing tail: the head names a row past the last one read."""
        if self.finding is None and self.head.seq > self._seq:
            self.finding = Finding(
                Breach.DELETED, self._seq + 1, None, f"seq {self._seq + 1} to {self.head.seq} missing"
            )
        if self.finding is None and self.head.seq == self._seq and self.head.hash != self._hash:
            self.finding = Finding(Breach.EDITED, self._seq, None, "the last row does not match the head")
        return self.finding


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The verdict on one workspace's chain."""

    workspace: str
    checked: int
    head_seq: int
    head_hash: str
    anchor_seq: int
    unsealed: int
    finding: Finding | None

    @property
    def ok(self) -> bool:
        return self.finding is None

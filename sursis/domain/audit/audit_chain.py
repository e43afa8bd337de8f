"""The audit log's hash chain: one chain per workspace, in the order rows were sealed (`seq`).

A row is written without its link (writers take no workspace-wide lock); the sweeper seals rows
in batches under the workspace's chain head lock, giving each the next `seq` and
`hash = audit_row_hash(prev_hash, row)`. `verify_chain` walks the links in `seq` order and names
the first row edited, deleted or reordered. Retention cuts the chain at an anchor (the last
purged row's `seq` and `hash`); verification then starts from the anchor, and the anchor must be
vouched for by a sealed purge row carrying it (and the anchor before it): an anchor moved by hand
is a breach. A signed checkpoint (`audit_checkpoint.py`) and an expected `(seq, hash)` recorded
outside the database catch a chain recomputed from an edited row.
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

from sursis.domain.audit.integrity import IntegrityFinding
from sursis.domain.records import AuditEntry

GENESIS = "0" * 64
"""The `prev_hash` of a workspace's first row."""


def _text(value: uuid.UUID | datetime | None) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, datetime) else str(value)


def row_content(entry: AuditEntry) -> dict[str, Any]:
    """What a row's hash covers: every stored field but the link itself, as text (also what an
    exported bundle carries for each row, so an offline verifier recomputes the same hash)."""
    return {
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


def audit_row_hash(prev_hash: str, entry: AuditEntry) -> str:
    """The one hash of the chain: SHA-256 over the previous row's hash and this row's plaintext
    canonical content (sorted-key JSON of `row_content`). Encryption at rest happens below this,
    so re-encrypting a row never changes its hash."""
    canonical = json.dumps(
        row_content(entry), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(f"{prev_hash}\n{canonical}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainLink:
    """A sealed row as the chain sees it; `unreadable` names why its content did not open (its
    `entry` then holds no details)."""

    seq: int
    prev_hash: str
    hash: str
    entry: AuditEntry
    unreadable: str | None = None


@dataclass(frozen=True, slots=True)
class ChainHead:
    """A workspace's chain: the last sealed row and the retention anchor (rows up to `anchor_seq`
    were purged; `anchor_hash` is the hash of the last of them)."""

    workspace: str
    seq: int
    hash: str
    anchor_seq: int = 0
    anchor_hash: str = GENESIS
    sealed_at: datetime | None = None
    """The time of the newest sealed row: sealing refuses rows dated well before it."""

    @property
    def anchor(self) -> tuple[int, str]:
        return (self.anchor_seq, self.anchor_hash)


PURGE_ACTION = "retention.audit_purged"
"""The row a retention cut leaves: `from_seq`/`from_hash` (the anchor before) and
`through_seq`/`anchor_hash` (the anchor after)."""


def purge_anchors(entry: AuditEntry) -> tuple[tuple[int, str] | None, tuple[int, str]] | None:
    """(anchor before, anchor after) that a purge row vouches for; None for any other row. The
    anchor before is None on rows written before purge rows carried it."""
    if entry.action != PURGE_ACTION:
        return None
    d = entry.details
    try:
        after = (int(d["through_seq"]), str(d["anchor_hash"]))
        before = (int(d["from_seq"]), str(d["from_hash"])) if "from_seq" in d else None
    except (KeyError, TypeError, ValueError):
        return None
    return before, after


class Breach(StrEnum):
    EDITED = "edited"
    """The row's content (or its stored link) does not hash to its stored hash."""
    DELETED = "deleted"
    """A `seq` is missing: a row was deleted (or the newest rows, if the head is past the end)."""
    REORDERED = "reordered"
    """The row is intact but does not follow the row before it."""
    UNREADABLE = "unreadable"
    """The row's encrypted content does not open (a missing or wrong key, or altered bytes)."""
    ANCHOR = "anchor_moved"
    """The anchor is not the one the last purge row vouches for: moved without a purge."""
    CHECKPOINT = "checkpoint"
    """The signed checkpoint is missing, forged, or names a head the chain no longer has."""
    EXPECTED = "expected_head"
    """The chain does not hold the `(seq, hash)` the caller recorded."""
    EXTERNAL = "external_checkpoint"
    """The chain does not hold the head of the newest checkpoint kept outside the database."""
    BACKDATED = "backdated"
    """An unsealed row is dated before the chain's newest sealed row: sealing refuses it."""


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
    expect: dict[int, tuple[str, str]] = field(default_factory=dict)
    """seq → (hash, who recorded it): heads recorded outside the database that the chain must
    hold (an operator's `--expect`, the signed checkpoint)."""
    _seq: int = field(init=False)
    _hash: str = field(init=False)
    _vouched: tuple[int, str] | None = field(init=False, default=None)
    _vouched_by: int | None = field(init=False, default=None)
    _expect_seen: set[int] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self._seq, self._hash = self.head.anchor_seq, self.head.anchor_hash
        if (anchored := self.expect.get(self.head.anchor_seq)) and anchored[0] == self.head.anchor_hash:
            self._expect_seen.add(self.head.anchor_seq)

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
        if link.unreadable is not None:
            return Finding(
                Breach.UNREADABLE, link.seq, row_id, f"its content does not open ({link.unreadable})"
            )
        if (expected := self.expect.get(link.seq)) is not None:
            if link.hash != expected[0]:
                return Finding(
                    _breach_of(expected[1]),
                    link.seq,
                    row_id,
                    f"hash {link.hash}, not the {expected[1]} {expected[0]}",
                )
            self._expect_seen.add(link.seq)
        if audit_row_hash(link.prev_hash, link.entry) != link.hash:
            return Finding(Breach.EDITED, link.seq, row_id, "content does not match its hash")
        if link.prev_hash != self._hash:
            return Finding(
                Breach.REORDERED, link.seq, row_id, "does not follow the row before it (moved or renumbered)"
            )
        return self._check_purge(link)

    def _check_purge(self, link: ChainLink) -> Finding | None:
        anchors = purge_anchors(link.entry)
        if anchors is None:
            return None
        before, after = anchors
        if self._vouched is not None and before is not None and before != self._vouched:
            return Finding(
                Breach.ANCHOR,
                link.seq,
                link.entry.id,
                "this purge does not start where the previous one ended",
            )
        self._vouched, self._vouched_by = after, link.seq
        return None

    def finish(self) -> Finding | None:
        """The breach found, or a missing tail: the head names a row past the last one read."""
        if self.finding is None and self.head.seq > self._seq:
            self.finding = Finding(
                Breach.DELETED, self._seq + 1, None, f"seq {self._seq + 1} to {self.head.seq} missing"
            )
        if self.finding is None and self.head.seq == self._seq and self.head.hash != self._hash:
            self.finding = Finding(Breach.EDITED, self._seq, None, "the last row does not match the head")
        if self.finding is None and self.head.anchor_seq > 0 and self._vouched != self.head.anchor:
            vouched = "no purge row" if self._vouched is None else f"the purge row at seq {self._vouched_by}"
            self.finding = Finding(
                Breach.ANCHOR,
                self.head.anchor_seq,
                None,
                f"the anchor (seq {self.head.anchor_seq}) is not the one {vouched} vouches for: "
                "rows were deleted without a purge",
            )
        for seq, (_, who) in sorted(self.expect.items()):
            if self.finding is not None:
                break
            if seq in self._expect_seen:
                continue
            detail = (
                f"the {who} seq {seq} was purged (the anchor is at {self.head.anchor_seq}): "
                "it cannot be checked"
                if seq < self.head.anchor_seq
                else f"the chain has no row at the {who} seq {seq} (its head is at {self.head.seq})"
            )
            self.finding = Finding(_breach_of(who), seq, None, detail)
        return self.finding


EXPECTED_HEAD_PATTERN = r"^[1-9][0-9]{0,17}:[0-9a-f]{64}$"
"""`SEQ:HASH`, a head recorded from an earlier verify (the command line's `--expect`, the API's
`expect`)."""


def parse_expected_head(value: str) -> tuple[int, str]:
    """`SEQ:HASH` as `(seq, hash)`; ValueError unless SEQ >= 1 and HASH is 64 lower-case hex digits."""
    seq, _, digest = value.partition(":")
    if (
        not seq.isdigit()
        or len(seq) > 18
        or int(seq) < 1
        or len(digest) != 64
        or not all(c in "0123456789abcdef" for c in digest)
    ):
        raise ValueError("SEQ:HASH, e.g. 1042:9f86d0…(64 hex digits), from an earlier verify")
    return int(seq), digest


EXPECTED_BY_CALLER = "recorded hash"
SIGNED = "signed hash"
EXTERNAL = "external checkpoint's hash"


def _breach_of(who: str) -> Breach:
    return {SIGNED: Breach.CHECKPOINT, EXTERNAL: Breach.EXTERNAL}.get(who, Breach.EXPECTED)


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
    integrity: tuple[IntegrityFinding, ...] = ()
    """Integrity findings the workspace's audit log holds (newest first, sealed or not): refusals of
    data that no longer agrees with a decision (`sursis.domain.audit.integrity`). Any makes it not ok."""

    @property
    def ok(self) -> bool:
        return self.finding is None and not self.integrity

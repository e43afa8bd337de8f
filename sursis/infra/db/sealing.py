"""Which columns carry conversation content, and how a row's values are sealed and opened.

One place names every encrypted column, its kind and the columns that name its row (the
associated data): repositories seal on write and open on read through it, and `sursis encryption
rotate` / `status` walk the same list. A JSON column stores a sealed value as a JSON string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa

from sursis.domain.encryption import Address, Cipher, UnsealedValue
from sursis.infra.db import approver_tables as approvers
from sursis.infra.db import channel_tables as channels
from sursis.infra.db import customer_tables as customer
from sursis.infra.db import people_tables as people
from sursis.infra.db import retention_tables as retention
from sursis.infra.db import review_tables as reviews
from sursis.infra.db import tables as t

Kind = Literal["text", "json"]


_dumps = json.JSONEncoder(separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class OpenedRow:
    """A row's values after opening, where a row is expected (`row._mapping`)."""

    _mapping: Mapping[str, Any]


@dataclass(frozen=True)
class SealedTable:
    """A table's encrypted columns (name → kind) and the plaintext columns that name a row.

    Where the database assigns the id (audit rows, events), the row is named by the columns known
    when it is written: a value copied to a row with other names does not open.
    """

    table: sa.Table
    columns: Mapping[str, Kind]
    row: tuple[str, ...]

    @property
    def key(self) -> tuple[sa.Column[Any], ...]:
        return tuple(self.table.primary_key.columns)

    def address(self, column: str, values: Mapping[Any, Any]) -> Address:
        return Address(self.table.name, column, tuple([values[name] for name in self.row]))

    def seal_value(self, cipher: Cipher, column: str, value: Any, values: Mapping[Any, Any]) -> Any:
        if value is None:
            return None
        if self.columns[column] == "text":
            return cipher.seal(value, self.address(column, values))
        if cipher.active_key_id is None and not isinstance(value, str):
            return value
        text = value if cipher.active_key_id is None else _dumps(value)
        return cipher.seal(text, self.address(column, values))

    def open_value(self, cipher: Cipher, column: str, stored: Any, values: Mapping[Any, Any]) -> Any:
        """The plaintext of a stored value; on an encrypted database (`cipher.refuses_plaintext`) a
        value that is not sealed is refused by its address (`UnsealedValue`), never served."""
        if stored is not None and cipher.refuses_plaintext and not self.is_sealed(cipher, stored):
            raise UnsealedValue(self.address(column, values))
        return self.open_unchecked(cipher, column, stored, values)

    @staticmethod
    def is_sealed(cipher: Cipher, stored: Any) -> bool:
        return isinstance(stored, str) and cipher.key_id_of(stored) is not None

    def open_unchecked(self, cipher: Cipher, column: str, stored: Any, values: Mapping[Any, Any]) -> Any:
        """`open_value` that reads an unsealed value as it is: only for `seal-existing`, the
        operator's deliberate sealing of values written before encryption was on."""
        if not isinstance(stored, str):
            return stored
        opened = cipher.open(stored, self.address(column, values))
        if self.columns[column] == "json" and cipher.key_id_of(stored) is not None:
            return json.loads(opened)
        return opened

    def seal(
        self, cipher: Cipher, values: dict[str, Any], row: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """`values` (an insert's, or an update's of the row named by `row`) with every encrypted
        column sealed, in place."""
        for column in self.columns:
            if column in values:
                values[column] = self.seal_value(cipher, column, values[column], row or values)
        return values

    def open_row(self, cipher: Cipher, row: Any) -> OpenedRow:
        """A row with every encrypted column opened, for `record_from_row`."""
        return OpenedRow(self.open(cipher, row))

    def open(self, cipher: Cipher, row: Any, *, unchecked: bool = False) -> dict[str, Any]:
        """A row's mapping with every encrypted column opened (`unchecked`: see `open_unchecked`)."""
        values = dict(row._mapping)
        opener = self.open_unchecked if unchecked else self.open_value
        for column in self.columns:
            if column in values:
                values[column] = opener(cipher, column, values[column], values)
        return values


MESSAGES = SealedTable(t.messages, {"body": "text"}, ("conversation_id", "seq"))
RUNS = SealedTable(
    t.runs, {"input": "text", "output": "text", "error": "json", "deps_state": "json"}, ("id",)
)
PENDING_CALLS = SealedTable(
    t.pending_calls,
    {
        "args": "json",
        "args_summary": "json",
        "effect_description": "text",
        "resolution": "json",
        "reason": "text",
        "validated_args": "json",
    },
    ("correlation_id",),
)
VOTES = SealedTable(approvers.pending_votes, {"reason": "text"}, ("correlation_id", "voter"))
REVIEWS = SealedTable(reviews.pending_reviews, {"reason": "text"}, ("correlation_id",))
TOOL_CALLS = SealedTable(t.tool_calls, {"result": "json"}, ("conversation_id", "tool_call_id"))
AUDIT_LOG = SealedTable(
    t.audit_log, {"details": "json"}, ("workspace", "action", "at", "run_id", "correlation_id")
)
EVENTS = SealedTable(t.events, {"data": "json"}, ("conversation_id", "type", "created_at"))
OUTBOX = SealedTable(t.outbox, {"payload": "json"}, ("workspace", "topic", "created_at"))
DEAD_LETTERS = SealedTable(t.dead_letters, {"payload": "json"}, ("workspace", "id"))
DIGEST_ITEMS = SealedTable(
    channels.digest_items,
    {"summary": "text", "data": "json"},
    ("binding_id", "conversation_id", "kind", "created_at"),
)
DELEGATIONS = SealedTable(
    customer.delegations,
    {"messages": "text", "deferred": "json", "output": "text"},
    ("conversation_id", "tool_call_id"),
)

LEGAL_HOLDS = SealedTable(retention.legal_holds, {"reason": "text"}, ("id",))
FAILURE_CLUSTERS = SealedTable(t.failure_clusters, {"notes": "text"}, ("id",))
AUTHORIZATIONS = SealedTable(t.authorizations, {"reason": "text", "args_match": "json"}, ("id",))
PERSON_SESSIONS = SealedTable(people.person_sessions, {"refresh_token": "text"}, ("id_hash",))

SEALED_TABLES: list[SealedTable] = [
    MESSAGES,
    RUNS,
    PENDING_CALLS,
    TOOL_CALLS,
    AUDIT_LOG,
    EVENTS,
    OUTBOX,
    DEAD_LETTERS,
    DELEGATIONS,
    DIGEST_ITEMS,
    LEGAL_HOLDS,
    FAILURE_CLUSTERS,
    VOTES,
    AUTHORIZATIONS,
    REVIEWS,
    PERSON_SESSIONS,
]
"""Every table with encrypted columns, in the order `rotate` walks them."""

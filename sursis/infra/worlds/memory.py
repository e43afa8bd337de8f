"""The memory gateway: the one write path into `memories`, for every agent, and recall.

Writes pass `check_memory` (no rule content, no verbatim tool output, no personal data or
secrets); on PostgreSQL a trigger refuses rule content again, so a direct SQL insert cannot
bypass it. Recall ranks by trigram word similarity: on PostgreSQL with the GIN index, on SQLite
in Python over the scope's newest rows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from sursis.domain.clock import Clock
from sursis.domain.worlds.memory import (
    MemoryKind,
    MemoryRefused,
    MemoryTier,
    PersonalDataDetector,
    check_memory,
    word_similarity,
)
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.db.world_tables import memories
from sursis.infra.worlds.personal_data import ValidatedPersonalData
from sursis.infra.worlds.repository import SqlWorldRepository

RECALL_THRESHOLD = 0.3
SQLITE_RECALL_WINDOW = 5000
RULE_CONTENT_CONSTRAINT = "memories_no_rule_content"

RECALL_CANDIDATES = 500
"""Recall ranks at most this many trigram matches: a query of common words cannot make it scan the
whole table (the best of the first 500 matches, not of all of them)."""

_PG_RECALL = sa.text(
    """
    WITH candidates AS MATERIALIZED (
        SELECT id, tier, kind, text, created_at
        FROM memories
        WHERE :query <% text
          AND workspace = :workspace AND agent = :agent
          AND world_id IS NOT DISTINCT FROM :world_id
          AND (tier = 'persistent'
               OR (tier = 'session' AND conversation_id = :conversation_id)
               OR (tier = 'interaction' AND run_id = :run_id))
        LIMIT :candidates
    )
    SELECT id, tier, kind, text, word_similarity(:query, text) AS score
    FROM candidates
    ORDER BY score DESC, created_at DESC
    LIMIT :limit
    """
)


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory: an agent of a workspace, optionally of one world, in one conversation and run."""

    workspace: str
    agent: str
    world_id: uuid.UUID | None
    conversation_id: uuid.UUID
    run_id: uuid.UUID


class MemoryGateway:
    def __init__(
        self, uow: SqlUnitOfWorkFactory, clock: Clock, detector: PersonalDataDetector | None = None
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._detector = detector if detector is not None else ValidatedPersonalData()

    async def remember(
        self, scope: MemoryScope, text: str, tier: MemoryTier, kind: MemoryKind, tool_outputs: list[str]
    ) -> dict[str, Any]:
        """Store one memory, or raise `MemoryRefused` saying why not."""
        memory_id = uuid.uuid4()
        try:
            async with self._uow() as uow:
                rules = SqlWorldRepository(uow.session)
                enshrined = await rules.enshrined_texts(scope.world_id) if scope.world_id else []
                check_memory(
                    text, enshrined_texts=enshrined, tool_outputs=tool_outputs, detector=self._detector
                )
                await uow.session.execute(
                    memories.insert().values(
                        id=memory_id,
                        workspace=scope.workspace,
                        world_id=scope.world_id,
                        agent=scope.agent,
                        tier=tier.value,
                        kind=kind.value,
                        text=text.strip(),
                        conversation_id=scope.conversation_id,
                        run_id=scope.run_id,
                        created_at=self._clock(),
                    )
                )
                await uow.commit()
        except sa_exc.DBAPIError as exc:
            if RULE_CONTENT_CONSTRAINT in str(exc.orig):
                raise MemoryRefused(
                    "MEMORY_RULE_CONTENT",
                    "the database refused the text: it restates an enshrined rule of this world",
                ) from None
            raise
        return {"id": str(memory_id), "tier": tier.value, "kind": kind.value}

    async def recall(self, scope: MemoryScope, query: str, limit: int = 10) -> list[dict[str, Any]]:
        async with self._uow() as uow:
            if uow.session.get_bind().dialect.name == "postgresql":
                rows = await uow.session.execute(
                    _PG_RECALL,
                    {
                        "query": query,
                        "workspace": scope.workspace,
                        "agent": scope.agent,
                        "world_id": scope.world_id,
                        "conversation_id": scope.conversation_id,
                        "run_id": scope.run_id,
                        "limit": limit,
                        "candidates": RECALL_CANDIDATES,
                    },
                )
                return [_recalled(r.id, r.tier, r.kind, r.text, float(r.score)) for r in rows]
            c = memories.c
            rows = await uow.session.execute(
                sa.select(c.id, c.tier, c.kind, c.text)
                .where(
                    c.workspace == scope.workspace,
                    c.agent == scope.agent,
                    c.world_id.is_(None) if scope.world_id is None else c.world_id == scope.world_id,
                    sa.or_(
                        c.tier == MemoryTier.PERSISTENT.value,
                        sa.and_(
                            c.tier == MemoryTier.SESSION.value, c.conversation_id == scope.conversation_id
                        ),
                        sa.and_(c.tier == MemoryTier.INTERACTION.value, c.run_id == scope.run_id),
                    ),
                )
                .order_by(c.created_at.desc())
                .limit(SQLITE_RECALL_WINDOW)
            )
            scored = [(word_similarity(query, r.text), r) for r in rows]
        ranked = sorted((s for s in scored if s[0] >= RECALL_THRESHOLD), key=lambda s: -s[0])[:limit]
        return [_recalled(r.id, r.tier, r.kind, r.text, score) for score, r in ranked]


def _recalled(memory_id: uuid.UUID, tier: str, kind: str, text: str, score: float) -> dict[str, Any]:
    return {"id": str(memory_id), "tier": tier, "kind": kind, "text": text, "score": round(score, 3)}

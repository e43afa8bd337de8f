"""What an insider with SQL rights and no key does: statements sent straight to the database."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sursis.infra.db.engine import create_engine


async def execute(database_url: str, statement: str, **params: Any) -> list[Any]:
    """Run `statement` in a transaction of its own; the rows it returns, if any."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(sa.text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        await engine.dispose()


async def findings(database_url: str, action: str = "integrity.unsealed_value") -> list[Any]:
    """The audit rows of `action` (their plaintext columns)."""
    return await execute(
        database_url, "SELECT workspace, actor, conversation_id FROM audit_log WHERE action = :a", a=action
    )

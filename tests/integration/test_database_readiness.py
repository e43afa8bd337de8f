"""A database that is missing, unreachable or behind the code: one sentence, no file left behind,
and no SQL parameter or password in any error."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import downgrade, upgrade
from sursis.infra.db.readiness import (
    DatabaseNotReady,
    current_revision,
    head_revision,
    require_head,
    shown_url,
)


def test_a_printed_url_has_its_password_masked() -> None:
    assert (
        shown_url("postgresql+asyncpg://postgres:s3cretpw@db:5432/x")
        == "postgresql+asyncpg://postgres:***@db:5432/x"
    )
    assert shown_url("sqlite+aiosqlite:///./sursis.db") == "sqlite+aiosqlite:///./sursis.db"
    assert "s3cret" not in shown_url("not a url s3cret")


async def test_a_missing_sqlite_file_is_not_migrated_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(DatabaseNotReady) as raised:
        await require_head(f"sqlite+aiosqlite:///{path}")
    assert str(raised.value) == (
        f"the database sqlite+aiosqlite:///{path} is not migrated (revision none, head {head_revision()}): "
        "run `sursis migrate`"
    )
    assert not path.exists()


async def test_a_database_behind_the_code_names_both_revisions(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    await _upgrade(url)
    await require_head(url)
    downgrade(url, "-1")
    behind = await current_revision(url)
    assert behind is not None and behind != head_revision()
    with pytest.raises(DatabaseNotReady, match=rf"\(revision {behind}, head {head_revision()}\)"):
        await require_head(url)


async def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(DatabaseNotReady) as raised:
        await require_head("postgresql+asyncpg://postgres:s3cretpw@127.0.0.1:9/nothing")
    text = str(raised.value)
    assert text.startswith(
        "cannot reach the database postgresql+asyncpg://postgres:***@127.0.0.1:9/nothing: "
    )
    assert "s3cretpw" not in text and "\n" not in text


async def test_sql_errors_never_carry_their_parameters(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    try:
        async with engine.begin() as conn:
            with pytest.raises(exc.DBAPIError) as raised:
                await conn.execute(
                    sa.text("INSERT INTO api_keys (key_hash) VALUES (:h)"), {"h": "hash-0123456789"}
                )
    finally:
        await engine.dispose()
    assert "hash-0123456789" not in str(raised.value)
    assert "hidden due to hide_parameters" in str(raised.value)


async def _upgrade(url: str) -> None:
    import asyncio

    await asyncio.to_thread(upgrade, url)


def test_the_head_read_from_the_scripts_is_alembics_own() -> None:
    from alembic.script import ScriptDirectory

    from sursis.infra.db.migrations import alembic_config

    assert head_revision() == ScriptDirectory.from_config(alembic_config("")).get_current_head()


async def test_a_migrated_database_reads_as_the_head_without_alembic(database_url: str) -> None:
    """Both databases (`database_url` is migrated by the fixture): the revision read directly from
    `alembic_version` is the head, so `serve` starts."""
    assert await current_revision(database_url) == head_revision()
    await require_head(database_url)

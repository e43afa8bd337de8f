"""What a rotation leaves on disk, and the compaction step that removes it: after `rotate` the old
values are unreadable through the service but their bytes are still in the table's file (a thief
with the file, not the key, reads them) on PostgreSQL; `sursis encryption compact` rewrites the
files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa

from sursis.app.cli import run
from sursis.infra.db.engine import create_engine
from tests.api.test_encryption_at_rest import new_key
from tests.conftest import make_settings
from tests.integration.test_encryption_cli import write_messages

MARKER = "saffron-lynx-9083"


async def table_files(url: str, table: str) -> list[Path]:
    """The files that hold `table` on disk (PostgreSQL: after a checkpoint, its heap and TOAST)."""
    if url.startswith("sqlite"):
        path = Path(sa.make_url(url).database or "")
        return [p for p in (path, Path(f"{path}-wal")) if p.exists()]
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.execute(sa.text("CHECKPOINT"))
            data = Path(str(await conn.scalar(sa.text("SHOW data_directory"))))
            query = sa.text(
                "SELECT pg_relation_filepath(c.oid), pg_relation_filepath(c.reltoastrelid) "
                "FROM pg_class c WHERE c.relname = :t"
            )
            heap, toast = (await conn.execute(query, {"t": table})).one()
    finally:
        await engine.dispose()
    files = [data / p for p in (heap, toast) if p]
    # The tests' PostgreSQL runs on this machine (.ci/run starts it): its table files are readable.
    assert all(f.exists() for f in files), f"the table's files are not on this machine: {files}"
    return files


async def on_disk(url: str, text: str) -> bool:
    return any(text.encode() in f.read_bytes() for f in await table_files(url, "messages"))


async def test_rotate_says_what_stays_on_disk_and_compact_removes_it(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await write_messages(database_url, None, [f'{{"said": "{MARKER}"}}'] * 3)
    assert await on_disk(database_url, MARKER)
    settings = make_settings(database_url, encryption_keys=new_key("k1"))
    assert await asyncio.to_thread(run, ["encryption", "rotate", "--quiet"], settings) == 0
    out = capsys.readouterr().out
    assert "rewrote 3 rows" in out and "their bytes stay on disk" in out and "encryption compact" in out
    if not database_url.startswith("sqlite"):
        # PostgreSQL keeps the old row version in the file (MVCC) until it is compacted; SQLite
        # rewrites a row in place, and leaves old bytes only in pages freed by a move.
        assert await on_disk(database_url, MARKER)
    assert await asyncio.to_thread(run, ["encryption", "compact"], settings) == 0
    assert "compacted" in capsys.readouterr().out
    assert not await on_disk(database_url, MARKER)

"""How many segments a worker runs at once, unset: 10 on PostgreSQL (a segment mostly waits for its
model), 4 on SQLite (one writer at a time); `SURSIS_WORKER_CONCURRENCY` decides when it is set
(docs/durability.md, "How many segments a worker runs at once")."""

from __future__ import annotations

import pytest

from sursis.app.container import build_container
from sursis.app.settings import Settings
from tests.conftest import make_settings


async def test_a_worker_has_ten_slots_on_postgresql_and_four_on_sqlite(database_url: str) -> None:
    container = build_container(make_settings(database_url))
    try:
        expected = 4 if database_url.startswith("sqlite") else 10
        assert container.settings.worker_slots == expected
        assert container.worker._slots.size == expected
    finally:
        await container.close()


async def test_the_setting_decides_when_it_is_set(database_url: str) -> None:
    container = build_container(make_settings(database_url, worker_concurrency=3))
    try:
        assert container.worker._slots.size == 3
    finally:
        await container.close()


def test_the_variable_is_read_and_zero_slots_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURSIS_DATABASE_URL", "postgresql+asyncpg://sursis@db/sursis")
    monkeypatch.setenv("SURSIS_WORKER_CONCURRENCY", "16")
    assert Settings().worker_slots == 16
    monkeypatch.setenv("SURSIS_WORKER_CONCURRENCY", "0")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings()

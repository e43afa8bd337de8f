from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from tests.conftest import _truncate_pg, admin_headers
from tests.faults.processes import Cluster


@pytest.fixture
async def cluster(pg_migrated: str, tmp_path: Path) -> AsyncIterator[Cluster]:
    await _truncate_pg(pg_migrated)
    engine = create_engine(pg_migrated)
    await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
    await engine.dispose()
    running = Cluster(pg_migrated, tmp_path, headers=await admin_headers(pg_migrated))
    try:
        yield running
    finally:
        running.stop_all()

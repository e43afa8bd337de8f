from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from tests.adoption.cases import CASES
from tests.adoption.harness import AdoptionHarness, install
from tests.conftest import PG_URL
from tests.fresh_database import drop_database, fresh_database


@pytest.fixture(scope="session")
def adoption(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdoptionHarness]:
    """One venv with the wheel and every package, one fresh PostgreSQL database, one API process."""
    root = tmp_path_factory.mktemp("adoption")
    bin_dir = install(root)
    url = asyncio.run(fresh_database(PG_URL, "adoption"))
    try:
        with AdoptionHarness(bin_dir, url, root, CASES) as harness:
            yield harness
    finally:
        # On a busy server the drop's checkpoint can outlast the command timeout; the next session's
        # `fresh_database` drops what is left, so a slow drop is not this session's failure.
        with contextlib.suppress(TimeoutError):
            asyncio.run(drop_database(url))

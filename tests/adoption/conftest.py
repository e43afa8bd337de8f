from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adoption.cases import CASES
from tests.adoption.harness import AdoptionHarness, install
from tests.conftest import PG_URL
from tests.faults.conftest import cluster  # noqa: F401  (the fault tests' processes, for the tests that kill one)
from tests.fresh_database import drop_database, fresh_database


@pytest.fixture(scope="session")
def adoption_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fresh venv with the built wheel and every package under `packages/`: its `bin`."""
    return install(tmp_path_factory.mktemp("adoption-venv"))


@pytest.fixture(scope="session")
def adoption(tmp_path_factory: pytest.TempPathFactory, adoption_bin: Path) -> Iterator[AdoptionHarness]:
    """The session's venv, one fresh PostgreSQL database, one API process."""
    root = tmp_path_factory.mktemp("adoption")
    url = asyncio.run(fresh_database(PG_URL, "adoption"))
    try:
        with AdoptionHarness(adoption_bin, url, root, CASES) as harness:
            yield harness
    finally:
        # On a busy server the drop's checkpoint can outlast the command timeout; the next session's
        # `fresh_database` drops what is left, so a slow drop is not this session's failure.
        with contextlib.suppress(TimeoutError):
            asyncio.run(drop_database(url))

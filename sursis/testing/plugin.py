"""The pytest plugin of the kit (loaded through the `pytest11` entry point as `sursis`).

Fixtures:

- `sursis_service`: a started `sursis.Service` per test over a freshly migrated SQLite file, or
  over the PostgreSQL database given by `--sursis-db URL` (emptied before each test). It runs the
  agents of `sursis_agents` on the `scripted_model`; nothing runs in the background: call
  `run_until_idle()` (or the helpers of `sursis.testing`) to drive queued work.
- `scripted_model`: a `ScriptedModel` whose turns the test declares.
- `sursis_agents`: override it to return your agents, definitions or plain pydantic-ai `Agent`s
  (default: the built-in ones).
- `sursis_settings`: override it to return `Settings` field overrides (default: none).

Helpers: `expect_pending`, `resolve_and_settle`, `settle`. The async fixtures need pytest-asyncio
(`pip install "sursis[testing]"`); the plugin sets it up itself: an `async def` test that uses a
`sursis_*` fixture runs on asyncio without `asyncio_mode = auto` or a marker, and the fixture loop
scope defaults to `function` unless the project sets `asyncio_default_fixture_loop_scope`.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sursis.app.service import Service
    from sursis.infra.agents.declarations import AgentDefinition
    from sursis.testing.scripted import ScriptedModel

try:
    import pytest_asyncio
except ImportError:  # without the `testing` extra: the plugin must not break the user's pytest
    pytest_asyncio = None  # type: ignore[assignment]


def _async_fixture(function: Callable[..., Any]) -> Any:
    """An async fixture under pytest-asyncio, or one that says what is missing."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(function)

    @pytest.fixture(name=function.__name__)
    def missing() -> None:
        raise pytest.UsageError(f"{function.__name__} needs pytest-asyncio: pip install 'sursis[testing]'")

    return missing


DB_OPTION = "--sursis-db"
LOOP_SCOPE = "asyncio_default_fixture_loop_scope"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Choose pytest-asyncio's fixture loop scope when the project has not (no deprecation warning)."""
    if pytest_asyncio is not None and not config.getini(LOOP_SCOPE):
        config._inicache[LOOP_SCOPE] = "function"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """Run `async def` tests that take the kit's fixtures on asyncio, in pytest-asyncio's strict mode too."""
    import inspect

    if pytest_asyncio is None or not inspect.iscoroutinefunction(obj) or not name.startswith("test"):
        return
    if any(p.startswith("sursis_") for p in inspect.signature(obj).parameters) and not any(
        mark.name == "asyncio" for mark in getattr(obj, "pytestmark", [])
    ):
        pytest.mark.asyncio(obj)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("sursis")
    group.addoption(
        DB_OPTION,
        metavar="URL",
        default=None,
        help="run `sursis_service` on this PostgreSQL database (migrated, then emptied before each test)",
    )


@pytest.fixture(scope="session")
def _sursis_sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from sursis.infra.db.migrations import upgrade

    path = tmp_path_factory.mktemp("sursis") / "template.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def _sursis_pg_migrated(pytestconfig: pytest.Config) -> str:
    from sursis.infra.db.migrations import upgrade

    url: str = pytestconfig.getoption(DB_OPTION)
    upgrade(url)
    return url


async def _empty(url: str) -> None:
    import sqlalchemy as sa

    from sursis.infra.db.engine import create_engine
    from sursis.infra.db.tables import metadata

    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            names = ", ".join(t.name for t in metadata.sorted_tables)
            await conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    finally:
        await engine.dispose()


@_async_fixture
async def sursis_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated, empty database for one test: a copy of a migrated SQLite file, or the
    `--sursis-db` PostgreSQL database emptied."""
    if request.config.getoption(DB_OPTION):
        url: str = request.getfixturevalue("_sursis_pg_migrated")
        await _empty(url)
        return url
    template: Path = request.getfixturevalue("_sursis_sqlite_template")
    target = tmp_path / "sursis.db"
    shutil.copy(template, target)
    return f"sqlite+aiosqlite:///{target}"


@pytest.fixture
def sursis_agents() -> list[AgentDefinition] | None:
    """The agents `sursis_service` runs; override it with your own. None: the built-in agents."""
    return None


@pytest.fixture
def sursis_settings() -> dict[str, Any]:
    """`Settings` field overrides for `sursis_service` (e.g. `{"step_limit": 5}`)."""
    return {}


@pytest.fixture
def scripted_model() -> ScriptedModel:
    from sursis.testing.scripted import ScriptedModel

    return ScriptedModel()


@_async_fixture
async def sursis_service(
    sursis_database_url: str,
    sursis_agents: list[AgentDefinition] | None,
    sursis_settings: dict[str, Any],
    scripted_model: ScriptedModel,
) -> AsyncIterator[Service]:
    from sursis.app.service import Service

    async with Service.open(
        sursis_database_url,
        agents=sursis_agents,
        model=scripted_model.model,
        **{"migrate_on_start": False, **sursis_settings},
    ) as service:
        yield service

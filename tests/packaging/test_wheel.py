"""The built wheel, installed with pip into a fresh venv outside the checkout beside
pydantic-ai-harness (`pip install sursis pydantic-ai-harness`, which resolves to the lowest
pydantic-ai the service supports, the one the harness pins) and the example project
(`examples/support-desk`), migrates SQLite and PostgreSQL, serves the example's agent with
`sursis serve --agents` and runs an adopted agent carrying a harness capability through an
approval turn: whatever the wheel misses fails here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from sursis.infra.db.engine import create_engine
from sursis.infra.db.migrations import alembic_config
from tests.conftest import PG_URL
from tests.fresh_database import drop_database, fresh_database
from tests.packaging.installing import build_wheel, clean_env, fresh_venv

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "support-desk"
AGENTS = ["--agents", "support_desk.agents:AGENTS", "--agents", "assistant"]
HEAD = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
HARNESS = "pydantic-ai-harness==0.62.0"
"""The official capability library at the version that pins the lowest supported pydantic-ai."""
LOWEST_PYDANTIC_AI = "2.62.0"
JUDGED_DESK = Path(__file__).resolve().parent / "judged_desk.py"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel, pydantic-ai-harness and their dependencies installed by one pip
    resolution (the local pip cache and configured indexes only), then the example project (its
    `sursis` dependency is the wheel); returns its `bin` directory."""
    return fresh_venv(tmp_path_factory.mktemp("venv"), [str(wheel), HARNESS], [str(EXAMPLE)])


_clean_env = clean_env


def _sursis(bin_dir: Path, cwd: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "sursis"), *args],
        cwd=cwd,
        env=_clean_env(bin_dir, SURSIS_DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _serving(bin_dir: Path, cwd: Path, url: str) -> Iterator[tuple[str, str]]:
    """`sursis serve` from the venv; yields its base URL and the admin key it wrote to the key file
    (its output is not a terminal, so it prints none)."""
    port = _free_port()
    log = cwd / f"serve-{port}.log"
    key_file = cwd / f"admin-{port}.key"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(bin_dir / "sursis"), "serve", "--port", str(port), *AGENTS],
            cwd=cwd,
            env=_clean_env(
                bin_dir, SURSIS_DATABASE_URL=url, SURSIS_LOG_JSON="true", SURSIS_ADMIN_KEY_FILE=str(key_file)
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        key = key_file.read_text().strip()
        assert key.startswith("srs_"), log.read_text()
        assert key not in log.read_text()
        yield base, key
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _exercise(base: str, key: str) -> None:
    """Health, readiness, the inbox page and one conversation turn on the scripted model."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").json()["status"] == "ready"
        assert http.get("/inbox").status_code == 200
        conversation = http.post("/v1/conversations", json={"agent": "assistant"})
        assert conversation.status_code == 201, conversation.text
        run = http.post(
            f"/v1/conversations/{conversation.json()['id']}/messages",
            params={"wait": 20},
            json={"content": "hi"},
        )
        assert run.json()["status"] == "completed", run.text
        _approve_a_refund(http)


def _approve_a_refund(http: httpx.Client) -> None:
    """One approval turn of the example's agent, served from the installed package."""
    assert sorted(a["name"] for a in http.get("/v1/agents").json()) == ["assistant", "support"]
    conversation = http.post("/v1/conversations", json={"agent": "support"}).json()
    steps = [
        [{"tool": "lookup_order", "args": {"order_id": "A1001"}}],
        [{"tool": "refund_order", "args": {"order_id": "A1001", "amount": 20, "reason": "late"}}],
        "Refunded.",
    ]
    content = f"A1001 came late\nSCRIPT: {json.dumps(steps)}"
    run = http.post(
        f"/v1/conversations/{conversation['id']}/messages", params={"wait": 20}, json={"content": content}
    ).json()
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    assert (pending["tool_name"], pending["effect_description"]) == (
        "refund_order",
        "Refund 20 on order A1001 (late)",
    )
    decided = http.post(f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    done = http.get(f"/v1/runs/{run['id']}", params={"wait": 20}).json()
    assert (done["status"], done["output"]) == ("completed", "Refunded."), done
    [refund] = [
        c for c in http.get(f"/v1/runs/{run['id']}/tool-calls").json() if c["tool_name"] == "refund_order"
    ]
    assert refund["ok"], refund


def test_the_wheel_holds_the_migrations_the_inbox_and_the_pytest_plugin(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    versions = {p.name for p in (REPO / "sursis" / "migrations" / "versions").glob("*.py")}
    assert {f"sursis/migrations/versions/{v}" for v in versions} <= names
    assert {"sursis/migrations/env.py", "sursis/migrations/script.py.mako", "sursis/py.typed"} <= names
    assert any(n.startswith("sursis/app/static/inbox/") for n in names)
    assert "sursis = sursis.testing.plugin" in entry_points and "sursis = sursis.app.cli:main" in entry_points


def test_the_installed_wheel_migrates_sqlite_and_serves(venv: Path, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    located = subprocess.run(
        [
            str(venv / "python"),
            "-c",
            "import sursis.client, sursis.testing.scripted, sursis; print(sursis.__file__)",
        ],
        cwd=tmp_path,
        env=_clean_env(venv),
        capture_output=True,
        text=True,
        check=True,
    )
    assert located.stdout.startswith(str(venv.parent)), located.stdout
    migrated = _sursis(venv, tmp_path, url, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert _revision(url) == HEAD
    with _serving(venv, tmp_path, url) as (base, key):
        _exercise(base, key)


def test_the_installed_wheel_migrates_a_fresh_postgresql_database(venv: Path, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(PG_URL, "wheel"))
    try:
        migrated = _sursis(venv, tmp_path, url, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert _revision(url) == HEAD
        with _serving(venv, tmp_path, url) as (base, key):
            _exercise(base, key)
    finally:
        asyncio.run(drop_database(url))


def test_beside_pydantic_ai_harness_a_judged_agent_completes_an_approval_turn(
    venv: Path, tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'judged.db'}"
    migrated = _sursis(venv, tmp_path, url, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    done = subprocess.run(
        [str(venv / "python"), str(JUDGED_DESK), url],
        cwd=tmp_path,
        env=_clean_env(venv),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    turn = json.loads(done.stdout.splitlines()[-1])
    assert (turn["pydantic-ai-slim"], turn["pydantic-ai-harness"]) == (LOWEST_PYDANTIC_AI, "0.62.0")
    assert turn["pending"] == [["drop_table", "approval"]]
    # The person approved; the harness's judge, at execution, let the call run; it ran once.
    assert (turn["status"], turn["effects"]) == ("completed", ["tmp_import"]), turn
    assert turn["verdicts"] == [["drop_table", "allow"]]


def _revision(url: str) -> str | None:
    async def read() -> str | None:
        engine = create_engine(url)
        try:
            async with engine.connect() as conn:
                value = (await conn.execute(sa.text("SELECT version_num FROM alembic_version"))).scalar()
                return str(value) if value is not None else None
        finally:
            await engine.dispose()

    return asyncio.run(read())

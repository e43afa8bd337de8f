"""Database URLs as operators write them: several hosts in either form, a password with `@` and
other special characters, and the careless ones (an unreadable URL, an SQLite file in a folder that
does not exist), each a working command or one line on stderr, never a traceback or the password."""

from __future__ import annotations

import os
import re
import shutil
import signal
import string
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from sursis.infra.db.listen_target import connect_for_listening, listen_url
from sursis.infra.db.urls import (
    InvalidDatabaseUrl,
    asyncpg_connect_kwargs,
    database_url,
    normalized,
    plain_postgres_kwargs,
    plain_sqlite_file,
    shown_url,
)
from tests.faults.patroni_cluster import PatroniCluster
from tests.pg_servers import PgBouncer, free_port

PASSWORD = "p@ss:w/rd#?%&x"
"""Characters a generated password holds: each would cut an unencoded URL somewhere else."""


def with_password(url: str, password: str = PASSWORD) -> str:
    """`url` with the password written in raw, unencoded, as an operator pastes it."""
    parsed = make_url(url)
    return f"postgresql+asyncpg://{parsed.username}:{password}@{parsed.host}:{parsed.port}/{parsed.database}"


def sursis(*args: str, url: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_both_multi_host_forms_give_every_host_to_asyncpg() -> None:
    libpq = "postgresql+asyncpg://app:pw@db1:5432,db2:5433/sursis?target_session_attrs=read-write"
    repeated = (
        "postgresql+asyncpg://app:pw@/sursis?host=db1:5432&host=db2:5433&target_session_attrs=read-write"
    )
    expected = {
        "host": ["db1", "db2"],
        "port": [5432, 5433],
        "user": "app",
        "password": "pw",
        "database": "sursis",
        "target_session_attrs": "read-write",
    }
    assert asyncpg_connect_kwargs(libpq) == expected
    assert asyncpg_connect_kwargs(repeated) == expected
    # A host without its port gets PostgreSQL's.
    assert asyncpg_connect_kwargs("postgresql+asyncpg://app@db1,db2:6000/sursis")["port"] == [5432, 6000]
    assert shown_url(libpq) == (
        "postgresql+asyncpg://app:***@/sursis?host=db1:5432&host=db2:5433&target_session_attrs=read-write"
    )


def test_the_listen_url_defaults_to_the_main_one_and_can_be_turned_off() -> None:
    main = "postgresql+asyncpg://app@pooler:6432/sursis"
    direct = "postgresql+asyncpg://app@db1:5432,db2:5432/sursis?target_session_attrs=read-write"
    assert listen_url(main, None) == main
    assert listen_url(main, "") == main
    assert listen_url(main, direct) == direct
    assert listen_url(main, "off") is None


def test_a_raw_password_with_special_characters_is_read_whole() -> None:
    url = f"postgresql+asyncpg://app:{PASSWORD}@db:5432/sursis"
    assert asyncpg_connect_kwargs(url)["password"] == PASSWORD
    assert asyncpg_connect_kwargs(url)["host"] == "db"
    assert normalized(url).startswith("postgresql+asyncpg://app:p%40ss%3Aw%2Frd%23%3F%25%26x@db:5432/")
    assert PASSWORD not in shown_url(url)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql+asyncpg://app:{PASSWORD}@db:54x2/sursis",
        f"postgresql+asyncpg://app:{PASSWORD}@db:5432,:5433/sursis",
        f"postgresql+asyncpg://app:{PASSWORD}@db1:5432/sursis?host=db2:5432",
    ],
)
def test_an_unreadable_url_is_one_sentence_without_the_password(url: str) -> None:
    with pytest.raises(InvalidDatabaseUrl) as refused:
        asyncpg_connect_kwargs(url)
    assert PASSWORD not in str(refused.value) and "p@ss" not in str(refused.value)
    assert "\n" not in str(refused.value)


async def test_a_listen_connection_goes_to_the_host_that_answers(pg_migrated: str) -> None:
    real = make_url(pg_migrated)
    nobody = free_port()
    url = (
        f"postgresql+asyncpg://{real.username}@127.0.0.1:{nobody},{real.host}:{real.port}/{real.database}"
        "?target_session_attrs=read-write"
    )
    connection = await connect_for_listening(url)
    try:
        assert await connection.fetchval("SELECT current_database()") == real.database
    finally:
        await connection.close()


def test_migrate_db_check_keys_with_a_raw_password(pg_migrated: str) -> None:
    url = with_password(pg_migrated)
    for args in (["migrate"], ["db-check"], ["keys", "list"]):
        done = sursis(*args, url=url)
        assert done.returncode == 0, (args, done.stderr)
        assert "p@ss" not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr


def test_serve_with_a_raw_password_starts_and_never_prints_it(pg_migrated: str, tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env.update(SURSIS_DATABASE_URL=with_password(pg_migrated), SURSIS_MIGRATE_ON_START="false")
    env["SURSIS_ADMIN_KEY_FILE"] = str(tmp_path / "admin.key")
    output = tmp_path / "serve.log"
    with output.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sursis.app.cli", "serve", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, output.read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    printed = output.read_text()
    assert "database: postgresql+asyncpg://postgres:***@" in printed
    assert "p@ss" not in printed and "p%40ss" not in printed


@pytest.mark.parametrize("command", [["migrate"], ["db-check"], ["serve"], ["keys", "list"]])
def test_an_unreadable_url_is_one_line_on_every_command(command: list[str]) -> None:
    done = sursis(*command, url=f"postgresql+asyncpg://app:{PASSWORD}@db:54x2/sursis")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("sursis: the database URL cannot be read")
    assert "p@ss" not in done.stdout + done.stderr


@pytest.mark.parametrize("command", [["serve"], ["db-check"], ["migrate"]])
def test_an_sqlite_file_in_a_missing_folder_is_one_line_and_exit_2(
    command: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-folder" / "sursis.db"
    done = sursis(*command, url=f"sqlite+aiosqlite:///{missing}")
    assert done.returncode == 2, done.stdout
    [line] = done.stderr.strip().splitlines()
    assert line == (
        f"sursis: the folder '{missing.parent}' of the SQLite database sqlite+aiosqlite:///{missing} "
        "does not exist: create it or change SURSIS_DATABASE_URL"
    )
    assert not missing.parent.exists()


OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def fenced(language: str) -> list[str]:
    """The bodies of docs/operations.md's fenced blocks of `language`."""
    return re.findall(rf"^```{language}\n(.*?)^```$", OPERATIONS.read_text(), re.MULTILINE | re.DOTALL)


def test_the_url_forms_of_the_operations_guide_are_read_as_it_says() -> None:
    [urls] = fenced("text")
    forms = [line for line in urls.splitlines() if line]
    assert len(forms) == 2
    read = [asyncpg_connect_kwargs(url) for url in forms]
    assert read[0] == read[1]
    assert read[0]["host"] == ["db1", "db2"] and read[0]["port"] == [5432, 5432]
    assert read[0]["target_session_attrs"] == "read-write"


def test_the_settings_the_operations_guide_shows_are_those_the_drill_uses() -> None:
    [pgbouncer] = fenced("ini")
    [patroni] = fenced("yaml")
    bouncer = PgBouncer(5432)
    try:
        bouncer._configure()
        used = bouncer.ini.read_text().splitlines()
    finally:
        bouncer.stop()
    assert all(line in used for line in pgbouncer.splitlines())
    cluster = PatroniCluster()
    try:
        drill = cluster._config(cluster.nodes[0]).splitlines()
    finally:
        shutil.rmtree(cluster.folder)
    assert all(line in drill for line in patroni.splitlines())


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_unreadable_listen_url_is_one_line_at_start(command: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env["SURSIS_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    env["SURSIS_DATABASE_LISTEN_URL"] = f"postgresql+asyncpg://app:{PASSWORD}@db:54x2/sursis"
    done = subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("sursis: SURSIS_DATABASE_LISTEN_URL: the database URL cannot be read")
    assert "p@ss" not in done.stdout + done.stderr


NAME = st.text(alphabet=string.ascii_letters + string.digits + "_.-", min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    user=st.none() | NAME,
    password=st.none() | st.text(alphabet=string.printable.replace("\n", ""), min_size=1, max_size=12),
    host=st.from_regex(r"[a-z][a-z0-9.\-]{0,11}", fullmatch=True),
    port=st.none() | st.integers(min_value=1, max_value=65535),
    database=NAME,
    driver=st.sampled_from(["sqlite", "sqlite+aiosqlite"]),
    path=st.text(alphabet=string.ascii_letters + string.digits + "/._- ", min_size=1, max_size=20),
)
def test_a_plain_url_is_read_without_sqlalchemy_as_sqlalchemy_reads_it(
    user: str | None,
    password: str | None,
    host: str,
    port: int | None,
    database: str,
    driver: str,
    path: str,
) -> None:
    """`migrate` at the head and `db-check` read a plain URL (one PostgreSQL host and no options, or
    an SQLite file) without SQLAlchemy: what they read is what the engine reads, and what they print
    is what SQLAlchemy prints; any other URL is left to SQLAlchemy."""
    userinfo = (
        "" if user is None else user + ("" if password is None else f":{quote(password, safe='')}") + "@"
    )
    url = f"postgresql+asyncpg://{userinfo}{host}{'' if port is None else f':{port}'}/{database}"
    assert plain_postgres_kwargs(url) == asyncpg_connect_kwargs(url)
    assert shown_url(url) == database_url(url).render_as_string(hide_password=True)
    sqlite_url = f"{driver}:///{path}"
    file = plain_sqlite_file(sqlite_url)
    assert file is not None
    assert file == make_url(sqlite_url).database
    assert shown_url(sqlite_url) == make_url(sqlite_url).render_as_string(hide_password=True)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+asyncpg://app:pw@db1:5432,db2:5433/sursis",
        "postgresql+asyncpg://app:pw@db/sursis?ssl=require",
        "postgresql+asyncpg://app:p@ss@db/sursis",
        "postgresql://app@db/sursis",
        "sqlite+aiosqlite:///:memory:",
        "sqlite+aiosqlite:///file:x.db?mode=ro&uri=true",
        "sqlite+aiosqlite:///name%20with%20escape.db",
        "postgresql+asyncpg://app:@db/sursis",
        "postgresql+asyncpg://app:pw@db:99999/sursis",
    ],
)
def test_a_url_with_options_or_several_hosts_is_left_to_sqlalchemy(url: str) -> None:
    assert plain_postgres_kwargs(url) is None
    assert plain_sqlite_file(url) is None
    assert ":pw@" not in shown_url(url)


def test_migrate_at_the_head_loads_neither_sqlalchemy_nor_alembic(pg_migrated: str, tmp_path: Path) -> None:
    """What a deploy runs before every start: on a database at the head, `migrate` only reads its
    revision (asyncpg alone on PostgreSQL, the standard library's sqlite3 on SQLite)."""
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('LOADED', *sorted(m for m in ('sqlalchemy', 'alembic', 'aiosqlite')"
        " if m in sys.modules)))\n"
        "from sursis.app.cli import main\n"
        "sys.exit(main(['migrate']))\n"
    )
    sqlite_url = f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}"
    assert sursis("migrate", url=sqlite_url).returncode == 0
    for url in (pg_migrated, sqlite_url):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
        env["SURSIS_DATABASE_URL"] = url
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [f"migrated {url} to head", "LOADED"]

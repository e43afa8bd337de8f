"""API keys through the `sursis keys` command and the first-start bootstrap, on real databases."""

from __future__ import annotations

import asyncio
import re
import stat
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from sursis.app.cli import run
from sursis.app.cli.keys import bootstrap_admin_key
from sursis.domain.access import Role
from sursis.domain.errors import Unauthenticated
from sursis.domain.identity.keys import KEY_PREFIX, KeyService
from sursis.domain.records import Principal
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from tests.conftest import make_settings

KEY = re.compile(r"\bsrs_[A-Za-z0-9_-]{40,}")


def authenticate(database_url: str, secret: str) -> Principal:
    async def main() -> Principal:
        engine = create_engine(database_url)
        try:
            return await KeyService(SqlUnitOfWorkFactory(engine)).authenticate(secret)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def stored_rows(database_url: str) -> list[dict[str, object]]:
    async def main() -> list[dict[str, object]]:
        engine = create_engine(database_url)
        try:
            async with engine.connect() as conn:
                rows = await conn.execute(sa.text("SELECT * FROM api_keys"))
                return [dict(r._mapping) for r in rows]
        finally:
            await engine.dispose()

    return asyncio.run(main())


def test_keys_are_shown_once_stored_hashed_listed_and_revoked(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(database_url)
    assert (
        run(["keys", "create", "--role", "operator", "--workspace", "team-a", "--name", "alice"], settings)
        == 0
    )
    [secret] = KEY.findall(capsys.readouterr().out)
    assert secret.startswith(KEY_PREFIX)

    principal = authenticate(database_url, secret)
    assert (principal.role, principal.workspace, principal.name) == (Role.OPERATOR, "team-a", "alice")
    [row] = stored_rows(database_url)
    assert str(uuid.UUID(str(row["id"]))) == principal.id
    assert all(secret not in str(value) for value in row.values())
    assert row["prefix"] == secret[:12]
    assert len(str(row["key_hash"])) == 64

    assert run(["keys", "list"], settings) == 0
    listing = capsys.readouterr().out
    assert principal.id in listing
    assert "alice" in listing
    assert secret not in listing

    assert run(["keys", "revoke", principal.id], settings) == 0
    assert "revoked" in capsys.readouterr().out
    with pytest.raises(Unauthenticated):
        authenticate(database_url, secret)
    assert run(["keys", "list"], settings) == 0
    assert principal.id not in capsys.readouterr().out
    assert run(["keys", "list", "--all"], settings) == 0
    assert principal.id in capsys.readouterr().out


def test_refused_key_commands_exit_2_with_a_reason(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(database_url)
    assert run(["keys", "create", "--role", "user"], settings) == 2
    assert "needs a workspace" in capsys.readouterr().err
    assert run(["keys", "create", "--role", "user", "--workspace", "bad space"], settings) == 2
    assert run(["keys", "revoke", str(uuid.uuid4())], settings) == 2
    assert "key not found" in capsys.readouterr().err
    assert stored_rows(database_url) == []


def test_the_first_start_makes_one_admin_key_and_prints_it_once(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(database_url)
    issued = bootstrap_admin_key(settings, on_terminal=True)
    assert issued is not None
    printed = capsys.readouterr().out
    assert KEY.findall(printed) == [issued.secret]
    assert authenticate(database_url, issued.secret).role is Role.ADMIN

    assert bootstrap_admin_key(settings, on_terminal=True) is None
    assert capsys.readouterr().out == ""
    assert len(stored_rows(database_url)) == 1


def test_no_bootstrap_when_keys_exist_even_if_all_are_revoked(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(database_url)
    run(["keys", "create", "--role", "admin", "--name", "root"], settings)
    [row] = stored_rows(database_url)
    run(["keys", "revoke", str(uuid.UUID(str(row["id"])))], settings)
    capsys.readouterr()
    assert bootstrap_admin_key(settings, on_terminal=True) is None
    assert KEY.findall(capsys.readouterr().out) == []


def test_off_a_terminal_the_first_key_goes_only_to_the_file_the_operator_names(
    database_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    settings = make_settings(database_url)
    assert bootstrap_admin_key(settings, on_terminal=False) is None
    printed = capsys.readouterr().out
    assert "sursis keys create --role admin" in printed and KEY.findall(printed) == []
    assert stored_rows(database_url) == []

    key_file = tmp_path / "admin.key"
    issued = bootstrap_admin_key(
        settings.model_copy(update={"admin_key_file": str(key_file)}), on_terminal=False
    )
    assert issued is not None
    assert key_file.read_text() == issued.secret + "\n"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    printed = capsys.readouterr().out
    assert KEY.findall(printed) == [] and str(key_file) in printed


def test_a_key_made_with_an_expiry_lists_it_and_a_moment_without_a_zone_is_refused(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(database_url)
    create = ["keys", "create", "--role", "operator", "--workspace", "team-a", "--name", "temp"]
    assert run([*create, "--expires-at", "2099-01-31T18:00:00+01:00"], settings) == 0
    [secret] = KEY.findall(capsys.readouterr().out)
    assert authenticate(database_url, secret).name == "temp"
    assert run(["keys", "list"], settings) == 0
    assert "2099-01-31 17:00:00Z" in capsys.readouterr().out

    with pytest.raises(SystemExit) as refused:
        run([*create, "--expires-at", "2099-01-31T18:00:00"], settings)
    assert refused.value.code == 2
    assert "time zone" in capsys.readouterr().err
    assert run([*create, "--expires-at", "2020-01-01T00:00:00Z"], settings) == 2

"""Encryption is a property of the database, and a careless operator cannot switch it off.

An empty keyring is refused; a database that holds encrypted values refuses a process without a
keyring, and one holding a key whose bytes are not the ones stored under its id (key check
values), in one line with exit 2 on the command line; `/readyz`, the banner and `encryption
status` say whether encryption is on and under which key. A run whose history no key of the
keyring opens fails at once with `encryption_key_unavailable`; an audit row that does not open
is a finding of `verify`, never a 500."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient
from structlog.testing import capture_logs

from sursis.app.cli import run
from sursis.app.main import create_app
from sursis.app.settings import Settings
from sursis.domain.clock import utcnow
from sursis.domain.encryption import EncryptionRefused, KeyManager
from sursis.domain.identity.keys import IssuedKey
from sursis.domain.records import AuditEntry
from sursis.domain.retention.audit_verify import AuditChainService
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.encryption import AesGcmCipher, LocalKeyring
from tests.api.http_calls import create_conversation, post_message
from tests.api.test_encryption_at_rest import app_client, forget_key, new_key
from tests.conftest import make_settings, script

UNUSED = "sqlite+aiosqlite:///never-opened.db"


async def sursis(argv: list[str], settings: Settings) -> int:
    return await asyncio.to_thread(run, argv, settings)


@pytest.mark.parametrize("keys", [",", " , ", "# no key yet", "\n#k1\n"])
def test_a_keyring_that_names_no_key_is_refused(keys: str, capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(UNUSED, encryption_keys=keys)
    for command in (["encryption", "status"], ["serve"], ["worker"], ["keys", "list"]):
        assert run(command, settings) == 2, command
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "holds no key" in err, err


@pytest.mark.parametrize("content", ["", "\n\n", "# rotated away\n"])
def test_an_empty_keyring_file_is_refused(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    path.chmod(0o600)
    assert run(["encryption", "status"], make_settings(UNUSED, encryption_keys_file=str(path))) == 2
    assert "holds no key" in capsys.readouterr().err


def test_a_keyring_file_others_may_read_is_refused_one_the_group_may_read_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "keys"
    secret = new_key("k1")
    path.write_text(secret + "\n")
    path.chmod(0o644)
    settings = make_settings(UNUSED, encryption_keys_file=str(path))
    assert run(["serve"], settings) == 2
    err = capsys.readouterr().err
    assert "readable or writable by other users (mode 0644)" in err and secret.split(":")[1] not in err
    path.chmod(0o640)
    with capture_logs() as logs:
        assert run(["encryption", "rotate"], make_settings(UNUSED, encryption_keys_file=str(path))) != 0
    assert any(e["event"] == "encryption.keyring_file_group_readable" for e in logs), logs


def test_a_reload_to_an_empty_or_broken_keyring_keeps_the_last_good_one(tmp_path: Path) -> None:
    from sursis.infra.encryption import FileKeyring

    path = tmp_path / "keys"
    path.write_text(new_key("k1") + "\n")
    path.chmod(0o600)
    now = [0.0]
    keyring = FileKeyring(path, interval=1.0, clock=lambda: now[0])
    for edit in ("", "# emptied by mistake\n", "k1:not-base64\n"):
        path.write_text(edit)
        now[0] += 2
        with capture_logs() as logs:
            assert keyring.active_key_id == "k1", edit
        assert [e["log_level"] for e in logs if e["event"] == "encryption.keyring_unreadable"] == ["error"]


async def test_an_encrypted_database_refuses_a_process_without_its_keyring(
    seeded: str, admin_key: IssuedKey, capsys: pytest.CaptureFixture[str]
) -> None:
    k1 = new_key("k1")
    async with app_client(seeded, admin_key, k1) as client:
        ready = (await client.get("/readyz")).json()
        assert ready == {"status": "ready", "encryption": "on", "active_key_id": "k1"}
        await create_conversation(client)
    plain = make_settings(seeded)
    for command in (["keys", "list"], ["encryption", "status"], ["worker"], ["serve", "--port", "1"]):
        assert await sursis(command, plain) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "holds encrypted values (keys k1)" in err, err
    with pytest.RaisesGroup(
        pytest.RaisesExc(EncryptionRefused, match="holds encrypted values"), flatten_subgroups=True
    ):
        async with AsyncTestClient(app=create_app(plain)):
            pass


async def test_a_wrong_key_under_the_right_id_is_refused_naming_the_id(
    seeded: str, admin_key: IssuedKey, capsys: pytest.CaptureFixture[str]
) -> None:
    right, wrong = new_key("k1"), new_key("k1")
    async with app_client(seeded, admin_key, right) as client:
        await create_conversation(client)
    assert await sursis(["encryption", "status"], make_settings(seeded, encryption_keys=right)) == 0
    shown = capsys.readouterr().out
    assert "encryption: on" in shown and "check value" in shown and "k1" in shown
    for command in (["encryption", "status"], ["encryption", "rotate"], ["worker"]):
        assert await sursis(command, make_settings(seeded, encryption_keys=wrong)) == 2
        err = capsys.readouterr().err
        assert "key 'k1' of the keyring is not the key this database used" in err, err
        assert wrong.split(":")[1] not in err
    with pytest.RaisesGroup(pytest.RaisesExc(EncryptionRefused, match="'k1'"), flatten_subgroups=True):
        async with app_client(seeded, admin_key, f"{new_key('k2')},{wrong}"):
            pass


async def test_readyz_says_when_encryption_is_off(seeded: str, admin_key: IssuedKey) -> None:
    async with app_client(seeded, admin_key, None) as client:
        assert (await client.get("/readyz")).json() == {
            "status": "ready",
            "encryption": "off",
            "active_key_id": None,
        }


async def test_a_run_whose_history_does_not_open_fails_at_once_with_the_code(
    seeded: str, admin_key: IssuedKey
) -> None:
    k1, k2 = new_key("k1"), new_key("k2")
    async with app_client(seeded, admin_key, k1) as client:
        cid = await create_conversation(client)
        first = await post_message(client, cid, script(text="first"))
        assert first["status"] == "completed", first
    await forget_key(seeded, "k1")
    async with app_client(seeded, admin_key, k2) as client:  # k1 lost: k2 alone is a usable keyring
        run_ = await post_message(client, cid, script(text="second"))
        assert run_["status"] == "failed", run_
        assert run_["error"]["code"] == "encryption_key_unavailable", run_
        assert "'k1'" in run_["error"]["message"]
        again = await post_message(client, await create_conversation(client), script(text="fresh"))
        assert again["status"] == "completed"  # the conversation is freed, the service serves on


async def test_an_audit_row_that_does_not_open_is_a_finding_not_a_500(
    seeded: str, admin_key: IssuedKey
) -> None:
    right = new_key("k1")
    async with app_client(seeded, admin_key, right) as client:
        await create_conversation(client)  # k1's check value is stored
    # a process that bypassed the start check wrote and sealed a row under wrong bytes for k1
    engine = create_engine(seeded)
    try:
        wrong = AesGcmCipher(LocalKeyring.parse(new_key("k1")))
        uow = SqlUnitOfWorkFactory(engine, cipher=wrong)
        async with uow() as work:
            await work.audit.append(
                AuditEntry("test.step", "system:test", "default", details={"n": 1}), utcnow()
            )
            await work.commit()
        await AuditChainService(uow, utcnow).seal_all()
        async with engine.connect() as conn:
            sealed = await conn.scalar(sa.text("SELECT count(*) FROM audit_log WHERE action = 'test.step'"))
        assert sealed == 1
    finally:
        await engine.dispose()
    async with app_client(seeded, admin_key, right) as client:
        response = await client.get("/v1/audit/verify", params={"workspace": "default"})
        assert response.status_code == 200, response.text
        [report] = response.json()
        assert report["ok"] is False and report["finding"]["breach"] == "unreadable", report
        assert "encrypted_value_unreadable" in report["finding"]["detail"]


async def test_a_reload_to_other_bytes_under_a_known_id_keeps_the_last_good_keyring(
    database_url: str, tmp_path: Path
) -> None:
    from sursis.infra.db.encryption_state import check_encryption
    from sursis.infra.encryption import FileKeyring

    right, added = new_key("k1"), new_key("k2")
    path = tmp_path / "keys"
    path.write_text(right + "\n")
    path.chmod(0o600)
    now = [0.0]
    keyring = FileKeyring(path, interval=1.0, clock=lambda: now[0])
    engine = create_engine(database_url)
    try:
        await check_encryption(engine, keyring, utcnow())  # stores k1's check value, follows reloads
        cipher = AesGcmCipher(keyring)
        path.write_text(new_key("k1") + "\n")  # other bytes under k1: refused, k1 kept
        now[0] += 2
        with capture_logs() as logs:
            assert keyring.key_ids == ("k1",)
        [refused] = [e for e in logs if e["event"] == "encryption.keyring_unreadable"]
        assert "'k1'" in refused["error"] and refused["log_level"] == "error"
        assert key_check(keyring, "k1") == key_check(LocalKeyring.parse(right), "k1")
        path.write_text(f"{added}\n{right}\n")  # a new key made active: taken
        now[0] += 2
        assert keyring.active_key_id == "k2" and cipher.active_key_id == "k2"
    finally:
        await engine.dispose()


def key_check(keys: KeyManager, key_id: str) -> str:
    from sursis.domain.encryption import key_check_value

    return key_check_value(keys.data_key(key_id))

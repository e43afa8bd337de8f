"""Attack (careless operator): start with a keyring holding only a new key, not the one the
database holds values under. Refused at start like a wrong key, naming the missing id, instead of
storing the new key's check value for good and leaving every older value unreadable. A key no
value is under any more (after `rotate`) may leave the keyring."""

from __future__ import annotations

import asyncio

import pytest

from sursis.app.cli import run
from sursis.domain.encryption import EncryptionRefused
from sursis.domain.identity.keys import IssuedKey
from tests.api.http_calls import create_conversation, post_message
from tests.api.test_encryption_at_rest import app_client, new_key
from tests.attacks.sql_rights import execute
from tests.conftest import make_settings, script

MISSING = "key 'k1' is not in the keyring but this database holds values under it"


async def test_a_keyring_lacking_the_database_s_key_is_refused_at_start(
    seeded: str, admin_key: IssuedKey, capsys: pytest.CaptureFixture[str]
) -> None:
    k1, k2 = new_key("k1"), new_key("k2")
    async with app_client(seeded, admin_key, k1) as client:
        cid = await create_conversation(client)
        assert (await post_message(client, cid, script(text="hello")))["status"] == "completed"
    with pytest.RaisesGroup(pytest.RaisesExc(EncryptionRefused, match=MISSING), flatten_subgroups=True):
        async with app_client(seeded, admin_key, k2):
            pass
    for command in (["encryption", "status"], ["worker"]):
        assert await asyncio.to_thread(run, command, make_settings(seeded, encryption_keys=k2)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and MISSING in err, err
        assert k2.split(":")[1] not in err
    assert [k for (k,) in await execute(seeded, "SELECT key_id FROM encryption_keys")] == ["k1"]

    rotating = make_settings(seeded, encryption_keys=f"{k2},{k1}")
    assert await asyncio.to_thread(run, ["encryption", "rotate", "--quiet"], rotating) == 0
    async with app_client(seeded, admin_key, k2) as client:  # nothing is under k1 any more
        assert (await client.get(f"/v1/conversations/{cid}")).status_code == 200

"""The careless operator: a process without the keyring kept writing after encryption was turned
on (or the database was encrypted by a version that still read plaintext). Those values are
refused on read; `rotate` does not make them real; `sursis encryption seal-existing --yes` is the
explicit step that seals them, and it is audited. Turning encryption on seals what the database
held until then, audited too."""

from __future__ import annotations

import asyncio
import json

import pytest

from sursis.app.cli import run
from sursis.domain.identity.keys import IssuedKey
from tests.api.test_encryption_at_rest import app_client, approved_turn, new_key
from tests.attacks.sql_rights import execute, findings
from tests.conftest import make_settings


async def test_turning_encryption_on_seals_what_was_there_and_says_so(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with app_client(seeded, admin_key, None) as client:
        cid, _ = await approved_turn(client)
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        assert (await client.get(f"/v1/conversations/{cid}")).status_code == 200
    [(body,)] = await execute(seeded, "SELECT body FROM messages WHERE seq = 1")
    assert body.startswith("sursis:enc:1:k1:")
    [row] = await findings(seeded, "encryption.sealed_existing")
    assert row.actor == "system:start"


async def test_values_written_around_the_keyring_are_sealed_only_by_the_explicit_command(
    seeded: str, admin_key: IssuedKey, capsys: pytest.CaptureFixture[str]
) -> None:
    k1, k2 = new_key("k1"), new_key("k2")
    async with app_client(seeded, admin_key, k1) as client:
        cid, _ = await approved_turn(client)
    key = cid.replace("-", "") if seeded.startswith("sqlite") else cid
    plaintext = json.dumps({"written": "by a process without the keyring"})
    await execute(
        seeded, "UPDATE messages SET body = :b WHERE conversation_id = :c AND seq = 1", b=plaintext, c=key
    )

    rotating = make_settings(seeded, encryption_keys=f"{k2},{k1}")
    assert await asyncio.to_thread(run, ["encryption", "rotate", "--quiet"], rotating) == 0
    assert "1 rows hold values in plaintext, left as they are" in capsys.readouterr().out
    async with app_client(seeded, admin_key, f"{k2},{k1}") as client:
        assert (await client.get(f"/v1/conversations/{cid}")).json()["code"] == "unsealed_value"

    assert await asyncio.to_thread(run, ["encryption", "seal-existing"], rotating) == 1
    assert "Again with --yes" in capsys.readouterr().err
    assert await asyncio.to_thread(run, ["encryption", "seal-existing", "--yes"], rotating) == 0
    shown = capsys.readouterr().out
    assert "messages.body: sealed 1" in shown and "sealed 1 values under k2" in shown, shown
    assert await asyncio.to_thread(run, ["encryption", "seal-existing"], rotating) == 0
    assert "nothing to seal" in capsys.readouterr().out
    async with app_client(seeded, admin_key, f"{k2},{k1}") as client:
        assert "by a process without the keyring" in str(
            (await client.get(f"/v1/conversations/{cid}")).json()
        )
        audit = (await client.get("/v1/audit", params={"action": "encryption.sealed_existing"})).json()
    [item] = [i for i in audit["items"] if i["actor"] == "cli"]
    assert item["details"] == {"key_id": "k2", "values": 1, "columns": {"messages.body": 1}}, item
    assert len(await findings(seeded)) == 1  # the read refused before sealing

"""Attack: with SQL rights and no key, copy a sealed value from another row or column (a message
of another conversation, a run's input into its output). The associated data of every sealed
value is its table, column and row, so the copy does not open, and the refusal names where it is."""

from __future__ import annotations

from sursis.domain.identity.keys import IssuedKey
from tests.api.test_encryption_at_rest import app_client, approved_turn, new_key
from tests.attacks.sql_rights import execute


def stored_id(database_url: str, value: str) -> str:
    return value.replace("-", "") if database_url.startswith("sqlite") else value


async def test_a_message_copied_from_another_conversation_is_refused_by_name(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        source, _ = await approved_turn(client)
        target, _ = await approved_turn(client)
        await execute(
            seeded,
            "UPDATE messages SET body = (SELECT body FROM messages WHERE conversation_id = :s AND seq = 1) "
            "WHERE conversation_id = :t AND seq = 1",
            s=stored_id(seeded, source),
            t=stored_id(seeded, target),
        )
        response = await client.get(f"/v1/conversations/{target}")
        assert response.status_code == 500, response.text
        problem = response.json()
        assert problem["code"] == "encrypted_value_unreadable", problem
        assert f"messages.body row ({target}, 1)" in problem["detail"], problem
        assert (await client.get(f"/v1/conversations/{source}")).status_code == 200


async def test_a_run_input_copied_into_its_output_is_refused_by_name(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        _, run_id = await approved_turn(client)
        await execute(seeded, "UPDATE runs SET output = input WHERE id = :r", r=stored_id(seeded, run_id))
        response = await client.get(f"/v1/runs/{run_id}")
        assert response.status_code == 500, response.text
        assert f"runs.output row ({run_id})" in response.json()["detail"]

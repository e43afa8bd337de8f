"""Attack: read a pre-approval's reason and argument match from the database or a dump. Both are
sealed like other content (an e-mail address in a reason is not in any table's plaintext), the
API shows them in the clear, and a call they cover still runs without asking."""

from __future__ import annotations

from sursis.domain.identity.keys import IssuedKey
from tests.api.http_calls import create_conversation, post_message
from tests.api.test_encryption_at_rest import app_client, new_key, tables_holding
from tests.attacks.sql_rights import execute
from tests.conftest import call, script

EMAIL = "jane.doe@example.com"
EVENT = "evt_1001"


async def test_a_pre_approval_is_sealed_at_rest_and_still_matches(seeded: str, admin_key: IssuedKey) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        created = await client.post(
            "/v1/authorizations",
            json={
                "tool_name": "replay_dlq_event",
                "reason": f"asked by {EMAIL}",
                "args_match": {"event_id": EVENT},
                "workspace": "default",
            },
        )
        assert created.status_code == 201, created.text
        [(reason, args_match)] = await execute(
            seeded, "SELECT reason, CAST(args_match AS TEXT) FROM authorizations"
        )
        assert reason.startswith("sursis:enc:1:k1:") and EMAIL not in reason
        assert args_match.startswith('"sursis:enc:1:k1:') and EVENT not in args_match
        assert await tables_holding(seeded, EMAIL) == {}
        [shown] = (await client.get("/v1/authorizations")).json()
        assert shown["reason"] == f"asked by {EMAIL}" and shown["args_match"] == {"event_id": EVENT}

        cid = await create_conversation(client)
        covered = script([call("replay_dlq_event", event_id=EVENT, reason="partner back")], "done")
        assert (await post_message(client, cid, covered))["status"] == "completed"
        other = script([call("replay_dlq_event", event_id="evt_1002", reason="partner back")], "done")
        assert (await post_message(client, await create_conversation(client), other))["status"] == "suspended"


async def test_a_pre_approval_rewritten_in_plaintext_is_refused(seeded: str, admin_key: IssuedKey) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        created = await client.post(
            "/v1/authorizations",
            json={"tool_name": "replay_dlq_event", "reason": "narrow", "args_match": {"event_id": EVENT}},
        )
        assert created.status_code == 201, created.text
        await execute(seeded, "UPDATE authorizations SET args_match = NULL, reason = 'everything'")
        response = await client.get("/v1/authorizations")
        assert response.status_code == 409, response.text
        assert response.json()["code"] == "unsealed_value"
        assert "authorizations.reason" in response.json()["detail"]

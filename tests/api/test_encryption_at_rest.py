"""Encryption at rest through the real app: content is sealed in every table a turn writes, reads
are plaintext, a missing key is a 500 with a code naming it, and `rotate` moves values to a new key."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.storage import build_cipher
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db.engine import create_engine
from sursis.infra.db.rotation import PLAINTEXT_KEY, key_counts, rotate, rows_to_rotate
from sursis.infra.db.tables import metadata
from tests.api.http_calls import conversation, create_conversation, get_run, post_message, resolve, tool_calls
from tests.api.test_webhooks import store_webhook_unchecked
from tests.conftest import bearer, call, make_settings, script
from tests.customer_scripts import delegation

SECRET = "quartz-heron-7731"
"""Appears only in conversation content: the user's message, a tool's arguments and its result."""


def new_key(key_id: str) -> str:
    return f"{key_id}:{base64.b64encode(os.urandom(32)).decode()}"


@asynccontextmanager
async def app_client(
    database_url: str, admin_key: IssuedKey, keys: str | None
) -> AsyncIterator[AsyncTestClient[Any]]:
    app = create_app(make_settings(database_url, encryption_keys=keys))
    async with AsyncTestClient(app=app) as client:
        client.headers.update(bearer(admin_key.secret))
        yield client


async def approved_turn(client: AsyncTestClient[Any]) -> tuple[str, str]:
    """A turn whose message, gated call, operator's reason and result all carry `SECRET`."""
    cid = await create_conversation(client)
    content = script([call("replay_dlq_event", event_id="evt_1001", reason=f"because {SECRET}")], text=SECRET)
    run = await post_message(client, cid, content)
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    decided = await resolve(client, pending["correlation_id"], decision="approve", reason=f"ok {SECRET}")
    assert decided.status_code == 200, decided.text
    done = await get_run(client, run["id"])
    assert done["status"] == "completed", done
    return cid, run["id"]


async def tables_holding(database_url: str, text: str) -> dict[str, list[str]]:
    """Every table and column whose stored text contains `text` (a direct SELECT, no cipher)."""
    found: dict[str, list[str]] = {}
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            for table in metadata.sorted_tables:
                for row in await conn.execute(sa.select(table)):
                    for column, value in row._mapping.items():
                        if text in str(value):
                            found.setdefault(table.name, []).append(column)
    finally:
        await engine.dispose()
    return found


async def test_a_turn_stores_no_content_in_plaintext_and_reads_back_plaintext(
    seeded: str, admin_key: IssuedKey
) -> None:
    await store_webhook_unchecked(seeded, "http://127.0.0.1:9/hooks")  # run.completed → the outbox
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        cid, run_id = await approved_turn(client)
        shown = await conversation(client, cid)
        assert SECRET in str(shown["messages"])
        assert SECRET in str(await tool_calls(client, run_id))
        audit = (await client.get("/v1/audit", params={"conversation_id": cid})).json()
        assert SECRET in str(audit)
    assert await tables_holding(seeded, SECRET) == {}
    engine = create_engine(seeded)
    try:
        async with engine.connect() as conn:
            body = await conn.scalar(sa.text("SELECT body FROM messages ORDER BY seq LIMIT 1"))
            args = await conn.scalar(sa.text("SELECT CAST(args AS TEXT) FROM pending_calls"))
    finally:
        await engine.dispose()
    assert str(body).startswith("sursis:enc:1:k1:")
    assert str(args).startswith('"sursis:enc:1:k1:')
    assert "outbox" in await tables_holding(seeded, "webhook:run.completed")  # the delivery was queued


async def test_a_delegated_run_stores_its_specialist_s_payloads_sealed(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        cid = await create_conversation(client, "customer")
        change = call("apply_framework_change", changes={"score_threshold": 0.8}, reason=f"stricter {SECRET}")
        content = script(
            [delegation("framework-advisor", [call("get_framework_config")], [change])], text=SECRET
        )
        run = await post_message(client, cid, content)
        assert run["status"] == "suspended", run
        assert await tables_holding(seeded, SECRET) == {}
        assert "delegations" in await tables_holding(seeded, "framework-advisor")
        [pending] = run["pending"]
        assert SECRET in str(pending["args"])
        decided = await resolve(client, pending["correlation_id"], decision="approve")
        assert decided.status_code == 200, decided.text
        assert (await get_run(client, run["id"]))["status"] == "completed"


async def test_without_keys_content_is_plaintext_and_still_reads_after_turning_encryption_on(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with app_client(seeded, admin_key, None) as client:
        cid, _ = await approved_turn(client)
    assert "messages" in await tables_holding(seeded, SECRET)
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        assert SECRET in str((await conversation(client, cid))["messages"])


async def forget_key(database_url: str, key_id: str) -> None:
    """Delete a key's check value, as someone with SQL rights could: the start check no longer
    knows the database holds values under it (a keyring lacking a key it knows is refused at
    start, tests/attacks/test_keyring_missing_key.py), so reading is what stops those values."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("DELETE FROM encryption_keys WHERE key_id = :k"), {"k": key_id})
    finally:
        await engine.dispose()


async def test_a_missing_key_is_a_500_with_a_code_naming_it(seeded: str, admin_key: IssuedKey) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        cid, run_id = await approved_turn(client)
    await forget_key(seeded, "k1")
    async with app_client(seeded, admin_key, new_key("k2")) as client:
        for path in (f"/v1/conversations/{cid}", f"/v1/runs/{run_id}/tool-calls"):
            response = await client.get(path)
            assert response.status_code == 500, response.text
            problem = response.json()
            assert problem["code"] == "encryption_key_unavailable"
            assert problem["key_id"] == "k1"
            assert "'k1'" in problem["detail"]
        stream = await client.get(f"/v1/conversations/{cid}/events")
        assert stream.status_code == 200
        [error] = [line for line in stream.text.splitlines() if line.startswith("data:")]
        assert "event: error" in stream.text
        assert json.loads(error.removeprefix("data:"))["key_id"] == "k1"


async def test_rotate_moves_every_value_to_the_new_key_and_the_old_one_can_go(
    seeded: str, admin_key: IssuedKey
) -> None:
    old, new = new_key("k1"), new_key("k2")
    async with app_client(seeded, admin_key, None) as client:
        plain_cid, _ = await approved_turn(client)
    async with app_client(seeded, admin_key, old) as client:
        cid, _ = await approved_turn(client)
    cipher = build_cipher(make_settings(seeded, encryption_keys=f"{new},{old}").storage)
    engine = create_engine(seeded)
    try:
        before = await key_counts(engine, cipher)
        assert sum(c.by_key["k1"] for c in before) > 0
        assert sum(c.by_key[PLAINTEXT_KEY] for c in before) == 0  # sealed when encryption was turned on
        batches: list[int] = []
        rewritten = await rotate(engine, cipher, batch_size=3, on_batch=batches.append)
        assert rewritten == sum(batches) > 0
        assert max(batches) <= 3
        assert await rows_to_rotate(engine, "k2") == 0
        after = await key_counts(engine, cipher)
        assert sum(c.by_key["k1"] + c.by_key[PLAINTEXT_KEY] for c in after) == 0
    finally:
        await engine.dispose()
    assert await tables_holding(seeded, SECRET) == {}
    async with app_client(seeded, admin_key, new) as client:
        for conversation_id in (plain_cid, cid):
            assert SECRET in str((await conversation(client, conversation_id))["messages"])
        assert SECRET in str((await client.get("/v1/audit", params={"conversation_id": cid})).json())


async def test_runs_keep_completing_while_rotate_runs(seeded: str, admin_key: IssuedKey) -> None:
    """`sursis encryption rotate`, in its own process as an operator runs it, beside a service
    that keeps taking turns (the test client blocks this loop per request, so a task here would
    not run beside them)."""
    old, new = new_key("k1"), new_key("k2")
    async with app_client(seeded, admin_key, old) as client:
        for _ in range(4):
            await approved_turn(client)
    engine = create_engine(seeded)
    try:
        initial = await rows_to_rotate(engine, "k2")
        remaining: list[int] = []
        async with app_client(seeded, admin_key, f"{new},{old}") as client:
            env = {**os.environ, "SURSIS_DATABASE_URL": seeded, "SURSIS_ENCRYPTION_KEYS": f"{new},{old}"}
            rotating = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sursis.app.cli",
                "encryption",
                "rotate",
                "--batch-size=5",
                "--pause=0.05",
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            while rotating.returncode is None:
                cid, _ = await approved_turn(client)
                remaining.append(await rows_to_rotate(engine, "k2"))
                await asyncio.sleep(0)
            out, err = await rotating.communicate()
            assert rotating.returncode == 0, err.decode()
            assert SECRET in str((await conversation(client, cid))["messages"])
        assert await rows_to_rotate(engine, "k2") == 0
    finally:
        await engine.dispose()
    assert "rewrote" in out.decode()
    assert any(0 < left < initial for left in remaining), (initial, remaining)
    async with app_client(seeded, admin_key, new) as client:
        assert SECRET in str((await conversation(client, cid))["messages"])

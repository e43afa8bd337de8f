"""A pre-approval made before decisions were sealed (an upgrade, or a keyring turned on later)
carries no seal and lifts nothing; `sursis encryption seal-existing` says how many there are and,
with `--yes`, seals each as it is stored, one audit row each. After that the pre-approval lifts
its calls again. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.cli import run
from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.api.http_calls import create_conversation, post_message
from tests.conftest import bearer, call, make_settings, script
from tests.integration.test_encryption_cli import make_key


async def replay_run(settings: Any, admin: IssuedKey) -> Any:
    async with AsyncTestClient(app=create_app(settings)) as http:
        http.headers.update(bearer(admin.secret))
        conversation_id = await create_conversation(http)
        steps = script([call("replay_dlq_event", event_id="evt_1001", reason="partner is back")], "done")
        return await post_message(http, conversation_id, steps)


async def test_seal_existing_seals_the_pre_approvals_made_before_sealing(
    seeded: str, admin_key: IssuedKey, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = make_settings(seeded)
    async with AsyncTestClient(app=create_app(plain)) as http:
        http.headers.update(bearer(admin_key.secret))
        made = await http.post(
            "/v1/authorizations", json={"tool_name": "replay_dlq_event", "reason": "partner incident 42"}
        )
        assert made.status_code == 201, made.text
    engine = create_engine(seeded)
    try:
        async with engine.connect() as conn:
            assert (await conn.scalar(sa.select(t.authorizations.c.seal))) is None

        keyed = make_settings(seeded, encryption_keys=make_key("k1"))
        # Unsealed, the pre-approval runs nothing: the run fails naming it (never runs unasked).
        first = await replay_run(keyed, admin_key)
        assert first["status"] == "failed" and "pre-approval" in str(first["error"]), first

        assert await asyncio.to_thread(run, ["encryption", "seal-existing"], keyed) == 1
        assert "1 pre-approvals carry no seal" in capsys.readouterr().err
        assert await asyncio.to_thread(run, ["encryption", "seal-existing", "--yes"], keyed) == 0
        assert "sealed 1 pre-approvals under k1" in capsys.readouterr().out
        async with engine.connect() as conn:
            seal = await conn.scalar(sa.select(t.authorizations.c.seal))
            actions = list(
                (
                    await conn.execute(
                        sa.select(t.audit_log.c.actor).where(
                            t.audit_log.c.action == "authorization.sealed_existing"
                        )
                    )
                ).scalars()
            )
        assert isinstance(seal, str) and seal.startswith("v1:k1:")
        assert len(actions) == 1
        assert await asyncio.to_thread(run, ["encryption", "seal-existing"], keyed) == 0
        assert "nothing to seal" in capsys.readouterr().out

        # Sealed as it was stored, it lifts its calls again.
        again = await replay_run(keyed, admin_key)
        assert again["status"] == "completed", again
    finally:
        await engine.dispose()

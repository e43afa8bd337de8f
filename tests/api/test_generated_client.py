"""A client generated from `/schema/openapi.json` with openapi-python-client runs the README walk-through.

The document is fetched from the real app on a socket, the client generated into a temporary
directory and imported, and the walk-through (in workspace `ws1`, seeded like `demo seed
--workspace ws1`) driven through it alone, with `raise_on_unexpected_status`: a status the
document does not list fails the test, and every answer is parsed into the generated models.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import demo_event_id, seed_demo
from tests.api.live import serve
from tests.conftest import KeyMaker, make_settings

GENERATOR = Path(sys.executable).with_name("openapi-python-client")


def generate(document: dict[str, Any], into: Path, package: str) -> None:
    """Run the generator as a user would (no formatting hooks: the output is only imported)."""
    source = into / "openapi.json"
    source.write_text(json.dumps(document))
    config = into / "config.json"
    config.write_text(json.dumps({"package_name_override": package, "post_hooks": []}))
    done = subprocess.run(
        [str(GENERATOR), "generate", "--path", str(source), "--config", str(config), "--meta", "none"],
        cwd=into,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Anything the generator could not turn into code it reports as a warning: there must be none.
    assert "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_generated_client_runs_the_readme_walkthrough(
    seeded: str, keys: KeyMaker, tmp_path: Path
) -> None:
    workspace = "ws1"
    engine = create_engine(seeded)
    await seed_demo(SqlUnitOfWorkFactory(engine), workspace, utcnow())
    await engine.dispose()
    key = await keys.make("operator", workspace)
    # As the README: a user key asks, the operator decides (a key never approves its own call).
    asker_key = await keys.make("user", workspace)
    package = f"sursis_generated_{uuid.uuid4().hex[:8]}"

    async with serve(create_app(make_settings(seeded))) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            document = (await http.get("/schema/openapi.json")).json()
        started = time.monotonic()
        await asyncio.to_thread(generate, document, tmp_path, package)
        print(f"generated in {time.monotonic() - started:.1f} s")
        sys.path.insert(0, str(tmp_path))
        try:
            generated = importlib.import_module(package)
            api = f"{package}.api"
            models = importlib.import_module(f"{package}.models")
            create = importlib.import_module(f"{api}.conversations.v1_conversations_create")
            post = importlib.import_module(
                f"{api}.conversations.v1_conversations_conversation_id_messages_post_message"
            )
            list_pending = importlib.import_module(f"{api}.pending.v1_pending_list_pending")
            resolve = importlib.import_module(f"{api}.pending.v1_pending_correlation_id_resolve_resolve")
            run_detail = importlib.import_module(f"{api}.runs.v1_runs_run_id_detail")
            tool_calls = importlib.import_module(f"{api}.runs.v1_runs_run_id_tool_calls_tool_calls")
            client = generated.AuthenticatedClient(
                base_url=base_url, token=key, raise_on_unexpected_status=True, timeout=httpx.Timeout(30)
            )
            asker = generated.AuthenticatedClient(
                base_url=base_url, token=asker_key, raise_on_unexpected_status=True, timeout=httpx.Timeout(30)
            )
            async with client, asker:
                await walk_through(
                    client, asker, models, create, post, list_pending, resolve, run_detail, tool_calls
                )
        finally:
            sys.path.remove(str(tmp_path))
            for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
                del sys.modules[name]


async def walk_through(client: Any, asker: Any, models: Any, *api: Any) -> None:
    """The README's steps: a conversation and a turn that suspends on an approval (by `asker`), the
    awaiting list, the approval, and the run completing (by `client`)."""
    create, post, list_pending, resolve, run_detail, tool_calls = api
    event_id = demo_event_id("ws1", "evt_1001")

    conversation = (
        await create.asyncio_detailed(
            client=asker, body=models.CreateConversation(agent=models.CreateConversationAgent.OPS)
        )
    ).parsed
    assert isinstance(conversation, models.ConversationOut), conversation
    assert conversation.workspace == "ws1"

    steps = [
        [{"tool": "list_dlq_events", "args": {}}],
        [{"tool": "replay_dlq_event", "args": {"event_id": event_id, "reason": "partner is back"}}],
    ]
    content = "Replay the timed-out invoice\nSCRIPT: " + json.dumps(steps)
    posted = await post.asyncio_detailed(
        conversation.id, client=asker, body=models.PostMessage(content=content), wait=10
    )
    run = posted.parsed
    assert posted.status_code == 200 and isinstance(run, models.RunOut), posted
    assert run.status == "suspended", run
    [pending] = run.pending
    assert pending.effect_description == f"Replay DLQ event {event_id}"

    page = (
        await list_pending.asyncio_detailed(client=client, status=models.V1PendingListPendingStatus.AWAITING)
    ).parsed
    assert isinstance(page, models.PendingPage)
    assert [p.correlation_id for p in page.items] == [pending.correlation_id]

    approved = (
        await resolve.asyncio_detailed(
            pending.correlation_id,
            client=client,
            body=models.ResolveBody(decision=models.ResolveBodyDecision.APPROVE),
        )
    ).parsed
    assert isinstance(approved, models.ResolvedOut) and approved.status == "approved", approved

    done = (await run_detail.asyncio_detailed(run.id, client=client, wait=10)).parsed
    assert isinstance(done, models.RunOut) and done.status == "completed", done
    calls = (await tool_calls.asyncio_detailed(run.id, client=client)).parsed
    assert [c.ok for c in calls if c.tool_name == "replay_dlq_event"] == [True]

    # A problem answer is parsed into its status's model, with its code.
    again = await resolve.asyncio_detailed(
        pending.correlation_id,
        client=client,
        body=models.ResolveBody(decision=models.ResolveBodyDecision.APPROVE),
    )
    assert isinstance(again.parsed, models.Problem409), again
    assert again.parsed.code in {"stale", "invalid_transition", "conflict"}

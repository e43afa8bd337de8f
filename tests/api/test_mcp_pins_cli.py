"""`sursis mcp pins | accept` against the real app over a socket: an admin sees a tool whose MCP server
describes it otherwise now and accepts the change; an operator cannot."""

from __future__ import annotations

import json

from sursis.domain.clock import utcnow
from sursis.infra.agents.mcp_tools import tool_digest
from sursis.infra.db.engine import create_engine
from sursis.infra.db.mcp_pins import SqlMcpPinStore
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from tests.api.conftest import LiveFactory
from tests.api.test_pending_cli import sursis
from tests.conftest import KeyMaker

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}}


def said(annotations: dict[str, bool]) -> dict[str, object]:
    return {
        "name": "delete",
        "title": None,
        "description": "Delete.",
        "input_schema": SCHEMA,
        "annotations": annotations,
    }


async def test_an_admin_lists_a_changed_tool_and_accepts_it(live: LiveFactory, keys: KeyMaker) -> None:
    admin = await keys.make("admin", "default", name="root")
    operator = await keys.make("operator", "default", name="alice")
    before, after = said({"destructiveHint": True}), said({"readOnlyHint": True})
    digests = [
        tool_digest("delete", None, "Delete.", SCHEMA, None, d["annotations"]) for d in (before, after)
    ]  # type: ignore[arg-type]
    async with live() as app:
        engine = create_engine(app.settings.database_url)
        store = SqlMcpPinStore(SqlUnitOfWorkFactory(engine))
        assert (await store.check("desk", "delete", "desk", digests[0], before, utcnow())).accepted
        assert not (await store.check("desk", "delete", "desk", digests[1], after, utcnow())).accepted
        await engine.dispose()

        code, out, err = await sursis("mcp", "pins", "--changed", url=app.base_url, key=admin)
        assert code == 0, err
        assert (
            f"desk/delete (server desk): {digests[0]} accepted by first-seen; CHANGED to {digests[1]}" in out
        )
        assert 'annotations: {"destructiveHint": true} -> {"readOnlyHint": true}' in out

        code, out, err = await sursis(
            "mcp", "accept", "desk", "delete", digests[1], url=app.base_url, key=operator
        )
        assert code == 2 and "forbidden" in err

        code, out, err = await sursis(
            "mcp", "accept", "desk", "delete", digests[1], url=app.base_url, key=admin
        )
        assert code == 0, err
        assert out.strip() == f"accepted desk/delete as {digests[1]}"

        code, out, err = await sursis("mcp", "pins", "--json", url=app.base_url, key=admin)
        assert code == 0, err
        [pin] = json.loads(out)
        assert (pin["digest"], pin["changed"], pin["description"]["annotations"]) == (
            digests[1],
            False,
            {"readOnlyHint": True},
        )
        code, out, err = await sursis("mcp", "pins", "--changed", url=app.base_url, key=admin)
        assert (code, out.strip()) == (0, "no MCP tool changed since it was accepted")

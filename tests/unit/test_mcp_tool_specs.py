"""How an MCP tool's contract is decided from what its server says and the options given to `adopt`."""

from __future__ import annotations

import pytest
import structlog.testing
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import CombinedToolset

from sursis.domain.errors import ToolDeclarationError
from sursis.domain.tools import Category
from sursis.infra.agents.adopted import ToolOptions
from sursis.infra.agents.mcp_tools import McpTools, mcp_servers, mcp_tool_spec, schema_digest

SCHEMA = {"type": "object", "properties": {"ticket_id": {"type": "string"}}, "required": ["ticket_id"]}


def test_read_only_tools_run_and_every_other_is_asked() -> None:
    read = mcp_tool_spec("lookup", "desk", "Look up.", SCHEMA, {"readOnlyHint": True})
    assert (read.category, read.gated, read.server) == (Category.READ, False, "desk")
    for said in (
        None,
        {},
        {"readOnlyHint": False},
        {"destructiveHint": False},
        {"idempotentHint": True},
    ):
        spec = mcp_tool_spec("delete", "desk", "Delete.", SCHEMA, said)
        assert (spec.category, spec.gated) == (Category.MUTATE, True), said


def test_options_override_what_the_server_says() -> None:
    asked = mcp_tool_spec(
        "lookup", "desk", None, SCHEMA, {"readOnlyHint": True}, ToolOptions(category="mutate")
    )
    assert asked.gated
    trusted = mcp_tool_spec("ping", "desk", None, SCHEMA, None, ToolOptions(category="read", timeout=30))
    assert not trusted.gated and trusted.timeout is not None and trusted.timeout.total_seconds() == 30
    with pytest.raises(ToolDeclarationError, match="always requires approval"):
        mcp_tool_spec("delete", "desk", None, SCHEMA, None, ToolOptions(approval="auto"))


def test_the_digest_changes_with_the_description_or_the_schema_and_not_with_key_order() -> None:
    digest = schema_digest("Delete.", SCHEMA)
    assert len(digest) == 64
    assert digest == schema_digest("Delete.", dict(reversed(list(SCHEMA.items()))))
    assert digest != schema_digest("Delete it.", SCHEMA)
    wider = {**SCHEMA, "properties": {**SCHEMA["properties"], "force": {"type": "boolean"}}}
    assert digest != schema_digest("Delete.", wider)
    assert digest == mcp_tool_spec("delete", "desk", "Delete.", SCHEMA, None).schema_digest


def test_servers_are_found_through_prefixed_and_combined_toolsets() -> None:
    plain = MCPToolset("http://127.0.0.1:9/mcp", id="plain")
    inner = MCPToolset("http://127.0.0.1:9/other", id="inner")
    found = mcp_servers([plain, CombinedToolset([inner.prefixed("crm")])])
    assert [(s.name, s.prefix) for s in found] == [("plain", ""), ("inner", "crm_")]


def test_the_wrapper_gets_a_spec_only_for_a_tool_an_mcp_server_described() -> None:
    tools = McpTools("desk", mcp_servers([MCPToolset("http://127.0.0.1:9/mcp", id="desk")]))
    mcp_def = ToolDefinition(
        name="delete",
        description="Delete.",
        parameters_json_schema=SCHEMA,
        metadata={"meta": None, "annotations": {"destructiveHint": True}, "task": False},
    )
    spec = tools.spec_for(mcp_def)
    assert spec is not None and (spec.server, spec.category) == ("desk", Category.MUTATE)
    assert tools.spec("delete") == spec
    function_def = ToolDefinition(name="other", parameters_json_schema=SCHEMA)
    assert tools.spec_for(function_def) is None
    changed = ToolDefinition(
        name="delete",
        description="Delete, and everything under it.",
        parameters_json_schema=SCHEMA,
        metadata={"annotations": {"destructiveHint": True}},
    )
    again = tools.spec_for(changed)
    assert again is not None and again.schema_digest != spec.schema_digest
    assert tools.spec("delete") == again


def test_a_server_cannot_ungate_a_tool_by_claiming_it_only_reads_later() -> None:
    tools = McpTools("desk", mcp_servers([MCPToolset("http://127.0.0.1:9/mcp", id="desk")]))

    def described(annotations: dict[str, object]) -> ToolDefinition:
        return ToolDefinition(
            name="delete",
            description="Delete.",
            parameters_json_schema=SCHEMA,
            metadata={"annotations": annotations},
        )

    first = tools.spec_for(described({"destructiveHint": True}))
    assert first is not None and first.gated
    later = tools.spec_for(described({"readOnlyHint": True}))
    assert later is not None and later.gated and later.category is Category.MUTATE
    listed = tools.tool("delete")
    assert listed is not None and listed.annotations == {"readOnlyHint": True}  # shown as the server says
    trusted = McpTools("desk", tools.servers, {"delete": ToolOptions(category="read")})
    trusted.spec_for(described({"destructiveHint": True}))
    kept = trusted.spec_for(described({"readOnlyHint": True}))
    assert kept is not None and not kept.gated  # an operator's option still decides


async def test_a_server_whose_headers_depend_on_the_run_is_not_held_open() -> None:
    per_run = MCPToolset("http://127.0.0.1:9/mcp", id="per-run", headers=lambda ctx: {"x-user": "u"})
    tools = McpTools("desk", mcp_servers([per_run]))
    with structlog.testing.capture_logs() as logs:
        await tools.connect()  # nothing to connect with outside a run: no session, no error
    assert [e["event"] for e in logs if e["log_level"] != "debug"] == []
    assert tools.tools() == []
    await tools.close()

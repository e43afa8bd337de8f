"""An adopted agent with read, gated and MCP tools, and helpers to store a policy, for the policy tests."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic_ai import Agent, RunContext

from sursis import Service
from sursis.domain.policy.policies import PolicyRule
from sursis.domain.policy_decisions import ApprovalRoute, PolicyEffect
from sursis.domain.tools import Category, ToolSpec
from sursis.infra.agents.adopted import ToolOptions, adopt
from sursis.infra.agents.declarations import AgentDefinition

RAN: list[tuple[str, dict[str, Any]]] = []
DIGEST = "sha256:v1"


def shop_agent(*, mcp_digest: str = DIGEST) -> AgentDefinition:
    """`lookup_order` (read), `refund` and `deploy` (gated), and two tools as an MCP server would
    give them: `mcp_search` (read-only) and `mcp_delete` (destructive), both of server `files`."""
    agent: Agent[None, str] = Agent(name="shop", instructions="Serve the shop.")

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        """Look an order up."""
        RAN.append(("lookup_order", {"order_id": order_id}))
        return {"order_id": order_id}

    @agent.tool(requires_approval=True)
    def refund(ctx: RunContext[Any], order_id: str, amount: int) -> str:
        """Refund an order."""
        RAN.append(("refund", {"order_id": order_id, "amount": amount}))
        return f"refunded {amount}"

    @agent.tool(requires_approval=True)
    def deploy(ctx: RunContext[Any], service: str, env: str) -> str:
        """Deploy a service."""
        RAN.append(("deploy", {"service": service, "env": env}))
        return f"deployed {service} to {env}"

    @agent.tool_plain
    def mcp_search(query: str) -> list[str]:
        """Search files."""
        RAN.append(("mcp_search", {"query": query}))
        return ["a.txt"]

    @agent.tool_plain
    def mcp_delete(path: str) -> str:
        """Delete a file."""
        RAN.append(("mcp_delete", {"path": path}))
        return f"deleted {path}"

    definition = adopt(agent, tools={"refund": ToolOptions(effect="Refund {amount}")})
    served = {
        "mcp_search": ToolSpec(
            "mcp_search", category=Category.READ, server="files", schema_digest="sha256:s"
        ),
        "mcp_delete": ToolSpec(
            "mcp_delete", category=Category.MUTATE, server="files", schema_digest=mcp_digest
        ),
    }
    # MCP tools reach the wrapper with their server and digest: `readOnlyHint` makes `read`,
    # anything else `mutate`.
    tools = tuple(
        dataclasses.replace(d, spec=served[d.spec.name]) if d.spec.name in served else d
        for d in definition.tools
    )
    return dataclasses.replace(definition, tools=tools)


def rule(
    id: str,
    effect: str,
    when: str = "",
    tools: tuple[str, ...] = (),
    route: ApprovalRoute | None = None,
    pins: dict[str, str] | None = None,
    reason: str | None = None,
) -> PolicyRule:
    return PolicyRule(
        id=id,
        effect=PolicyEffect(effect),
        when=when,
        tools=tools,
        route=route,
        pins=pins or {},
        reason=reason,
    )


async def put_policy(svc: Service, *rules: PolicyRule) -> int:
    stored = await svc.container.policies.put(svc.principal, "default", list(rules), "test")
    return stored.version


def model_saw(model: Any) -> str:
    return json.dumps([m.parts for m in model.requests[-1]], default=str)

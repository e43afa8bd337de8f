"""What an MCP server says about a tool, and the contract the service gives the tool from it.

`schema_digest` (description and input schema) is what a policy rule pins; `tool_digest` covers
everything the server says about the tool (name, title, description, input and output schema,
annotations) and is what the database pins (`sursis.domain.agents.mcp_pins`); a tool whose description
changed since it was accepted is asked (`changed_review`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sursis.domain.policy.policies import SCHEMA_CHANGED
from sursis.domain.policy_decisions import ApprovalRoute, PolicyDecision, PolicyEffect
from sursis.domain.tools import Approval, Category, Executor, ToolSpec

if TYPE_CHECKING:
    from sursis.infra.agents.tool_options import ToolOptions


def schema_digest(description: str | None, input_schema: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of what the model is told about a tool."""
    canonical = json.dumps(
        {"description": description or "", "input_schema": input_schema},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def tool_digest(
    name: str,
    title: str | None,
    description: str | None,
    input_schema: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None,
    annotations: Mapping[str, Any] | None,
) -> str:
    """sha256 of the canonical JSON of everything a server says about a tool: what is pinned."""
    return hashlib.sha256(
        _canonical(
            {
                "name": name,
                "title": title,
                "description": description or "",
                "input_schema": input_schema,
                "output_schema": output_schema,
                "annotations": annotations,
            }
        ).encode()
    ).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def read_only(annotations: Mapping[str, Any] | None) -> bool:
    return bool((annotations or {}).get("readOnlyHint"))


def mcp_tool_spec(
    name: str,
    server: str,
    description: str | None,
    input_schema: Mapping[str, Any],
    annotations: Mapping[str, Any] | None,
    options: ToolOptions | None = None,
) -> ToolSpec:
    """The contract of one MCP tool: `read` when the server says it only reads, else `mutate`;
    `ToolOptions` (category, approval, effect, timeout) override."""
    category = (
        Category(options.category)
        if options is not None and options.category
        else (Category.READ if read_only(annotations) else Category.MUTATE)
    )
    approval = Approval(options.approval) if options is not None and options.approval else None
    timeout = options.timeout if options is not None else None
    return ToolSpec(
        name,
        executor=Executor.SERVER,
        category=category,
        approval=approval,
        effect=options.effect if options is not None else None,
        timeout=timedelta(seconds=timeout) if isinstance(timeout, int | float) else timeout,
        server=server,
        schema_digest=schema_digest(description, input_schema),
    )


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool of an MCP server as the catalog lists it. `digest` covers all it says (`tool_digest`);
    `accepted`: whether that is the description accepted for it (else its calls are asked)."""

    spec: ToolSpec
    description: str | None
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] | None
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None
    digest: str = ""
    accepted: bool = True


@dataclass(frozen=True, slots=True)
class Said:
    """What a server says about one tool, from its listing or a tool definition."""

    name: str
    server: str
    description: str | None
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] | None
    title: str | None = None
    output_schema: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, name: str, server: str, said: Mapping[str, Any]) -> Said:
        """A description as `described` stored it (a pin's)."""
        return cls(
            name,
            server,
            said.get("description"),
            said.get("input_schema") or {"type": "object"},
            said.get("annotations"),
            said.get("title"),
            said.get("output_schema"),
        )

    @property
    def digest(self) -> str:
        return tool_digest(
            self.name, self.title, self.description, self.input_schema, self.output_schema, self.annotations
        )


def said_of(name: str, server: str, tool: Any) -> Said:
    """What an MCP SDK `Tool` says, under the name the agent gives it: `mcp` 2 names its schemas
    `input_schema` / `output_schema`, `mcp` 1.x (under FastMCP 3) `inputSchema` / `outputSchema`;
    the annotations dump to their wire names (`readOnlyHint`) on both."""
    annotations = tool.annotations.model_dump(by_alias=True) if tool.annotations else None
    return Said(
        name,
        server,
        tool.description,
        _either(tool, "input_schema", "inputSchema"),
        annotations,
        getattr(tool, "title", None),
        _either(tool, "output_schema", "outputSchema"),
    )


def _either(tool: Any, name: str, v1_name: str) -> Any:
    return getattr(tool, name) if hasattr(tool, name) else getattr(tool, v1_name, None)


def described(said: Said) -> dict[str, Any]:
    return {
        "name": said.name,
        "title": said.title,
        "description": said.description,
        "input_schema": dict(said.input_schema),
        "output_schema": dict(said.output_schema) if said.output_schema is not None else None,
        "annotations": dict(said.annotations) if said.annotations is not None else None,
    }


def changed_review(spec: ToolSpec, decision: PolicyDecision) -> PolicyDecision:
    """A decision about a tool whose description was not accepted: asked, whatever the policy's
    allow or notify (the policy was written about another tool), flagged `schema_changed`."""
    if decision.effect is PolicyEffect.DENY:
        return decision
    reason = (
        f"the MCP server {spec.server!r} changed what it says about this tool since it was "
        "accepted; an admin accepts the new description (`sursis mcp accept`)"
    )
    flags = decision.flags if SCHEMA_CHANGED in decision.flags else (*decision.flags, SCHEMA_CHANGED)
    if decision.effect is PolicyEffect.ASK:
        return replace(decision, reason=reason, flags=flags)
    return PolicyDecision(
        PolicyEffect.ASK,
        policy_version=decision.policy_version,
        rule=decision.rule,
        reason=reason,
        route=ApprovalRoute(),
        flags=flags,
    )

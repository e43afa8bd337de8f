"""What the approval-routing tests share: an adopted agent whose `refund` tool is asked with a route
chosen per order id (as the policy point will ask it), the people of a workspace, and a service."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, RunContext

from sursis import Service
from sursis.domain.access import Role
from sursis.domain.approvals.pending_calls import Resolution
from sursis.domain.policy_decisions import ApprovalRoute, Escalation, PolicyDecision, PolicyEffect
from sursis.domain.records import AuditEntry, AuditQuery, PendingCall, Principal
from sursis.domain.states import Decision
from sursis.infra.agents.observed import POLICY
from tests.conftest import call, script

ADMIN = Principal(id="routing-admin", role=Role.ADMIN, workspace=None, name="routing admin")


def asked(route: ApprovalRoute, rule: str = "refunds") -> PolicyDecision:
    return PolicyDecision(effect=PolicyEffect.ASK, policy_version=1, rule=rule, reason="asked", route=route)


def payments_agent(routes: dict[str, ApprovalRoute]) -> Agent[None, str]:
    """`refund(order_id, amount)`, asked with `routes[order_id]` (no policy decision when absent)."""
    agent: Agent[None, str] = Agent(name="payments")

    @agent.tool
    def refund(ctx: RunContext[Any], order_id: str, amount: int) -> str:
        """Refund an order."""
        if not ctx.tool_call_approved:
            route = routes.get(order_id)
            metadata = {"kind": "approval"}
            if route is not None:
                metadata[POLICY] = asked(route).to_json()  # type: ignore[assignment]
            raise ApprovalRequired(metadata=metadata)
        return f"refunded {amount} for {order_id}"

    return agent


@dataclass
class People:
    """Keys of one workspace, by name, as principals."""

    svc: Service
    by_name: dict[str, Principal] = field(default_factory=dict)

    async def key(self, name: str, role: Role = Role.OPERATOR, workspace: str = "default") -> Principal:
        issued = await self.svc.create_api_key(role, workspace=workspace, name=name)
        principal = issued.key.principal()
        self.by_name[name] = principal
        return principal

    def __getitem__(self, name: str) -> Principal:
        return self.by_name[name]

    async def group(self, name: str, *members: str, workspace: str = "default") -> None:
        await self.svc.container.approvers.create_group(
            ADMIN, workspace, name, members=[self.by_name[m].id for m in members]
        )

    async def ask(self, requester: str, order_id: str, amount: int = 900) -> PendingCall:
        """`requester` starts a conversation that asks to refund `order_id`; the call it waits on."""
        principal = self.by_name[requester]
        conversations = self.svc.container.conversations
        conversation = await conversations.create_conversation(principal, "payments", "default")
        await conversations.post_message(
            principal, conversation.id, script(call("refund", order_id=order_id, amount=amount))
        )
        await self.svc.run_until_idle()
        calls = await self.svc.pending(conversation_id=conversation.id)
        assert len(calls) == 1, calls
        return calls[0]

    async def vote(self, name: str, call: PendingCall, decision: str = "approve", **more: Any) -> PendingCall:
        return await self.svc.container.pending_calls.resolve_pending(
            self.by_name[name], call.correlation_id, Resolution(Decision(decision), **more)
        )

    async def show(self, name: str, call: PendingCall) -> PendingCall:
        return await self.svc.container.pending_calls.get_pending(self.by_name[name], call.correlation_id)

    async def audit(self, call: PendingCall) -> list[AuditEntry]:
        async with self.svc.container.uow.reader() as uow:
            return await uow.audit.search(None, AuditQuery(correlation_id=call.correlation_id, limit=100))

    async def output(self, call: PendingCall) -> str:
        await self.svc.run_until_idle()
        view = await self.svc.get_run(call.run_id)
        return view.run.output or ""


@asynccontextmanager
async def routing_service(
    database_url: str, routes: dict[str, ApprovalRoute], **settings: Any
) -> AsyncIterator[People]:
    """The service serving the payments agent; `settings` override `Settings` fields."""
    async with Service.open(
        database_url, agents=[payments_agent(routes)], model="scripted", **settings
    ) as svc:
        yield People(svc)


def correlation(value: PendingCall | uuid.UUID) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else value.correlation_id


CLI_ROUTES = {
    "L1": ApprovalRoute(groups=("finance",), quorum=2),
    "L2": ApprovalRoute(groups=("finance",)),
    "L3": ApprovalRoute(
        groups=("finance",),
        escalations=(
            Escalation(
                after=timedelta(seconds=1), to=("group:on-call", "slack:C0ESCAL", "email:oncall@example.com")
            ),
        ),
    ),
    # A reminder a quarter of the way to a 4 s deadline: 1 s after the call is asked.
    "L4": ApprovalRoute(groups=("finance",), timeout=timedelta(seconds=4), reminders=(0.25,)),
}
CLI_AGENT = payments_agent(CLI_ROUTES)
"""Served by name (`tests.routing.kit:CLI_AGENT`) where a test starts the app from settings."""

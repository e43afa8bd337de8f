"""The policy point every tool call passes: defaults, rules in Cedar, deny, notify, the ladder, MCP
tools and their digests, on SQLite and PostgreSQL through the migrations."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from sursis import Service
from sursis.domain.errors import Forbidden, Stale
from sursis.domain.policy.policies import AboveCeiling, InvalidPolicy, LadderLevel
from sursis.domain.policy_decisions import ApprovalRoute, PolicyEffect, TimeoutOutcome
from sursis.domain.records import AuditQuery, Principal
from sursis.domain.records.event_records import StoredEvent
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle, settle
from tests.integration.policy_kit import DIGEST, RAN, model_saw, put_policy, rule, shop_agent

FINANCE = ApprovalRoute(
    groups=("finance",), quorum=1, timeout=timedelta(hours=4), on_timeout=TimeoutOutcome.DENY
)


async def tool_calls(svc: Service, run_id: uuid.UUID) -> dict[str, dict[str, object] | None]:
    records = await svc.container.runs.list_tool_calls(svc.principal, run_id)
    return {r.metadata.tool_name: (r.policy.to_json() if r.policy else None) for r in records}


async def test_without_a_policy_calls_are_decided_as_before(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().calls(
        ("lookup_order", {"order_id": "A1"}), ("refund", {"order_id": "A1", "amount": 5})
    )
    model.text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "refund")
        [call] = await expect_pending(svc, tool_name="refund")
        assert call.policy is not None
        assert (call.policy.effect, call.policy.rule, call.policy.policy_version) == (
            PolicyEffect.ASK,
            None,
            None,
        )
        assert call.policy.route == ApprovalRoute()
        assert RAN == [("lookup_order", {"order_id": "A1"})]
        await resolve_and_settle(svc, call, "approve")
        recorded = await tool_calls(svc, run.id)
        assert recorded["lookup_order"] is not None and recorded["lookup_order"]["effect"] == "allow"
        # The approved call ran under the decision that asked for it.
        assert recorded["refund"] is not None and recorded["refund"]["effect"] == "ask"


async def test_a_rule_routes_big_refunds_and_allows_small_ones(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().calls(
        ("refund", {"order_id": "S", "amount": 20}), ("refund", {"order_id": "B", "amount": 900})
    )
    model.text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        version = await put_policy(
            svc,
            rule(
                "big-refunds",
                "ask",
                "context.arguments.amount > 500",
                ("refund",),
                FINANCE,
                reason="over 500",
            ),
            rule("small-refunds", "allow", tools=("refund",)),
        )
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "refunds")
        [call] = await expect_pending(svc, tool_name="refund")
        assert call.args["amount"] == 900
        assert call.policy is not None
        assert (call.policy.rule, call.policy.policy_version, call.policy.reason) == (
            "big-refunds",
            version,
            "over 500",
        )
        assert call.policy.route == FINANCE
        assert RAN == [("refund", {"order_id": "S", "amount": 20})]
        recorded = await tool_calls(svc, run.id)
        assert recorded["refund"] == {
            "effect": "allow",
            "policy_version": version,
            "rule": "small-refunds",
            "reason": None,
            "route": None,
            "flags": [],
        }


async def test_a_denied_call_reaches_the_model_as_a_typed_error(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("deploy", service="api", env="prod").text("could not")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        await put_policy(
            svc,
            rule(
                "no-prod-fridays",
                "deny",
                'context.arguments.env == "prod"',
                ("deploy",),
                reason="prod is frozen",
            ),
        )
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "deploy")
        view = await settle(svc, run.id)
        assert (view.run.status, view.run.output) == ("completed", "could not")
        assert RAN == []
        seen = model_saw(model)
        assert "POLICY_DENIED" in seen and "prod is frozen" in seen
        [record] = await svc.container.runs.list_tool_calls(svc.principal, run.id)
        assert (record.metadata.ok, record.error_code) == (False, "POLICY_DENIED")
        assert record.policy is not None and record.policy.rule == "no-prod-fridays"
        assert await svc.pending() == []


async def test_notify_runs_now_and_tells_the_approvers_after(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("refund", order_id="N", amount=50).text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        await put_policy(svc, rule("tell-finance", "notify", tools=("refund",), route=FINANCE))
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "refund")
        await settle(svc, run.id)
        assert RAN == [("refund", {"order_id": "N", "amount": 50})]
        page = await svc.container.audit.list_audit(
            svc.principal, AuditQuery(conversation_id=conversation.id, limit=200)
        )
        [notified] = [a for a in page.items if a.action == "policy.notified"]
        assert notified.details["policy"]["route"]["groups"] == ["finance"]
        assert notified.details["args_summary"] == {"order_id": "N", "amount": 50}
        events = [e.type for e in await _events(svc, conversation.id)]
        assert "policy.notified" in events


async def test_a_condition_that_fails_to_evaluate_asks(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("lookup_order", order_id="x").text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        # Valid for the schema, but the hour arithmetic overflows: an evaluation error at call time.
        await put_policy(svc, rule("overflow", "allow", "context.time.epoch * 9223372036854775807 > 0"))
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "look")
        [call] = await expect_pending(svc, tool_name="lookup_order")
        assert call.policy is not None
        assert (call.policy.rule, call.policy.flags) == ("overflow", ("condition_error",))
        assert RAN == []


async def test_policies_are_versioned_and_a_bad_one_is_not_stored(database_url: str) -> None:
    async with Service.open(database_url, agents=[shop_agent()], model=ScriptedModel().model) as svc:
        policies = svc.container.policies
        assert await policies.get(svc.principal, "default", None) is None
        first = await put_policy(svc, rule("a", "allow", tools=("lookup_order",)))
        second = await put_policy(svc, rule("b", "deny", tools=("lookup_order",)))
        assert (first, second) == (1, 2)
        old = await policies.get(svc.principal, "default", 1)
        assert old is not None and [r.id for r in old.rules] == ["a"]
        bad = [
            rule("x", "allow", "context.arguments.amount > 1"),  # not every tool has `amount`
            rule("x", "allow", "context.nope"),
            rule("x", "allow", "true }; permit(principal, action, resource) when { true"),
            rule("x", "allow", tools=("no_such_tool",)),
            rule("bad id!", "allow"),
        ]
        for candidate in bad:
            with pytest.raises(InvalidPolicy):
                await put_policy(svc, candidate)
        current = await policies.get(svc.principal, "default", None)
        assert current is not None and current.version == 2
        with pytest.raises(Stale):
            await policies.put(svc.principal, "default", [], None, expected_version=1)
        operator = Principal(id="op", role="operator", workspace="default")
        with pytest.raises(Forbidden):
            await policies.put(operator, "default", [], None)


async def test_the_ladder_moves_within_the_ceiling_and_back(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("refund", order_id="L", amount=50).call("refund", order_id="M", amount=500)
    model.text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        policies = svc.container.policies
        user = Principal(id="customer", role="user", workspace="default")
        with pytest.raises(AboveCeiling):
            await policies.move(user, None, "refund", level=LadderLevel.AUTO)
        with pytest.raises(Forbidden):
            await policies.move(user, None, "refund", level=None, ceiling=LadderLevel.AUTO)
        await policies.move(svc.principal, None, "refund", level=None, ceiling=LadderLevel.NOTIFY)
        with pytest.raises(AboveCeiling) as above:
            await policies.move(user, None, "refund", level=LadderLevel.AUTO)
        assert above.value.code == "above_ceiling"
        moved = await policies.move(
            user, None, "refund", level=LadderLevel.ASK_ABOVE, condition="context.arguments.amount > 100"
        )
        assert (moved.level, moved.previous_level) == (LadderLevel.ASK_ABOVE, None)

        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "refunds")
        [call] = await expect_pending(svc, tool_name="refund")
        assert call.args["amount"] == 500
        assert call.policy is not None and call.policy.rule == "ladder:refund"
        assert RAN == [("refund", {"order_id": "L", "amount": 50})]
        await resolve_and_settle(svc, call, "approve")
        assert (await tool_calls(svc, run.id))["refund"] is not None

        notify = await policies.move(user, None, "refund", level=LadderLevel.NOTIFY)
        assert notify.previous_level is LadderLevel.ASK_ABOVE
        undone = await policies.move(user, None, "refund", level=None, undo=True)
        assert (undone.level, undone.condition) == (LadderLevel.ASK_ABOVE, "context.arguments.amount > 100")
        page = await svc.container.audit.list_audit(svc.principal, AuditQuery(limit=200))
        moves = [(a.details["from"], a.details["to"]) for a in page.items if a.action == "ladder.moved"]
        assert (None, "ask_above") in moves and ("notify", "ask_above") in moves


async def test_mcp_tools_are_asked_unless_read_and_a_changed_schema_is_asked_again(database_url: str) -> None:
    RAN.clear()
    model = (
        ScriptedModel().calls(("mcp_search", {"query": "q"}), ("mcp_delete", {"path": "/tmp/a"})).text("one")
    )
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "files")
        [call] = await expect_pending(svc, tool_name="mcp_delete")
        assert RAN == [("mcp_search", {"query": "q"})]
        await svc.resolve(call.correlation_id, "deny", reason="no")
        await svc.run_until_idle()
        # A rule lets the destructive tool run: it pins the digest the tool has now.
        await put_policy(svc, rule("cleanup", "allow", tools=("mcp_delete",)))
        stored = await svc.container.policies.get(svc.principal, "default", None)
        assert stored is not None and stored.rules[0].pins == {"mcp_delete": DIGEST}

    RAN.clear()
    model = ScriptedModel().call("mcp_delete", path="/tmp/b").text("two")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("shop")
        await settle(svc, (await svc.send(conversation.id, "files")).id)
        assert RAN == [("mcp_delete", {"path": "/tmp/b"})]

    # The server now describes the tool differently: the rule no longer covers it.
    RAN.clear()
    model = ScriptedModel().call("mcp_delete", path="/tmp/c").text("three")
    async with Service.open(
        database_url, agents=[shop_agent(mcp_digest="sha256:v2")], model=model.model
    ) as svc:
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "files")
        [call] = await expect_pending(svc, tool_name="mcp_delete")
        assert call.policy is not None
        assert (call.policy.rule, call.policy.flags) == ("cleanup", ("schema_changed",))
        assert RAN == []
        catalog = {t.spec.name: t for t in await svc.container.policies.catalog(svc.principal, None)}
        assert catalog["mcp_delete"].flags == ("schema_changed",)
        assert (catalog["mcp_delete"].pinned, catalog["mcp_delete"].spec.schema_digest) == (
            DIGEST,
            "sha256:v2",
        )
        assert catalog["mcp_search"].flags == ()


async def test_a_rule_may_read_who_started_the_conversation(database_url: str) -> None:
    RAN.clear()
    model = ScriptedModel().call("lookup_order", order_id="R").text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        await put_policy(
            svc, rule("admins-ask", "ask", 'context.requester.key == "' + svc.principal.id + '"')
        )
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "look")
        [call] = await expect_pending(svc, tool_name="lookup_order")
        assert call.policy is not None and call.policy.rule == "admins-ask"


async def _events(svc: Service, conversation_id: uuid.UUID) -> list[StoredEvent]:
    async with svc.container.uow() as uow:
        return await uow.events.after(conversation_id, 0, 500)


async def test_concurrent_policy_writes_have_one_winner(database_url: str) -> None:
    async with Service.open(database_url, agents=[shop_agent()], model=ScriptedModel().model) as svc:
        policies = svc.container.policies

        async def put(i: int) -> int | str:
            try:
                stored = await policies.put(
                    svc.principal, "default", [rule(f"r{i}", "allow", tools=("lookup_order",))], None, 0
                )
            except Stale:
                return "stale"
            return stored.version

        outcomes = await asyncio.gather(*(put(i) for i in range(5)))
        assert sorted(outcomes, key=str) == [1, "stale", "stale", "stale", "stale"]
        current = await policies.get(svc.principal, "default", None)
        assert current is not None and current.version == 1

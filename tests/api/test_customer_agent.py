"""The customer supervisor and its specialists, end to end through the real app and database."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from tests.api.http_calls import create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import call, script
from tests.customer_scripts import delegation, findings, results


async def audit_actions(client: AsyncTestClient[Any], conversation_id: str) -> list[dict[str, Any]]:
    response = await client.get("/v1/audit", params={"conversation_id": conversation_id, "limit": 200})
    assert response.status_code == 200, response.text
    return [e for e in response.json()["items"] if e["action"].startswith("delegation.")]


async def customer_turn(
    client: AsyncTestClient[Any], *steps: Any, text: str = "please help"
) -> tuple[str, Any]:
    """A new conversation with the customer supervisor and its first turn, scripted by `steps`:
    the conversation's id and the run."""
    cid = await create_conversation(client, "customer")
    return cid, await post_message(client, cid, script(*steps, text=text))


def threshold_change(threshold: float, reason: str) -> dict[str, Any]:
    """The framework advisor's gated call that sets the score threshold."""
    return call("apply_framework_change", changes={"score_threshold": threshold}, reason=reason)


async def advisor_turn(
    client: AsyncTestClient[Any], *responses: list[dict[str, Any]], text: str = "please help"
) -> tuple[str, Any]:
    """A customer turn that delegates to the framework advisor, which answers with `responses`."""
    return await customer_turn(client, [delegation("framework-advisor", *responses)], text=text)


async def test_a_turn_delegates_to_two_specialists_and_synthesises(client: AsyncTestClient[Any]) -> None:
    cid, run = await customer_turn(
        client,
        [
            delegation("scan-analyst", [call("get_scan_detail", scan_id="scan_102")]),
            delegation("troubleshooter", [call("diagnose_scan_failure", scan_id="scan_102")]),
        ],
        text="Why did my last scan fail?",
    )

    assert run["status"] == "completed", run
    [analyst, troubleshooter] = results(run["output"])
    name, [detail] = findings(analyst)
    assert name == "scan-analyst"
    assert detail["result"]["verdict"] == "fail"
    assert detail["result"]["scores"]["faithfulness"] == 0.62
    name, [diagnosis] = findings(troubleshooter)
    assert name == "troubleshooter"
    assert [f["test"] for f in diagnosis["result"]["failures"]] == [
        "billing_refund_policy",
        "billing_invoice_dates",
    ]
    executed = {(t["tool_name"], t["agent_name"]) for t in await tool_calls(client, run["id"])}
    assert executed == {
        ("delegate", "customer"),
        ("get_scan_detail", "scan-analyst"),
        ("diagnose_scan_failure", "troubleshooter"),
    }
    actions = [(e["action"], e["details"]["specialist"]) for e in await audit_actions(client, cid)]
    assert sorted(actions) == sorted(
        [
            ("delegation.started", "scan-analyst"),
            ("delegation.completed", "scan-analyst"),
            ("delegation.started", "troubleshooter"),
            ("delegation.completed", "troubleshooter"),
        ]
    )


async def test_a_third_delegation_in_a_turn_is_refused(client: AsyncTestClient[Any]) -> None:
    cid, run = await customer_turn(
        client,
        [delegation("scan-analyst", [call("list_recent_scans")])],
        [delegation("onboarding-guide", [call("get_onboarding_status")])],
        [delegation("troubleshooter", [call("get_recent_errors")])],
    )

    assert run["status"] == "completed", run
    [refused] = results(run["output"])
    assert refused["ok"] is False
    assert refused["error"]["class"] == "ToolPolicyError"
    assert refused["error"]["code"] == "DELEGATION_LIMIT"
    started = [
        e["details"]["specialist"]
        for e in await audit_actions(client, cid)
        if e["action"] == "delegation.started"
    ]
    assert sorted(started) == ["onboarding-guide", "scan-analyst"]
    assert "get_recent_errors" not in {t["tool_name"] for t in await tool_calls(client, run["id"])}


async def test_the_limit_counts_per_turn(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client, "customer")
    two = script(
        [
            delegation("scan-analyst", [call("list_recent_scans")]),
            delegation("onboarding-guide", [call("get_onboarding_status")]),
        ]
    )
    assert (await post_message(client, cid, two))["status"] == "completed"
    again = await post_message(
        client, cid, script([delegation("troubleshooter", [call("check_workspace_health")])])
    )
    [answer] = results(again["output"])
    name, [health] = findings(answer)
    assert name == "troubleshooter"
    assert health["result"]["failing_scans"] == ["scan_103", "scan_102"]


async def test_a_change_inside_a_specialist_suspends_the_run_and_resumes_inside_it(
    client: AsyncTestClient[Any],
) -> None:
    cid, run = await advisor_turn(
        client,
        [call("get_framework_config")],
        [threshold_change(0.8, "stricter gate")],
        text="Raise the score threshold to 0.8",
    )

    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    assert pending["tool_name"] == "apply_framework_change"
    assert pending["agent"] == "framework-advisor"
    assert pending["agent_path"] == "customer/framework-advisor"
    assert pending["kind"] == "approval"
    listed = (await client.get("/v1/pending", params={"status": "awaiting"})).json()["items"]
    assert [(p["correlation_id"], p["agent_path"]) for p in listed] == [
        (pending["correlation_id"], "customer/framework-advisor")
    ]

    decided = await resolve(client, pending["correlation_id"], decision="approve")
    assert decided.status_code == 200, decided.text
    done = await get_run(client, run["id"])

    assert done["status"] == "completed", done
    [answer] = results(done["output"])
    name, [applied] = findings(answer)
    assert name == "framework-advisor"
    assert applied["result"]["version"] == 2
    assert applied["result"]["config"]["score_threshold"] == 0.8
    executed = [(t["tool_name"], t["agent_name"]) for t in await tool_calls(client, run["id"])]
    # The specialist resumed where it stopped: its first tool ran once, before the suspension.
    assert sorted(executed) == sorted(
        [
            ("delegate", "customer"),
            ("get_framework_config", "framework-advisor"),
            ("apply_framework_change", "framework-advisor"),
        ]
    )
    actions = [e["action"] for e in await audit_actions(client, cid)]
    assert sorted(actions) == sorted(["delegation.started", "delegation.suspended", "delegation.completed"])


async def test_a_denied_change_reaches_the_specialist(client: AsyncTestClient[Any]) -> None:
    _, run = await customer_turn(
        client,
        [delegation("troubleshooter", [call("rerun_scan", scan_id="scan_103", reason="judge timeout")])],
    )
    [pending] = run["pending"]
    assert pending["agent_path"] == "customer/troubleshooter"
    await resolve(client, pending["correlation_id"], decision="deny", reason="not now")
    done = await get_run(client, run["id"])

    assert done["status"] == "completed", done
    [answer] = results(done["output"])
    _, [denied] = findings(answer)
    assert denied["ok"] is False
    assert denied["error"]["code"] == "APPROVAL_DENIED"
    assert "rerun_scan" not in {t["tool_name"] for t in await tool_calls(client, run["id"])}


async def test_specialists_are_not_conversation_agents(client: AsyncTestClient[Any]) -> None:
    response = await client.post("/v1/conversations", json={"agent": "framework-advisor"})
    assert response.status_code == 422
    assert response.json()["code"] == "validation_failed"


async def test_three_delegations_in_one_response_run_two(client: AsyncTestClient[Any]) -> None:
    _, run = await customer_turn(
        client,
        [
            delegation("scan-analyst", [call("list_recent_scans", limit=1)]),
            delegation("onboarding-guide", [call("get_onboarding_status")]),
            delegation("troubleshooter", [call("get_recent_errors")]),
        ],
    )

    assert run["status"] == "completed", run
    first, second, third = results(run["output"])
    assert findings(first)[0] == "scan-analyst"
    assert findings(second)[0] == "onboarding-guide"
    assert third["error"]["code"] == "DELEGATION_LIMIT"


async def test_a_revision_inside_a_specialist_parks_the_run_again_on_the_revised_call(
    client: AsyncTestClient[Any],
) -> None:
    cid, run = await advisor_turn(
        client,
        [threshold_change(0.95, "strict")],
        [threshold_change(0.85, "less strict")],
    )
    [first] = run["pending"]
    revised = await resolve(client, first["correlation_id"], decision="revise", reason="too strict")
    assert revised.status_code == 200, revised.text
    again = await get_run(client, run["id"])

    assert again["status"] == "suspended", again
    [second] = again["pending"]
    assert second["agent_path"] == "customer/framework-advisor"
    assert second["args_summary"]["changes"] == {"score_threshold": 0.85}
    await resolve(client, second["correlation_id"], decision="approve")
    done = await get_run(client, run["id"])
    _, [applied] = findings(results(done["output"])[0])
    assert applied["result"]["config"]["score_threshold"] == 0.85
    assert applied["result"]["version"] == 2
    actions = [e["action"] for e in await audit_actions(client, cid)]
    assert actions.count("delegation.started") == 1
    assert actions.count("delegation.suspended") == 2


async def test_an_edited_change_is_validated_against_the_specialists_tool(
    client: AsyncTestClient[Any],
) -> None:
    _, run = await advisor_turn(
        client,
        [threshold_change(0.9, "stricter")],
    )
    [pending] = run["pending"]
    bad = await resolve(client, pending["correlation_id"], decision="approve", args={"changes": "nope"})
    assert bad.status_code == 422
    assert bad.json()["code"] == "validation_failed"
    edited = {"changes": {"score_threshold": 0.8}, "reason": "operator's choice"}
    assert (
        await resolve(client, pending["correlation_id"], decision="approve", args=edited)
    ).status_code == 200
    done = await get_run(client, run["id"])
    _, [applied] = findings(results(done["output"])[0])
    assert applied["result"]["config"]["score_threshold"] == 0.8
    assert applied["args_edited_by_operator"] == edited

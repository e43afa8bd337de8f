"""The World Agent's operator flow over HTTP, shared by the in-process and the real-process tests."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import call, script

OVERRIDE_REASON = "refund refused although the parcel arrived damaged"
BAD_PREDICATE = "import os\ndef predicate(ctx):\n    return os.path.exists('/tmp')\n"
PREDICATE = (
    "def predicate(ctx):\n"
    "    if ctx.get('parcel_damaged') and ctx.get('days_since_delivery', 99) <= 14:\n"
    "        return True\n"
    "    return False\n"
)
CASES = [
    {"context": {"parcel_damaged": True, "days_since_delivery": 3}, "expected": True},
    {"context": {"parcel_damaged": True, "days_since_delivery": 30}, "expected": False},
    {"context": {"parcel_damaged": False, "days_since_delivery": 1}, "expected": False},
]
CITATIONS = [
    {"source": "Returns policy 2026", "locator": "section 4.2", "quote": "Damaged parcels are refunded."}
]
RULE_TEXT = "Refund a damaged parcel reported within 14 days of delivery"


def results_of(output: str) -> list[Any]:
    assert output.startswith("RESULTS: "), output
    return list(json.loads(output.removeprefix("RESULTS: ")))


async def create_world(http: Any, domain: str = "refunds") -> str:
    response = await http.post("/v1/worlds", json={"domain": domain, "title": "Refund decisions"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def record_history(http: Any, world_id: str, rule_id: str = "R-refunds-1") -> None:
    """Three refusals of one rule, each flagged by a customer for the same reason."""
    for n in range(3):
        decision = {
            "id": f"d-{n}",
            "rule_ids": [rule_id],
            "context": {"parcel_damaged": True, "days_since_delivery": n + 2},
            "outcome": "refund_refused",
        }
        response = await http.post(f"/v1/worlds/{world_id}/decisions", json=decision)
        assert response.status_code == 201, response.text
        flag = {"id": f"f-{n}", "kind": "review_request", "reason": OVERRIDE_REASON}
        response = await http.post(f"/v1/worlds/{world_id}/decisions/d-{n}/flags", json=flag)
        assert response.status_code == 201, response.text


async def open_session(http: Any, world_id: str) -> dict[str, Any]:
    response = await http.post(f"/v1/worlds/{world_id}/conversations")
    assert response.status_code == 201, response.text
    return dict(response.json())


async def say(http: Any, conversation_id: str, content: str, wait: float = 20) -> Any:
    response = await http.post(
        f"/v1/conversations/{conversation_id}/messages", params={"wait": wait}, json={"content": content}
    )
    assert response.status_code in (200, 202), response.text
    return response.json()


async def wait_run(http: Any, run_id: str, wait: float = 20) -> Any:
    response = await http.get(f"/v1/runs/{run_id}", params={"wait": wait})
    assert response.status_code == 200, response.text
    return response.json()


async def tool_calls(http: Any, run_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/runs/{run_id}/tool-calls")
    assert response.status_code == 200, response.text
    return list(response.json())


def find_and_propose() -> str:
    return script(
        [call("list_override_patterns")],
        [
            call(
                "propose_rule_candidate",
                text=RULE_TEXT,
                evidence={"rule_id": "R-refunds-1", "reason": OVERRIDE_REASON},
            )
        ],
        text="look for override patterns and propose a rule",
    )


def prepare_and_request(rule_id: str) -> str:
    return script(
        [call("generate_predicate", rule_id=rule_id, code=BAD_PREDICATE)],
        [call("generate_predicate", rule_id=rule_id, code=PREDICATE)],
        [call("propose_inline_tests", rule_id=rule_id, cases=CASES)],
        [call("run_readiness_gate", rule_id=rule_id)],
        [call("draft_provenance", rule_id=rule_id, citations=CITATIONS)],
        [call("request_enshrinement", rule_id=rule_id)],
        text="write the predicate, test it, cite it and ask for enshrinement",
    )


async def candidate_until_request(http: Any, world_id: str) -> tuple[str, dict[str, Any]]:
    """The operator's conversation up to the suspended enshrinement request: (rule_id, run)."""
    session = await open_session(http, world_id)
    assert session["mode"] == "operator"
    cid = session["conversation"]["id"]
    first = await say(http, cid, find_and_propose())
    assert first["status"] == "completed", first
    patterns, proposed = [c["result"] for c in await tool_calls(http, first["id"])]
    assert patterns["ok"] is True, patterns
    [pattern] = patterns["result"]
    assert pattern["rule_id"] == "R-refunds-1" and pattern["flags"] == 3, pattern
    rule_id = proposed["result"]["rule_id"]
    assert proposed["result"]["state"] == "candidate"

    second = await say(http, cid, prepare_and_request(rule_id))
    assert second["status"] == "suspended", second
    return rule_id, second


def check_refusal_then_acceptance(tool_results: list[Any]) -> None:
    """The tool-call records of the second run: the first predicate refused, the second accepted."""
    by_name = [(t["tool_name"], t["ok"]) for t in tool_results]
    assert by_name[:5] == [
        ("generate_predicate", False),
        ("generate_predicate", True),
        ("propose_inline_tests", True),
        ("run_readiness_gate", True),
        ("draft_provenance", True),
    ], by_name


async def rule_versions(http: Any, world_id: str, rule_id: str) -> list[dict[str, Any]]:
    response = await http.get(f"/v1/worlds/{world_id}/rules/{rule_id}")
    assert response.status_code == 200, response.text
    return list(response.json()["versions"])

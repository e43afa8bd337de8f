"""The customer context's pure parts: which events start conversations, and the per-turn count."""

from __future__ import annotations

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart

from sursis.domain.customer._events import proactive_turn
from sursis.domain.records.customer_records import PlatformEvent, PlatformEventType
from sursis.infra.agents.scripted import parse_script
from sursis.infra.customer.delegation import delegation_position
from sursis.infra.customer.specialists import SPECIALISTS


def delegate(call_id: str, specialist: str) -> ToolCallPart:
    return ToolCallPart("delegate", {"specialist": specialist, "task": "t"}, tool_call_id=call_id)


def test_the_position_counts_delegations_of_the_current_turn_only() -> None:
    messages = [
        ModelRequest(parts=[UserPromptPart("earlier")]),
        ModelResponse(parts=[delegate("a", "scan-analyst"), delegate("b", "troubleshooter")]),
        ModelRequest(parts=[ToolReturnPart("delegate", {}, tool_call_id="a")]),
        ModelRequest(parts=[UserPromptPart("now")]),
        ModelResponse(parts=[delegate("c", "scan-analyst"), delegate("x", "nobody")]),
        ModelRequest(parts=[ToolReturnPart("delegate", {}, tool_call_id="c")]),
        ModelResponse(parts=[delegate("d", "onboarding-guide"), delegate("e", "troubleshooter")]),
    ]
    positions = {cid: delegation_position(messages, cid, SPECIALISTS) for cid in "cxde"}
    # An unknown specialist is refused by its own error and does not use up the allowance.
    assert positions == {"c": 0, "x": 1, "d": 1, "e": 2}


def test_events_are_routed_to_their_specialist_with_a_plan_the_scripted_model_follows() -> None:
    scan = PlatformEvent(
        "e1", PlatformEventType.SCAN_COMPLETED, "w", {"scan": {"id": "s1", "verdict": "fail"}}
    )
    turn = proactive_turn(scan)
    assert turn is not None
    assert turn.specialist == "scan-analyst"
    [step] = parse_script(turn.prompt) or []
    assert step["tool"] == "delegate"
    assert step["args"]["specialist"] == "scan-analyst"
    assert parse_script(step["args"]["task"]) == [{"tool": "get_scan_detail", "args": {"scan_id": "s1"}}]
    assert "verdict fail" in turn.prompt.splitlines()[0]


def test_a_configuration_change_to_nothing_starts_no_conversation() -> None:
    same = PlatformEvent("e", PlatformEventType.CONFIG_CHANGED, "w", {"old": {"a": 1}, "new": {"a": 1}})
    other = PlatformEvent("e", PlatformEventType.CONFIG_CHANGED, "w", {"old": {"a": 1}, "new": {"a": 2}})
    anomaly = PlatformEvent(
        "e",
        PlatformEventType.ANOMALY_DETECTED,
        "w",
        {"kind": "cost_spike", "metric": "m", "baseline": 1.0, "observed": 3.0},
    )
    assert proactive_turn(same) is None
    changed, investigated = proactive_turn(other), proactive_turn(anomaly)
    assert changed is not None
    assert changed.specialist == "framework-advisor"
    assert investigated is not None
    assert investigated.specialist == "troubleshooter"

"""pydantic-ai's own examples as a conformance suite: the `pydantic-ai-examples` package from PyPI,
pinned (`upstream-examples.txt`) and unchanged, each served by `sursis serve --agents` through a
wrapper module (`packages/served-examples`: its deps factory, `ToolOptions` gating one of its tools,
the offline `scripted` model driven by a `SCRIPT:` line) with `sursis worker` on PostgreSQL, driven
over HTTP: its gated call approved, denied, and approved with the worker that resumes the run
SIGKILLed after the tool ran (another worker finishes it; for a tool not declared idempotent, a person
is asked what happened). docs/compatibility.md lists every example and why the others are not served.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.adoption.cases import UPSTREAM_CASES
from tests.adoption.harness import AdoptionCase, AdoptionHarness

pytestmark = pytest.mark.packaging


def _cases() -> list[Any]:
    return [pytest.param(case, id=case.package) for case in UPSTREAM_CASES]


def _parsed(output: Any) -> Any:
    """A structured output as a value, whether the API shows it as JSON or as a string holding JSON."""
    if isinstance(output, str):
        try:
            return json.loads(output)
        except ValueError:
            return output
    return output


def _gated_calls(upstream: AdoptionHarness, case: AdoptionCase, run_id: str) -> list[dict[str, Any]]:
    return [c for c in upstream.tool_calls(run_id) if c["tool_name"] == case.gated_tool]


def _assert_ran(call: dict[str, Any], case: AdoptionCase) -> None:
    """The call succeeded with the case's result (any result when the case cannot know it: a clock)."""
    assert (call["ok"], call["result"]["ok"]) == (True, True), call
    if case.tool_result is not None:
        assert call["result"] == {"ok": True, "result": case.tool_result}, call


@pytest.mark.parametrize("case", _cases())
def test_an_approved_gated_call_runs_the_examples_tool_once(
    upstream: AdoptionHarness, case: AdoptionCase
) -> None:
    turn = upstream.gated_turn(case)
    assert turn.run["status"] == "completed", (turn.run, upstream.logs())
    assert _parsed(turn.run["output"]) == case.output
    [call] = _gated_calls(upstream, case, turn.run["id"])
    _assert_ran(call, case)


@pytest.mark.parametrize("case", _cases())
def test_a_denied_gated_call_never_runs_and_the_run_goes_on(
    upstream: AdoptionHarness, case: AdoptionCase
) -> None:
    turn = upstream.gated_turn(case, decision="deny")
    assert turn.run["status"] == "completed", (turn.run, upstream.logs())
    # The model read the denial and took the script's next step.
    assert _parsed(turn.run["output"]) == case.output
    assert [c for c in _gated_calls(upstream, case, turn.run["id"]) if c["ok"]] == []
    pending = httpx.get(
        f"{upstream.base}/v1/pending/{turn.pending['correlation_id']}", headers=upstream.headers, timeout=10
    ).json()
    assert pending["status"] == "denied", pending


@pytest.mark.parametrize("case", _cases())
def test_the_run_completes_when_the_worker_dies_mid_resume(
    upstream: AdoptionHarness, case: AdoptionCase
) -> None:
    turn = upstream.gated_turn(case, kill_at=f"tool_effect_committed:{case.gated_tool}")
    assert turn.killed, "the worker was not killed at the crash point"
    if not case.idempotent:
        # The example's own `requires_approval` tool, not declared idempotent: it is not run a second
        # time, a person is asked what happened.
        assert turn.run["status"] == "suspended", (turn.run, upstream.logs())
        [question] = turn.run["pending"]
        assert question["kind"] == "elicitation" and "outcome_unknown" in question["args"]["review"]
        return
    assert turn.run["status"] == "completed", (turn.run, upstream.logs())
    assert _parsed(turn.run["output"]) == case.output
    # The tool ran again under the same call id (the first worker died before storing its outcome);
    # one outcome is stored.
    [call] = _gated_calls(upstream, case, turn.run["id"])
    _assert_ran(call, case)


def test_the_examples_are_in_the_catalog_with_their_gated_tools(upstream: AdoptionHarness) -> None:
    agents = {
        a["name"]: a
        for a in httpx.get(f"{upstream.base}/v1/agents", headers=upstream.headers, timeout=10).json()
    }
    assert set(agents) == {case.agent for case in UPSTREAM_CASES}
    for case in UPSTREAM_CASES:
        approvals = {t["name"]: t["approval"] for t in agents[case.agent]["tools"]}
        assert approvals[case.gated_tool] == "requires_approval", approvals
        assert {a for t, a in approvals.items() if t != case.gated_tool} <= {"auto"}, approvals
        assert agents[case.agent]["model"] == "scripted"

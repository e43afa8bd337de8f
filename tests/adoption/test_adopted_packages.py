"""Agents written as their authors would, each a package of its own, installed with the wheel into a
fresh venv and served by `sursis serve --agents ...` with `sursis worker` on PostgreSQL: a gated
call approved over HTTP applies its effect once, and once more when the worker resuming it is
SIGKILLed after the tool ran (see `harness.py` to add a case)."""

from __future__ import annotations

import httpx
import pytest

from tests.adoption.cases import CASES
from tests.adoption.harness import AdoptionCase, AdoptionHarness

pytestmark = pytest.mark.packaging


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_gated_call_approved_over_http_applies_its_effect_once(
    adoption: AdoptionHarness, case: AdoptionCase
) -> None:
    turn = adoption.gated_turn(case)
    assert turn.run["status"] == "completed", (turn.run, adoption.logs())
    if case.output is not None:
        assert turn.run["output"] == case.output
    assert [e.kind for e in turn.effects] == [case.effect]
    assert len(turn.attempts) == 1
    if case.package == "orders-desk":
        # Its deps factory was told the workspace and the key that posted the message.
        workspace, _, key_id = turn.effects[0].body["customer"].partition(":")
        assert workspace == "default" and key_id not in ("", "None")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_effect_is_applied_once_when_the_worker_dies_mid_resume(
    adoption: AdoptionHarness, case: AdoptionCase
) -> None:
    turn = adoption.gated_turn(case, kill_at=f"tool_effect_committed:{case.gated_tool}")
    assert turn.killed, "the worker was not killed at the crash point"
    if not case.idempotent:
        # A tool not declared idempotent is not run a second time: a person is asked what happened.
        assert turn.run["status"] == "suspended", (turn.run, adoption.logs())
        [question] = turn.run["pending"]
        assert question["kind"] == "elicitation" and "outcome_unknown" in question["args"]["review"]
        assert len(turn.attempts) == 1
        assert [e.kind for e in turn.effects] == [case.effect]
        return
    assert turn.run["status"] == "completed", (turn.run, adoption.logs())
    if case.output is not None:
        assert turn.run["output"] == case.output
    # The tool ran twice (the first worker died before storing its outcome), under one call id:
    # the API applied the effect once.
    assert len(turn.attempts) == 2 and len({e.key for e in turn.attempts}) == 1
    assert [e.kind for e in turn.effects] == [case.effect]


def test_the_agents_are_in_the_catalog_with_their_models(adoption: AdoptionHarness) -> None:
    agents = {
        a["name"]: a
        for a in httpx.get(f"{adoption.base}/v1/agents", headers=adoption.headers, timeout=10).json()
    }
    assert set(agents) == {case.agent for case in CASES}
    assert agents["helpdesk"]["model"] and "claude" in agents["helpdesk"]["model"]
    for case in CASES:
        tools = {t["name"]: t for t in agents[case.agent]["tools"]}
        assert tools[case.gated_tool]["approval"] == "requires_approval"
    # The banner names the model each agent uses.
    banner = (adoption.work / "api-0.log").read_text()
    assert "helpdesk=anthropic:claude-sonnet-4-0" in banner and "orders-desk=scripted" in banner, banner

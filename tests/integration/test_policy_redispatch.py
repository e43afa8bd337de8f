"""A call the policy cleared with `notify`, dispatched again after its worker died, is neither asked
nor told about twice, even when the policy changed meanwhile (as for a pre-approval)."""

from __future__ import annotations

import pytest

from sursis.app.container import build_container
from sursis.domain.policy.policies import PolicyRule
from sursis.domain.policy_decisions import PolicyEffect
from sursis.domain.records import AuditQuery
from sursis.domain.states import RunStatus
from tests.conftest import eventually, make_settings
from tests.integration.test_audit import ADMIN, USER, Button


@pytest.mark.parametrize("changed", [False, True], ids=["same-policy", "denied-meanwhile"])
@pytest.mark.parametrize("die_after_effect", [False, True], ids=["before-the-effect", "after-the-effect"])
async def test_a_notified_call_dispatched_again_after_a_crash_is_told_once(
    seeded: str, die_after_effect: bool, changed: bool
) -> None:
    button = Button(die_after_effect)
    container = build_container(make_settings(seeded, lease_seconds=0.3), extra_agents=[button.agent()])
    try:
        notify = PolicyRule("tell", PolicyEffect.NOTIFY, tools=("press_button",))
        await container.policies.put(ADMIN, "default", [notify], None)
        conversation, run = await button.press_and_die(container)
        if changed:
            deny = PolicyRule("no", PolicyEffect.DENY, tools=("press_button",))
            await container.policies.put(ADMIN, "default", [deny], None)
        assert await eventually(container.worker.sweep)
        claimed = await container.worker.run_once()
        assert claimed, (await container.runs.get_run(USER, run.id)).run

        view = await container.runs.get_run(USER, run.id)
        rows = (await container.audit.list_audit(ADMIN, AuditQuery(conversation_id=conversation.id))).items
        records = await container.runs.list_tool_calls(USER, run.id)
    finally:
        await container.close()

    assert (view.run.status, view.run.output, view.pending) == (RunStatus.COMPLETED, "pressed", [])
    assert button.pressed == ["red"]
    assert [r.action for r in rows if r.action.startswith(("pending.", "policy."))] == ["policy.notified"]
    assert [(r.metadata.tool_name, r.result) for r in records] == [
        ("press_button", {"ok": True, "result": {"pressed": "red"}})
    ]

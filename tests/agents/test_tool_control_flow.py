"""pydantic-ai's control flow out of a tool reaches the model as pydantic-ai sends it: `ModelRetry`
(its retry budget honoured), `ToolFailed`, `SkipToolExecution` (a judge's denial),
`SkipToolValidation`, `ApprovalRequired` and `CallDeferred`, for a gated and an ungated tool; only a
real crash is "unexpected". On SQLite and PostgreSQL, on the lowest and the newest pydantic-ai."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic_ai import Agent, ApprovalRequired, ModelRetry, RunContext, ToolFailed
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import SkipToolExecution, SkipToolValidation
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolCallPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition
from structlog.testing import capture_logs

from sursis import Service, ToolOptions, adopt
from sursis.domain.errors import error_result
from sursis.domain.records import ToolCallMetadata, ToolCallRecord
from sursis.domain.runs.runs import RunView
from sursis.infra.agents.compat import call_deferred
from sursis.testing import ScriptedModel, settle

pytestmark = pytest.mark.parametrize("gated", [False, True], ids=["ungated", "gated"])

RAN: list[int] = []


def picker(*capabilities: AbstractCapability[Any], retries: int = 1) -> Agent[None, str]:
    """An agent whose `pick` tool takes 1 to 3 and asks the model to retry anything else."""
    agent: Agent[None, str] = Agent(name="picker", capabilities=list(capabilities))

    @agent.tool(retries=retries)
    def pick(ctx: RunContext[Any], n: int) -> str:
        """Pick a number from 1 to 3."""
        if n > 3:
            raise ModelRetry(f"{n} is out of range, pick 1 to 3")
        if n < 0:
            raise ToolFailed(f"{n} can never be picked")
        if n == 0:
            raise RuntimeError("database password is hunter2")
        RAN.append(n)
        return f"picked {n}"

    return agent


def served(agent: Agent[None, str], gated: bool) -> Any:
    tools = {"pick": ToolOptions(approval="requires_approval")} if gated else {}
    return adopt(agent, tools=tools)


async def turn(svc: Service, answers: dict[str, Any] | None = None) -> tuple[RunView, int]:
    """One turn, every call asked about approved (or answered from `answers`, by tool name);
    the settled run and how many calls were decided."""
    conversation = await svc.start_conversation("picker")
    run = await svc.send(conversation.id, "pick one")
    decided = 0
    for _ in range(6):
        await svc.run_until_idle()
        pending = await svc.pending(conversation_id=conversation.id)
        if not pending:
            break
        for call in pending:
            if answers and call.tool_name in answers and call.kind != "approval":
                await svc.resolve(call.correlation_id, "answer", result=answers[call.tool_name])
            else:
                await svc.resolve(call.correlation_id, "approve")
            decided += 1
    return await settle(svc, run.id), decided


def told(requests: list[list[ModelMessage]], tool_call_id: str) -> tuple[str, str]:
    """What the model was sent for a call: the part's outcome and its text as the model reads it."""
    for messages in reversed(requests):
        for message in messages:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if getattr(part, "tool_call_id", None) != tool_call_id or isinstance(part, ToolCallPart):
                    continue
                outcome = getattr(part, "outcome", None) or type(part).__name__
                text = (
                    part.model_response_str()
                    if hasattr(part, "model_response_str")
                    else part.model_response()
                )
                return outcome, text
    raise AssertionError(f"the model was never told of {tool_call_id}")


def call_ids(requests: list[list[ModelMessage]]) -> list[str]:
    ids: list[str] = []
    for messages in requests:
        for message in messages:
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.tool_call_id not in ids:
                    ids.append(part.tool_call_id)
    return ids


async def rows(svc: Service, run_id: uuid.UUID) -> list[ToolCallRecord]:
    async with svc.container.uow() as uow:
        return list(await uow.tool_calls.for_run(run_id))


def errors_logged(logs: list[dict[str, Any]]) -> list[str]:
    return [entry["event"] for entry in logs if entry.get("log_level") in ("error", "critical")]


async def test_model_retry_reaches_the_model_with_the_tools_text(database_url: str, gated: bool) -> None:
    RAN.clear()
    model = ScriptedModel().call("pick", n=7).call("pick", n=2).text("Picked 2.")
    async with Service.open(database_url, agents=[served(picker(), gated)], model=model.model) as svc:
        with capture_logs() as logs:
            view, decided = await turn(svc)
        first, _second = call_ids(model.requests)
        outcome, text = told(model.requests, first)
        records = {r.tool_call_id: r for r in await rows(svc, view.run.id)}
    assert (view.run.status, view.run.output, RAN) == ("completed", "Picked 2.", [2])
    assert decided == (2 if gated else 0)
    assert outcome in ("retried", "RetryPromptPart")
    assert "7 is out of range, pick 1 to 3" in text and "UNEXPECTED" not in text
    assert records[first].error_code == "RETRY"
    assert records[first].metadata.error_class == "ModelRetry"
    assert records[first].result["error"]["message"] == "7 is out of range, pick 1 to 3"
    assert errors_logged(logs) == []


async def test_a_spent_retry_budget_ends_the_run_as_pydantic_ai_does(database_url: str, gated: bool) -> None:
    model = ScriptedModel().call("pick", n=7).call("pick", n=8).text("never")
    async with Service.open(
        database_url, agents=[served(picker(retries=1), gated)], model=model.model
    ) as svc:
        view, _ = await turn(svc)
        records = await rows(svc, view.run.id)
    if gated:
        # Each approval resumes a new segment, whose retry count starts again, as pydantic-ai's own
        # deferred-tool resumption does: the model is asked to retry both times.
        assert view.run.status == "completed"
    else:
        assert view.run.status == "failed", view.run.output
        # pydantic-ai's `UnexpectedModelBehavior`: the model kept calling the tool wrong.
        assert view.run.error is not None and view.run.error.code == "model_error"
    assert [r.error_code for r in records] == ["RETRY", "RETRY"]


async def test_tool_failed_reaches_the_model_with_the_tools_text(database_url: str, gated: bool) -> None:
    model = ScriptedModel().call("pick", n=-1).text("Could not pick.")
    async with Service.open(database_url, agents=[served(picker(), gated)], model=model.model) as svc:
        with capture_logs() as logs:
            view, _ = await turn(svc)
        [call_id] = call_ids(model.requests)
        outcome, text = told(model.requests, call_id)
        [record] = await rows(svc, view.run.id)
    assert view.run.status == "completed"
    assert outcome == "failed" and "-1 can never be picked" in text and "UNEXPECTED" not in text
    assert (record.error_code, record.metadata.error_class) == ("TOOL_FAILED", "ToolFailed")
    assert errors_logged(logs) == []


async def test_a_crash_is_unexpected_and_hides_its_text(database_url: str, gated: bool) -> None:
    model = ScriptedModel().call("pick", n=0).text("Sorry.")
    async with Service.open(database_url, agents=[served(picker(), gated)], model=model.model) as svc:
        with capture_logs() as logs:
            view, _ = await turn(svc)
        [call_id] = call_ids(model.requests)
        _, text = told(model.requests, call_id)
        [record] = await rows(svc, view.run.id)
    assert "UNEXPECTED" in text and "hunter2" not in text
    assert record.error_code == "UNEXPECTED"
    assert errors_logged(logs) == ["tool.unexpected_error"]


class Judge(AbstractCapability[Any]):
    """Blocks every call to `pick` before its body runs, as a harness `ToolCallJudge` does."""

    async def before_tool_execute(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: dict[str, Any]
    ) -> dict[str, Any]:
        raise SkipToolExecution(f"The call to `{call.tool_name}` was blocked by a judge.")


async def test_a_skipped_execution_tells_the_model_the_hooks_result(database_url: str, gated: bool) -> None:
    RAN.clear()
    model = ScriptedModel().call("pick", n=2).text("Blocked.")
    async with Service.open(database_url, agents=[served(picker(Judge()), gated)], model=model.model) as svc:
        with capture_logs() as logs:
            view, decided = await turn(svc)
        [call_id] = call_ids(model.requests)
        _, text = told(model.requests, call_id)
        [record] = await rows(svc, view.run.id)
    assert (view.run.status, RAN, decided) == ("completed", [], 1 if gated else 0)
    assert text == "The call to `pick` was blocked by a judge."
    assert (record.error_code, record.metadata.error_class) == ("SKIPPED", "SkipToolExecution")
    assert errors_logged(logs) == []


class Coerce(AbstractCapability[Any]):
    """Skips validation of `pick`'s arguments, giving its own."""

    async def before_tool_validate(
        self, ctx: RunContext[Any], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        raise SkipToolValidation({"n": 3})


async def test_a_skipped_validation_runs_the_tool_with_the_hooks_arguments(
    database_url: str, gated: bool
) -> None:
    RAN.clear()
    model = ScriptedModel().call("pick", n="two").text("Picked.")
    async with Service.open(database_url, agents=[served(picker(Coerce()), gated)], model=model.model) as svc:
        view, decided = await turn(svc)
        [record] = await rows(svc, view.run.id)
    assert (view.run.status, RAN, decided) == ("completed", [3], 1 if gated else 0)
    assert record.error_code is None


def asking(gated: bool) -> Agent[None, str]:
    """`pick` asks a person itself once (`ApprovalRequired`), or twice when it is also gated."""
    agent: Agent[None, str] = Agent(name="picker")

    @agent.tool
    def pick(ctx: RunContext[Any], n: int) -> str:
        """Pick a number."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"reason": "a person picks"})
        RAN.append(n)
        return f"picked {n}"

    return agent


async def test_approval_required_becomes_a_pending_call(database_url: str, gated: bool) -> None:
    RAN.clear()
    model = ScriptedModel().call("pick", n=2).text("Picked.")
    async with Service.open(database_url, agents=[served(asking(gated), gated)], model=model.model) as svc:
        view, decided = await turn(svc)
    assert (view.run.status, RAN, decided) == ("completed", [2], 1)


def deferring() -> Agent[None, str]:
    """`pick` hands the pick to someone else (`CallDeferred`)."""
    agent: Agent[None, str] = Agent(name="picker")

    @agent.tool_plain
    def pick(n: int) -> str:
        """Pick a number."""
        raise call_deferred({"n": n}, "question")

    return agent


async def test_call_deferred_becomes_an_answerable_call(database_url: str, gated: bool) -> None:
    model = ScriptedModel().call("pick", n=2).text("Done.")
    async with Service.open(database_url, agents=[served(deferring(), gated)], model=model.model) as svc:
        view, decided = await turn(svc, answers={"pick": "picked 2 by hand"})
        [call_id] = call_ids(model.requests)
        _, text = told(model.requests, call_id)
    assert view.run.status == "completed"
    assert decided == (2 if gated else 1)
    assert "picked 2 by hand" in text


async def test_a_tool_call_judges_denial_reaches_the_model(database_url: str, gated: bool) -> None:
    """pydantic-ai-harness's `ToolCallJudge` blocking a call (an approved one too) tells the model
    its denial, not an unexpected failure."""
    judge_module = pytest.importorskip("pydantic_ai_harness.tool_call_judge")
    RAN.clear()
    judge = judge_module.ToolCallJudge(
        TestModel(custom_output_args={"response": "yes"}), question="Would this pick the wrong number?"
    )
    model = ScriptedModel().call("pick", n=2).text("Blocked.")
    async with Service.open(database_url, agents=[served(picker(judge), gated)], model=model.model) as svc:
        view, decided = await turn(svc)
        [call_id] = call_ids(model.requests)
        _, text = told(model.requests, call_id)
    assert (view.run.status, RAN, decided) == ("completed", [], 1 if gated else 0)
    assert "was blocked by a tool-call judge" in text and "UNEXPECTED" not in text


async def test_a_retried_call_is_a_failure_on_the_event_stream(database_url: str, gated: bool) -> None:
    model = ScriptedModel().call("pick", n=7).call("pick", n=2).text("Picked 2.")
    async with Service.open(database_url, agents=[served(picker(), gated)], model=model.model) as svc:
        view, _ = await turn(svc)
        first, second = call_ids(model.requests)
        results = {
            e.data["tool_call_id"]: e.data
            async for e in svc.events(view.run.conversation_id, follow=False)
            if e.type == "tool.result"
        }
    assert results[first]["ok"] is False
    assert "7 is out of range, pick 1 to 3" in results[first]["error"]["message"]
    assert results[second]["ok"] is True


@pytest.mark.parametrize(
    ("recorded", "outcome_told", "text_told"),
    [
        (
            error_result("ModelRetry", "7 is out of range, pick 1 to 3", "RETRY"),
            "retried",
            "7 is out of range",
        ),
        (
            error_result("ToolFailed", "7 can never be picked", "TOOL_FAILED"),
            "failed",
            "7 can never be picked",
        ),
        (error_result("SkipToolExecution", "blocked by a judge", "SKIPPED"), "success", "blocked by a judge"),
    ],
    ids=["retry", "failed", "skipped"],
)
async def test_a_call_recorded_by_a_segment_that_died_is_told_its_outcome_again(
    database_url: str, gated: bool, recorded: dict[str, Any], outcome_told: str, text_told: str
) -> None:
    """The row a segment that died wrote for the call (its outcome recorded, the model's next response
    not): the next segment tells the model the same, in the same form, and the tool does not run."""
    RAN.clear()
    model = ScriptedModel().call("pick", n=7).text("Told.")
    async with Service.open(database_url, agents=[served(picker(), gated)], model=model.model) as svc:
        conversation = await svc.start_conversation("picker")
        run = await svc.send(conversation.id, "pick one")
        call_id = f"{model._prefix}_0_0"  # the id ScriptedModel gives its first call
        now = datetime.now(UTC)
        metadata = ToolCallMetadata("pick", "picker", 1.0, False, recorded["error"]["class"], None, now, now)
        async with svc.container.uow() as uow:
            await uow.tool_calls.record(
                ToolCallRecord(
                    conversation.id, run.id, call_id, metadata, recorded, recorded["error"]["code"]
                )
            )
            await uow.commit()
        for _ in range(3):
            await svc.run_until_idle()
            for call in await svc.pending(conversation_id=conversation.id):
                await svc.resolve(call.correlation_id, "approve")
        view = await settle(svc, run.id)
        outcome, text = told(model.requests, call_id)
    assert (view.run.status, RAN) == ("completed", [])
    assert outcome in (outcome_told, "RetryPromptPart") and text_told in text

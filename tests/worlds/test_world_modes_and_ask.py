"""Customer mode sees read-only tools; the ops agent asks a World Agent in process, traced and audited."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from sursis.domain.access import Role
from tests.api.test_observability import traced_app
from tests.conftest import KeyMaker, bearer, call, script
from tests.worlds.flow import (
    CASES,
    CITATIONS,
    PREDICATE,
    RULE_TEXT,
    candidate_until_request,
    create_world,
    open_session,
    record_history,
    results_of,
    say,
    wait_run,
)

READ_ONLY = ["explain_decision", "get_rule", "list_rules"]


class ToolListRecorder:
    """A model that lists the world's rules once, then answers, recording the tools it was given."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self.stream, model_name="recorder")

    async def stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.seen.append(sorted(t.name for t in info.function_tools))
        returned = [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returned and "list_rules" in self.seen[-1]:
            yield {0: DeltaToolCall(name="list_rules", json_args="{}", tool_call_id="call_rules")}
        else:
            yield json.dumps([p.content for p in returned], default=str)


async def test_customer_mode_is_shown_only_the_read_tools(seeded: str, keys: KeyMaker) -> None:
    recorder = ToolListRecorder()
    async with traced_app(seeded, model=recorder.model()) as app:
        http = app.client
        world_id = await create_world(http)
        operator_session = await open_session(http, world_id)
        await say(http, operator_session["conversation"]["id"], "hello")
        operator_tools = recorder.seen[-1]

        user = bearer(await keys.make(Role.USER))
        opened = await http.post(f"/v1/worlds/{world_id}/conversations", headers=user)
        assert opened.status_code == 201 and opened.json()["mode"] == "customer"
        cid = opened.json()["conversation"]["id"]
        response = await http.post(
            f"/v1/conversations/{cid}/messages",
            params={"wait": 20},
            json={"content": "which rules apply?"},
            headers=user,
        )
        run = response.json()
        assert run["status"] == "completed", run

        customer_tools = recorder.seen[-2:]
        into_operator_session = await http.post(
            f"/v1/conversations/{operator_session['conversation']['id']}/messages",
            params={"wait": 20},
            json={"content": "and now?"},
            headers=user,
        )
        assert into_operator_session.json()["status"] == "completed"
        posted_by_user = recorder.seen[-1]

    assert posted_by_user == READ_ONLY, "a user posting into an operator session gets customer tools"
    assert customer_tools == [READ_ONLY, READ_ONLY]
    assert json.loads(run["output"]) == [{"ok": True, "result": []}]
    assert set(READ_ONLY) < set(operator_tools)
    writing = {
        "propose_rule_candidate",
        "generate_predicate",
        "request_enshrinement",
        "remember",
        "run_readiness_gate",
    }
    assert writing <= set(operator_tools)
    assert not writing & set(recorder.seen[-1])


async def test_a_conversation_without_a_world_is_shown_no_world_tools(seeded: str) -> None:
    recorder = ToolListRecorder()
    async with traced_app(seeded, model=recorder.model()) as app:
        created = await app.client.post("/v1/conversations", json={"agent": "world"})
        run = await say(app.client, created.json()["id"], "hello")
    assert run["status"] == "completed"
    assert recorder.seen == [[]]


async def test_ops_asks_the_world_agent_which_answers_from_the_rules_in_a_nested_span(seeded: str) -> None:
    async with traced_app(seeded) as app:
        http = app.client
        world_id = await create_world(http)
        await record_history(http, world_id)
        rule_id, request = await candidate_until_request(http, world_id)
        [pending] = request["pending"]
        await http.post(f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"})
        assert (await wait_run(http, request["id"]))["status"] == "completed"

        ops = (await http.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
        question = "which rules are enshrined?\nSCRIPT: " + json.dumps(
            [[call("list_rules", state="enshrined")]]
        )
        run = await say(http, ops, script([call("ask_world_agent", world_id=world_id, question=question)]))
        assert run["status"] == "completed", run
        [asked] = results_of(run["output"])
        audit = (await http.get("/v1/audit", params={"conversation_id": ops})).json()["items"]

    assert asked["ok"] is True
    answer = asked["result"]["answer"]
    [listed] = results_of(answer)
    assert listed["result"] == [
        {"rule_id": rule_id, "version": 1, "state": "enshrined", "text": RULE_TEXT, "reason": None}
    ]

    tool_spans = [s for s in app.spans() if (s.attributes or {}).get("gen_ai.tool.name") == "ask_world_agent"]
    [tool_span] = tool_spans
    nested = [s for s in app.spans("run.segment") if (s.attributes or {}).get("sursis.agent") == "world"]
    assert tool_span.context is not None
    children = [s for s in nested if s.parent is not None and s.parent.span_id == tool_span.context.span_id]
    assert len(children) == 1, "the World Agent's run is a child span of the calling tool's span"
    assert children[0].context is not None and tool_span.context.trace_id == children[0].context.trace_id

    [entry] = [a for a in audit if a["action"] == "world.asked"]
    world_conversation = entry["details"]["world_conversation_id"]
    assert entry["details"]["caller_conversation_id"] == ops
    async with traced_app(seeded) as again:
        mirrored = (
            await again.client.get("/v1/audit", params={"conversation_id": world_conversation})
        ).json()
    assert [
        a["details"]["caller_conversation_id"] for a in mirrored["items"] if a["action"] == "world.asked"
    ] == [ops]


async def test_an_approval_inside_ask_is_left_to_an_operator(seeded: str) -> None:
    async with traced_app(seeded) as app:
        http = app.client
        world_id = await create_world(http)
        cid = (await open_session(http, world_id))["conversation"]["id"]
        out = await say(http, cid, script([call("propose_rule_candidate", text=RULE_TEXT, evidence={})]))
        rule_id = results_of(out["output"])[0]["result"]["rule_id"]
        ready = script(
            [call("generate_predicate", rule_id=rule_id, code=PREDICATE)],
            [call("propose_inline_tests", rule_id=rule_id, cases=CASES)],
            [call("run_readiness_gate", rule_id=rule_id)],
            [call("draft_provenance", rule_id=rule_id, citations=CITATIONS)],
        )
        assert (await say(http, cid, ready))["status"] == "completed"

        ops = (await http.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
        question = "enshrine it\nSCRIPT: " + json.dumps([[call("request_enshrinement", rule_id=rule_id)]])
        run = await say(http, ops, script([call("ask_world_agent", world_id=world_id, question=question)]))
        awaiting = (await http.get("/v1/pending", params={"status": "awaiting"})).json()["items"]

    assert run["status"] == "completed", "the caller is not suspended"
    [asked] = results_of(run["output"])
    assert asked["result"]["answer"].startswith("An operator must decide")
    [left] = awaiting
    assert left["tool_name"] == "request_enshrinement" and left["agent"] == "world"
    assert left["correlation_id"] in asked["result"]["answer"]
    assert left["conversation_id"] != ops


async def test_ask_refuses_a_world_of_another_workspace(seeded: str, keys: KeyMaker) -> None:
    async with traced_app(seeded) as app:
        http = app.client
        made = await http.post("/v1/worlds", json={"domain": "far", "title": "x", "workspace": "elsewhere"})
        world_id = made.json()["id"]
        ops = (await http.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
        run = await say(http, ops, script([call("ask_world_agent", world_id=world_id, question="hello")]))
    [asked] = results_of(run["output"])
    assert asked["ok"] is False
    assert asked["error"]["class"] == "ToolUserError" and "no world" in asked["error"]["message"]

"""The readiness gate runs predicates in a limited child process: hostile code fails the gate only."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.infra.worlds.sandbox import SandboxLimits, run_in_sandbox
from tests.conftest import call, script
from tests.worlds.flow import CASES, RULE_TEXT, create_world, open_session, results_of, say, tool_calls

LIMITS = SandboxLimits(cpu_seconds=1, memory_bytes=256 * 1024 * 1024, wall_seconds=5)
ONE_CASE = [{"context": {}, "expected": True}]


async def test_a_loop_is_killed_by_the_cpu_limit() -> None:
    # A wall timeout far above the CPU limit, so that only the CPU limit can stop it.
    limits = SandboxLimits(cpu_seconds=1, memory_bytes=256 * 1024 * 1024, wall_seconds=60)
    outcome = await run_in_sandbox(
        "def predicate(ctx):\n    while True:\n        pass\n", "predicate", ONE_CASE, limits
    )
    assert outcome.passed is False
    assert outcome.error is not None and "CPU time" in outcome.error


async def test_a_long_run_is_killed_at_the_wall_timeout() -> None:
    # The CPU limit is above the wall timeout here, so the parent's clock stops the child first.
    limits = SandboxLimits(cpu_seconds=5, wall_seconds=0.5)
    outcome = await run_in_sandbox(
        "def predicate(ctx):\n    return [0 for _ in range(10**9)] == []\n", "predicate", ONE_CASE, limits
    )
    assert outcome.passed is False
    assert outcome.error is not None and "longer than 0.5 s" in outcome.error


async def test_ten_gigabytes_fail_the_case_not_the_process() -> None:
    code = "def predicate(ctx):\n    block = [0] * 10000000000\n    return len(block) > 0\n"
    outcome = await run_in_sandbox(code, "predicate", ONE_CASE, LIMITS)
    assert outcome.passed is False
    assert outcome.cases[0]["error"].startswith("MemoryError")


async def test_import_is_not_a_builtin_in_the_child() -> None:
    outcome = await run_in_sandbox(
        "def predicate(ctx):\n    return __import__('os') is None\n", "predicate", ONE_CASE, LIMITS
    )
    assert outcome.passed is False
    assert "NameError" in outcome.cases[0]["error"]


async def test_a_good_predicate_passes_and_a_wrong_answer_fails() -> None:
    code = "def predicate(ctx):\n    return ctx.get('x', 0) > 1\n"
    cases = [{"context": {"x": 2}, "expected": True}, {"context": {"x": 0}, "expected": True}]
    outcome = await run_in_sandbox(code, "predicate", cases, LIMITS)
    assert outcome.passed is False
    assert [c["passed"] for c in outcome.cases] == [True, False]
    assert (await run_in_sandbox(code, "predicate", cases[:1], LIMITS)).passed is True


async def test_hostile_predicates_are_refused_or_fail_and_the_worker_keeps_serving(
    client: AsyncTestClient[Any],
) -> None:
    world_id = await create_world(client)
    cid = (await open_session(client, world_id))["conversation"]["id"]
    out = await say(client, cid, script([call("propose_rule_candidate", text=RULE_TEXT, evidence={})]))
    rule_id = results_of(out["output"])[0]["result"]["rule_id"]
    looping = "def predicate(ctx):\n    for i in range(1000000000000):\n        pass\n    return True\n"
    hoarding = "def predicate(ctx):\n    block = [0] * 10000000000\n    return len(block) > 0\n"
    run = await say(
        client,
        cid,
        script(
            [
                call(
                    "generate_predicate",
                    rule_id=rule_id,
                    code="def predicate(ctx):\n    while True:\n        pass\n",
                )
            ],
            [
                call(
                    "generate_predicate",
                    rule_id=rule_id,
                    code="def predicate(ctx):\n    return __import__('os')\n",
                )
            ],
            [call("propose_inline_tests", rule_id=rule_id, cases=CASES)],
            [call("generate_predicate", rule_id=rule_id, code=looping)],
            [call("run_readiness_gate", rule_id=rule_id)],
            [call("generate_predicate", rule_id=rule_id, code=hoarding)],
            [call("run_readiness_gate", rule_id=rule_id)],
        ),
        wait=60,
    )
    assert run["status"] == "completed", run
    calls = await tool_calls(client, run["id"])
    refused_while, refused_import = calls[0]["result"]["error"], calls[1]["result"]["error"]
    assert "node While" in refused_while["message"] and "line 2" in refused_while["message"]
    assert "node Name" in refused_import["message"] and "__import__" in refused_import["message"]
    loop_gate, memory_gate = calls[4]["result"]["result"], calls[6]["result"]["result"]
    # Killed by its CPU limit, or by the wall timeout first on a machine too busy to give it 2 s of CPU.
    assert loop_gate["passed"] is False
    assert "CPU time" in loop_gate["cases"][0]["error"] or "longer than" in loop_gate["cases"][0]["error"]
    assert memory_gate["passed"] is False
    assert all(c["error"].startswith("MemoryError") for c in memory_gate["cases"])

    # Same process, same worker: the next message is served.
    again = await say(client, cid, script([call("list_rules")]))
    assert again["status"] == "completed"
    assert results_of(again["output"])[0]["ok"] is True

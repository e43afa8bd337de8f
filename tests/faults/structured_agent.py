"""An adopted agent with a structured output, on a `FunctionModel` (no stream function), for the
fault tests (`SURSIS_AGENTS=tests.faults.structured_agent:AGENTS`).

Its one response holds the output (`final_result`) and a call of `record_note`, which runs too
(`end_strategy="exhaustive"`): the response is stored before the tool runs, so a worker killed at
`tool_started:record_note` leaves the structured output stored. Every model request is counted in
`$STRUCTURED_DIR/requests.log`; a second request would answer a different verdict.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


class Verdict(BaseModel):
    approved: bool
    note: str


def _directory() -> Path:
    return Path(os.environ["STRUCTURED_DIR"])


def judge_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    with (_directory() / "requests.log").open("a") as log:
        log.write("request\n")
    asked_before = sum(1 for m in messages if isinstance(m, ModelResponse))
    verdict = {"approved": asked_before == 0, "note": "first answer" if asked_before == 0 else "asked again"}
    return ModelResponse(
        parts=[ToolCallPart("final_result", verdict), ToolCallPart("record_note", {"note": verdict["note"]})]
    )


judge = Agent(FunctionModel(judge_model), name="judge", output_type=Verdict, end_strategy="exhaustive")


@judge.tool_plain
def record_note(note: str) -> str:
    """Keep a note of the verdict."""
    with (_directory() / "notes.log").open("a") as notes:
        notes.write(note + "\n")
    return "noted"


AGENTS = [judge]

"""Scripts for the customer agent: the supervisor's steps, each delegation carrying the specialist's
own `SCRIPT:` line in its task (the specialist's prompt), so every agent's turns are scripted."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import call


def delegation(specialist: str, *steps: Any, task: str = "look into it") -> dict[str, Any]:
    """A `delegate` call whose specialist follows `steps`."""
    return call("delegate", specialist=specialist, task=f"{task}\nSCRIPT: {json.dumps(list(steps))}")


def results(output: str) -> list[Any]:
    """The tool results a scripted answer quotes (`RESULTS: [...]`)."""
    assert output.startswith("RESULTS: "), output
    return list(json.loads(output.removeprefix("RESULTS: ")))


def findings(result: dict[str, Any]) -> tuple[str, list[Any]]:
    """A `delegate` result: the specialist's name and the tool results its answer quotes."""
    assert result["ok"] is True, result
    return result["result"]["specialist"], results(result["result"]["findings"])

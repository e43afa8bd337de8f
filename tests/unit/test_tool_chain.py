"""The tool path is one chain: each link wraps the next, in the order a call passes them, and the
last link wraps nothing."""

from __future__ import annotations

from sursis.infra.agents.observed import tool_path
from sursis.infra.agents.tool_chain import ToolLink, WrapperLink


def links(first: ToolLink) -> list[ToolLink]:
    found = [first]
    while isinstance(found[-1], WrapperLink):
        found.append(found[-1].next)
    return found


def test_a_call_passes_the_links_in_order_each_once() -> None:
    chain = links(tool_path())
    assert [type(link).__name__ for link in chain] == [
        "PolicyGate",
        "Suspension",
        "Dispatched",
        "Execution",
        "OutcomeRecord",
        "CallTelemetry",
    ]
    assert len({type(link).__module__ for link in chain}) == len(chain), "one link a module"

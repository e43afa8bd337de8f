"""Agent sources the loading tests name as `tests.agents.sample_agents:NAME`."""

from __future__ import annotations

from pydantic_ai import Agent

from sursis import AgentDefinition

helpdesk = Agent(name="helpdesk", instructions="Answer questions.")
notes = AgentDefinition("notes", "Take notes.", ())
AGENTS = [helpdesk, notes]


def make_agents() -> list[object]:
    return [Agent(name="made")]


NOT_AN_AGENT = 42

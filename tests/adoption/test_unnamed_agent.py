"""An agent without a `name` (all of pydantic-ai's examples) is served under its variable's name, as
pydantic-ai names it: `--agents module:var` serves `var`; a list of unnamed agents names each after
the module variable holding it. Two agents of one name, or an agent nothing names, are one line each,
naming where they came from and `adopt(agent, name=...)` as the fix (never an edit of the agent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sursis import Service
from sursis.app.agent_loading import AgentLoadError, select_agents
from sursis.app.cli import run
from sursis.app.settings import Settings
from tests.conftest import make_settings

UPSTREAM = """\
from pydantic_ai import Agent

{var} = Agent(instructions="Answer about {what}.")


@{var}.tool_plain(requires_approval=True)
def act(item: str) -> str:
    \"\"\"Do something to an item.\"\"\"
    return f"done: {{item}}"
"""


@pytest.fixture
def examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Modules written as pydantic-ai's examples are: `agent = Agent(...)`, no `name`."""
    (tmp_path / "bank_example.py").write_text(UPSTREAM.format(var="support_agent", what="banking"))
    (tmp_path / "weather_example.py").write_text(UPSTREAM.format(var="agent", what="weather"))
    (tmp_path / "flight_example.py").write_text(UPSTREAM.format(var="agent", what="flights"))
    (tmp_path / "listed_example.py").write_text(
        UPSTREAM.format(var="search", what="search")
        + "\nfrom pydantic_ai import Agent as _A\nbooking = _A()\nAGENTS = [search, booking]\n"
        + "\ndef made():\n    return _A()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_an_unnamed_agent_is_named_after_its_variable(examples: Path) -> None:
    [support] = select_agents(["bank_example:support_agent"]).definitions
    assert support.name == "support_agent"
    assert [t.spec.name for t in support.tools] == ["act"]
    assert [d.name for d in select_agents(["listed_example:AGENTS"]).definitions] == ["search", "booking"]


def test_two_unnamed_agents_in_variables_of_one_name_are_one_line(examples: Path) -> None:
    with pytest.raises(AgentLoadError) as caught:
        select_agents(["weather_example:agent", "flight_example:agent"])
    assert str(caught.value) == (
        "agents: two agents are named 'agent' (weather_example:agent and flight_example:agent): "
        "serve one under another name, adopt(agent, name='...')"
    )


def test_an_agent_nothing_names_is_one_line_naming_the_fix(examples: Path) -> None:
    with pytest.raises(AgentLoadError) as caught:
        select_agents(["listed_example:made"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("agents listed_example:made: ToolDeclarationError: an adopted pydantic-ai")
    assert "adopt(agent, name='...')" in message and "Agent(" not in message


def test_the_command_refuses_a_collision_in_one_line(
    examples: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SURSIS_AGENTS", "")  # the command passes --agents on through it; restored after
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    argv = ["serve", "--agents", "weather_example:agent", "--agents", "flight_example:agent"]
    assert run(argv, settings) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "two agents are named 'agent'" in err


async def test_served_under_its_variables_name_through_an_approval_turn(
    database_url: str, examples: Path
) -> None:
    settings = make_settings(database_url, agents=["bank_example:support_agent"])
    service = Service.from_settings(settings)
    await service.start(run_worker=False)
    try:
        assert [a.name for a in service.container.catalog.describe_agents()] == ["support_agent"]
        conversation = await service.start_conversation("support_agent")
        script = 'SCRIPT: [[{"tool": "act", "args": {"item": "card"}}], "ok"]'
        run_ = await service.send(conversation.id, script)
        await service.run_until_idle()
        awaiting = await service.pending(conversation_id=conversation.id)
        assert len(awaiting) == 1, (await service.get_run(run_.id)).run
        [pending] = awaiting
        assert (pending.agent, pending.tool_name) == ("support_agent", "act")
        await service.resolve(pending.correlation_id, "approve")
        await service.run_until_idle()
        view = await service.get_run(run_.id)
        assert view.run.status == "completed", view.run.error
    finally:
        await service.close()


def test_two_unnamed_agents_of_one_list_are_each_named_by_their_index(examples: Path, tmp_path: Path) -> None:
    (tmp_path / "pair_example.py").write_text(
        "from pydantic_ai import Agent\n\nAGENTS = [Agent(name='named'), Agent(), Agent()]\n"
    )
    with pytest.raises(AgentLoadError) as caught:
        select_agents(["pair_example:AGENTS"])
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "agents pair_example:AGENTS[1] and pair_example:AGENTS[2]: ToolDeclarationError: an adopted"
    )
    assert "adopt(agent, name='...')" in message

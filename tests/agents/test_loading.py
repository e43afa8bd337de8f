"""Which agents a process serves: built-in names, `module:NAME`, entry points, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from sursis.app.agent_loading import BUILT_IN, AgentLoadError, select_agents
from sursis.app.cli import run
from sursis.app.settings import Settings


def names(selection_names: list[str]) -> tuple[set[str], list[str]]:
    selection = select_agents(selection_names)
    return set(selection.built_in), [d.name for d in selection.definitions]


def test_nothing_named_serves_the_built_in_agents() -> None:
    assert names([]) == (set(BUILT_IN), [])


def test_a_list_a_callable_and_built_in_names_are_loaded() -> None:
    assert names(["tests.agents.sample_agents:AGENTS", "assistant"]) == ({"assistant"}, ["helpdesk", "notes"])
    assert names(["tests.agents.sample_agents:make_agents"]) == (set(), ["made"])
    adopted = select_agents(["tests.agents.sample_agents:helpdesk"]).definitions[0]
    assert adopted.adopted is not None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no_such_package.agents:AGENTS", "cannot import no_such_package.agents: ModuleNotFoundError"),
        ("tests.agents.sample_agents:MISSING", "has no 'MISSING'"),
        ("tests.agents.sample_agents:NOT_AN_AGENT", "int is not an agent definition"),
        ("nobody", "not a built-in agent, an entry point or module:NAME"),
        ("tests.agents.sample_agents:", "expected package.module:NAME"),
    ],
)
def test_what_cannot_be_loaded_is_one_line_naming_it(name: str, message: str) -> None:
    with pytest.raises(AgentLoadError, match=message) as caught:
        select_agents([name])
    assert "\n" not in str(caught.value)


def test_two_agents_of_one_name_are_refused() -> None:
    with pytest.raises(AgentLoadError, match="two agents are named 'helpdesk'"):
        select_agents(["tests.agents.sample_agents:helpdesk", "tests.agents.sample_agents:AGENTS"])


def test_an_installed_package_offers_agents_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "desk_agents-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: desk-agents\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[sursis.agents]\ndesk = tests.agents.sample_agents:AGENTS\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert names([]) == (set(BUILT_IN), ["helpdesk", "notes"])
    assert names(["desk", "ops"]) == ({"ops"}, ["helpdesk", "notes"])


def test_settings_read_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURSIS_AGENTS", "ops, my_pkg.agents:AGENTS")
    assert Settings().agents == ["ops", "my_pkg.agents:AGENTS"]


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_the_command_says_what_failed_in_one_line_and_exits_2(
    command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SURSIS_AGENTS", "")  # the command passes --agents on through it; restored after
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}")
    assert run([command, "--agents", "no_such_package.agents:AGENTS"], settings) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(
        "sursis: agents no_such_package.agents:AGENTS: cannot import no_such_package.agents"
    )


def test_a_users_agent_may_not_take_a_served_built_in_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "clashing.py").write_text("from pydantic_ai import Agent\nAGENTS = [Agent(name='ops')]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AgentLoadError, match="ops is already the name of a built-in agent"):
        select_agents(["clashing:AGENTS", "ops"])
    assert names(["clashing:AGENTS"]) == (set(), ["ops"])

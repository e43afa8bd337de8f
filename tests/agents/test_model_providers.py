"""A model whose provider's client library is not installed stops `serve` and `worker` before the
banner, in one line naming the extra that installs it (exit 2); the banner names the model each
served agent actually uses."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_ai import Agent

from sursis.app.agent_loading import select_agents, served_models
from sursis.app.model_check import models_banner
from sursis.infra.agents.models import missing_provider_package

AGENTS = """
from pydantic_ai import Agent
desk = Agent(name="desk", model="groq:llama-3.3-70b-versatile")
"""


def _sursis(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    clean.update({"SURSIS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", **env})
    return subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", *args],
        cwd=tmp_path,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_agents_model_without_its_library_stops_the_start_in_one_line(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "groq_agents.py").write_text(AGENTS)
    done = _sursis(tmp_path, command, "--agents", "groq_agents:desk")
    assert done.returncode == 2
    # pydantic-ai builds an `Agent`'s model when the agent is made, so the module cannot be imported.
    assert done.stderr.strip().splitlines() == [
        "sursis: agents groq_agents:desk: cannot import groq_agents: its model needs a client library "
        "that is not installed: pip install \"pydantic-ai-slim[groq]\" or pip install 'sursis[groq]' "
        "(or sursis[all-models]; Docker: --build-arg SURSIS_EXTRAS=groq)"
    ]
    assert "Sursis API on" not in done.stdout


def test_a_tool_without_its_library_repeats_pydantic_ais_install_line(tmp_path: Path) -> None:
    """A library pydantic-ai asks for that no extra of sursis installs (`ddgs`, for its DuckDuckGo
    tool): pydantic-ai's own line, no extra of sursis made up."""
    if importlib.util.find_spec("ddgs") is not None:
        pytest.skip("ddgs is installed here")
    (tmp_path / "search_agents.py").write_text(
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.common_tools.duckduckgo import duckduckgo_search_tool\n"
        "agent = Agent(name='search', tools=[duckduckgo_search_tool()])\n"
    )
    done = _sursis(tmp_path, "serve", "--agents", "search_agents:agent")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "sursis: agents search_agents:agent: cannot import search_agents: a library it needs is not "
        'installed: pip install "pydantic-ai-slim[duckduckgo]"'
    ]
    assert "sursis[" not in done.stderr


def test_the_services_model_without_its_library_stops_the_start_too(tmp_path: Path) -> None:
    done = _sursis(tmp_path, "serve", "--agents", "assistant", SURSIS_MODEL="groq:llama-3.3-70b-versatile")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    # The line docs/agents.md shows.
    assert f"```\n{line}\n```" in (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert "Sursis API on" not in done.stdout
    done = _sursis(tmp_path, "worker", "--agents", "assistant", SURSIS_MODEL="mistral:mistral-large-latest")
    assert done.returncode == 2
    assert "pip install 'sursis[mistral]'" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_installed_libraries_and_plain_names_pass() -> None:
    # `anthropic` is installed with the dev extra; `openai` with the service; others need nothing.
    for name in ("anthropic:claude-sonnet-4-0", "openai:gpt-4.1-mini", "scripted", "test"):
        assert missing_provider_package(name) is None, name


def test_the_banner_names_the_model_each_agent_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "not-used")
    own = Agent(name="own", model="anthropic:claude-sonnet-4-0")
    plain = Agent(name="plain")
    monkeypatch.setitem(sys.modules, "banner_agents", type(sys)("banner_agents"))
    sys.modules["banner_agents"].own = own  # type: ignore[attr-defined]
    sys.modules["banner_agents"].plain = plain  # type: ignore[attr-defined]
    selection = select_agents(["assistant", "banner_agents:own", "banner_agents:plain"])
    models = served_models("scripted", selection)
    assert models == {"assistant": "scripted", "own": "anthropic:claude-sonnet-4-0", "plain": "scripted"}
    assert models_banner(models) == (
        "models: assistant=scripted, own=anthropic:claude-sonnet-4-0, plain=scripted"
    )
    assert models_banner({"assistant": "scripted", "plain": "scripted"}) == "model: scripted"


def test_every_providers_extra_is_in_the_project_and_in_all_models() -> None:
    import tomllib

    from sursis.infra.agents.models import _PROVIDER_PACKAGES

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    [all_models] = extras["all-models"]
    for _, extra in _PROVIDER_PACKAGES.values():
        assert extras[extra] == [f"pydantic-ai-slim[{extra}]>=2.62,<3"], extra
        assert extra in all_models.partition("[")[2].partition("]")[0].split(","), extra


def test_a_service_model_without_its_api_key_stops_the_start_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", "serve", "--agents", "assistant"],
        cwd=tmp_path,
        env={
            **{k: v for k, v in env.items() if not k.startswith("SURSIS_")},
            "SURSIS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'x.db'}",
            "SURSIS_MODEL": "anthropic:claude-sonnet-4-0",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("sursis: model 'anthropic:claude-sonnet-4-0': ") and "ANTHROPIC_API_KEY" in line
    assert "Sursis API on" not in done.stdout

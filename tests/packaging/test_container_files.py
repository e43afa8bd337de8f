"""The Dockerfile and compose.yaml, checked without a Docker daemon: their structure, and that every
command they give is one the `sursis` CLI accepts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from sursis.app.cli import parser

REPO = Path(__file__).resolve().parents[2]


def _stages() -> list[tuple[str, list[tuple[str, str]]]]:
    """(stage name, [(instruction, arguments)]) of each stage of the Dockerfile."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    stages: list[tuple[str, list[tuple[str, str]]]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, arguments = line.strip().partition(" ")
        if instruction.upper() == "FROM":
            stages.append((arguments.split(" AS ")[-1].strip(), []))
        elif stages:
            stages[-1][1].append((instruction.upper(), arguments.strip()))
    return stages


def test_the_image_is_built_in_stages_and_runs_the_wheel_as_a_non_root_user() -> None:
    stages = _stages()
    assert [name for name, _ in stages] == ["build", "runtime"]
    (_, build), (_, runtime) = stages

    def arguments(steps: list[tuple[str, str]], instruction: str) -> list[str]:
        return [a for i, a in steps if i == instruction]

    assert any("pip wheel --no-deps --wheel-dir /wheels ." in run for run in arguments(build, "RUN"))
    for copied in ("pyproject.toml", "README.md", "sursis"):
        assert (REPO / copied).exists()
    ignored = (REPO / ".dockerignore").read_text().split()
    assert not {"sursis", "pyproject.toml", "README.md"} & set(ignored)
    assert arguments(runtime, "COPY") == ["--from=build /wheels /tmp/wheels"]
    assert any(
        'pip install --no-index --find-links /tmp/wheels "sursis${SURSIS_EXTRAS:+[$SURSIS_EXTRAS]}"' in run
        for run in arguments(runtime, "RUN")
    )
    # The build argument for other model providers reaches both stages.
    assert ("ARG", "SURSIS_EXTRAS") in build and ("ARG", "SURSIS_EXTRAS") in runtime
    [user] = arguments(runtime, "USER")
    assert user not in ("root", "0")
    instructions = [i for i, _ in runtime]
    assert instructions.index("USER") < instructions.index("ENTRYPOINT")
    assert arguments(runtime, "ENTRYPOINT") == ['["sursis"]']
    [command] = arguments(runtime, "CMD")
    parser().parse_args(json.loads(command))


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((REPO / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_compose_runs_postgresql_a_one_shot_migration_one_api_and_two_workers() -> None:
    services = _compose()["services"]
    db = services["db"]
    assert db["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")
    [volume] = db["volumes"]
    assert volume.split(":")[0] in _compose()["volumes"]

    migrate, api, worker = services["migrate"], services["api"], services["worker"]
    assert migrate["command"] == ["migrate"] and migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    for service in (api, worker):
        assert service["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
        # Every long-running service says whether it is healthy, with a command the image has.
        healthcheck = service["healthcheck"]["test"]
        assert healthcheck[:2] == ["CMD", "sursis"]
        parser().parse_args(healthcheck[2:])
    # One published port: a port range with replicas fails to bind, and --scale api cannot work.
    assert "deploy" not in api
    assert api["ports"] == ["127.0.0.1:${SURSIS_PORT:-8000}:8000"]
    assert worker["deploy"]["replicas"] == 2
    assert "--no-worker" in api["command"] and worker["command"][0] == "worker"
    for service in (migrate, api, worker):
        command = [re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", part) for part in service["command"]]
        parser().parse_args(command)
        assert service["build"]["context"] == "." and service["image"] == "sursis:local"


def test_compose_has_no_default_password_and_passes_the_model_through() -> None:
    compose = (REPO / "compose.yaml").read_text()
    assert "POSTGRES_PASSWORD:-" not in compose
    assert compose.count("${POSTGRES_PASSWORD:?") == 2
    environment = _compose()["services"]["api"]["environment"]
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SURSIS_MODEL"):
        assert name in environment
    example = (REPO / "deploy" / "compose.env.example").read_text()
    assert "POSTGRES_PASSWORD=\n" in example


def test_every_process_uses_the_compose_database() -> None:
    compose = _compose()
    db = compose["services"]["db"]["environment"]
    for name in ("migrate", "api", "worker"):
        raw = compose["services"][name]["environment"]["SURSIS_DATABASE_URL"]
        url = sa.make_url(re.sub(r"\$\{POSTGRES_PASSWORD:\?[^}]*\}", "pw", raw))
        assert (url.drivername, url.host, url.port) == ("postgresql+asyncpg", "db", 5432)
        assert (url.username, url.database) == (db["POSTGRES_USER"], db["POSTGRES_DB"])
        assert url.password == re.sub(r"\$\{POSTGRES_PASSWORD:\?[^}]*\}", "pw", db["POSTGRES_PASSWORD"])


def _compose_command() -> list[str] | None:
    """`docker compose` (v2) or `docker-compose` (v1, Debian's package), whichever is installed."""
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0
    ):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.mark.skipif(_compose_command() is None, reason="no compose binary (apt-get install docker-compose)")
def test_compose_validates_and_refuses_to_start_without_a_password(tmp_path: Path) -> None:
    command = _compose_command()
    assert command is not None
    text = (REPO / "compose.yaml").read_text()
    if command == ["docker-compose"]:
        text = text.replace("\nname: sursis\n", "\n")  # v1 predates the top-level `name`
    (tmp_path / "compose.yaml").write_text(text)
    key = "SURSIS_ENCRYPTION_KEYS=k1:SLQjGhsKHkMaR6Isfvbla2J8IC5I8TqXh0WGTxup5hk=\n"
    (tmp_path / ".env").write_text(key)  # the keyring given, the password not
    refused = subprocess.run([*command, "config", "-q"], cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode != 0
    assert "set POSTGRES_PASSWORD in .env" in refused.stderr
    (tmp_path / ".env").write_text("POSTGRES_PASSWORD=pw-from-env-file\nSURSIS_PORT=18123\n" + key)
    resolved = subprocess.run([*command, "config"], cwd=tmp_path, capture_output=True, text=True)
    assert resolved.returncode == 0, resolved.stderr
    config = yaml.safe_load(resolved.stdout)
    api = config["services"]["api"]
    assert "pw-from-env-file@db" in api["environment"]["SURSIS_DATABASE_URL"]
    [port] = api["ports"]
    published = str(port["published"]) if isinstance(port, dict) else port
    assert published in ("127.0.0.1:18123:8000/tcp", "18123"), published


def test_every_compose_process_encrypts_with_the_same_keyring() -> None:
    compose = _compose()
    keyrings = {
        compose["services"][name]["environment"]["SURSIS_ENCRYPTION_KEYS"]
        for name in ("migrate", "api", "worker")
    }
    [keyring] = keyrings
    assert keyring.startswith("${SURSIS_ENCRYPTION_KEYS:?"), keyring  # from .env, no silent default


def test_compose_passes_dot_env_and_the_extras_build_argument() -> None:
    sursis = _compose()["services"]["api"]
    assert sursis["env_file"] == [".env"]
    assert sursis["build"]["args"] == {"SURSIS_EXTRAS": "${SURSIS_EXTRAS:-}"}
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dockerfile = (REPO / "Dockerfile").read_text()
    for extra in ("anthropic", "google", "groq", "mistral", "bedrock", "all-models"):
        assert extra in extras and f"`{extra}`" in dockerfile, extra


def test_the_readmes_docker_steps_name_every_required_setting() -> None:
    """What compose refuses to start without, the README's Docker steps say to set."""
    readme = (REPO / "README.md").read_text()
    steps = readme[readme.index("cp deploy/compose.env.example .env") :].split("\n", 1)[0]
    required = set(re.findall(r"\$\{(\w+):\?", (REPO / "compose.yaml").read_text()))
    assert required == {"POSTGRES_PASSWORD", "SURSIS_ENCRYPTION_KEYS"}
    for name in required:
        assert name in steps, name
        assert f"\n{name}=" in (REPO / "deploy" / "compose.env.example").read_text(), name

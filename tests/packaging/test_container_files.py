"""The Dockerfile and compose.yaml, checked without a Docker daemon: their structure, and that every
command they give is one the `sursis` CLI accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

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
        "pip install --no-index --find-links /tmp/wheels sursis" in run for run in arguments(runtime, "RUN")
    )
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


def test_compose_runs_postgresql_a_one_shot_migration_two_apis_and_two_workers() -> None:
    services = _compose()["services"]
    db = services["db"]
    assert db["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL")
    [volume] = db["volumes"]
    assert volume.split(":")[0] in _compose()["volumes"]

    migrate, api, worker = services["migrate"], services["api"], services["worker"]
    assert migrate["command"] == ["migrate"] and migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    for service in (api, worker):
        assert service["deploy"]["replicas"] == 2
        assert service["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert "--no-worker" in api["command"] and worker["command"][0] == "worker"
    for service in (migrate, api, worker):
        parser().parse_args(service["command"])
        assert service["build"] == "." and service["image"] == "sursis:local"


def test_every_process_uses_the_compose_database() -> None:
    compose = _compose()
    db = compose["services"]["db"]["environment"]
    for name in ("migrate", "api", "worker"):
        raw = compose["services"][name]["environment"]["SURSIS_DATABASE_URL"]
        url = sa.make_url(re.sub(r"\$\{POSTGRES_PASSWORD:-([^}]*)\}", r"\1", raw))
        assert (url.drivername, url.host, url.port) == ("postgresql+asyncpg", "db", 5432)
        assert (url.username, url.database) == (db["POSTGRES_USER"], db["POSTGRES_DB"])
        assert url.password == re.sub(r"\$\{POSTGRES_PASSWORD:-([^}]*)\}", r"\1", db["POSTGRES_PASSWORD"])


def test_every_compose_process_encrypts_with_the_same_keyring() -> None:
    from sursis.infra.encryption import LocalKeyring

    compose = _compose()
    keyrings = set()
    for name in ("migrate", "api", "worker"):
        raw = compose["services"][name]["environment"]["SURSIS_ENCRYPTION_KEYS"]
        keyrings.add(re.sub(r"\$\{SURSIS_ENCRYPTION_KEYS:-([^}]*)\}", r"\1", raw))
    [keyring] = keyrings
    assert LocalKeyring.parse(keyring).active_key_id == "compose-demo"

"""The example project's image and compose override, checked without a Docker daemon."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "support-desk"


def test_the_override_builds_every_sursis_service_from_the_examples_image() -> None:
    base = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    override = yaml.safe_load((EXAMPLE / "compose.override.yaml").read_text())["services"]
    assert set(override) == {name for name, s in base.items() if s.get("image") == "sursis:local"}
    for service in override.values():
        assert (REPO / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
        assert service["image"] == "sursis-support-desk:local"


def test_the_examples_image_installs_its_wheel_on_the_services_image_as_a_non_root_user() -> None:
    lines = [line.strip() for line in (EXAMPLE / "Dockerfile").read_text().splitlines()]
    steps = [line for line in lines if line and not line.startswith("#")]
    assert "FROM ${BASE_IMAGE}" in steps
    assert "COPY examples/support-desk /src/support-desk" in steps
    assert any(s.startswith("RUN pip install --no-deps /tmp/wheels/support_desk-") for s in steps)
    assert [s for s in steps if s.startswith("USER")][-1] == "USER sursis"
    ignored = (REPO / ".dockerignore").read_text().split()
    assert "examples" not in ignored

"""Building the wheel and installing it, with a user's packages, into a fresh venv outside the
checkout: shared by the packaging tests and the adoption harness (`tests/adoption/harness.py`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def build_wheel(dist: Path) -> Path:
    """The project's wheel, built into `dist`."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    [built] = dist.glob("sursis-*.whl")
    return built


def fresh_venv(root: Path, *installs: Sequence[str], uv: bool = False) -> Path:
    """A new venv at `root`; each of `installs` is one `pip install` of its targets (paths or
    requirements, the local pip cache and configured indexes only). Returns its `bin` directory.

    With `uv`, the venv is made and filled by uv (the `dev` extra's, beside this interpreter), with
    the constraints `PIP_CONSTRAINT` names: the same packages in a tenth of pip's time, for venvs
    whose installer is not what a test is about (the adoption harness). Without uv there, pip."""
    installer = Path(sys.executable).parent / "uv"
    if uv and installer.exists():
        return _uv_venv(installer, root, installs)
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    for targets in installs:
        done = subprocess.run(
            [str(root / "bin" / "pip"), "install", "--quiet", "--no-compile", *targets],
            capture_output=True,
            text=True,
            cwd=root,
            env=clean_env(root / "bin"),
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return root / "bin"


def _uv_venv(uv: Path, root: Path, installs: Sequence[Sequence[str]]) -> Path:
    env = clean_env(root / "bin")
    made = subprocess.run(
        [str(uv), "venv", "--quiet", "--seed", "--python", sys.executable, str(root)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    constraints = [
        arg for path in os.environ.get("PIP_CONSTRAINT", "").split() for arg in ("--constraint", path)
    ]
    for targets in installs:
        done = subprocess.run(
            # The system's certificates: a registry behind a proxy of the machine's own authority.
            [
                *(str(uv), "pip", "install", "--quiet", "--system-certs"),
                *("--python", str(root / "bin" / "python")),
                *constraints,
                *targets,
            ],
            capture_output=True,
            text=True,
            cwd=root,
            env=env,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    return root / "bin"


def clean_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a user's shell with only the venv on PATH: nothing from the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env

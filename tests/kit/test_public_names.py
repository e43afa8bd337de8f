"""`import abeyance` is cheap, and every public name it lists resolves."""

from __future__ import annotations

import subprocess
import sys

import abeyance


def test_importing_the_package_loads_no_framework() -> None:
    code = (
        "import sys, abeyance, abeyance.testing, abeyance.testing.plugin\n"
        "heavy = {'abeyance.app', 'abeyance.infra', 'pydantic_ai', 'sqlalchemy', 'litestar'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_every_public_name_resolves() -> None:
    for name in abeyance.__all__:
        assert getattr(abeyance, name).__name__ in (name, "StoredEvent")
    assert abeyance.Event.__name__ == "StoredEvent"
    assert "Service" in dir(abeyance)

"""`import sursis` is cheap, and every public name it lists resolves."""

from __future__ import annotations

import subprocess
import sys

import sursis


def test_importing_the_package_loads_no_framework() -> None:
    code = (
        "import sys, sursis, sursis.testing, sursis.testing.plugin\n"
        "heavy = {'sursis.app', 'sursis.infra', 'pydantic_ai', 'sqlalchemy', 'litestar'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_every_public_name_resolves() -> None:
    for name in sursis.__all__:
        assert getattr(sursis, name).__name__ in (name, "StoredEvent")
    assert sursis.Event.__name__ == "StoredEvent"
    assert "Service" in dir(sursis)

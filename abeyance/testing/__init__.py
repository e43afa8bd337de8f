"""The kit for testing agents run by Abeyance: `ScriptedModel` and the helpers below, and a pytest
plugin (`abeyance.testing.plugin`, loaded through the `pytest11` entry point) with the fixtures
`abeyance_service`, `scripted_model`, `abeyance_agents` and `abeyance_settings`.

See docs/testing.md. The async fixtures need pytest-asyncio (`pip install "abeyance[testing]"`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from abeyance.testing.assertions import expect_pending, resolve_and_settle, settle
    from abeyance.testing.scripted import ScriptedModel

__all__ = ["ScriptedModel", "expect_pending", "resolve_and_settle", "settle"]

_LAZY = {
    "ScriptedModel": "abeyance.testing.scripted",
    "expect_pending": "abeyance.testing.assertions",
    "resolve_and_settle": "abeyance.testing.assertions",
    "settle": "abeyance.testing.assertions",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'abeyance.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)

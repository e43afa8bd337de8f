"""The kit for testing agents run by Sursis: `ScriptedModel` and the helpers below, and a pytest
plugin (`sursis.testing.plugin`, loaded through the `pytest11` entry point) with the fixtures
`sursis_service`, `scripted_model`, `sursis_agents` and `sursis_settings`.

See docs/testing.md. The async fixtures need pytest-asyncio (`pip install "sursis[testing]"`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sursis.testing.assertions import expect_pending, resolve_and_settle, settle
    from sursis.testing.policy_timing import PolicyTimings, store_policy, time_policy_decisions
    from sursis.testing.scripted import ScriptedModel

__all__ = [
    "PolicyTimings",
    "ScriptedModel",
    "expect_pending",
    "resolve_and_settle",
    "settle",
    "store_policy",
    "time_policy_decisions",
]

_LAZY = {
    "ScriptedModel": "sursis.testing.scripted",
    "expect_pending": "sursis.testing.assertions",
    "resolve_and_settle": "sursis.testing.assertions",
    "settle": "sursis.testing.assertions",
    "PolicyTimings": "sursis.testing.policy_timing",
    "store_policy": "sursis.testing.policy_timing",
    "time_policy_decisions": "sursis.testing.policy_timing",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'sursis.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)

"""Deterministic crash points for the fault-injection tests.

`ABEYANCE_CRASH_AT=name` (or `name#k` for the k-th time) makes the process SIGKILL itself when
it reaches that point. Unset in production, where each check is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    spec = os.environ.get("ABEYANCE_CRASH_AT")
    if not spec:
        return
    target, _, nth = spec.partition("#")
    if target != name:
        return
    _hits[name] += 1
    if _hits[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)

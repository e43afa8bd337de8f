"""Deterministic fault points for the fault-injection tests.

`SURSIS_CRASH_AT=name` (or `name#k` for the k-th time) makes the process SIGKILL itself when
it reaches that point. `SURSIS_FREEZE_AT=name[#k]` makes it SIGSTOP itself there instead: a
test catches the process mid-step, acts on it (a SIGTERM, say) and lets it go on with SIGCONT.
Unset in production, where each check is two dictionary lookups.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

_hits: Counter[tuple[str, str]] = Counter()
_FAULTS = (("SURSIS_CRASH_AT", signal.SIGKILL), ("SURSIS_FREEZE_AT", signal.SIGSTOP))


def crash_point(name: str) -> None:
    for variable, fault in _FAULTS:
        spec = os.environ.get(variable)
        if not spec:
            continue
        target, _, nth = spec.partition("#")
        if target != name:
            continue
        _hits[variable, name] += 1
        hits, wanted = _hits[variable, name], int(nth or 1)
        # A process freezes once; a crash is for good anyway.
        if hits == wanted or (fault is signal.SIGKILL and hits > wanted):
            os.kill(os.getpid(), fault)

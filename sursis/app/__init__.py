"""The application: the HTTP API, the command line and the composition root.

structlog (for the tracebacks of its console renderer) and httpx (for its command-line client)
import Rich and Pygments whenever they are installed: 4.8 MiB in every process, which logs JSON
lines and never runs httpx's command line. Their first import, here, hides Rich and Pygments from
them; the console renderer of `sursis.app.logging` loads Rich at the first traceback it shows.
A program that imported either library (or Rich) before keeps what it has.
"""

from __future__ import annotations

import importlib
import sys

_HIDDEN = ("rich", "pygments")


def _import_without_rich(*names: str) -> None:
    wanted = [name for name in names if name not in sys.modules]
    if not wanted or any(hidden in sys.modules for hidden in _HIDDEN):
        return
    for hidden in _HIDDEN:
        sys.modules[hidden] = None  # type: ignore[assignment]  # `import rich` raises ImportError
    try:
        for name in wanted:
            importlib.import_module(name)
    finally:
        for hidden in _HIDDEN:
            del sys.modules[hidden]


_import_without_rich("structlog", "httpx")

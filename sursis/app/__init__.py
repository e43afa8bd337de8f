"""The application: the HTTP API, the command line and the composition root.

structlog (for the tracebacks of its console renderer) and httpx (for its command-line client)
import Rich and Pygments whenever they are installed: 4.8 MiB in every process, which logs JSON
lines and never runs httpx's command line. Their first import, here, hides Rich and Pygments from
them; the console renderer of `sursis.app.logging` loads Rich at the first traceback it shows.
A program that imported either library (or Rich) before keeps what it has. Alembic, through Mako's
error templates, imports Pygments the same way (about 2 MiB, and a tenth of `sursis migrate`'s
start): its first import hides them too (Mako then highlights nothing, as without Pygments).

The hiding waits for their first import (a finder on `sys.meta_path`): a command that uses neither,
`sursis --help` or `sursis migrate`, does not pay for loading them.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_HIDDEN = ("rich", "pygments")
_SHY = ("structlog", "httpx", "alembic")


class _LoaderWithoutRich(importlib.abc.Loader):
    """The library's own loader, run with Rich and Pygments unimportable."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        if all(name in sys.modules for name in _SHY) and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
        if any(hidden in sys.modules for hidden in _HIDDEN):
            self._loader.exec_module(module)
            return
        for hidden in _HIDDEN:
            sys.modules[hidden] = None  # type: ignore[assignment]  # `import rich` raises ImportError
        try:
            self._loader.exec_module(module)
        finally:
            for hidden in _HIDDEN:
                del sys.modules[hidden]


class _FinderWithoutRich(importlib.abc.MetaPathFinder):
    """Finds structlog, httpx and Alembic as the other finders do, and hands their loader the hiding."""

    def __init__(self) -> None:
        self._finding = False

    def find_spec(self, name: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        if name not in _SHY or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LoaderWithoutRich(spec.loader)
        return spec


_FINDER = _FinderWithoutRich()
if not any(name in sys.modules for name in _SHY):
    sys.meta_path.insert(0, _FINDER)

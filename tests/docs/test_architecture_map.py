"""docs/architecture.md cannot rot: every module (`sursis.x.y`), attribute (`sursis.x.y:name`, also
`Class.method`) and file path (`sursis/…`, `tests/…`, `docs/…`, `pyproject.toml`) it names in
backticks exists in the code."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAP = REPO / "docs" / "architecture.md"
CODE = re.compile(r"`([^`\n]+)`")
MODULE = re.compile(r"^sursis(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_][\w.]*)?$")
FILE = re.compile(r"^(?:sursis|tests|docs|bench|examples)/[\w./-]*$|^[\w-]+\.(?:toml|md|ini)$")


def names(kind: re.Pattern[str]) -> list[str]:
    return sorted({span for span in CODE.findall(MAP.read_text()) if kind.match(span)})


def resolve(name: str) -> object:
    module_name, _, attribute = name.partition(":")
    found: object = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        found = getattr(found, part)
    return found


def test_the_map_names_the_root_and_each_step_of_an_approval_turn() -> None:
    named = set(names(MODULE))
    assert "sursis.app.container:build_container" in named
    assert "sursis.domain.approvals.pending_calls:PendingCallService.resolve_pending" in named
    assert len(named) >= 40, "the map lost most of its names: the pattern no longer finds them?"
    assert names(FILE), "the map names no file"


@pytest.mark.parametrize("name", names(MODULE))
def test_each_module_and_function_named_exists(name: str) -> None:
    try:
        resolve(name)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"docs/architecture.md names `{name}`, which does not exist: {error}")


def defined_in(name: str) -> str | None:
    """The module that defines what `name` names (its first attribute: a class or a function), or
    None for a module or a value that has no defining module."""
    module_name, _, attribute = name.partition(":")
    if not attribute:
        return None
    first = getattr(importlib.import_module(module_name), attribute.split(".")[0])
    if not (inspect.isclass(first) or inspect.isfunction(first)):
        first = getattr(first, "fn", None)  # a Litestar route handler: the function it wraps
    defined = getattr(first, "__module__", None)
    return defined if isinstance(defined, str) else None


@pytest.mark.parametrize("name", [n for n in names(MODULE) if ":" in n])
def test_each_name_points_at_the_module_that_defines_it(name: str) -> None:
    """A re-export sends the reader to the wrong file: the map names where the code lives."""
    module_name = name.partition(":")[0]
    defined = defined_in(name)
    assert defined in (None, module_name), f"docs/architecture.md names `{name}`, defined in {defined}"


@pytest.mark.parametrize("path", names(FILE))
def test_each_file_named_exists(path: str) -> None:
    assert (REPO / path).exists(), f"docs/architecture.md names {path}, which does not exist"


def test_a_re_export_is_caught() -> None:
    assert defined_in("sursis.app.routes.v1:route_handlers") == "sursis.app.routes.v1"
    assert defined_in("sursis.app.routes.v1:PendingController") == "sursis.app.routes.pending"


def test_a_missing_name_is_caught() -> None:
    with pytest.raises(AttributeError):
        resolve("sursis.app.container:no_such_function")
    with pytest.raises(ImportError):
        resolve("sursis.app.no_such_module")

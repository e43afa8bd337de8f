"""The composition root stays a list: one call of each context's `wire_*` function, every one of them
called there, what each offers handed to the container by name and offered only once."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field, fields
from types import ModuleType

import pytest

import sursis.app.wiring as wiring
from sursis.app.container import Container, build_container
from sursis.app.wiring import INNER, offered


def wiring_modules() -> list[ModuleType]:
    return [
        importlib.import_module(f"sursis.app.wiring.{m.name}") for m in pkgutil.iter_modules(wiring.__path__)
    ]


def wiring_functions() -> set[str]:
    names = set()
    for module in wiring_modules():
        source = inspect.getsource(module)
        names |= {
            node.name
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef) and node.name.startswith("wire_")
        }
    return names


def test_the_root_is_short_and_calls_every_wiring_function_once() -> None:
    source = inspect.getsource(build_container)
    assert len(source.splitlines()) <= 60
    called = [
        node.func.id
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("wire_")
    ]
    assert len(wiring_functions()) >= 10
    assert sorted(called) == sorted(wiring_functions())


def test_each_container_attribute_is_offered_by_one_context() -> None:
    """Every attribute but the settings and what `start` sets is a field of some part."""
    fed = {f.name for f in fields(Container)} - {"settings", "encryption"}
    offered_names = {
        f.name
        for module in wiring_modules()
        for cls in vars(module).values()
        if isinstance(cls, type) and cls.__name__.endswith("Parts") and hasattr(cls, "__dataclass_fields__")
        for f in fields(cls)
        if not f.metadata.get("inner")
    }
    assert fed == offered_names


@dataclass(frozen=True)
class _One:
    uow: str
    point: str = field(metadata=INNER)


@dataclass(frozen=True)
class _Two:
    uow: str


def test_offered_leaves_inner_fields_out_and_refuses_a_name_offered_twice() -> None:
    assert offered(_One("a", "p")) == {"uow": "a"}
    with pytest.raises(TypeError, match="'uow' is offered twice"):
        offered(_One("a", "p"), _Two("b"))

"""Which agents a process serves: the built-in ones by name, the user's by `module:NAME` or by an
installed package's entry point (group `sursis.agents`).

`SURSIS_AGENTS` (or `--agents`, repeatable) names them. Each name is one of

* a built-in group: `ops` (with the World Agent it asks), `assistant`, `customer` (the supervisor
  and its specialists), `world`;
* `package.module:NAME`, where NAME is an agent definition, a pydantic-ai `Agent` (served under its
  `name`, or when it has none under the variable's name, as pydantic-ai names it), a list of those,
  or a callable returning one of these;
* the name of an entry point in the group `sursis.agents`, which points at such a NAME.

With no name at all the built-in agents are served, with every agent installed packages offer
through the entry-point group. Nothing here knows more about a built-in agent than its name.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from pydantic_ai.agent import AbstractAgent

from sursis.domain.errors import Error, ToolDeclarationError
from sursis.infra.agents.adopted import adopt
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.agents.models import missing_library, model_label

ENTRY_POINT_GROUP = "sursis.agents"
BUILT_IN = ("ops", "assistant", "customer", "world")


class AgentLoadError(Error):
    """An agent source that cannot be loaded; the message is one line naming it and why."""

    code = "agent_load_failed"


Sourced = list[tuple[str, AgentDefinition]]
"""Loaded definitions, each with where it came from (`module:NAME`, an entry point)."""


@dataclass(frozen=True, slots=True)
class AgentSelection:
    """The built-in groups to serve and the user's agents, loaded."""

    built_in: frozenset[str]
    definitions: tuple[AgentDefinition, ...]


def select_agents(names: Sequence[str]) -> AgentSelection:
    """Load what `names` name (see the module's docstring); raises `AgentLoadError`."""
    if not names:
        loaded: Sourced = [item for ep in _entry_points() for item in _load_entry_point(ep)]
        return AgentSelection(frozenset(BUILT_IN), _unique(loaded))
    built_in: set[str] = set()
    loaded = []
    installed = {ep.name: ep for ep in _entry_points()}
    for name in names:
        if name in BUILT_IN:
            built_in.add(name)
        elif ":" in name:
            loaded += _load_reference(name)
        elif name in installed:
            loaded += _load_entry_point(installed[name])
        else:
            known = ", ".join([*BUILT_IN, *sorted(installed)])
            raise AgentLoadError(
                f"agents {name!r}: not a built-in agent, an entry point or module:NAME ({known})"
            )
    taken = sorted(built_in & {d.name for _, d in loaded})
    if taken:
        sources = ", ".join(source for source, d in loaded if d.name in taken)
        raise AgentLoadError(
            f"agents: {', '.join(taken)} is already the name of a built-in agent ({sources}): "
            "serve yours under another name, adopt(agent, name='...')"
        )
    return AgentSelection(frozenset(built_in), _unique(loaded))


def served_models(service_model: str, selection: AgentSelection) -> dict[str, str]:
    """The model each served agent runs on, by agent (built-in groups by group name): the one an
    agent names, else the service's (`SURSIS_MODEL`)."""
    models = dict.fromkeys(sorted(selection.built_in), model_label(service_model))
    for definition in selection.definitions:
        model = definition.model
        models[definition.name] = model_label(service_model if model is None else model)
    return models


def named_models(service_model: str, selection: AgentSelection) -> list[str]:
    """The model names the served agents use, to be built from their names (not the `Model`s an
    agent brings built): the service's when an agent names none, and the names agents give."""
    names = [service_model] if selection.built_in else []
    for definition in selection.definitions:
        model = definition.model
        if model is None or isinstance(model, str):
            names.append(service_model if model is None else model)
    return list(dict.fromkeys(names))


def _entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _load_entry_point(entry_point: EntryPoint) -> Sourced:
    source = f"{entry_point.name} ({entry_point.value})"
    try:
        value = entry_point.load()
    except Exception as exc:
        missing = missing_library(exc)
        raise AgentLoadError(f"agents {source}: cannot import: {missing or _one_line(exc)}") from exc
    module, _, attribute = entry_point.value.partition(":")
    variable = attribute.rpartition(".")[2].strip() or None
    return [(source, d) for d in definitions_from(value, source, name=variable, module=module.strip())]


def _load_reference(reference: str) -> Sourced:
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise AgentLoadError(f"agents {reference!r}: expected package.module:NAME")
    _current_directory_importable()
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        missing = missing_library(exc)
        reason = missing if missing is not None else _one_line(exc)
        raise AgentLoadError(f"agents {reference}: cannot import {module_name}: {reason}") from exc
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise AgentLoadError(f"agents {reference}: module {module_name} has no {attribute!r}")
        value = getattr(value, part)
    variable = attribute.rpartition(".")[2]
    return [(reference, d) for d in definitions_from(value, reference, name=variable, module=module_name)]


def _current_directory_importable() -> None:
    """`module:NAME` is looked up from the directory the command runs in too, as uvicorn and
    `python -m` do: `sursis serve --agents my_agents:desk` next to `my_agents.py` finds it."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def definitions_from(
    value: Any, source: str, *, name: str | None = None, module: str | None = None
) -> list[AgentDefinition]:
    """The definitions `value` stands for: a definition, a pydantic-ai agent (adopted), an iterable
    of those, or a callable returning one of these. An agent without a `name` is named as
    pydantic-ai names it, after the variable holding it: `name` (the variable `module:NAME` names)
    when it is that variable's value, else the variable of `module` that holds it, if one does."""
    try:
        if isinstance(value, AgentDefinition):
            return [value]
        if isinstance(value, AbstractAgent):
            served = None if value.name else name or _module_variable(value, module)
            return [adopt(value, name=served)]
        if callable(value):
            return definitions_from(value(), source, module=module)
        if isinstance(value, Iterable) and not isinstance(value, str | bytes):
            return _listed(list(value), source, module)
    except AgentLoadError:
        raise
    except Exception as exc:
        raise AgentLoadError(f"agents {source}: {_one_line(exc)}") from exc
    raise AgentLoadError(
        f"agents {source}: {type(value).__name__} is not an agent definition, a pydantic-ai Agent, "
        "a list of them or a callable returning them"
    )


def _listed(items: list[Any], source: str, module: str | None) -> list[AgentDefinition]:
    """The definitions of a list, each element that cannot be loaded named by its index
    (`module:AGENTS[1]`); elements refused for one reason (two unnamed agents) in one line."""
    loaded: list[AgentDefinition] = []
    refused: dict[str, list[str]] = {}
    for index, item in enumerate(items):
        where = f"{source}[{index}]"
        try:
            loaded.extend(definitions_from(item, where, module=module))
        except AgentLoadError as exc:
            refused.setdefault(str(exc).removeprefix(f"agents {where}: "), []).append(where)
    if refused:
        reason, wheres = next(iter(refused.items()))
        raise AgentLoadError(f"agents {' and '.join(wheres)}: {reason}")
    return loaded


def _module_variable(agent: AbstractAgent[Any, Any], module_name: str | None) -> str | None:
    """The name of a public module-level variable of `module_name` holding `agent`."""
    module = sys.modules.get(module_name or "")
    if module is None:
        return None
    return next((k for k, v in vars(module).items() if v is agent and not k.startswith("_")), None)


def _unique(loaded: Sourced) -> tuple[AgentDefinition, ...]:
    seen: dict[str, str] = {}
    for source, definition in loaded:
        if definition.name in seen:
            first = seen[definition.name]
            where = source if first == source else f"{first} and {source}"
            raise AgentLoadError(
                f"agents: two agents are named {definition.name!r} ({where}): "
                "serve one under another name, adopt(agent, name='...')"
            )
        seen[definition.name] = source
    return tuple(d for _, d in loaded)


def check_no_clash(built_in: Iterable[str], definitions: Iterable[AgentDefinition]) -> None:
    """A user's agent may not take a built-in agent's name (it would replace it silently)."""
    clash = sorted(set(built_in) & {d.name for d in definitions})
    if clash:
        raise ToolDeclarationError(f"agents: {', '.join(clash)} is already the name of a built-in agent")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]

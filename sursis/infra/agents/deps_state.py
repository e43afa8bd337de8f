"""The state in an adopted agent's deps, kept while its run waits for a person.

A deps factory builds the deps again for each segment, so what the tools put in them before a call
was asked about would be lost at the approval. The part pydantic-ai itself can serialize is kept:
a deps object's `state` (pydantic-ai's `StateHandler`, e.g. AG-UI's `StateDeps[Model]`) that is a
pydantic model or a dataclass. It is stored with the run (sealed) when the run suspends and put back
into the deps the factory builds for the resumed segment, in whichever process runs it; everything
else in the deps (clients, pools) is the factory's to build, as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import structlog
from pydantic import BaseModel, TypeAdapter

from sursis.domain.ports import UnitOfWorkFactory

log = structlog.get_logger("sursis.runner")


def kept_state(deps: Any) -> Any:
    """The JSON form of the deps' state, or None when the deps hold none the service keeps."""
    state = _state(deps)
    if state is None:
        return None
    return TypeAdapter(type(state)).dump_python(state, mode="json")


def restore_state(deps: Any, stored: Any) -> None:
    """Put the stored state back into freshly built deps (validated as the type the factory's
    state has); deps without such a state are left as built."""
    state = _state(deps)
    if state is None or stored is None:
        return
    try:
        deps.state = TypeAdapter(type(state)).validate_python(stored)
    except (AttributeError, TypeError, ValueError) as exc:
        # A frozen deps object, or a state whose type changed since it was stored.
        log.warning("agent.deps_state_not_restored", error=f"{type(exc).__name__}: {exc}"[:300])


async def keep(uow: UnitOfWorkFactory, run_id: Any, deps: Any) -> None:
    """Store the deps' state with the run (a transaction of its own), when it holds one."""
    state = kept_state(deps)
    if state is None:
        return
    async with uow() as unit:
        await unit.runs.keep_deps_state(run_id, state)
        await unit.commit()


async def restore(uow: UnitOfWorkFactory, run_id: Any, deps: Any) -> None:
    """Put the state stored with the run back into the deps built for its resumed segment."""
    if _state(deps) is None:
        return
    async with uow.reader() as unit:
        stored = await unit.runs.deps_state(run_id)
    restore_state(deps, stored)


def _state(deps: Any) -> Any:
    state = getattr(deps, "state", None)
    if isinstance(state, BaseModel) or (dataclasses.is_dataclass(state) and not isinstance(state, type)):
        return state
    return None

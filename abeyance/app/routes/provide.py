"""What a controller is given: the services it uses, by name, never the whole container."""

from __future__ import annotations

from typing import Any

from litestar.datastructures import State
from litestar.di import Provide

from abeyance.app.container import Container


def service(name: str) -> Provide:
    """A dependency of the container's attribute `name` (e.g. `"runs"`), read per request from the
    app's state (the container is built in the lifespan)."""

    def dependency(state: State) -> Any:
        container: Container = state.container
        return getattr(container, name)

    return Provide(dependency, sync_to_thread=False)


def services(*names: str) -> dict[str, Provide]:
    """`dependencies=` of a controller or route: one per name."""
    return {name: service(name) for name in names}

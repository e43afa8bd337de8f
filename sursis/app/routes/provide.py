"""What a route is given: the parts of the container it uses, by name, never the container itself."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from litestar.datastructures import State
from litestar.di import Provide

from sursis.app.container import Container


def service(path: str) -> Provide:
    """A dependency of the container's attribute at `path` (`"runs"`, `"worlds.service"`), read per
    request from the app's state (the container is built in the lifespan)."""
    pick = attrgetter(path)

    def dependency(state: State) -> Any:
        container: Container = state.container
        return pick(container)

    return Provide(dependency, sync_to_thread=False)


def services(*names: str) -> dict[str, Provide]:
    """`dependencies=` of a controller or route: the container's attributes of these names."""
    return {name: service(name) for name in names}

"""The composition root's parts: each context of the service wires itself in one function of its own
module (`wire_storage`, `wire_agents`, ...) from the settings and what the contexts before it handed
back, and returns a `...Parts` of what it offers (frozen, but for the storage the container is built
on). `sursis.app.container.build_container` calls them in order; the fields of the parts become the
container's attributes of the same names.

A field marked `inner` is handed to the contexts wired after it but is not an attribute of the
container (the policy point the runner asks, the default model).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

INNER = {"inner": True}
"""`field(metadata=INNER)`: handed on to later wiring, not offered by the container."""


def offered(*parts: Any) -> dict[str, Any]:
    """The offered fields of each part, by name; a name two parts offer is a wiring mistake."""
    found: dict[str, Any] = {}
    for part in parts:
        for each in fields(part):
            if each.metadata.get("inner"):
                continue
            if each.name in found:
                raise TypeError(f"{each.name!r} is offered twice ({type(part).__name__} and another part)")
            found[each.name] = getattr(part, each.name)
    return found

"""What differs between the pydantic-ai versions the service supports: from the one
pydantic-ai-harness pins (2.62) to the newest 2.x. Each difference is decided once, here."""

from __future__ import annotations

import inspect
from typing import Any, Literal

from pydantic_ai import exceptions
from pydantic_ai.exceptions import CallDeferred

DeferredKind = Literal["external", "question"]

_DEFERRED_KIND = "kind" in inspect.signature(CallDeferred.__init__).parameters
"""`CallDeferred(kind=...)` (after 2.62): a call that asks for content (`question`) rather
than standing for work done elsewhere. Older versions have no kind; the pending call's own `kind`
metadata says the same to the service either way."""


def call_deferred(metadata: dict[str, Any], kind: DeferredKind = "external") -> CallDeferred:
    """`CallDeferred(metadata, kind=kind)`, where the installed pydantic-ai knows kinds."""
    if _DEFERRED_KIND:
        return CallDeferred(metadata=metadata, kind=kind)
    return CallDeferred(metadata=metadata)


def deferred_kind(exc: CallDeferred) -> DeferredKind:
    """The kind a tool's `CallDeferred` was raised with (`external` where kinds are unknown)."""
    kind: DeferredKind = getattr(exc, "kind", "external")
    return kind


_RETRY_MODEL_REQUEST = getattr(exceptions, "RetryModelRequest", None)
MODEL_REQUEST_CONTROL: tuple[type[Exception], ...] = tuple(
    t for t in (exceptions.SkipModelRequest, _RETRY_MODEL_REQUEST) if isinstance(t, type)
)
"""The control flow of model-request hooks: `SkipModelRequest`, and `RetryModelRequest` where the
installed pydantic-ai has it (after 2.62)."""

"""Whether the installed OpenTelemetry packages can serve, checked before `serve`, `worker` and
`migrate` start.

OpenTelemetry ships as a family of distributions released together (`opentelemetry-api` 1.N with
the contrib packages 0.(N+21)bX). Installing a package beside the service that pins an older member
(`pip install 'logfire[asyncpg]'`) leaves a mix in which one member imports a name another lacks;
the service then died at start with a long `ImportError` traceback, while `migrate`, which imports
none of it, worked. Here the modules the service serves with are imported once, and a mix is one
line naming the two packages and the pin that puts them back on one release.

`serve` and `worker` import what they serve with (they load it right after anyway); `migrate`
imports only OpenTelemetry's own modules among them (not Litestar and pydantic-ai, seconds of
start-up for a command that uses neither); the OTLP exporters (protobuf) are checked, as they are
loaded, only where an OTLP endpoint is configured.
"""

from __future__ import annotations

import importlib
import re
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

SERVED_WITH = (
    "sursis.infra.telemetry",
    "litestar.plugins.opentelemetry",
    "opentelemetry.semconv.attributes.http_attributes",
)
"""What the service imports from OpenTelemetry to serve (its telemetry, the HTTP middleware's ASGI
instrumentation), directly or through the libraries that wrap it."""

OPENTELEMETRY_SERVED_WITH = (
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.metrics",
    "opentelemetry.exporter.prometheus",
    "opentelemetry.instrumentation.asgi",
    "opentelemetry.semconv.attributes.http_attributes",
)
"""The OpenTelemetry modules among those, imported directly (what `migrate` checks)."""

EXPORTERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
)
"""The OTLP exporters, loaded when an OTLP endpoint is configured."""

SERVING_MODULES = (*SERVED_WITH, *EXPORTERS)


def modules_to_check(command: str, *, exporting: bool) -> tuple[str, ...]:
    """What `command` checks: what it will load, or OpenTelemetry's share of it for `migrate`."""
    served = SERVED_WITH if command in ("serve", "worker") else OPENTELEMETRY_SERVED_WITH
    return (*served, *(EXPORTERS if exporting else ()))


_CONTRIB_OFFSET = 21
"""A contrib release 0.(N+21)bX goes with the API and SDK release 1.N."""


def unusable_opentelemetry(modules: Sequence[str] = SERVING_MODULES) -> str | None:
    """Why the installed OpenTelemetry packages cannot serve, in one line; None when they can."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            if not (exc.name or "").startswith("opentelemetry"):
                raise
            return _mixed_releases(exc)
    return None


def _mixed_releases(exc: ImportError) -> str:
    provider = _distribution_of(Path(exc.path)) if exc.path else None
    importer = _importer(exc)
    missing = re.search(r"cannot import name '([^']+)'", str(exc))
    what = f"imports {missing.group(1)} from {exc.name}" if missing else f"imports {exc.name}"
    needed = f"{importer[0]} {importer[1]}" if importer else "the service"
    has = f"{provider[0]} {provider[1]}" if provider else exc.name
    line = f"the installed OpenTelemetry packages cannot serve: {needed} {what}, which {has} lacks"
    if provider is None or importer is None:
        return f"{line}: install OpenTelemetry's packages of one release"
    pin = _pin_like(provider[0], provider[1], importer[1])
    return (
        f"{line}: re-pin it to the release of the other (pip install '{provider[0]}{pin}'), or find "
        "the package that pinned it back"
    )


def _importer(exc: ImportError) -> tuple[str, str] | None:
    """The OpenTelemetry distribution whose code made the failing import: the innermost frame of
    the traceback in one, other than the module that could not be imported."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        found = _distribution_of(Path(frame.filename))
        if found is not None and frame.filename != exc.path:
            return found
    return None


def _distribution_of(path: Path) -> tuple[str, str] | None:
    """The installed `opentelemetry-*` distribution holding the file at `path`, with its version."""
    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if not name.lower().startswith("opentelemetry") or dist.files is None:
            continue
        for file in dist.files:
            if file.suffix == ".py" and Path(str(dist.locate_file(file))) == path:
                return name, dist.version
    return None


def _pin_like(name: str, version: str, wanted: str) -> str:
    """A specifier for `name` (now at `version`) in the release `wanted` belongs to."""
    release = _release(wanted)
    if release is None:
        return f">={wanted}"
    if version.startswith("0."):
        minor = release + _CONTRIB_OFFSET
        return f">=0.{minor}b0,<0.{minor + 1}b0"
    return f">=1.{release}.0,<1.{release + 1}"


def _release(version: str) -> int | None:
    """The API/SDK minor release a version of any member belongs to (1.45.2 and 0.66b2: 45)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        return None
    major, minor = int(found.group(1)), int(found.group(2))
    return minor - _CONTRIB_OFFSET if major == 0 else minor

"""Which AG-UI route the service mounts: the endpoint needs AG-UI 1.0 (run outcomes, interrupts and
resumes); a project whose pydantic-ai pins an older `ag-ui-protocol` (pydantic-ai 2.62's `[ag-ui]`
extra asks for `<1`; 2.63 and later allow 1.0) still installs and serves, and the endpoint answers
501 naming the version to install instead of failing the whole service at import."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import structlog
from litestar import post
from litestar.params import FromPath

from sursis.app.auth import requires
from sursis.domain.access import Permission
from sursis.domain.errors import ServiceError

log = structlog.get_logger("sursis.ag_ui")
NEEDED = 1


class AgUiProtocolTooOld(ServiceError):
    """The installed `ag-ui-protocol` predates 1.0: no AG-UI endpoint on this install."""

    code = "ag_ui_protocol_too_old"
    status = 501


def protocol_version() -> str | None:
    try:
        return version("ag-ui-protocol")
    except PackageNotFoundError:
        return None


def ag_ui_route_handlers() -> list[Any]:
    """`POST /v1/agents/{name}/ag-ui`: the real endpoint, or one that says what to install."""
    installed = protocol_version()
    if installed is not None and int(installed.split(".")[0]) >= NEEDED:
        from sursis.app.routes.ag_ui import ag_ui_run

        return [ag_ui_run]
    log.warning(
        "ag_ui.unavailable",
        installed=installed,
        fix="pip install 'ag-ui-protocol>=1.0,<2' (pydantic-ai 2.63 or later allows it)",
    )

    @post(
        "/v1/agents/{name:str}/ag-ui",
        tags=["agents"],
        status_code=200,
        guards=[requires(Permission.CONVERSE)],
        include_in_schema=False,
    )
    async def ag_ui_unavailable(name: FromPath[str]) -> None:
        """The endpoint without AG-UI 1.0: 501 with what to install (permission decided first)."""
        raise AgUiProtocolTooOld(
            f"the AG-UI endpoint needs ag-ui-protocol 1.0 or later; this install has {installed or 'none'}: "
            "pip install 'ag-ui-protocol>=1.0,<2' (pydantic-ai 2.63 or later allows it)"
        )

    return [ag_ui_unavailable]

"""`POST /v1/events`: domain events from the rest of the platform (a `system` key)."""

from __future__ import annotations

from litestar import Response, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_202_ACCEPTED

from abeyance.app.container import Container
from abeyance.app.schemas.platform_events import EventAccepted, EventBody, event_accepted, platform_event
from abeyance.domain.records import Principal


@post("/v1/events", tags=["events"], status_code=HTTP_202_ACCEPTED)
async def post_event(
    data: JSONBody[EventBody],
    container: NamedDependency[Container],
    principal: NamedDependency[Principal],
) -> Response[EventAccepted]:
    """Take one domain event: `scan.completed`, `anomaly.detected` or `workspace.config_changed`.

    The event, the rows it carries and, when it warrants one, a conversation of the `customer`
    agent with its first run queued are stored in one transaction. Posting an id again changes
    nothing and answers 200 with `duplicate: true`; a new event answers 202.
    """
    intake_service = container.intake
    workspace = intake_service.workspace_for(principal, data.workspace)
    intake = await intake_service.receive(principal, platform_event(data, workspace))
    await intake_service.notify(intake)
    return Response(
        event_accepted(intake), status_code=HTTP_200_OK if intake.duplicate else HTTP_202_ACCEPTED
    )

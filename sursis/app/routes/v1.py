"""HTTP API v1: every route of the service, gathered from their modules (one concept each).

Every route sits behind the API-key middleware (`sursis.app.auth`); what each role may do
is decided in the domain services, never here.
"""

from __future__ import annotations

from typing import Any

from sursis.app.routes.ag_ui_support import ag_ui_route_handlers
from sursis.app.routes.agents import list_agents
from sursis.app.routes.approvals import ApprovalController
from sursis.app.routes.approvers import approver_route_handlers
from sursis.app.routes.audit import AuditController
from sursis.app.routes.authorizations import AuthorizationController
from sursis.app.routes.channels_admin import channel_route_handlers
from sursis.app.routes.conversations import ConversationController
from sursis.app.routes.events import event_route_handlers
from sursis.app.routes.fork import fork_route_handlers
from sursis.app.routes.keys import KeyController, me
from sursis.app.routes.mcp_pins import mcp_route_handlers
from sursis.app.routes.pending import PendingController
from sursis.app.routes.platform_events import list_conversations, post_event
from sursis.app.routes.policies import policy_route_handlers
from sursis.app.routes.provisioning import ProvisioningController
from sursis.app.routes.retention import retention_route_handlers
from sursis.app.routes.runs import RunController
from sursis.app.routes.worlds import world_route_handlers


def route_handlers() -> list[Any]:
    return [
        me,
        list_agents,
        *ag_ui_route_handlers(),
        ConversationController,
        *fork_route_handlers(),
        RunController,
        PendingController,
        ApprovalController,
        AuditController,
        *event_route_handlers(),
        AuthorizationController,
        KeyController,
        ProvisioningController,
        *world_route_handlers(),
        *channel_route_handlers(),
        *retention_route_handlers(),
        *policy_route_handlers(),
        *approver_route_handlers(),
        *mcp_route_handlers(),
        post_event,
        list_conversations,
    ]

"""Provisioning rules: which provider group signs in as which role and workspace."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from litestar.params import PathParameter
from pydantic import Field

from sursis.app.schemas.validation import FromRecord, Strict, WorkspaceName
from sursis.domain.identity.people import GROUP

ProviderGroup = Annotated[
    str,
    PathParameter(
        description="The group's name at the identity provider (its `groups` claim), without `idp:`",
        min_length=1,
        max_length=200,
        pattern=GROUP.pattern,
    ),
]


class ProvisioningRuleIn(Strict):
    """Members of the group sign in as `role` of `workspace` (an admin rule has no workspace)."""

    role: Literal["user", "operator", "admin"]
    workspace: WorkspaceName | None = Field(default=None, description="Required unless the role is admin")


class ProvisioningRuleOut(FromRecord):
    group: str
    role: str
    workspace: str | None
    source: Literal["settings", "stored"] = Field(
        description="`settings`: from SURSIS_OIDC_GROUPS (read-only); `stored`: written over this API"
    )
    updated_by: str | None
    updated_at: datetime | None

"""Who may do what: the caller, API keys and standing authorizations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from abeyance.app.schemas.validation import JsonObject, Strict, UtcDatetime
from abeyance.domain.access import Permission
from abeyance.domain.keys import IssuedKey
from abeyance.domain.records import (
    ApiKey,
    Authorization,
    Principal,
)

WorkspaceName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]


class CreateAuthorization(Strict):
    tool_name: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=4000)
    args_match: JsonObject | None = Field(
        default=None, description="Pre-approve only calls whose arguments equal these values"
    )
    expires_at: UtcDatetime | None = None
    workspace: WorkspaceName | None = Field(default=None, description="Admins only; defaults to the key's")


class AuthorizationOut(BaseModel):
    id: uuid.UUID
    workspace: str
    tool_name: str
    args_match: dict[str, Any] | None
    reason: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class CreateKey(Strict):
    role: Literal["user", "operator", "admin"]
    workspace: WorkspaceName | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)


class ApiKeyOut(BaseModel):
    id: uuid.UUID
    name: str
    prefix: str
    role: str
    workspace: str | None
    created_at: datetime
    revoked_at: datetime | None


class IssuedKeyOut(ApiKeyOut):
    key: str = Field(description="The key itself. Shown only in this response; only its hash is stored.")


class PrincipalOut(BaseModel):
    id: str = Field(description="The key's id: what `resolved_by` and the audit `actor` record")
    name: str | None
    role: str
    workspace: str | None
    permissions: list[str]


def principal_out(principal: Principal) -> PrincipalOut:
    return PrincipalOut(
        id=principal.id,
        name=principal.name,
        role=principal.role.value,
        workspace=principal.workspace,
        permissions=sorted(p.value for p in Permission if principal.may(p)),
    )


def authorization_out(a: Authorization) -> AuthorizationOut:
    return AuthorizationOut(
        id=a.id,
        workspace=a.workspace,
        tool_name=a.tool_name,
        args_match=a.args_match if isinstance(a.args_match, dict) else None,
        reason=a.reason,
        created_by=a.created_by,
        created_at=a.created_at,
        expires_at=a.expires_at,
        revoked_at=a.revoked_at,
    )


def api_key_out(k: ApiKey) -> ApiKeyOut:
    return ApiKeyOut(
        id=k.id,
        name=k.name,
        prefix=k.prefix,
        role=k.role.value,
        workspace=k.workspace,
        created_at=k.created_at,
        revoked_at=k.revoked_at,
    )


def issued_key_out(issued: IssuedKey) -> IssuedKeyOut:
    return IssuedKeyOut(**api_key_out(issued.key).model_dump(), key=issued.secret)

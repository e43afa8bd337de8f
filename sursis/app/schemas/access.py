"""Who may do what: the caller, API keys and standing authorizations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from sursis.app.schemas.validation import FromRecord, JsonObject, Strict, UtcDatetime, WorkspaceName
from sursis.domain.access import Permission
from sursis.domain.identity.keys import IssuedKey
from sursis.domain.records import Principal
from sursis.domain.records.access_records import ApiKey, Authorization


def _object_or_none(value: Any) -> Any:
    """A stored rule that is not a JSON object is shown as null (it gates every call)."""
    return value if isinstance(value, dict) else None


class CreateAuthorization(Strict):
    tool_name: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=4000)
    args_match: JsonObject | None = Field(
        default=None, description="Pre-approve only calls whose arguments equal these values"
    )
    expires_at: UtcDatetime | None = None
    workspace: WorkspaceName | None = Field(default=None, description="Admins only; defaults to the key's")


class AuthorizationOut(FromRecord):
    id: uuid.UUID
    workspace: str
    tool_name: str
    args_match: Annotated[dict[str, Any] | None, BeforeValidator(_object_or_none)]
    reason: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class CreateKey(Strict):
    """A user or operator key belongs to a workspace (`KeyService.create` refuses one without)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"role": {"enum": ["user", "operator"]}}},
            "then": {"required": ["workspace"], "properties": {"workspace": {"type": "string"}}},
        },
    )

    role: Literal["user", "operator", "admin"]
    workspace: WorkspaceName | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)
    expires_at: AwareDatetime | None = Field(
        default=None, description="The key is refused from then on (default: until revoked)."
    )


class ApiKeyOut(FromRecord):
    id: uuid.UUID
    name: str
    prefix: str
    role: str
    workspace: str | None
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None
    person: str | None = Field(
        default=None, description="The person (`oidc:<subject>`) the key approves as, if an admin linked it"
    )


class LinkPerson(BaseModel):
    """The person a key approves as: one approver with their sign-in and their other keys."""

    model_config = ConfigDict(extra="forbid")
    person: str | None = Field(
        pattern=r"^oidc:[\x21-\x7e]{1,255}$",
        description="`oidc:` and the provider's subject; null unlinks the key",
    )


class IssuedKeyOut(ApiKeyOut):
    key: str = Field(description="The key itself. Shown only in this response; only its hash is stored.")


class PrincipalOut(BaseModel):
    id: str = Field(description="The key's id: what `resolved_by` and the audit `actor` record")
    name: str | None
    role: str
    workspace: str | None
    permissions: list[str]


def principal_out(principal: Principal) -> PrincipalOut:
    """By hand on purpose: the permissions are the role's, spelled out for the caller."""
    return PrincipalOut(
        id=principal.id,
        name=principal.name,
        role=principal.role.value,
        workspace=principal.workspace,
        permissions=sorted(p.value for p in Permission if principal.may(p)),
    )


def authorization_out(a: Authorization) -> AuthorizationOut:
    return AuthorizationOut.model_validate(a)


def api_key_out(k: ApiKey) -> ApiKeyOut:
    return ApiKeyOut.model_validate(k)


def issued_key_out(issued: IssuedKey) -> IssuedKeyOut:
    return IssuedKeyOut(**api_key_out(issued.key).model_dump(), key=issued.secret)

"""API keys over the API: who the presented key is, and the keys themselves (admins)."""

from __future__ import annotations

import uuid

from litestar import Controller, delete, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas import (
    ApiKeyOut,
    CreateKey,
    IssuedKeyOut,
    LinkPerson,
    PrincipalOut,
    api_key_out,
    issued_key_out,
    principal_out,
)
from sursis.domain.access import Permission
from sursis.domain.identity.keys import KeyService
from sursis.domain.records import Principal


@get("/v1/me", tags=["keys"])
async def me(principal: NamedDependency[Principal]) -> PrincipalOut:
    """Who the presented key is: its id, name, role, workspace and what the role may do."""
    return principal_out(principal)


class KeyController(Controller):
    path = "/v1/keys"
    tags = ["keys"]
    dependencies = services("keys")

    @get("/")
    async def list_keys(
        self,
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
        include_revoked: FromQuery[bool] = False,
    ) -> list[ApiKeyOut]:
        """API keys (admins); never the keys themselves, only their prefixes."""
        return [api_key_out(k) for k in await keys.list_keys(principal, include_revoked=include_revoked)]

    @post("/", status_code=HTTP_201_CREATED, guards=[requires(Permission.MANAGE_KEYS)])
    async def create(
        self,
        data: JSONBody[CreateKey],
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
    ) -> IssuedKeyOut:
        """Make a key (admins). The response is the only place the key is ever shown."""
        issued = await keys.create(
            principal, role=data.role, workspace=data.workspace, name=data.name, expires_at=data.expires_at
        )
        return issued_key_out(issued)

    @put("/{key_id:uuid}/person", guards=[requires(Permission.MANAGE_KEYS)])
    async def link_person(
        self,
        key_id: FromPath[uuid.UUID],
        data: JSONBody[LinkPerson],
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
    ) -> ApiKeyOut:
        """Link the key to a person (admins, audited): it then approves as that person, so the
        person's sign-in and their other keys are one approver with it, and its calls are theirs."""
        return api_key_out(await keys.link_person(principal, key_id, data.person))

    @delete("/{key_id:uuid}", status_code=HTTP_200_OK)
    async def revoke(
        self,
        key_id: FromPath[uuid.UUID],
        keys: NamedDependency[KeyService],
        principal: NamedDependency[Principal],
    ) -> ApiKeyOut:
        """Revoke a key (admins); it is refused from the next request on."""
        return api_key_out(await keys.revoke(principal, key_id))

"""Provisioning rules over the API (admins only): which provider groups sign in as which role
and workspace, on top of `SURSIS_OIDC_GROUPS`. Each change is audited; it takes effect at each
member's next sign-in or session refresh."""

from __future__ import annotations

from litestar import Controller, delete, get, put
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_204_NO_CONTENT

from sursis.app.auth import requires
from sursis.app.routes.provide import services
from sursis.app.schemas.people import ProviderGroup, ProvisioningRuleIn, ProvisioningRuleOut
from sursis.domain.access import Permission
from sursis.domain.identity.people import ProvisioningService
from sursis.domain.records import Principal


class ProvisioningController(Controller):
    path = "/v1/oidc/provisioning"
    tags = ["keys"]
    dependencies = services("provisioning")
    guards = [requires(Permission.MANAGE_KEYS)]

    @get("/")
    async def list_rules(
        self, provisioning: NamedDependency[ProvisioningService], principal: NamedDependency[Principal]
    ) -> list[ProvisioningRuleOut]:
        """The rules in force: those of SURSIS_OIDC_GROUPS and those stored here (a stored rule
        replaces the setting's for its group)."""
        return [ProvisioningRuleOut.model_validate(r) for r in await provisioning.list_rules(principal)]

    @put("/{group:str}", status_code=HTTP_200_OK)
    async def set_rule(
        self,
        group: ProviderGroup,
        data: JSONBody[ProvisioningRuleIn],
        provisioning: NamedDependency[ProvisioningService],
        principal: NamedDependency[Principal],
    ) -> ProvisioningRuleOut:
        """Store (replace) the group's rule: its members sign in as this role and workspace from
        their next sign-in or session refresh. Audited as `oidc.rule_set`."""
        rule = await provisioning.set_rule(principal, group, data.role, data.workspace)
        return ProvisioningRuleOut.model_validate(rule)

    @delete("/{group:str}", status_code=HTTP_204_NO_CONTENT)
    async def remove_rule(
        self,
        group: ProviderGroup,
        provisioning: NamedDependency[ProvisioningService],
        principal: NamedDependency[Principal],
    ) -> None:
        """Remove the group's stored rule (404 without one): its members lose what it gave them at
        their next session refresh, unless SURSIS_OIDC_GROUPS maps the group. Audited as
        `oidc.rule_removed`."""
        await provisioning.remove_rule(principal, group)

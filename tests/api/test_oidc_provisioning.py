"""Provisioning rules an admin writes (`/v1/oidc/provisioning`): which provider group signs in as
which role and workspace, on top of SURSIS_OIDC_GROUPS; admins only (refused before the body is
read), validated, audited; and used at sign-in and at each refresh, against a real provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from pydantic import ValidationError

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.api.conftest import LiveFactory
from tests.api.oidc_provider import LocalProvider, sign_in, start_provider
from tests.api.test_pending_cli import sursis
from tests.conftest import KeyMaker, bearer, make_settings

SETTING = {"finance": {"role": "operator", "workspace": "default"}}
URL = "/v1/oidc/provisioning"


@pytest.fixture
async def http(seeded: str, admin_key: IssuedKey) -> AsyncIterator[AsyncTestClient[Any]]:
    """The app with SURSIS_OIDC_GROUPS set (sign-in itself off); the admin key on every request."""
    async with AsyncTestClient(app=create_app(make_settings(seeded, oidc_groups=SETTING))) as client:
        client.headers.update(bearer(admin_key.secret))
        yield client


async def audit_of(http: AsyncTestClient[Any], action: str) -> list[dict[str, Any]]:
    found = await http.get("/v1/audit", params={"action": action})
    assert found.status_code == 200, found.text
    items: list[dict[str, Any]] = found.json()["items"]
    return items


async def test_an_admin_sets_replaces_and_removes_rules_and_each_change_is_audited(
    http: AsyncTestClient[Any], admin_key: IssuedKey
) -> None:
    [setting] = (await http.get(URL)).json()
    assert (setting["group"], setting["role"], setting["workspace"], setting["source"]) == (
        "finance",
        "operator",
        "default",
        "settings",
    )
    made = await http.put(f"{URL}/sre", json={"role": "operator", "workspace": "ws1"})
    assert made.status_code == 200, made.text
    assert made.json()["source"] == "stored" and made.json()["updated_by"] == str(admin_key.key.id)
    admins = await http.put(f"{URL}/sursis-admins", json={"role": "admin"})
    assert admins.status_code == 200 and admins.json()["workspace"] is None
    # A stored rule replaces the setting's rule for its group; removing it brings the setting's back.
    replaced = await http.put(f"{URL}/finance", json={"role": "user", "workspace": "ws2"})
    assert replaced.status_code == 200
    listed = {r["group"]: r for r in (await http.get(URL)).json()}
    assert set(listed) == {"finance", "sre", "sursis-admins"}
    assert (listed["finance"]["role"], listed["finance"]["source"]) == ("user", "stored")
    assert (await http.delete(f"{URL}/finance")).status_code == 204
    listed = {r["group"]: r for r in (await http.get(URL)).json()}
    assert (listed["finance"]["role"], listed["finance"]["source"]) == ("operator", "settings")
    again = await http.delete(f"{URL}/finance")
    assert again.status_code == 404 and again.json()["code"] == "not_found"

    set_rows = await audit_of(http, "oidc.rule_set")
    assert sorted((r["details"]["group"], r["workspace"]) for r in set_rows) == [
        ("finance", "ws2"),
        ("sre", "ws1"),
        ("sursis-admins", "*"),
    ]
    assert all(r["actor"] == str(admin_key.key.id) for r in set_rows)
    [finance_set] = [r for r in set_rows if r["details"]["group"] == "finance"]
    assert finance_set["details"]["was"] is None  # the setting's rule is no stored rule
    [removed] = await audit_of(http, "oidc.rule_removed")
    assert removed["details"] == {"group": "finance", "was": {"role": "user", "workspace": "ws2"}}


async def test_an_operator_is_refused_before_the_body_is_read(
    http: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    operator = bearer(await keys.make("operator", "default"))
    for method, path, body in (
        ("GET", URL, None),
        ("PUT", f"{URL}/sre", {"role": "admin"}),
        ("PUT", f"{URL}/sre", {"not": "a rule"}),
        ("PUT", f"{URL}/sre", "[[["),
        ("DELETE", f"{URL}/finance", None),
    ):
        response = await http.request(method, path, headers=operator, json=body)
        assert response.status_code == 403, (method, path, body, response.text)
        assert response.json()["code"] == "forbidden"
    assert await audit_of(http, "oidc.rule_set") == []
    assert [r["group"] for r in (await http.get(URL)).json()] == ["finance"]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"role": "operator"}, id="operator-without-workspace"),
        pytest.param({"role": "admin", "workspace": "ws1"}, id="admin-with-workspace"),
        pytest.param({"role": "system", "workspace": "ws1"}, id="system-role"),
        pytest.param({"role": "root", "workspace": "ws1"}, id="unknown-role"),
        pytest.param({"role": "operator", "workspace": "no spaces"}, id="bad-workspace"),
        pytest.param({"role": "operator", "workspace": "ws1", "extra": 1}, id="extra-field"),
        pytest.param([], id="not-an-object"),
    ],
)
async def test_a_wrong_rule_is_refused_with_422(http: AsyncTestClient[Any], body: Any) -> None:
    response = await http.put(f"{URL}/sre", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "validation_failed"
    assert await audit_of(http, "oidc.rule_set") == []


async def test_a_group_name_too_long_is_refused(http: AsyncTestClient[Any]) -> None:
    response = await http.put(f"{URL}/{'g' * 201}", json={"role": "admin"})
    assert response.status_code == 422 and response.json()["code"] == "validation_failed", response.text
    assert (await http.get(URL)).json()[0]["group"] == "finance"


PEOPLE = {
    "alice": {"email": "alice@example.com", "groups": ["finance"]},
    "sam": {"email": "sam@example.com", "groups": ["sre"]},
}


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE)


async def test_a_stored_rule_decides_the_role_at_sign_in_and_its_removal_ends_the_session(
    seeded: str, provider: LocalProvider, admin_key: IssuedKey
) -> None:
    admin = bearer(admin_key.secret)
    settings = make_settings(seeded, **provider.settings(**SETTING), oidc_refresh_seconds=0.001)
    async with AsyncTestClient(app=create_app(settings)) as http:
        # `sre` is in no rule yet (sam could not sign in); an admin maps it, and moves finance.
        rule = await http.put(f"{URL}/sre", json={"role": "admin"}, headers=admin)
        assert rule.status_code == 200, rule.text
        promoted = await http.put(
            f"{URL}/finance", json={"role": "operator", "workspace": "ws2"}, headers=admin
        )
        assert promoted.status_code == 200, promoted.text

        alice = await sign_in(http, "alice")
        assert (alice["role"], alice["workspace"]) == ("operator", "ws2")
        http.cookies.clear()
        sam = await sign_in(http, "sam")
        assert (sam["role"], sam["workspace"]) == ("admin", None)
        assert (await http.get("/v1/me")).json()["role"] == "admin"

        assert (await http.delete(f"{URL}/sre", headers=admin)).status_code == 204
        # A refresh is due at every request here: the rule is gone, so is sam's session.
        refused = await http.get("/v1/pending")
        assert refused.status_code == 403 and refused.json()["code"] == "not_provisioned"
        assert (await http.get("/auth/oidc/session")).status_code == 401


async def test_provisioning_rules_from_the_command_line(live: LiveFactory, keys: KeyMaker) -> None:
    admin = await keys.make("admin", None, name="root")
    operator = await keys.make("operator", "default")
    async with live(oidc_groups=SETTING) as app:
        url = app.base_url
        code, out, err = await sursis(
            "provisioning",
            "set",
            "Finance Team",
            "--role",
            "operator",
            "--workspace",
            "ws1",
            url=url,
            key=admin,
        )
        assert code == 0, err
        assert "Finance Team: operator of ws1  (stored)" in out
        code, out, err = await sursis(
            "provisioning", "set", "sursis-admins", "--role", "admin", url=url, key=admin
        )
        assert code == 0 and "sursis-admins: admin of all workspaces" in out, err
        code, out, err = await sursis("provisioning", "set", "sre", "--role", "operator", url=url, key=admin)
        assert code == 2 and "validation_failed" in err
        code, out, err = await sursis("provisioning", "list", url=url, key=admin)
        assert code == 0, err
        assert out.splitlines() == [
            "Finance Team: operator of ws1  (stored)",
            "finance: operator of default  (settings)",
            "sursis-admins: admin of all workspaces  (stored)",
        ]
        code, out, err = await sursis("provisioning", "remove", "Finance Team", url=url, key=admin)
        assert code == 0 and out.strip() == "done", err
        code, out, err = await sursis("provisioning", "remove", "Finance Team", url=url, key=admin)
        assert code == 2 and "not_found" in err
        code, out, err = await sursis("provisioning", "list", url=url, key=operator)
        assert code == 2 and "forbidden" in err


@pytest.mark.parametrize("role", ["system", "boss"])
def test_a_setting_rule_no_person_may_have_is_refused_at_start(role: str) -> None:
    with pytest.raises(ValidationError, match="oidc_groups"):
        make_settings("sqlite+aiosqlite:///:memory:", oidc_groups={"x": {"role": role}})
    assert make_settings("sqlite+aiosqlite:///:memory:", oidc_groups={"x": {"role": "admin"}}).oidc_groups

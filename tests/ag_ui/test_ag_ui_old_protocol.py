"""An install whose `ag-ui-protocol` predates 1.0 (pydantic-ai 2.62's `[ag-ui]` extra pins `<1`):
the service serves everything else, and the AG-UI endpoint answers 501 `ag_ui_protocol_too_old`
naming what to install, its permission decided first; it is not in the OpenAPI document."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.routes import ag_ui_support
from sursis.domain.identity.keys import IssuedKey
from tests.conftest import bearer, make_settings


async def test_an_old_protocol_gets_a_501_that_names_the_fix(
    seeded: str, admin_key: IssuedKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ag_ui_support, "protocol_version", lambda: "0.1.22")
    app = create_app(make_settings(seeded))
    async with AsyncTestClient(app=app) as http:
        anonymous = await http.post("/v1/agents/ops/ag-ui", content=b"not json")
        assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthenticated"
        http.headers.update(bearer(admin_key.secret))
        response = await http.post("/v1/agents/ops/ag-ui", json={"threadId": "t", "runId": "r"})
        assert response.status_code == 501, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["code"] == "ag_ui_protocol_too_old"
        assert "0.1.22" in problem["detail"] and "ag-ui-protocol>=1.0,<2" in problem["detail"]
        assert (await http.get("/v1/agents")).status_code == 200
        paths = (await http.get("/schema/openapi.json")).json()["paths"]
        assert "/v1/agents/{name}/ag-ui" not in paths


async def test_the_installed_protocol_mounts_the_real_endpoint(seeded: str, admin_key: IssuedKey) -> None:
    assert int(str(ag_ui_support.protocol_version()).split(".")[0]) >= 1
    app = create_app(make_settings(seeded))
    async with AsyncTestClient(app=app) as http:
        http.headers.update(bearer(admin_key.secret))
        paths = (await http.get("/schema/openapi.json")).json()["paths"]
        assert "/v1/agents/{name}/ag-ui" in paths

"""The worked sign-in example of docs/sign-in.md, run: its settings, as environment variables,
against a real OpenID provider (only the provider's address, the client secret and the redirect
URL are the local ones): a finance person is an operator of `ws1`, a platform admin an admin."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from tests.api.oidc_provider import CLIENT_SECRET, REDIRECT_URL, LocalProvider, sign_in, start_provider
from tests.conftest import make_settings
from tests.docs.examples import REPO

BLOCK = re.compile(r"^```sh oidc-example\n(.*?)^```", re.MULTILINE | re.DOTALL)
PEOPLE = {
    "fiona": {"email": "fiona@example.com", "groups": ["finance"]},
    "pat": {"email": "pat@example.com", "groups": ["sursis-admins", "finance"]},
}


def example() -> dict[str, str]:
    [body] = BLOCK.findall((REPO / "docs" / "sign-in.md").read_text())
    found: dict[str, str] = {}
    for line in body.splitlines():
        if line.strip():
            name, _, value = shlex.split(line)[0].partition("=")
            found[name] = value
    return found


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE)


async def test_the_worked_example_signs_people_in(
    seeded: str, provider: LocalProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = example()
    assert env["SURSIS_OIDC_CLIENT_ID"] == "sursis"
    assert json.loads(env["SURSIS_OIDC_GROUPS"])["finance"] == {"role": "operator", "workspace": "ws1"}
    env |= {
        "SURSIS_OIDC_ISSUER": provider.issuer,
        "SURSIS_OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "SURSIS_OIDC_REDIRECT_URL": REDIRECT_URL,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = make_settings(seeded)
    assert settings.oidc_session_seconds == 28800
    async with AsyncTestClient(app=create_app(settings)) as http:
        fiona = await sign_in(http, "fiona")
        assert (fiona["role"], fiona["workspace"]) == ("operator", "ws1")
        pat = await sign_in(http, "pat")
        assert (pat["role"], pat["workspace"], pat["name"]) == ("admin", None, "pat@example.com")
        me = await http.get("/v1/me")
        assert me.status_code == 200 and me.json()["id"] == "oidc:pat"

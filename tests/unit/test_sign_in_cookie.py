"""The session cookie's attributes: `HttpOnly` and `SameSite=Lax` always, `Secure` when the service
is reached over TLS (its redirect URL is HTTPS)."""

from __future__ import annotations

import pytest

from sursis.app.oidc import PeopleSignIn
from sursis.app.oidc_provider import IdentityProvider, OidcConfig
from sursis.app.routes.signin import _cookie
from tests.fakes.people import FakePersonSessions


@pytest.mark.parametrize(
    ("redirect", "secure"), [("https://s.example.com/cb", True), ("http://127.0.0.1/cb", False)]
)
def test_the_session_cookie(redirect: str, secure: bool) -> None:
    config = OidcConfig("https://idp.example.com", "sursis", "secret", redirect, "openid", 3600, 300, {})
    cookie = _cookie(
        PeopleSignIn(IdentityProvider(config), FakePersonSessions()), "sursis_session", "v", 3600, "/"
    )
    header = cookie.to_header()
    assert "HttpOnly" in header and "SameSite=lax" in header.replace("Lax", "lax")
    assert ("Secure" in header) is secure

"""`/auth/oidc/*`: a person signs in to the inbox with the identity provider, and out again.

The session cookie is `HttpOnly` (the inbox's script never reads it), `SameSite=Lax` (another
site's form cannot carry it on a POST), `Secure` when the redirect URL is HTTPS, and a new one is
issued at each sign-in. Changes made with it carry the session's CSRF token in `X-CSRF-Token`,
which the script reads from `GET /auth/oidc/session`.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, Router, get, post
from litestar.datastructures import Cookie
from litestar.response import Redirect

from sursis.app.oidc import (
    CSRF_HEADER,
    SESSION_COOKIE,
    STATE_COOKIE,
    CsrfRefused,
    PeopleSignIn,
)
from sursis.app.oidc_provider import SignInFailed


def people(request: Request[Any, Any, Any]) -> PeopleSignIn:
    found: PeopleSignIn = request.app.state.people
    return found


def _cookie(sign_in: PeopleSignIn, name: str, value: str, max_age: int, path: str) -> Cookie:
    secure = sign_in.config.redirect_url.startswith("https://")
    return Cookie(
        key=name, value=value, max_age=max_age, path=path, httponly=True, secure=secure, samesite="lax"
    )


@get("/login", include_in_schema=False)
async def login(request: Request[Any, Any, Any]) -> Redirect:
    """To the provider's sign-in page; the state is also bound to this browser by a cookie."""
    sign_in = people(request)
    state, url = await sign_in.start()
    cookie = _cookie(sign_in, STATE_COOKIE, state, 600, "/auth/oidc")
    return Redirect(url, cookies=[cookie])


@get("/callback", include_in_schema=False)
async def callback(request: Request[Any, Any, Any]) -> Redirect:
    """The provider sends the browser back here: a new session, then the inbox."""
    sign_in = people(request)
    state, code = request.query_params.get("state", ""), request.query_params.get("code", "")
    if not state or not code:
        raise SignInFailed("the provider sent no code: sign in again")
    if request.cookies.get(STATE_COOKIE) != state:
        raise SignInFailed("this sign-in was not started by this browser")
    session_id, _ = await sign_in.finish(state, code, request.cookies.get(SESSION_COOKIE))
    max_age = int(sign_in.config.session_seconds)
    cookies = [
        _cookie(sign_in, SESSION_COOKIE, session_id, max_age, "/"),
        _cookie(sign_in, STATE_COOKIE, "", 0, "/auth/oidc"),
    ]
    return Redirect("/inbox/", cookies=cookies)


@get("/session", include_in_schema=False)
async def current(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Who is signed in, and the CSRF token their changes must carry; 401 when nobody is."""
    session = await people(request).session(request.cookies.get(SESSION_COOKIE))
    principal = session.principal
    return {
        "id": principal.id,
        "name": principal.name,
        "role": principal.role.value,
        "workspace": principal.workspace,
        "groups": session.groups,
        "csrf_token": session.csrf_token,
        "expires_at": session.expires_at,
    }


@post("/logout", include_in_schema=False, status_code=204)
async def logout(request: Request[Any, Any, Any]) -> Response[None]:
    """Ends the session (its CSRF token required, so another site cannot sign a person out)."""
    sign_in = people(request)
    session_id = request.cookies.get(SESSION_COOKIE)
    session = await sign_in.session(session_id)
    if request.headers.get(CSRF_HEADER) != session.csrf_token:
        raise CsrfRefused("send the session's CSRF token in X-CSRF-Token")
    await sign_in.end(session_id or "")
    return Response(None, status_code=204, cookies=[_cookie(sign_in, SESSION_COOKIE, "", 0, "/")])


def sign_in_router() -> Router:
    return Router(path="/auth/oidc", route_handlers=[login, callback, current, logout])

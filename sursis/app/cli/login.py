"""`sursis login`: a person signs the command line in with the identity provider's device flow
(RFC 8628), so `sursis pending approve` decides as them, not as a key.

The refresh token is kept in the user's config directory (`$XDG_CONFIG_HOME/sursis/credentials.json`,
mode 600); each client command trades it for a fresh ID token and sends that as its bearer, so a
person the provider disables or moves out of a group is refused at their next command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from sursis.domain.errors import Error

if TYPE_CHECKING:
    from sursis.app.settings import Settings

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


class LoginFailed(Error):
    """The provider refused or could not be reached: one line for the person at the terminal."""

    code = "login_failed"


def credentials_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "sursis" / "credentials.json"


def _client_auth(settings: Settings) -> dict[str, Any]:
    """HTTP Basic with the client secret where the client has one, else a public client's id."""
    client_id = settings.oidc_client_id or ""
    if settings.oidc_client_secret is not None:
        return {"auth": (client_id, settings.oidc_client_secret.get_secret_value()), "data": {}}
    return {"auth": None, "data": {"client_id": client_id}}


def _metadata(client: httpx.Client, issuer: str) -> dict[str, Any]:
    response = client.get(issuer.rstrip("/") + "/.well-known/openid-configuration")
    response.raise_for_status()
    found: dict[str, Any] = response.json()
    return found


def _token(client: httpx.Client, settings: Settings, endpoint: str, grant: dict[str, str]) -> httpx.Response:
    auth = _client_auth(settings)
    return client.post(endpoint, data={**auth["data"], **grant}, auth=auth["auth"])


def device_login(settings: Settings, *, out: Any = sys.stdout, sleep: Any = time.sleep) -> dict[str, Any]:
    """The device flow to its end: prints where to confirm, polls the token endpoint as the
    provider asks (`interval`, `slow_down`), returns the provider's tokens."""
    if not settings.oidc_issuer or not settings.oidc_client_id:
        raise LoginFailed("set SURSIS_OIDC_ISSUER and SURSIS_OIDC_CLIENT_ID to sign in")
    with httpx.Client(timeout=10.0) as client:
        meta = _metadata(client, settings.oidc_issuer)
        endpoint = meta.get("device_authorization_endpoint")
        if not endpoint:
            raise LoginFailed("the identity provider does not offer the device flow")
        auth = _client_auth(settings)
        started = client.post(
            endpoint, data={**auth["data"], "scope": settings.oidc_scopes}, auth=auth["auth"]
        )
        if started.status_code != 200:
            raise LoginFailed(f"the identity provider refused to start a sign-in ({started.status_code})")
        device = started.json()
        where = device.get("verification_uri_complete") or device["verification_uri"]
        print(f"Open {where} and confirm the code {device['user_code']}", file=out, flush=True)
        interval = float(device.get("interval", 5))
        deadline = time.monotonic() + float(device.get("expires_in", 600))
        grant = {"grant_type": DEVICE_GRANT, "device_code": device["device_code"]}
        while time.monotonic() < deadline:
            sleep(interval)
            answer = _token(client, settings, meta["token_endpoint"], grant)
            if answer.status_code == 200:
                tokens: dict[str, Any] = answer.json()
                return tokens
            error = answer.json().get("error") if answer.content else None
            if error == "slow_down":
                interval += 5
            elif error != "authorization_pending":
                raise LoginFailed(f"the sign-in was not completed ({error or answer.status_code})")
    raise LoginFailed("the sign-in was not confirmed in time")


def save_refresh_token(settings: Settings, tokens: dict[str, Any]) -> Path:
    """The refresh token in the user's config dir, readable by them only (written at mode 600)."""
    if not tokens.get("refresh_token"):
        raise LoginFailed("the identity provider gave no refresh token (ask for `offline_access`)")
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    body = json.dumps({"issuer": settings.oidc_issuer, "refresh_token": tokens["refresh_token"]})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(body)
    os.chmod(path, 0o600)
    return path


def person_token(settings: Settings) -> str | None:
    """A fresh ID token of the person `sursis login` signed in (the stored refresh token traded,
    and the new one stored), or None when nobody did. `LoginFailed` when the provider refuses."""
    path = credentials_path()
    if not path.exists() or not settings.oidc_issuer:
        return None
    stored = json.loads(path.read_text())
    with httpx.Client(timeout=10.0) as client:
        meta = _metadata(client, settings.oidc_issuer)
        grant = {"grant_type": "refresh_token", "refresh_token": stored["refresh_token"]}
        answer = _token(client, settings, meta["token_endpoint"], grant)
    if answer.status_code != 200:
        raise LoginFailed("the sign-in has ended: run `sursis login` again")
    tokens = answer.json()
    if tokens.get("refresh_token"):
        save_refresh_token(settings, tokens)
    token: str = tokens["id_token"]
    return token


def _login(settings: Settings, _: argparse.Namespace) -> int:
    try:
        tokens = device_login(settings)
        path = save_refresh_token(settings, tokens)
    except (LoginFailed, httpx.HTTPError) as error:
        print(f"sursis: {error}", file=sys.stderr)
        return 2
    print(f"Signed in; the refresh token is in {path}")
    return 0


def login(settings: Settings, args: argparse.Namespace) -> int:
    """`sursis login` (registered by `sursis.app.cli`, which loads this module only when it runs)."""
    return _login(settings, args)

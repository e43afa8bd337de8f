"""A real OpenID provider (the certified `oidc-provider` from npm) started for a test, and a person
signing in through it the way a browser does: the service's redirect, the provider's login form,
the provider's redirect back to the service's callback."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from litestar.testing import AsyncTestClient

PROVIDER_DIR = Path(__file__).resolve().parents[1] / "oidc_provider"
REDIRECT_URL = "http://testserver.local/auth/oidc/callback"
CLIENT_ID = "sursis"
CLIENT_SECRET = "sursis-test-secret"


@dataclass
class LocalProvider:
    issuer: str
    accounts: Path
    redirect_url: str = REDIRECT_URL
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        """The provider goes down (as in an outage): nothing answers at its address any more."""
        assert self.process is not None
        self.process.terminate()
        self.process.wait(10)

    def set_groups(self, person: str, groups: list[str]) -> None:
        people = json.loads(self.accounts.read_text())
        people[person]["groups"] = groups
        self.accounts.write_text(json.dumps(people))

    def settings(self, **rules: dict[str, str]) -> dict[str, Any]:
        return {
            "oidc_issuer": self.issuer,
            "oidc_client_id": CLIENT_ID,
            "oidc_client_secret": CLIENT_SECRET,
            "oidc_redirect_url": self.redirect_url,
            "oidc_groups": rules,
        }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_provider(
    tmp_path: Path,
    people: dict[str, dict[str, Any]],
    redirect_url: str = REDIRECT_URL,
    *,
    groups_in: str = "id_token",
) -> Iterator[LocalProvider]:
    """The provider, listening; `groups_in="userinfo"`: its ID tokens carry no `groups` (nor
    `email`), only its userinfo endpoint answers them."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, check=True)
    accounts = tmp_path / "accounts.json"
    accounts.write_text(json.dumps(people))
    port = free_port()
    log = (tmp_path / "provider.log").open("w")
    process = subprocess.Popen(
        [node, "provider.mjs", str(port), str(accounts), redirect_url],
        cwd=PROVIDER_DIR,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "SURSIS_TEST_GROUPS_IN": groups_in},
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(issuer + "/.well-known/openid-configuration").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError((tmp_path / "provider.log").read_text())
            time.sleep(0.1)
        yield LocalProvider(issuer, accounts, redirect_url, process)
    finally:
        process.terminate()
        process.wait(10)
        log.close()


async def provider_redirect(client: AsyncTestClient[Any], person: str) -> str:
    """The callback URL (path and query) the provider sends `person`'s browser back to."""
    started = await client.get("/auth/oidc/login", follow_redirects=False)
    assert started.status_code in (302, 303, 307), started.text
    url = started.headers["location"]
    async with httpx.AsyncClient() as browser:
        for _ in range(10):
            if url.startswith(REDIRECT_URL):
                parts = urlsplit(url)
                return f"{parts.path}?{parts.query}"
            page = await browser.get(url)
            if page.status_code == 200 and 'name="login"' in page.text:
                page = await browser.post(url, data={"prompt": "login", "login": person, "password": "x"})
            elif page.status_code == 200 and 'value="consent"' in page.text:
                page = await browser.post(url, data={"prompt": "consent"})
            assert page.status_code in (302, 303), page.text
            url = urljoin(url, page.headers["location"])
    raise AssertionError("the provider never sent the browser back")


async def sign_in(client: AsyncTestClient[Any], person: str) -> dict[str, Any]:
    """`person` signed in on `client` (its cookie jar holds the session): the session's view."""
    callback = await provider_redirect(client, person)
    back = await client.get(callback, follow_redirects=False)
    assert back.status_code in (302, 303), back.text
    assert back.headers["location"] == "/inbox/"
    session = await client.get("/auth/oidc/session")
    assert session.status_code == 200, session.text
    body: dict[str, Any] = session.json()
    return body


FORM = re.compile(r"<form[^>]*action=\"([^\"]+)\"[^>]*>(.*?)</form>", re.DOTALL)
HIDDEN = re.compile(r"<input type=\"hidden\" name=\"([^\"]+)\" value=\"([^\"]*)\"")


async def confirm_device(url: str, person: str) -> str:
    """What a person does with the device flow's link: open it, confirm the code, sign in at the
    provider's form. The provider's last page, once there is no form left to send."""
    async with httpx.AsyncClient() as browser:
        page = await browser.get(url)
        for _ in range(12):
            if page.status_code in (302, 303):
                url = urljoin(url, page.headers["location"])
                page = await browser.get(url)
                continue
            form = FORM.search(page.text)
            if form is None:
                return page.text
            fields = dict(HIDDEN.findall(form.group(2)))
            if 'name="login"' in form.group(2):
                fields |= {"login": person, "password": "x"}
            url = urljoin(url, form.group(1))
            page = await browser.post(url, data=fields)
    raise AssertionError("the provider kept asking")

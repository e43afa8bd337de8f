"""The inbox page and its assets as HTTP serves them; what the package ships."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from litestar.testing import AsyncTestClient

from sursis.app.routes.inbox import ASSETS, CONTENT_SECURITY_POLICY

ROOT = Path(__file__).resolve().parents[2]


async def test_the_page_and_its_assets_are_served_without_a_key_and_locked_to_this_origin(
    client: AsyncTestClient[Any],
) -> None:
    client.headers.pop("Authorization")
    page = await client.get("/inbox")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script src="/inbox/assets/inbox.js" defer></script>' in page.text
    for response in [
        page,
        *[await client.get(f"/inbox/assets/{name}") for name in ("inbox.js", "inbox.css")],
    ]:
        assert response.status_code == 200
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        assert response.headers["x-frame-options"] == "DENY"
    assert (await client.get("/inbox/assets/inbox.js")).headers["content-type"].startswith("text/javascript")
    assert (await client.get("/inbox/assets/inbox.css")).headers["content-type"].startswith("text/css")
    assert "connect-src 'self'" in CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY

    missing = await client.get("/inbox/assets/nothing.js")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")
    escape = await client.get("/inbox/assets/..%2F..%2Fmain.py")
    assert escape.status_code == 404
    schema = (await client.get("/schema/openapi.json")).json()
    assert not [path for path in schema["paths"] if path.startswith("/inbox")]


def test_the_assets_name_no_other_origin() -> None:
    for asset in ASSETS.iterdir():
        text = asset.read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.IGNORECASE), asset.name
        assert "innerHTML" not in text, asset.name


def test_every_asset_is_package_data() -> None:
    """An editable install finds the files anyway; a built wheel only ships what package-data names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["sursis"]
    package = ROOT / "sursis"
    shipped = sorted(str(a.relative_to(package)) for a in ASSETS.iterdir())
    assert shipped == [
        "app/static/inbox/inbox.css",
        "app/static/inbox/inbox.js",
        "app/static/inbox/index.html",
    ]
    assert [name for name in shipped if not any(fnmatch(name, p) for p in patterns)] == []

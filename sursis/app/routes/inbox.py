"""The operator inbox: one page and its assets, served from the package (no build step, no CDN).

The page holds no data and needs no key: everything it shows comes from `/v1`, fetched by its
script with the key the operator pasted (see `docs/inbox.md`).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from litestar import Response, Router, get
from litestar.enums import MediaType
from litestar.static_files import create_static_files_router

ASSETS = Path(str(files("sursis.app") / "static" / "inbox"))

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
"""Only the service's own origin, for everything: no CDN, no inline script, no framing."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


async def with_security_headers(response: Response[Any]) -> Response[Any]:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response


def inbox_router(assets: Path = ASSETS) -> Router:
    """`GET /inbox` (the page) and `GET /inbox/assets/*` (its script and style sheet)."""
    page = (assets / "index.html").read_bytes()

    @get("/", include_in_schema=False, media_type=MediaType.HTML)
    async def inbox_page() -> Response[bytes]:
        """The operator inbox."""
        return Response(page, media_type=MediaType.HTML)

    static = create_static_files_router(
        path="/assets", directories=[assets], name="inbox-assets", after_request=with_security_headers
    )
    return Router(path="/inbox", route_handlers=[inbox_page, static], after_request=with_security_headers)

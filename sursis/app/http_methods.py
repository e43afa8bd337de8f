"""Which methods a path allows, answered from the app's own route table (RFC 9110 `Allow`).

Litestar builds an `OPTIONS` answer per route object, and a path served by handlers declared
separately (`GET /v1/keys` and `POST /v1/keys`) can end up listing only some of them. The route
table holds the whole truth, so `OPTIONS` is answered from it here.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Request, Response
from litestar.routes import HTTPRoute
from litestar.status_codes import HTTP_204_NO_CONTENT


def allowed_methods(app: Litestar, path_template: str) -> list[str]:
    """Every method any handler serves at `path_template` (as Litestar formats it), plus OPTIONS."""
    methods = {"OPTIONS"}
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path_format == path_template:
            methods.update(str(m) for m in route.methods)
    return sorted(methods)


def answer_options(request: Request[Any, Any, Any]) -> Response[None] | None:
    """The `OPTIONS` answer with the full `Allow` list; any other method goes on to its handler."""
    template = request.scope.get("path_template")
    if request.method != "OPTIONS" or not template:
        return None
    allow = ", ".join(allowed_methods(request.app, template))
    return Response(None, status_code=HTTP_204_NO_CONTENT, headers={"Allow": allow})

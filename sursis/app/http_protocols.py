"""uvicorn's HTTP protocols, answering a request that is not valid HTTP with a problem document.

uvicorn refuses such a request (a control character in a header value, a broken request line)
before any ASGI app sees it, with a plain-text 400. These subclasses send the same 400 as an RFC
9457 problem with `code: bad_request`, like every other error of the service.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PROBLEM_BODY = json.dumps(
    {
        "type": "https://sursis.dev/problems/bad_request",
        "title": "bad request",
        "status": 400,
        "code": "bad_request",
        "detail": "the request is not valid HTTP (a header or the request line is malformed)",
    },
    separators=(",", ":"),
).encode()


def problem_400() -> bytes:
    """The whole response: status line, headers and the problem body; the connection then closes."""
    head = (
        "HTTP/1.1 400 Bad Request\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(PROBLEM_BODY)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + PROBLEM_BODY


class ProblemH11Protocol(H11Protocol):
    """The pure-Python protocol (`--http h11`)."""

    def send_400_response(self, msg: str) -> None:
        self.transport.write(problem_400())
        self.transport.close()


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    """The default protocol when `httptools` is installed."""

    def send_400_response(self, msg: str) -> None:
        self.transport.write(problem_400())
        self.transport.close()

"""Where a process's LISTEN connections go, and what it says when they cannot.

LISTEN needs a session of its own: behind a transaction pooler the server connection that ran
`LISTEN` is handed to other clients right after, and its notifications reach nobody. So LISTEN
connections go to `SURSIS_DATABASE_LISTEN_URL` (the database itself, or a session-mode pool),
which defaults to the main URL (`urls.listen_url`) and is given whole (every host, `target_session_attrs`) to
asyncpg. `off` turns LISTEN off. A LISTEN URL that reaches a pooler (found as the pool's
connections are: `sessions.behind_pooler`) is not used, whatever its pool mode, since a transaction
pooler would lose notifications without an error: a revoked key would then be served from the
cache until its time ran out. Without a usable LISTEN connection wake-ups fall back to polling;
the log says so once per listener until it is back, not at each retry.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import structlog

from sursis.domain.errors import Error
from sursis.infra.db.sessions import behind_pooler
from sursis.infra.db.urls import asyncpg_connect_kwargs, shown_url
from sursis.infra.db.urls import listen_url as listen_url

log = structlog.get_logger("sursis.listen")

POOLER_RETRY_SECONDS = 60.0
"""How long a listener whose URL reached a pooler waits before it looks again."""


class ListenNeedsSession(Error):
    """The LISTEN URL reaches a pooler, not PostgreSQL itself."""

    code = "listen_needs_session"


async def connect_for_listening(url: str) -> Any:
    """One asyncpg connection for LISTEN to every host of `url` (the first that suits); raises
    `ListenNeedsSession` when it reaches a pooler."""
    connection = await asyncpg.connect(**asyncpg_connect_kwargs(url), timeout=5, statement_cache_size=0)
    try:
        pooled = await behind_pooler(connection)
    except BaseException:
        connection.terminate()
        raise
    if pooled:
        await connection.close(timeout=2)
        raise ListenNeedsSession(
            "the LISTEN URL reaches a pooler: LISTEN needs a session of its own "
            "(set SURSIS_DATABASE_LISTEN_URL to PostgreSQL itself, or to `off`)"
        )
    return connection


def retry_after(error: BaseException, usual: float) -> float:
    """How long a listener waits before it connects again after `error`."""
    return POOLER_RETRY_SECONDS if isinstance(error, ListenNeedsSession) else usual


class PollingFallback:
    """Says once that a listener's wake-ups fall back to polling, and once that they are back."""

    def __init__(self, name: str, url: str) -> None:
        self._name = name
        self._url = url
        self._polling = False

    def lost(self, error: BaseException) -> None:
        if self._polling:
            return
        self._polling = True
        log.warning(
            "listen.polling",
            listener=self._name,
            url=shown_url(self._url),
            error_class=type(error).__name__,
            error=str(error)[:200],
            note="wake-ups fall back to polling until the LISTEN connection is back",
        )

    def listening(self) -> None:
        if self._polling:
            self._polling = False
            log.info("listen.restored", listener=self._name, url=shown_url(self._url))

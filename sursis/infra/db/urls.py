"""Database URLs as operators write them, made into what SQLAlchemy and asyncpg take.

Accepted beyond SQLAlchemy's own syntax:

- several hosts in the authority, as libpq writes them: `postgresql+asyncpg://u:pw@h1:5432,h2:5433/db`
  (a host without a port gets 5432); SQLAlchemy's form, `?host=h1:5432&host=h2:5433`, works too,
  also without ports. Both become one list of hosts that every connection is given whole (the pool's
  and the LISTEN connections), with `target_session_attrs` and the other options;
- a password with `@` in it, unencoded (`u:p@ss@host/db`): the last `@` before the host ends it.
  Percent-encoding (`p%40ss`) works as everywhere else.

A URL that still cannot be read raises `InvalidDatabaseUrl`, whose text never holds the password.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from sursis.domain.errors import Error

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DEFAULT_PORT = 5432
_HOST_PART = re.compile(r"[A-Za-z0-9._\-:,\[\]%]*(?=[/?]|$)")
_ONE_HOST = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<name>[^:]*))(?::(?P<port>[^:]*))?$")
_PLAIN_SQLITE = re.compile(r"sqlite(?:\+[A-Za-z0-9_]+)?:///(?P<path>[^?#%:]+)")
_PLAIN_POSTGRES = re.compile(
    r"postgresql\+asyncpg://(?:(?P<user>[A-Za-z0-9_.\-]+)(?::(?P<password>[^@/?#\[\]]+))?@)?"
    r"(?P<host>[A-Za-z0-9.\-]+)(?::(?P<port>[0-9]{1,5}))?/(?P<database>[A-Za-z0-9_.\-]+)"
)
SQLALCHEMY_ONLY = ("prepared_statement_cache_size", "prepared_statement_name_func")
"""Connection arguments SQLAlchemy's asyncpg adapter takes for itself; asyncpg refuses them."""


class InvalidDatabaseUrl(Error):
    """The database URL cannot be read; `str()` says why, without the password."""

    code = "invalid_database_url"


def _split_authority(rest: str) -> tuple[str | None, str]:
    """(userinfo, the rest from the host on), taking the last `@` that is followed by a host."""
    positions = [i for i, char in enumerate(rest) if char == "@"]
    for at in reversed(positions):
        if _HOST_PART.match(rest, at + 1):
            return rest[:at], rest[at + 1 :]
    return None, rest


def _encoded_userinfo(userinfo: str) -> str:
    user, colon, password = userinfo.partition(":")
    if not colon:
        return quote(unquote(user), safe="")
    # Encode what SQLAlchemy would misread, keep an already encoded password as it is.
    return f"{quote(unquote(user), safe='')}:{quote(unquote(password), safe='')}"


def _host_port(text: str) -> str:
    match = _ONE_HOST.match(text)
    if match is None or not (match["v6"] or match["name"]):
        raise InvalidDatabaseUrl(f"a host of the database URL is empty or unreadable: {text!r}")
    port = match["port"] or str(DEFAULT_PORT)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidDatabaseUrl(f"the port of host {text!r} in the database URL is not a number")
    host = f"[{match['v6']}]" if match["v6"] else match["name"]
    return f"{host}:{port}"


def normalized(url: str) -> str:
    """The URL in the form SQLAlchemy parses: userinfo encoded, several hosts as `host=` options."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.startswith("postgresql"):
        return url
    userinfo, rest = _split_authority(rest)
    authority_end = len(rest)
    for mark in ("/", "?"):
        found = rest.find(mark)
        if found != -1:
            authority_end = min(authority_end, found)
    hosts, tail = rest[:authority_end], rest[authority_end:]
    path, question, query = tail.partition("?")
    options = [option for option in query.split("&") if option] if question else []
    listed = [unquote(o.partition("=")[2]) for o in options if o.startswith("host=")]
    others = [o for o in options if not o.startswith("host=")]
    if "," in hosts or (listed and not listed[0].startswith("/")):
        if hosts and listed:
            raise InvalidDatabaseUrl("the database URL names hosts both before the path and as host= options")
        names = [_host_port(h) for h in (hosts.split(",") if "," in hosts else listed)]
        hosts = ""
        others = [*(f"host={quote(name, safe=':[]')}" for name in names), *others]
    prefix = f"{_encoded_userinfo(userinfo)}@" if userinfo is not None else ""
    query_text = f"?{'&'.join(others)}" if others else ""
    return f"{scheme}://{prefix}{hosts}{path}{query_text}"


def plain_sqlite_file(url: str) -> str | None:
    """The file an SQLite URL in its plain form names (`sqlite+aiosqlite:///path`: no options, no
    escapes, no `:memory:`), read without loading SQLAlchemy, exactly as SQLAlchemy reads it; None for
    every other URL, which only SQLAlchemy reads."""
    match = _PLAIN_SQLITE.fullmatch(url)
    return match["path"] if match else None


def plain_postgres_kwargs(url: str) -> dict[str, Any] | None:
    """`asyncpg_connect_kwargs` of a PostgreSQL URL in its plain form (`postgresql+asyncpg://user:pw@
    host:port/db`: one host, no options), read without loading SQLAlchemy; None for any other URL."""
    match = _PLAIN_POSTGRES.fullmatch(url)
    if match is None or (match["port"] and not 0 < int(match["port"]) < 65536):
        return None
    kwargs: dict[str, Any] = {"host": match["host"], "database": match["database"]}
    if match["user"]:
        kwargs["user"] = match["user"]
    if match["password"] is not None:
        kwargs["password"] = unquote(match["password"])
    if match["port"]:
        kwargs["port"] = int(match["port"])
    return kwargs


def database_url(url: str) -> URL:
    """The SQLAlchemy URL of `url` (any accepted form); `InvalidDatabaseUrl` when it cannot be read."""
    from sqlalchemy import exc
    from sqlalchemy.engine import make_url

    try:
        return make_url(normalized(url))
    except InvalidDatabaseUrl:
        raise
    except (exc.ArgumentError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidDatabaseUrl(
            f"the database URL cannot be read ({_without_password(reason, url)})"
        ) from None


def _without_password(text: str, url: str) -> str:
    userinfo, _ = _split_authority(url.partition("://")[2])
    password = (userinfo or "").partition(":")[2]
    for secret in {password, unquote(password)} - {""}:
        text = text.replace(secret, "***")
    return text[:200]


def asyncpg_connect_kwargs(url: str) -> dict[str, Any]:
    """The keyword arguments of `asyncpg.connect` for `url`: every host with its port, user,
    password, database and the URL's options (`target_session_attrs`, `ssl`, ...), exactly as the
    engine's pool passes them."""
    from sqlalchemy import exc
    from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg

    parsed = database_url(url)
    try:
        _, options = PGDialect_asyncpg().create_connect_args(parsed)  # type: ignore[no-untyped-call]
    except exc.ArgumentError as error:
        raise InvalidDatabaseUrl(f"the database URL cannot be used ({error})") from None
    for name in SQLALCHEMY_ONLY:
        options.pop(name, None)
    return dict(options)


def shown_url(url: str) -> str:
    """The URL as the service prints it: the password masked (`***`)."""
    if plain_sqlite_file(url) is not None:
        return url
    if plain_postgres_kwargs(url) is not None:
        match = _PLAIN_POSTGRES.fullmatch(url)
        assert match is not None
        if match["password"] is None:
            return url
        return url[: match.start("password")] + "***" + url[match.end("password") :]
    try:
        shown = database_url(url).render_as_string(hide_password=True)
    except InvalidDatabaseUrl:
        return "(an unreadable database URL)"
    return re.sub(r"(?<=host=)([^&]*)", lambda m: unquote(m[1]), shown)


LISTEN_OFF = frozenset({"off", "none", "false", "0"})


def listen_url(database_url: str, configured: str | None) -> str | None:
    """The URL LISTEN connections use: the configured one, else the main one; None when off."""
    if configured is None or not configured.strip():
        return database_url
    if configured.strip().lower() in LISTEN_OFF:
        return None
    return configured


def check_listen_url(url: str, configured: str | None) -> None:
    """An unreadable `SURSIS_DATABASE_LISTEN_URL` is one line at start (`InvalidDatabaseUrl`)."""
    listening = listen_url(url, configured)
    if listening is not None and listening != url:
        try:
            database_url(listening)
        except InvalidDatabaseUrl as error:
            raise InvalidDatabaseUrl(f"SURSIS_DATABASE_LISTEN_URL: {error}") from None

"""`jsonb` on PostgreSQL crosses asyncpg as text, decoded by `json.loads` itself
(`engine.decode_jsonb_in_c`): every JSON value the repositories bind comes back as it went in,
through a Core statement and through the turn's driver path alike."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sursis.infra.db.engine import create_engine

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(
                alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


async def _decoded(engine: AsyncEngine, values: list[Any]) -> list[tuple[str, str]]:
    """Each value bound as `jsonb` and read back: (its JSON text as decoded, the server's type)."""
    try:
        async with engine.connect() as connection:
            value = sa.cast(sa.bindparam("value", type_=JSONB), JSONB)
            query = sa.select(value, sa.func.jsonb_typeof(value))
            rows = [(await connection.execute(query, {"value": v})).one() for v in values]
            return [(json.dumps(row[0]), row[1]) for row in rows]
    finally:
        await engine.dispose()


def _json_type(value: Any) -> str:
    kinds = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string"}
    return kinds.get(type(value)) or ("array" if isinstance(value, list) else "object")


@settings(max_examples=25, deadline=None)
@given(values=st.lists(JSON_VALUES, min_size=1, max_size=12))
def test_a_jsonb_value_comes_back_as_sqlalchemys_own_codec_gives_it(
    pg_migrated: str, values: list[Any]
) -> None:
    """The same values, to the type (an integral float PostgreSQL keeps as `1e16` comes back an
    int through either), as SQLAlchemy's binary codec decodes them; the server read each as the JSON
    value it is."""
    ours = asyncio.run(_decoded(create_engine(pg_migrated), values))
    sqlalchemys = asyncio.run(_decoded(create_async_engine(pg_migrated), values))
    assert ours == sqlalchemys
    assert [kind for _, kind in ours] == [_json_type(v) for v in values]

"""Near-valid variants of a documented example, for property-based tests at the service's edge.

A variant changes one place of the example: a field dropped, given a value of another type, out of
range, a timestamp naive / aware / malformed, or the encoded body given a byte that is not UTF-8.
The hypothesis profile `edge` is derandomized with a modest number of examples, so `make test`
stays bounded and stable.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

settings.register_profile(
    "edge",
    max_examples=40,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
EDGE = settings.get_profile("edge")

Path = tuple[str | int, ...]


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every place in a JSON value (not the root), parents before children."""
    found: list[Path] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((*prefix, key))
            found.extend(paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.append((*prefix, index))
            found.extend(paths(child, (*prefix, index)))
    return found


def _parent(document: Any, path: Path) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


OTHER_TYPES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(min_value=0, max_value=3), max_size=2),
)
OUT_OF_RANGE = st.sampled_from(
    [-1, -0.5, 1.5, 2, 10**30, -(10**30), 1e308, -1e308, 0, "", " ", "x" * 5000, "\x00", "é" * 300, "a\nb"]
)
OFFSETS = st.sampled_from(
    [
        None,
        UTC,
        timezone(timedelta(hours=14)),
        timezone(timedelta(hours=-12)),
        timezone(timedelta(minutes=-30)),
    ]
)
TIMESTAMPS = st.one_of(
    st.builds(lambda d, tz: d.replace(tzinfo=tz).isoformat(), st.datetimes(), OFFSETS),
    st.sampled_from(
        [
            "2026-11-25T06:00:00",
            "2026-11-25T06:00:00Z",
            "2026-11-25T06:00:00+14:00",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "2026-02-30T00:00:00Z",
            "2026-11-25 06:00",
            "2026-11-25",
            "25/11/2026",
            "yesterday",
            "",
        ]
    ),
)


@dataclass(frozen=True)
class Variant:
    """A body to send (bytes) and what was done to the example, for the failure message."""

    body: bytes
    change: str

    def __repr__(self) -> str:
        return f"Variant({self.change}: {self.body[:300]!r})"


@st.composite
def near_valid(
    draw: st.DrawFn, example: Any, fresh: dict[Path, st.SearchStrategy[Any]] | None = None
) -> Variant:
    """One variant of `example`; `fresh` draws values set before the change (e.g. a new event id,
    so that variants are not all duplicates of one another)."""
    document = copy.deepcopy(example)
    for path, strategy in (fresh or {}).items():
        _parent(document, path)[path[-1]] = draw(strategy)
    places = paths(document)
    operation = draw(st.sampled_from(["drop", "retype", "range", "time", "utf8", "extra"]))
    if operation == "utf8":
        encoded = json.dumps(document).encode()
        at = draw(st.integers(min_value=0, max_value=len(encoded)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]))
        return Variant(encoded[:at] + bad + encoded[at:], f"non-UTF-8 {bad!r} at {at}")
    path = draw(st.sampled_from(places))
    parent = _parent(document, path)
    key = path[-1]
    if operation == "drop":
        del parent[key]
    elif operation == "extra":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target[draw(st.sampled_from(["unexpected", "", "id\x00"]))] = draw(OTHER_TYPES)
        else:
            target.append(draw(OTHER_TYPES))
    else:
        strategy = {"retype": OTHER_TYPES, "range": OUT_OF_RANGE, "time": TIMESTAMPS}[operation]
        parent[key] = draw(strategy)
    return Variant(json.dumps(document).encode(), f"{operation} at {list(path)}")


def every_variant(example: Any) -> list[Variant]:
    """Systematic variants, besides the drawn ones: each place dropped, each given a value of
    another type, each timestamp naive, at +14:00 and malformed, and the body cut short."""
    variants: list[Variant] = []
    for path in paths(example):
        original = _parent(example, path)[path[-1]]
        changes: list[tuple[str, Any]] = [
            ("drop", None),
            ("retype", [] if not isinstance(original, list) else {}),
        ]
        if isinstance(original, str) and original[:4].isdigit() and "T" in original:
            changes += [
                ("time", "2026-11-25T06:00:00"),
                ("time", "2026-11-25T06:00:00+14:00"),
                ("time", "2026-11-25T25:00:00Z"),
            ]
        for operation, value in changes:
            document = copy.deepcopy(example)
            parent = _parent(document, path)
            if operation == "drop":
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            variants.append(Variant(json.dumps(document).encode(), f"{operation} at {list(path)}"))
    encoded = json.dumps(example).encode()
    variants.append(Variant(encoded[: len(encoded) // 2], "cut short"))
    return variants

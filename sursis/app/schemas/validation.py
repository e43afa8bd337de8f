"""Input checks every request body shares: JSON depth, NUL characters, aware times, strict models."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from sursis.domain.errors import ValidationFailed
from sursis.domain.events.webhooks import WEBHOOK_URL_PATTERN


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return to_jsonable_python(value)


MAX_JSON_DEPTH = 32


def bounded_depth(value: Any) -> Any:
    """Refuse JSON nested deeper than `MAX_JSON_DEPTH`: it is never a legitimate tool argument or answer."""
    level: list[tuple[Any, int]] = [(value, 1)]
    while level:
        item, depth = level.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        level.extend((child, depth + 1) for child in children)
    return value


MAX_NUL_ERRORS = 20
NUL = "\x00"


def refuse_nul_characters(value: Any) -> Any:
    """Refuse a NUL character in any string of a JSON body, keys included.

    No field has a use for one, and PostgreSQL cannot store it in `text` or `jsonb`: refused here,
    once, it is a 422 with the offending fields instead of a database error on some later write.
    """
    errors: list[dict[str, Any]] = []
    stack: list[tuple[Any, list[str]]] = [(value, [])]
    while stack and len(errors) < MAX_NUL_ERRORS:
        item, path = stack.pop()
        if isinstance(item, str):
            if NUL in item:
                errors.append({"loc": path or ["body"], "msg": "must not contain a NUL character"})
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                name = str(key)
                if NUL in name:
                    loc = [*path, name.replace(NUL, "\\u0000")]
                    errors.append({"loc": loc, "msg": "a key must not contain a NUL character"})
                stack.append((child, [*path, name]))
        elif isinstance(item, list):
            stack.extend((child, [*path, str(i)]) for i, child in reversed(list(enumerate(item))))
    if errors:
        raise ValidationFailed("the request is not valid", extra={"errors": errors})
    return value


# Event and audit ids are `Integer` columns, 32-bit on PostgreSQL: a larger id cannot exist, and
# binding one fails in the database (after a stream has started, too late for a 422).
MAX_ROW_ID = 2**31 - 1


def as_utc(value: datetime) -> datetime:
    """An aware time in UTC; a time that has no UTC equivalent (year 1 at +14:00) is a ValueError."""
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the time is out of range") from exc


JsonValue = Annotated[Any, AfterValidator(bounded_depth)]
JsonObject = Annotated[dict[str, Any], AfterValidator(bounded_depth)]
UtcDatetime = Annotated[AwareDatetime, AfterValidator(as_utc)]


# Constraints the service enforces, named once: the pydantic models and the query parameters use
# these, so the check and the OpenAPI document come from the same place.
WORKSPACE_PATTERN = r"^[A-Za-z0-9_.-]+$"
MAX_WORKSPACE_CHARS = 100
WorkspaceName = Annotated[str, Field(min_length=1, max_length=MAX_WORKSPACE_CHARS, pattern=WORKSPACE_PATTERN)]

# A page cursor is opaque: URL-safe base64 of what the service needs to continue. The shape is
# checked by the pattern, the content when it is decoded (422 `validation_failed` either way).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+={0,2}$"
MAX_CURSOR_CHARS = 200

# A webhook URL is checked by `check_url` (with a message per problem); the document carries its
# shape, the same pattern `check_url` ends with.
MAX_URL_CHARS = 2000
WebhookUrl = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_URL_CHARS,
        json_schema_extra={"format": "uri", "pattern": WEBHOOK_URL_PATTERN},
        description="An absolute http or https URL without credentials; a public host unless "
        "the deployment allows private ones",
    ),
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FromRecord(BaseModel):
    """A response model read from a record's attributes of the same names (`model_validate`),
    so a field is listed on the record and here, nowhere else."""

    model_config = ConfigDict(from_attributes=True)

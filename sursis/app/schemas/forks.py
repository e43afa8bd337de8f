"""The body and answer of `POST /v1/conversations/{id}/fork`."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field

from sursis.app.schemas.conversations import ConversationOut
from sursis.app.schemas.runs import RunOut
from sursis.app.schemas.validation import Strict

MAX_SEQ = 2**31 - 1


def _json_integer(value: object) -> object:
    # The app validates bodies with `strict=False`, which a field's own `strict=True` does not
    # override: `"3"`, `3.0` or `true` would otherwise become 3.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("a message's seq, as a JSON integer (not a string, not a fraction)")
    return value


def _json_string(value: object) -> object:
    if not isinstance(value, str):
        raise ValueError("a string")
    return value


Seq = Annotated[int, BeforeValidator(_json_integer), Field(ge=1, le=MAX_SEQ)]
Message = Annotated[str, BeforeValidator(_json_string), Field(min_length=1)]


class ForkBody(Strict):
    at: Seq = Field(
        description="The seq of a user message of the conversation: the fork holds every message "
        "before it and runs a user message in its place",
    )
    message: Message | None = Field(
        default=None,
        description="The fork's user message at `at` (at most the service's message limit, "
        "32,000 characters by default); left out, the original's message is run again",
    )


class ForkedOut(BaseModel):
    conversation: ConversationOut
    run: RunOut = Field(description="The run of the fork's user message at `at`")

"""A failed segment's error classified as pydantic-ai raises it on every supported version: 2.62
re-raises the one error of its task group with that group as the error's `__context__`, so the
error and the group lead to each other; each is looked at once."""

from __future__ import annotations

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from sqlalchemy.exc import OperationalError

from sursis.infra.agents.approved_args import ApprovedArgsMismatch, Mismatch, refusal
from sursis.infra.runner import is_transient_database_error, run_failure


def reraised_from_task_group(error: Exception) -> BaseException:
    """`error` as pydantic-ai 2.62 raises it out of `agent.iter`: taken out of the group that
    held it, inside that group's handler."""
    try:
        try:
            raise ExceptionGroup("unhandled errors in a TaskGroup", [error])
        except ExceptionGroup as group:
            raise group.exceptions[0]  # noqa: B904 - the context kept, as pydantic-ai 2.62 keeps it
    except BaseException as raised:
        return raised


def test_the_error_and_its_group_lead_to_each_other() -> None:
    error = reraised_from_task_group(RuntimeError("the model broke"))
    group = error.__context__
    assert isinstance(group, BaseExceptionGroup) and group.exceptions == (error,)


@pytest.mark.parametrize(
    ("error", "code", "transient"),
    [
        (RuntimeError("the model broke"), "internal_error", False),
        (ModelHTTPError(500, "m", body="down"), "model_error", False),
        (OperationalError("SELECT 1", {}, Exception("database is locked")), "internal_error", True),
    ],
)
def test_an_error_reraised_out_of_its_group_is_classified(
    error: Exception, code: str, transient: bool
) -> None:
    raised = reraised_from_task_group(error)
    assert refusal(raised) is None
    assert run_failure(raised).code == code
    assert is_transient_database_error(raised) is transient


def test_a_refusal_reraised_out_of_its_group_is_found() -> None:
    found = Mismatch("call_1", "refund", "c-1", "expected", "actual", "changed")
    refused = ApprovedArgsMismatch(found)
    raised = reraised_from_task_group(refused)
    assert refusal(raised) is refused
    assert run_failure(raised).code == refused.code

"""A call that runs on an approval runs with exactly the arguments its deciders approved.

The tool of an approved call runs on the arguments in the stored message log (the model's call),
or on the arguments an operator edited; the deciders saw the pending call's `args` and `args_hash`.
Those are separate rows, so the log could say something the deciders never saw. When the run
resumes, each approved call is bound to what was approved (`binding`, from the pending row the
resume reads anyway): the `args_hash` the deciders saw, or the hash of the edited arguments they
signed off. The runner compares every approved call of the segment before the segment starts
(`mismatches`: nothing runs if one differs) and the tool wrapper compares again at dispatch
(`check_dispatch`). A mismatch is never run: it is an audit finding (`integrity.args_mismatch`)
and the run fails with `approved_args_mismatch`.

Where pydantic-ai (2.68 and later) gives the arguments the tool will receive (validated, defaults
filled, rewritten by validation hooks) and they differ from the model's, the deciders saw those too:
the pending call's `args_hash` binds both, and at dispatch the arguments the tool is about to
receive are compared with them as well.

Where decisions are sealed, the binding is first the decision's seal: an approved call whose ask or
decision seal does not check, or whose sealed votes do not meet its sealed route (the repository
that read it says why: `PendingCall.seal_problem`), is refused the same way, as
`integrity.decision_unsealed`, and the run fails with `decision_seal_invalid`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import structlog
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import DeferredToolResults, ToolApproved
from pydantic_core import to_jsonable_python

from sursis.domain.audit.integrity import ARGS_MISMATCH, DECISION_UNSEALED, OUTCOME_MISMATCH
from sursis.domain.errors import Error
from sursis.domain.records import AuditEntry, PendingCall, RunError, ToolCallRecord
from sursis.domain.sanitize import args_hash, pending_args_hash
from sursis.infra.agents.run_deps import RunDeps

log = structlog.get_logger("sursis.tools")

APPROVED = "approved_args"
"""Deferral metadata of an approved call: what it must hash to (`binding`)."""
CODE = "approved_args_mismatch"
UNSEALED_CODE = "decision_seal_invalid"
"""The run's error when an approved call's decision is not sealed by the service, or its sealed votes
do not meet its sealed route (`domain/approvals/decision_seal.py`)."""
ACTOR = "system:worker"
_ROW_CHANGED = "the pending call's arguments do not hash to the args_hash its deciders saw"
_LOG_CHANGED = "the arguments about to run are not the ones approved"
_OUTCOME_CHANGED = "the stored outcome about to be replayed was recorded for other arguments"
_VALIDATED_CHANGED = "the arguments the tool is about to receive are not the validated ones approved"
VALIDATED = "validated_args_hash"
"""In a binding: the hash of the validated arguments the deciders saw (pydantic-ai 2.68 and later)."""


def binding(row: PendingCall, call: ToolCallPart, annotations: Iterable[str] = ()) -> dict[str, Any]:
    """What the approved call `call` must hash to: the hash of the edited arguments when the
    deciders edited them, else the `args_hash` they saw (which the shown `args` must hash to).

    `annotations` are keys the service added to the shown arguments for the deciders (what a tool
    asks them to check): left out of the comparison when the call itself has no such argument.
    """
    bound: dict[str, Any] = {"correlation_id": str(row.correlation_id)}
    if row.seal_problem is not None:
        # Checked before the arguments: the edited arguments are part of what the seal covers.
        bound["args_hash"] = row.args_hash
        bound["unsealed"] = row.seal_problem
        return bound
    edited = (row.resolution or {}).get("args")
    if edited is not None:
        bound["args_hash"] = args_hash(row.tool_name, edited)
        return bound
    bound["args_hash"] = row.args_hash
    if pending_args_hash(row.tool_name, row.args, row.validated_args) != row.args_hash:
        bound["broken"] = _ROW_CHANGED
        return bound
    called = call.args_as_dict()
    shown = {k: v for k, v in row.args.items() if k in called or k not in annotations}
    bound["args_hash"] = args_hash(row.tool_name, shown)
    if row.validated_args is not None:
        # What the tool will receive, compared when it is about to (`check_dispatch`).
        bound[VALIDATED] = args_hash(row.tool_name, row.validated_args)
    return bound


@dataclass(frozen=True, slots=True)
class Mismatch:
    """An approved call whose arguments are not the approved ones."""

    tool_call_id: str
    tool_name: str
    correlation_id: str | None
    expected: str
    actual: str
    reason: str
    action: str = ARGS_MISMATCH
    authorization_id: str | None = None
    """The pre-approval whose lift was refused (a call no pending call holds)."""

    @classmethod
    def unsealed_lift(cls, call: ToolCallPart, hashed: str, authorization_id: str, reason: str) -> Mismatch:
        """A call a pre-approval would lift (or cleared) whose seal does not check."""
        return cls(
            call.tool_call_id,
            call.tool_name,
            None,
            hashed,
            hashed,
            reason,
            DECISION_UNSEALED,
            authorization_id,
        )

    @property
    def subject(self) -> str:
        """What the refused decision belongs to: its pending call, or the pre-approval that lifted it."""
        if self.correlation_id is None and self.authorization_id is not None:
            return f"pre-approval {self.authorization_id}"
        return f"pending call {self.correlation_id}"

    @property
    def code(self) -> str:
        """The failed run's error code: what was refused."""
        return UNSEALED_CODE if self.action == DECISION_UNSEALED else CODE

    def details(self) -> dict[str, Any]:
        details = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "expected_args_hash": self.expected,
            "actual_args_hash": self.actual,
            "reason": self.reason,
        }
        if self.authorization_id is not None:
            details["authorization_id"] = self.authorization_id
        return details

    def audit_entry(self, workspace: str, conversation_id: uuid.UUID, run_id: uuid.UUID) -> AuditEntry:
        """The finding, as an audit row about the pending call."""
        return AuditEntry(
            action=self.action,
            actor=ACTOR,
            workspace=workspace,
            conversation_id=conversation_id,
            run_id=run_id,
            correlation_id=uuid.UUID(self.correlation_id) if self.correlation_id else None,
            details=self.details(),
        )


def mismatch(
    call: ToolCallPart, bound: Mapping[str, Any] | None, receives: Mapping[str, Any] | None = None
) -> Mismatch | None:
    """How `call` (as it is about to run) differs from its binding; None when it is the approved call
    (or carries no binding). `receives`: the arguments its tool is about to receive, compared with
    the validated arguments the deciders saw."""
    if not isinstance(bound, Mapping) or "args_hash" not in bound:
        return None
    actual = args_hash(call.tool_name, call.args_as_dict())
    unsealed = bound.get("unsealed")
    if unsealed is not None:
        return Mismatch(
            call.tool_call_id,
            call.tool_name,
            bound.get("correlation_id"),
            str(bound["args_hash"]),
            actual,
            str(unsealed),
            DECISION_UNSEALED,
        )
    broken = bound.get("broken")
    validated = bound.get(VALIDATED)
    if broken is None and actual == bound["args_hash"] and validated is not None and receives is not None:
        received = args_hash(call.tool_name, jsonable_args(receives))
        if received != validated:
            return Mismatch(
                call.tool_call_id,
                call.tool_name,
                bound.get("correlation_id"),
                str(validated),
                received,
                _VALIDATED_CHANGED,
            )
    if broken is None and actual == bound["args_hash"]:
        return None
    return Mismatch(
        call.tool_call_id,
        call.tool_name,
        bound.get("correlation_id"),
        str(bound["args_hash"]),
        actual,
        str(broken or _LOG_CHANGED),
    )


def approved_hash(metadata: Mapping[str, Any]) -> str | None:
    """The hash of the approved arguments a call runs with (recorded with its outcome), or None for a
    call that does not run on an approval."""
    bound = metadata.get(APPROVED)
    if not isinstance(bound, Mapping) or bound.get("broken") is not None or bound.get("unsealed") is not None:
        return None
    value = bound.get("args_hash")
    return value if isinstance(value, str) else None


def replay_mismatch(
    call: ToolCallPart, bound: Mapping[str, Any] | None, recorded: str | None
) -> Mismatch | None:
    """How a stored outcome, recorded for arguments hashing to `recorded`, differs from the approved
    call it would be replayed for; None when it belongs to it (or either hash is unknown: an outcome
    recorded before the hash was)."""
    if not isinstance(bound, Mapping) or recorded is None or recorded == bound.get("args_hash"):
        return None
    return Mismatch(
        call.tool_call_id,
        call.tool_name,
        bound.get("correlation_id"),
        str(bound.get("args_hash")),
        recorded,
        _OUTCOME_CHANGED,
        OUTCOME_MISMATCH,
    )


def mismatches(
    tail: Sequence[ToolCallPart],
    results: DeferredToolResults | None,
    recorded: Mapping[str, ToolCallRecord | None] | None = None,
) -> list[Mismatch]:
    """The approved calls of `tail` that would run with arguments other than the approved ones, or
    whose stored outcome (`recorded`, by call id) would be replayed although it was recorded for
    other arguments."""
    if results is None:
        return []
    found: list[Mismatch] = []
    for part in tail:
        approval = results.approvals.get(part.tool_call_id)
        if not isinstance(approval, ToolApproved):
            continue
        running = part if approval.override_args is None else replace(part, args=approval.override_args)
        bound = (results.metadata.get(part.tool_call_id) or {}).get(APPROVED)
        stored = (recorded or {}).get(part.tool_call_id)
        found_one = mismatch(running, bound) or replay_mismatch(
            running, bound, stored.args_hash if stored is not None else None
        )
        if found_one is not None:
            found.append(found_one)
    return found


def run_error(found: Sequence[Mismatch]) -> RunError:
    """What the failed run tells its caller (a decision that is not the service's first: nothing
    about its arguments can be trusted then)."""
    unsealed = [m for m in found if m.action == DECISION_UNSEALED]
    if unsealed:
        named = ", ".join(f"{m.tool_name} ({m.subject}): {m.reason}" for m in unsealed)
        return RunError(
            UNSEALED_CODE,
            f"not run: {named}; an integrity audit finding names the call",
        )
    named = ", ".join(f"{m.tool_name} (pending call {m.correlation_id})" for m in found)
    return RunError(
        CODE,
        f"not run: {named} would have run (or replayed an outcome) with arguments other than the "
        "approved ones; an integrity audit finding names the hashes",
    )


class ApprovedArgsMismatch(Error):
    """Raised by the tool wrapper instead of running an approved call whose arguments changed."""

    code = "approved_args_mismatch"

    def __init__(self, found: Mismatch) -> None:
        self.found = found
        self.code = found.code
        self.message = run_error([found]).message
        super().__init__(self.message)


def refusal(exc: BaseException, seen: set[int] | None = None) -> ApprovedArgsMismatch | None:
    """The `ApprovedArgsMismatch` that `exc` is, or carries as a cause (or in a group), if any.

    Each exception is looked at once across the whole walk (`seen`): pydantic-ai 2.62 re-raises
    the one error of its task group with that group as its `__context__`, so the group leads back
    to the error that leads to the group.
    """
    seen = set() if seen is None else seen
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ApprovedArgsMismatch):
            return current
        if isinstance(current, BaseExceptionGroup):
            for inner in current.exceptions:
                if (found := refusal(inner, seen)) is not None:
                    return found
        current = current.__cause__ or current.__context__
    return None


def logged(found: Mismatch) -> None:
    log.error(
        "tool.approved_args_mismatch",
        tool_name=found.tool_name,
        tool_call_id=found.tool_call_id,
        correlation_id=found.correlation_id,
        expected_args_hash=found.expected,
        actual_args_hash=found.actual,
    )


def jsonable_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Validated arguments in the JSON form pydantic-ai gives them in `DeferredToolRequests`."""
    jsonable = to_jsonable_python(dict(args), serialize_unknown=True, bytes_mode="base64")
    assert isinstance(jsonable, dict)
    return jsonable


async def check_dispatch(
    deps: RunDeps, call: ToolCallPart, metadata: Mapping[str, Any], receives: Mapping[str, Any] | None = None
) -> None:
    """At dispatch of an approved call: the finding written and `ApprovedArgsMismatch` raised when
    its arguments (the model's, or those its tool receives) are not the approved ones."""
    found = mismatch(call, metadata.get(APPROVED), receives)
    if found is None:
        return
    await refuse(deps, found)


async def check_replay(
    deps: RunDeps, call: ToolCallPart, metadata: Mapping[str, Any], recorded: str | None
) -> None:
    """Before a stored outcome is replayed for an approved call: the finding written and
    `ApprovedArgsMismatch` raised when it was recorded for other arguments."""
    found = replay_mismatch(call, metadata.get(APPROVED), recorded)
    if found is not None:
        await refuse(deps, found)


async def refuse(deps: RunDeps, found: Mismatch) -> NoReturn:
    logged(found)
    async with deps.uow() as uow:
        entry = found.audit_entry(deps.workspace, deps.conversation_id, deps.run_id)
        await uow.audit.append(entry, deps.clock())
        await uow.commit()
    raise ApprovedArgsMismatch(found)

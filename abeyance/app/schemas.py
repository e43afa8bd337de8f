"""HTTP request and response shapes."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

from abeyance.domain.access import Permission
from abeyance.domain.errors import ValidationFailed
from abeyance.domain.keys import IssuedKey
from abeyance.domain.records import (
    ApiKey,
    AuditEntry,
    Authorization,
    Conversation,
    PendingCall,
    Principal,
    Run,
    StoredMessage,
    ToolCallRecord,
    Usage,
    Webhook,
)
from abeyance.domain.sanitize import sanitize
from abeyance.domain.services import RunView


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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateConversation(Strict):
    agent: str = Field(min_length=1, max_length=100)
    workspace: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")


class PostMessage(Strict):
    content: str = Field(min_length=1)


WorkspaceName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]


class CreateAuthorization(Strict):
    tool_name: str = Field(min_length=1, max_length=200)
    reason: str = Field(min_length=1, max_length=4000)
    args_match: JsonObject | None = Field(
        default=None, description="Pre-approve only calls whose arguments equal these values"
    )
    expires_at: UtcDatetime | None = None
    workspace: WorkspaceName | None = Field(default=None, description="Admins only; defaults to the key's")


class AuthorizationOut(BaseModel):
    id: uuid.UUID
    workspace: str
    tool_name: str
    args_match: dict[str, Any] | None
    reason: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class CreateKey(Strict):
    role: Literal["user", "operator", "admin"]
    workspace: WorkspaceName | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)


class ApiKeyOut(BaseModel):
    id: uuid.UUID
    name: str
    prefix: str
    role: str
    workspace: str | None
    created_at: datetime
    revoked_at: datetime | None


class IssuedKeyOut(ApiKeyOut):
    key: str = Field(description="The key itself. Shown only in this response; only its hash is stored.")


class ResolveBody(Strict):
    decision: Literal["approve", "deny", "revise", "answer"]
    reason: str | None = Field(default=None, max_length=4000)
    args: JsonObject | None = None
    result: JsonValue = None
    args_hash: str | None = Field(default=None, min_length=64, max_length=64)


class ConversationOut(BaseModel):
    id: uuid.UUID
    workspace: str
    agent: str
    status: str
    active_run_id: uuid.UUID | None
    created_at: datetime
    updated_at: datetime
    created_by: str | None = Field(
        description="The id of the API key that created it (`GET /v1/me` tells a key its own): "
        "a user key answers the elicitation and client-execution calls of its own conversations "
        "only. Null for conversations created before owners were recorded."
    )


class PendingCallOut(BaseModel):
    correlation_id: uuid.UUID
    conversation_id: uuid.UUID
    run_id: uuid.UUID
    tool_call_id: str
    tool_name: str
    agent: str
    executor: str
    kind: str
    args_summary: dict[str, Any]
    args_hash: str
    effect_description: str
    status: str
    created_at: datetime
    expires_at: datetime
    resolved_at: datetime | None
    resolved_by: str | None
    reason: str | None
    args: dict[str, Any] | None = None
    edited_args: dict[str, Any] | None = None
    result: Any = None


class UsageOut(BaseModel):
    requests: int
    input_tokens: int
    output_tokens: int
    tool_calls: int
    estimated_cost_usd: float | None = Field(
        description="From the model's published prices; null when the model has no known price."
    )


class RunOut(BaseModel):
    id: uuid.UUID
    conversation_id: uuid.UUID
    status: str
    output: str | None
    error: dict[str, str] | None
    pending: list[PendingCallOut]
    usage: UsageOut
    created_at: datetime
    finished_at: datetime | None


class MessageOut(BaseModel):
    seq: int
    run_id: uuid.UUID | None
    created_at: datetime
    message: dict[str, Any]


class ConversationDetailOut(ConversationOut):
    messages: list[MessageOut]
    active_run: RunOut | None


class ToolCallOut(BaseModel):
    tool_call_id: str
    tool_name: str
    agent_name: str
    ok: bool
    error_class: str | None
    error_code: str | None
    latency_ms: float
    trace_id: str | None
    started_at: datetime
    ended_at: datetime
    result: Any


class PrincipalOut(BaseModel):
    id: str = Field(description="The key's id: what `resolved_by` and the audit `actor` record")
    name: str | None
    role: str
    workspace: str | None
    permissions: list[str]


def principal_out(principal: Principal) -> PrincipalOut:
    return PrincipalOut(
        id=principal.id,
        name=principal.name,
        role=principal.role.value,
        workspace=principal.workspace,
        permissions=sorted(p.value for p in Permission if principal.may(p)),
    )


class PendingPage(BaseModel):
    items: list[PendingCallOut]
    next_cursor: str | None


class AuditEntryOut(BaseModel):
    id: int
    at: datetime
    actor: str
    actor_name: str | None = Field(description="The name of the API key that acted; null for other actors")
    action: str
    workspace: str
    conversation_id: uuid.UUID | None
    run_id: uuid.UUID | None
    correlation_id: uuid.UUID | None
    trace_id: str | None
    details: dict[str, Any]


class AuditPage(BaseModel):
    items: list[AuditEntryOut]
    next_cursor: str | None


def conversation_out(c: Conversation) -> ConversationOut:
    return ConversationOut(
        id=c.id,
        workspace=c.workspace,
        agent=c.agent,
        status=c.status,
        active_run_id=c.active_run_id,
        created_at=c.created_at,
        updated_at=c.updated_at,
        created_by=c.created_by,
    )


def pending_out(p: PendingCall, principal: Principal) -> PendingCallOut:
    """Full (and edited) arguments only for those who may approve; everyone sees the sanitized summary."""
    privileged = principal.may(Permission.APPROVE)
    resolution = p.resolution or {}
    return PendingCallOut(
        correlation_id=p.correlation_id,
        conversation_id=p.conversation_id,
        run_id=p.run_id,
        tool_call_id=p.tool_call_id,
        tool_name=p.tool_name,
        agent=p.agent,
        executor=p.executor.value,
        kind=p.kind.value,
        args_summary=p.args_summary,
        args_hash=p.args_hash,
        effect_description=p.effect_description,
        status=p.status.value,
        created_at=p.created_at,
        expires_at=p.expires_at,
        resolved_at=p.resolved_at,
        resolved_by=p.resolved_by,
        reason=p.reason,
        args=p.args if privileged else None,
        edited_args=resolution.get("args") if privileged else None,
        result=resolution.get("result"),
    )


def run_out(view: RunView, principal: Principal) -> RunOut:
    run: Run = view.run
    return RunOut(
        id=run.id,
        conversation_id=run.conversation_id,
        status=run.status.value,
        output=run.output,
        error={"code": run.error.code, "message": run.error.message} if run.error else None,
        pending=[pending_out(p, principal) for p in view.pending],
        usage=usage_out(run.usage),
        created_at=run.created_at,
        finished_at=run.finished_at,
    )


def usage_out(usage: Usage) -> UsageOut:
    return UsageOut(
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tool_calls=usage.tool_calls,
        estimated_cost_usd=None if usage.cost is None else float(usage.cost),
    )


def audit_out(entry: AuditEntry) -> AuditEntryOut:
    assert entry.id is not None
    assert entry.at is not None
    return AuditEntryOut(
        id=entry.id,
        at=entry.at,
        actor=entry.actor,
        actor_name=entry.actor_name,
        action=entry.action,
        workspace=entry.workspace,
        conversation_id=entry.conversation_id,
        run_id=entry.run_id,
        correlation_id=entry.correlation_id,
        trace_id=entry.trace_id,
        details=jsonable(entry.details),
    )


def tool_call_out(r: ToolCallRecord) -> ToolCallOut:
    md = r.metadata
    return ToolCallOut(
        tool_call_id=r.tool_call_id,
        tool_name=md.tool_name,
        agent_name=md.agent_name,
        ok=md.ok,
        error_class=md.error_class,
        error_code=r.error_code,
        latency_ms=md.latency_ms,
        trace_id=md.trace_id,
        started_at=md.started_at,
        ended_at=md.ended_at,
        result=r.result,
    )


def message_out(m: StoredMessage, principal: Principal) -> MessageOut:
    """One logged message; for callers who may not approve, tool-call arguments are sanitized as in
    `args_summary` (the full arguments are for operators)."""
    message = json.loads(m.body)
    if not principal.may(Permission.APPROVE):
        for part in message.get("parts", []):
            if part.get("part_kind") == "tool-call":
                part["args"] = sanitize(_as_object(part.get("args")))
    return MessageOut(seq=m.seq, run_id=m.run_id, created_at=m.created_at, message=message)


def _as_object(args: Any) -> Any:
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def authorization_out(a: Authorization) -> AuthorizationOut:
    return AuthorizationOut(
        id=a.id,
        workspace=a.workspace,
        tool_name=a.tool_name,
        args_match=a.args_match if isinstance(a.args_match, dict) else None,
        reason=a.reason,
        created_by=a.created_by,
        created_at=a.created_at,
        expires_at=a.expires_at,
        revoked_at=a.revoked_at,
    )


def api_key_out(k: ApiKey) -> ApiKeyOut:
    return ApiKeyOut(
        id=k.id,
        name=k.name,
        prefix=k.prefix,
        role=k.role.value,
        workspace=k.workspace,
        created_at=k.created_at,
        revoked_at=k.revoked_at,
    )


def issued_key_out(issued: IssuedKey) -> IssuedKeyOut:
    return IssuedKeyOut(**api_key_out(issued.key).model_dump(), key=issued.secret)


def encode_cursor(p: PendingCall) -> str:
    return base64.urlsafe_b64encode(f"{p.created_at.isoformat()}|{p.correlation_id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        created, cid = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        at = datetime.fromisoformat(created)
        if at.tzinfo is None:
            raise ValueError("naive time")
        return as_utc(at), uuid.UUID(cid)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            "cursor is not valid", extra={"errors": [{"loc": ["query", "cursor"], "msg": "invalid cursor"}]}
        ) from exc


def encode_audit_cursor(entry: AuditEntry) -> str:
    return base64.urlsafe_b64encode(f"audit|{entry.id}".encode()).decode()


def decode_audit_cursor(cursor: str) -> int:
    try:
        prefix, value = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        if prefix != "audit":
            raise ValueError(prefix)
        after_id = int(value)
        if not 0 <= after_id <= MAX_ROW_ID:
            raise ValueError("out of range")
        return after_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationFailed(
            "cursor is not valid", extra={"errors": [{"loc": ["query", "cursor"], "msg": "invalid cursor"}]}
        ) from exc


class CreateWebhook(Strict):
    url: str = Field(min_length=1, max_length=2000)
    events: list[str] = Field(min_length=1, max_length=10)
    workspace: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")


class WebhookOut(BaseModel):
    id: uuid.UUID
    workspace: str
    url: str
    events: list[str]
    created_by: str
    created_at: datetime


class WebhookCreatedOut(WebhookOut):
    secret: str = Field(description="The signing secret; shown only in this response.")


def webhook_out(w: Webhook) -> WebhookOut:
    return WebhookOut(
        id=w.id,
        workspace=w.workspace,
        url=w.url,
        events=list(w.events),
        created_by=w.created_by,
        created_at=w.created_at,
    )


def webhook_created_out(w: Webhook) -> WebhookCreatedOut:
    return WebhookCreatedOut(**webhook_out(w).model_dump(), secret=w.secret)

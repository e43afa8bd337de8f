"""Workspace policies, their simulation, the autonomy ladder and the decisions calls were made under."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from sursis.app.schemas.reviewer import ReviewerIn, ReviewerOut, ReviewerSimulationOut
from sursis.app.schemas.validation import Strict, UtcDatetime, WorkspaceName
from sursis.domain.policy.policies import (
    MAX_CONDITION_CHARS,
    MAX_RULES,
    RULE_ID,
    TOOL_NAME,
    LadderEntry,
    LadderLevel,
    PolicyRule,
    StoredPolicy,
)
from sursis.domain.policy.policy_service import PolicyTool
from sursis.domain.policy_decisions import (
    ApprovalRoute,
    Escalation,
    PolicyDecision,
    PolicyEffect,
    TimeoutOutcome,
)

MAX_SECONDS = 90 * 24 * 3600
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]
ToolName = Annotated[str, Field(min_length=1, max_length=200, pattern=TOOL_NAME.pattern)]
Condition = Annotated[str, Field(max_length=MAX_CONDITION_CHARS, description="A Cedar expression")]
Target = Annotated[str, Field(min_length=1, max_length=300, pattern=r"^(group|slack|email):[^\s]+$")]
GroupName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
Digest = Annotated[str, Field(min_length=1, max_length=200)]


class EscalationIn(Strict):
    after_seconds: Seconds
    to: list[Target] = Field(min_length=1, max_length=10)


class RouteIn(Strict):
    """Whom an asked call waits for (empty `groups`: any operator), how many distinct approvers,
    when to remind and escalate, and what a timeout does."""

    groups: list[GroupName] = Field(default_factory=list, max_length=20)
    quorum: int = Field(default=1, ge=1, le=20)
    remind_after_seconds: Seconds | None = None
    escalations: list[EscalationIn] = Field(default_factory=list, max_length=10)
    timeout_seconds: Seconds | None = None
    on_timeout: TimeoutOutcome = TimeoutOutcome.EXPIRE
    reviewer: ReviewerIn | None = Field(default=None, description="A model asked first; it never denies")
    reminders: list[float] = Field(
        default_factory=list,
        max_length=10,
        description="Fractions of the call's deadline (0 < f < 1, increasing) at which a reminder is "
        "posted on every channel the call was posted to",
    )

    def to_route(self) -> ApprovalRoute:
        return ApprovalRoute(
            groups=tuple(self.groups),
            quorum=self.quorum,
            remind_after=_delta(self.remind_after_seconds),
            escalations=tuple(
                Escalation(timedelta(seconds=e.after_seconds), tuple(e.to)) for e in self.escalations
            ),
            timeout=_delta(self.timeout_seconds),
            on_timeout=self.on_timeout,
            reviewer=self.reviewer.to_spec() if self.reviewer is not None else None,
            reminders=tuple(self.reminders),
        )


class PolicyRuleIn(Strict):
    id: str = Field(min_length=1, max_length=64, pattern=RULE_ID.pattern)
    effect: PolicyEffect
    when: Condition = Field(default="", description="A Cedar expression over `context`; empty: always")
    tools: list[ToolName] = Field(default_factory=list, max_length=50, description="Empty: every tool")
    reason: str | None = Field(default=None, max_length=500)
    route: RouteIn | None = Field(default=None, description="For `ask` and `notify` rules")
    pins: dict[ToolName, Digest] = Field(
        default_factory=dict,
        max_length=50,
        description="Schema digest per MCP tool; the current digest is pinned when left out",
    )
    allow_self_approval: bool = Field(
        default=False, description="The key that caused a call may decide it too (audited as such)"
    )
    allow_preapproval: bool | None = Field(
        default=None,
        description="Whether a pre-approval may lift this ask; null: yes unless the route names "
        "groups or a quorum above one",
    )

    def to_rule(self) -> PolicyRule:
        return PolicyRule(
            id=self.id,
            effect=self.effect,
            when=self.when,
            tools=tuple(self.tools),
            reason=self.reason,
            route=self.route.to_route() if self.route is not None else None,
            pins=dict(self.pins),
            allow_self_approval=self.allow_self_approval,
            allow_preapproval=self.allow_preapproval,
        )


Rules = Annotated[list[PolicyRuleIn], Field(max_length=MAX_RULES)]


class ApprovalPolicyIn(Strict):
    rules: Rules
    comment: str | None = Field(default=None, max_length=2000)
    workspace: WorkspaceName | None = Field(default=None, description="The caller's workspace by default")
    expected_version: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="The version read; 409 `stale` if another was stored since",
    )


class RouteOut(BaseModel):
    groups: list[str]
    quorum: int
    remind_after_seconds: float | None
    escalations: list[dict[str, Any]]
    timeout_seconds: float | None
    on_timeout: str
    reviewer: ReviewerOut | None = None
    reminders: list[float] = Field(default_factory=list)


class PolicyRuleOut(BaseModel):
    id: str
    effect: str
    when: str
    tools: list[str]
    reason: str | None
    route: RouteOut | None
    pins: dict[str, str]
    allow_self_approval: bool = False
    allow_preapproval: bool | None = None


class ApprovalPolicyOut(BaseModel):
    workspace: str
    version: int | None = Field(description="null: no policy stored, the defaults apply")
    rules: list[PolicyRuleOut]
    comment: str | None = None
    created_by: str | None = None
    created_at: datetime | None = None

    @classmethod
    def of(cls, workspace: str, policy: StoredPolicy | None) -> ApprovalPolicyOut:
        if policy is None:
            return cls(workspace=workspace, version=None, rules=[])
        return cls(
            workspace=policy.workspace,
            version=policy.version,
            rules=[PolicyRuleOut.model_validate(r.to_json()) for r in policy.rules],
            comment=policy.comment,
            created_by=policy.created_by,
            created_at=policy.created_at,
        )


class PolicyDecisionOut(BaseModel):
    """Why a call ran or waited: the effect, the rule that matched (null: the tool's default;
    `authorization:<id>`: a pre-approval; `ladder:<tool>`: the autonomy ladder) and the policy's
    version (null: no policy stored). A `sampled` rung's decision names its N (`sample_one_in`);
    a call it drew is asked with the flag `sampled`."""

    effect: str
    policy_version: int | None
    rule: str | None
    reason: str | None
    route: RouteOut | None
    flags: list[str]
    allow_self_approval: bool = False
    allow_preapproval: bool = True
    sample_one_in: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_decision(cls, data: Any) -> Any:
        return data.to_json() if isinstance(data, PolicyDecision) else data


def _text_time(value: Any) -> Any:
    """A time as RFC 3339 text, not a number of seconds (which pydantic would also take)."""
    if isinstance(value, int | float):
        raise ValueError("a time is an RFC 3339 string")
    return value


Moment = Annotated[UtcDatetime, BeforeValidator(_text_time)]


class SimulateIn(Strict):
    rules: Rules
    since: Moment
    until: Moment | None = Field(default=None, description="Now by default")
    workspace: WorkspaceName | None = None
    examples: int = Field(default=20, ge=0, le=100)
    reviewer_model: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9_.:/@-]+$",
        description="The model every reviewer rule is simulated with (e.g. `scripted`); its own by default",
    )
    max_reviews: int = Field(default=50, ge=0, le=500, description="Asks at most put to a reviewer model")


class SimulatedExampleOut(BaseModel):
    conversation_id: str
    tool_call_id: str
    tool_name: str
    agent: str
    at: datetime
    before: str
    after: str
    rule: str | None
    flags: list[str]
    arguments_known: bool


class SimulationOut(BaseModel):
    workspace: str
    since: datetime
    until: datetime
    calls: int
    current: dict[str, int] = Field(description="Calls per outcome as they happened")
    proposed: dict[str, int] = Field(description="Calls per outcome under the proposed rules")
    changed: int
    changes: dict[str, int] = Field(description="Changed calls by `before->after`")
    arguments_unknown: int = Field(description="Calls replayed without their arguments (they ran unasked)")
    sampled: int = Field(
        default=0,
        description="Calls a `sampled` rung would have sent to people (also counted as `ask`)",
    )
    truncated: bool
    examples: list[SimulatedExampleOut]
    reviewer: ReviewerSimulationOut | None = Field(
        default=None, description="What the proposed reviewers would have done; null: no asked call names one"
    )


LadderName = Literal["ask", "ask_above", "sampled", "notify", "auto"]


class LadderIn(Strict):
    tool: ToolName
    level: LadderLevel | None = Field(default=None, description="null: back to the tool's default")
    condition: Condition = Field(default="", description="For `ask_above`: asked when it holds")
    ceiling: LadderLevel | None = Field(default=None, description="Admins only")
    ceiling_condition: Condition | None = Field(
        default=None,
        description="Admins only; required with an `ask_above` ceiling: the calls asked whatever "
        "a user's own condition says",
    )
    undo: bool = Field(default=False, description="Back to the level before the last move")
    one_in: int | None = Field(
        default=None,
        description="For `sampled` (required, 2 to 1,000,000): 1 call in N that would run goes to people",
    )
    ceiling_one_in: int | None = Field(
        default=None, description="Admins only; required with a `sampled` ceiling: its own N"
    )
    workspace: WorkspaceName | None = None


class LadderOut(BaseModel):
    workspace: str
    tool: str
    ceiling: LadderName
    ceiling_condition: str
    level: LadderName | None
    condition: str
    pinned_digest: str | None
    previous_level: LadderName | None
    previous_condition: str
    updated_by: str | None
    updated_at: datetime | None
    one_in: int | None = Field(description="For `sampled`: 1 call in N goes to people")
    ceiling_one_in: int | None = Field(description="For a `sampled` ceiling: the admin's N")

    @classmethod
    def of(cls, entry: LadderEntry) -> LadderOut:
        return cls(
            workspace=entry.workspace,
            tool=entry.tool,
            ceiling=entry.ceiling.value,
            ceiling_condition=entry.ceiling_condition,
            level=entry.level.value if entry.level else None,
            condition=entry.condition,
            pinned_digest=entry.pin,
            previous_level=entry.previous_level.value if entry.previous_level else None,
            previous_condition=entry.previous_condition,
            updated_by=entry.updated_by,
            updated_at=entry.updated_at,
            one_in=entry.one_in,
            ceiling_one_in=entry.ceiling_one_in,
        )


class PolicyToolOut(BaseModel):
    name: str
    category: str
    gated: bool
    server: str | None
    schema_digest: str | None
    pinned_digest: str | None
    flags: list[str] = Field(
        description="`schema_changed`: not what the rule allowing it was written against"
    )

    @classmethod
    def of(cls, tool: PolicyTool) -> PolicyToolOut:
        spec = tool.spec
        return cls(
            name=spec.name,
            category=spec.category.value,
            gated=spec.gated,
            server=spec.server,
            schema_digest=spec.schema_digest,
            pinned_digest=tool.pinned,
            flags=list(tool.flags),
        )


def _delta(seconds: float | None) -> timedelta | None:
    return timedelta(seconds=seconds) if seconds is not None else None

"""What the policy decision point said about one tool call, and, when it asks, whom and how.

Every tool call passes one policy point before it runs: `allow` (runs now), `notify` (runs now,
its approvers are told after), `ask` (suspends: the `ApprovalRoute` says who may decide, how many
distinct approvers it takes, when to remind and escalate, and what a timeout does) or `deny` (the
model gets a typed tool error with the reason). A decision names the policy version and the rule
that matched, so "why did this wait, why did this run" has an answer; a pending call keeps the
decision that made it wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any

from sursis.domain.reviewer import ReviewerSpec


class PolicyEffect(StrEnum):
    ALLOW = "allow"
    NOTIFY = "notify"
    ASK = "ask"
    DENY = "deny"

    @property
    def strictness(self) -> int:
        """allow < notify < ask < deny: what "the strictest effect" compares."""
        return _STRICTNESS[self]


_STRICTNESS = {PolicyEffect.ALLOW: 0, PolicyEffect.NOTIFY: 1, PolicyEffect.ASK: 2, PolicyEffect.DENY: 3}


class TimeoutOutcome(StrEnum):
    """What happens to a call nobody decided in time: it is denied, or it expires. Either way the
    model is told that nobody decided, never that a person denied it."""

    DENY = "deny"
    EXPIRE = "expire"


@dataclass(frozen=True, slots=True)
class Escalation:
    """After `after` (from the call's creation) the call is also put before `to`: targets of the form
    `group:NAME`, `slack:CHANNEL` or `email:ADDRESS`."""

    after: timedelta
    to: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"after_seconds": self.after.total_seconds(), "to": list(self.to)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Escalation:
        return cls(after=timedelta(seconds=float(data["after_seconds"])), to=tuple(data["to"]))


@dataclass(frozen=True, slots=True)
class ApprovalRoute:
    """Who may decide an asked call, and how many of them.

    `groups` empty: any operator of the workspace (one decision decides, as before approver
    groups existed). `quorum`: distinct approvers needed to approve; the requester never counts;
    one denial decides. `timeout`: how long the call may wait (None: the tool's own timeout).
    `reminders`: fractions of the call's deadline (its creation to its expiry) at which the
    sweeper reminds, once each, on every channel the call was posted to (`[0.5, 0.9]`: half way and
    near the end).
    """

    groups: tuple[str, ...] = ()
    quorum: int = 1
    remind_after: timedelta | None = None
    escalations: tuple[Escalation, ...] = ()
    timeout: timedelta | None = None
    on_timeout: TimeoutOutcome = TimeoutOutcome.EXPIRE
    reviewer: ReviewerSpec | None = None
    """A model asked first (`domain/reviewer.py`): its `no` approves or votes; it never denies."""
    reminders: tuple[float, ...] = ()

    @property
    def restricted(self) -> bool:
        """Whether it names approvers or needs more than one: more than "any operator, once"."""
        return bool(self.groups) or self.quorum > 1

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "groups": list(self.groups),
            "quorum": self.quorum,
            "remind_after_seconds": _seconds(self.remind_after),
            "escalations": [e.to_json() for e in self.escalations],
            "timeout_seconds": _seconds(self.timeout),
            "on_timeout": self.on_timeout.value,
        }
        # Only when set, so routes stored before reviewers existed read the same.
        if self.reviewer is not None:
            data["reviewer"] = self.reviewer.to_json()
        if self.reminders:
            data["reminders"] = list(self.reminders)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ApprovalRoute:
        reviewer = data.get("reviewer")
        return cls(
            groups=tuple(data.get("groups") or ()),
            quorum=int(data.get("quorum", 1)),
            remind_after=_delta(data.get("remind_after_seconds")),
            escalations=tuple(Escalation.from_json(e) for e in data.get("escalations") or ()),
            timeout=_delta(data.get("timeout_seconds")),
            on_timeout=TimeoutOutcome(data.get("on_timeout", TimeoutOutcome.EXPIRE.value)),
            reviewer=ReviewerSpec.from_json(reviewer) if reviewer else None,
            reminders=tuple(float(f) for f in data.get("reminders") or ()),
        )


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """The policy point's answer for one call. `rule` is the id of the rule that matched (None: the
    default for the tool's category); `policy_version` the workspace policy's version (None: no
    policy stored, the defaults applied)."""

    effect: PolicyEffect
    policy_version: int | None = None
    rule: str | None = None
    reason: str | None = None
    route: ApprovalRoute | None = None
    flags: tuple[str, ...] = field(default=())
    """Why the decision is not what a rule said (`schema_changed`: an MCP tool changed since a rule
    allowed it, so it is asked)."""
    allow_self_approval: bool = False
    """The rule lets the key that caused the call decide it too (audited as a self-approval)."""
    allow_preapproval: bool = True
    """A stored pre-approval may lift this ask (never one its own requester created)."""
    sample_one_in: int | None = None
    """A `sampled` rung's N: the call is drawn (`policy_sampling.sample`) and 1 in N is asked."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "effect": self.effect.value,
            "policy_version": self.policy_version,
            "rule": self.rule,
            "reason": self.reason,
            "route": self.route.to_json() if self.route is not None else None,
            "flags": list(self.flags),
        }
        # Only when not the default, so decisions stored before these fields read the same.
        if self.allow_self_approval:
            data["allow_self_approval"] = True
        if not self.allow_preapproval:
            data["allow_preapproval"] = False
        if self.sample_one_in is not None:
            data["sample_one_in"] = self.sample_one_in
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PolicyDecision:
        route = data.get("route")
        return cls(
            effect=PolicyEffect(data["effect"]),
            policy_version=data.get("policy_version"),
            rule=data.get("rule"),
            reason=data.get("reason"),
            route=ApprovalRoute.from_json(route) if route is not None else None,
            flags=tuple(data.get("flags") or ()),
            allow_self_approval=bool(data.get("allow_self_approval", False)),
            allow_preapproval=bool(data.get("allow_preapproval", True)),
            sample_one_in=data.get("sample_one_in"),
        )


def _seconds(value: timedelta | None) -> float | None:
    return value.total_seconds() if value is not None else None


def _delta(value: Any) -> timedelta | None:
    return timedelta(seconds=float(value)) if value is not None else None

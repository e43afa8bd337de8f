"""Worlds, their rules and the rule state machine, decisions and flags, override patterns."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sursis.domain.errors import InvalidTransition


class RuleState(StrEnum):
    """`candidate` → `enshrined_pending` → `enshrined`; a denial goes back to `candidate`.

    `rejected` ends a candidate nobody will enshrine; `superseded` is an enshrined version that a
    newer enshrined version of the same rule replaced. Enshrined content never changes.
    """

    CANDIDATE = "candidate"
    ENSHRINED_PENDING = "enshrined_pending"
    ENSHRINED = "enshrined"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"

    @property
    def editable(self) -> bool:
        """Only a candidate's predicate, tests and citations may change (a draft)."""
        return self is RuleState.CANDIDATE


_TRANSITIONS: Mapping[RuleState, frozenset[RuleState]] = {
    RuleState.CANDIDATE: frozenset({RuleState.ENSHRINED_PENDING, RuleState.REJECTED}),
    RuleState.ENSHRINED_PENDING: frozenset({RuleState.ENSHRINED, RuleState.CANDIDATE}),
    RuleState.ENSHRINED: frozenset({RuleState.SUPERSEDED}),
    RuleState.REJECTED: frozenset(),
    RuleState.SUPERSEDED: frozenset(),
}


def check_transition(current: RuleState, target: RuleState) -> None:
    if target not in _TRANSITIONS[current]:
        raise InvalidTransition(f"a rule in state {current.value!r} cannot become {target.value!r}")


class FlagKind(StrEnum):
    REVIEW_REQUEST = "review_request"
    NOTEWORTHY = "noteworthy"


class WorldMode(StrEnum):
    """Decided from the key when a World Agent conversation is created."""

    OPERATOR = "operator"
    CUSTOMER = "customer"


@dataclass(frozen=True, slots=True)
class World:
    id: uuid.UUID
    workspace: str
    domain: str
    title: str
    created_by: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class TestCase:
    """One inline test: an input context and the value the predicate must return for it."""

    context: dict[str, Any]
    expected: bool
    note: str = ""


@dataclass(frozen=True, slots=True)
class Citation:
    source: str
    locator: str
    quote: str


@dataclass(frozen=True, slots=True)
class GateResult:
    """The readiness gate's verdict for one exact predicate and test list."""

    passed: bool
    cases: list[dict[str, Any]]
    code_hash: str
    ran_at: datetime


@dataclass(slots=True)
class Rule:
    """One version of a rule. `id` is the rule across versions; `(id, version)` is this row."""

    id: uuid.UUID
    version: int
    world_id: uuid.UUID
    state: RuleState
    text: str
    created_at: datetime
    updated_at: datetime
    predicate: str | None = None
    applies_when: str | None = None
    tests: list[TestCase] = field(default_factory=list)
    gate: GateResult | None = None
    citations: list[Citation] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    request_conversation_id: uuid.UUID | None = None
    request_tool_call_id: str | None = None
    enshrined_at: datetime | None = None

    def readiness_problem(self, code_hash: str) -> str | None:
        """Why enshrinement may not be requested yet, or None when the gates allow it."""
        if self.predicate is None:
            return "the rule has no predicate; write one with generate_predicate"
        if not self.tests:
            return "the rule has no inline tests; propose them with propose_inline_tests"
        if self.gate is None or self.gate.code_hash != code_hash:
            return "the readiness gate has not run on the current predicate and tests"
        if not self.gate.passed:
            return "the readiness gate failed; fix the predicate or the tests and run it again"
        if not self.citations:
            return "the rule has no provenance; draft it with draft_provenance"
        return None


@dataclass(frozen=True, slots=True)
class Decision:
    id: str
    world_id: uuid.UUID
    rule_ids: list[str]
    context: dict[str, Any]
    outcome: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Flag:
    id: str
    world_id: uuid.UUID
    decision_id: str
    kind: FlagKind
    reason: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class OverridePattern:
    """Flags of one rule with one reason, across the world's decisions."""

    rule_id: str
    reason: str
    flags: int
    decisions: list[str]
    kinds: dict[str, int]


def override_patterns(
    flagged: Iterable[tuple[Flag, Decision]], *, min_flags: int = 2
) -> list[OverridePattern]:
    """Group flags by (rule, normalised reason); a pattern is a group of at least `min_flags`."""
    groups: dict[tuple[str, str], list[tuple[Flag, Decision]]] = {}
    for flag, decision in flagged:
        reason = " ".join(flag.reason.lower().split())
        for rule_id in decision.rule_ids or ["(no rule)"]:
            groups.setdefault((rule_id, reason), []).append((flag, decision))
    patterns = [
        OverridePattern(
            rule_id=rule_id,
            reason=reason,
            flags=len(items),
            decisions=sorted({d.id for _, d in items}),
            kinds=dict(Counter(f.kind.value for f, _ in items)),
        )
        for (rule_id, reason), items in groups.items()
        if len(items) >= min_flags
    ]
    return sorted(patterns, key=lambda p: (-p.flags, p.rule_id, p.reason))


def readiness_hash(rule: Rule) -> str:
    """What the readiness gate ran on: the predicate, the filter and the tests, hashed."""
    body = {
        "predicate": rule.predicate,
        "applies_when": rule.applies_when,
        "tests": [{"context": t.context, "expected": t.expected} for t in rule.tests],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()

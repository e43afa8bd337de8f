"""Reading and changing a workspace's policy (versioned) and its autonomy ladder."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sursis.domain.access import Permission
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import Forbidden, NotFound, Stale
from sursis.domain.notified_cache import Invalidations
from sursis.domain.policy.policies import (
    SCHEMA_CHANGED,
    AboveCeiling,
    CallFacts,
    InvalidPolicy,
    LadderEntry,
    LadderLevel,
    Matches,
    PolicyRule,
    StoredPolicy,
    WorkspacePolicy,
    check_rules,
)
from sursis.domain.policy.policy_ports import PolicyUnitOfWorkFactory
from sursis.domain.policy.policy_sampling import one_in_error
from sursis.domain.policy_decisions import PolicyEffect
from sursis.domain.records import AuditEntry, Principal
from sursis.domain.tools import ToolSpec


class PolicyEngine(Protocol):
    """The condition language (Cedar): checks rules against the published schema, evaluates them."""

    def schema(self, extra_tools: Sequence[str] = ()) -> dict[str, Any]: ...
    def validate(self, rules: Sequence[PolicyRule]) -> None: ...
    def evaluate(self, state: WorkspacePolicy, facts: CallFacts) -> Matches: ...
    def evaluate_batch(self, state: WorkspacePolicy, calls: Sequence[CallFacts]) -> list[Matches]: ...


@dataclass(frozen=True, slots=True)
class PolicyTool:
    """A tool as the policy sees it: its spec, the digest the current policy pins for it, and the
    flags the catalog shows (`schema_changed`: the tool is not what a rule allowing it was
    written against)."""

    spec: ToolSpec
    pinned: str | None
    flags: tuple[str, ...]


class PolicyService:
    """Workspace policies (admins) and the autonomy ladder (users within the admin's ceiling)."""

    def __init__(
        self,
        uow: PolicyUnitOfWorkFactory,
        engine: PolicyEngine,
        tools: Mapping[str, ToolSpec],
        *,
        clock: Clock = utcnow,
        changes: Invalidations | None = None,
        model_problem: Callable[[str], str | None] | None = None,
    ) -> None:
        self._uow = uow
        self._engine = engine
        self._tools = tools
        self._clock = clock
        self._changes = changes
        self._model_problem = model_problem
        """Why this service cannot build a reviewer model a rule names (None: it can)."""

    @property
    def engine(self) -> PolicyEngine:
        return self._engine

    @staticmethod
    def workspace_of(principal: Principal, workspace: str | None) -> str:
        ws = workspace or principal.workspace or "default"
        if not principal.can_see(ws):
            raise NotFound("workspace not found")
        return ws

    def schema(self, principal: Principal) -> dict[str, Any]:
        principal.require(Permission.MANAGE_POLICIES)
        return self._engine.schema()

    async def get(
        self, principal: Principal, workspace: str | None, version: int | None
    ) -> StoredPolicy | None:
        """The current version (None: no policy, the defaults apply), or the named one (404)."""
        ws = self.workspace_of(principal, workspace)
        principal.require(Permission.MANAGE_POLICIES)
        async with self._uow.reader() as uow:
            if version is None:
                return await uow.policies.current(ws)
            found = await uow.policies.version(ws, version)
        if found is None:
            raise NotFound(f"workspace {ws!r} has no policy version {version}")
        return found

    def check(self, rules: Sequence[PolicyRule]) -> tuple[PolicyRule, ...]:
        """Rules as they would be stored: shape and Cedar checked, each MCP tool a rule names
        pinned to the digest it has now (unless the rule pins one itself)."""
        check_rules(rules)
        self._check_reviewer_models(rules)
        unknown = [
            {
                "loc": ["rules", str(i), "tools"],
                "msg": f"no agent declares a tool {tool!r}; pin its digest to name it",
            }
            for i, rule in enumerate(rules)
            for tool in rule.tools
            if tool not in self._tools and tool not in rule.pins
        ]
        if unknown:
            raise InvalidPolicy("a rule names an unknown tool", extra={"errors": unknown})
        self._engine.validate(rules)
        return tuple(replace(rule, pins=self._pins(rule)) for rule in rules)

    def _check_reviewer_models(self, rules: Sequence[PolicyRule]) -> None:
        """A reviewer model this service cannot build is refused here, not found out at each review
        (where every call would be left to people with `error`)."""
        if self._model_problem is None:
            return
        errors = []
        for i, rule in enumerate(rules):
            reviewer = rule.route.reviewer if rule.route is not None else None
            if reviewer is not None and (problem := self._model_problem(reviewer.model)) is not None:
                loc = ["rules", str(i), "route", "reviewer", "model"]
                errors.append({"loc": loc, "msg": f"this service cannot build the model: {problem}"})
        if errors:
            raise InvalidPolicy("a reviewer model cannot be built", extra={"errors": errors})

    def _pins(self, rule: PolicyRule) -> dict[str, str]:
        pins = dict(rule.pins)
        if rule.effect in (PolicyEffect.ALLOW, PolicyEffect.NOTIFY):
            named = rule.tools or tuple(self._tools)
            for tool in named:
                spec = self._tools.get(tool)
                if spec is not None and spec.server is not None and spec.schema_digest and tool not in pins:
                    pins[tool] = spec.schema_digest
        return pins

    async def put(
        self,
        principal: Principal,
        workspace: str | None,
        rules: Sequence[PolicyRule],
        comment: str | None,
        expected_version: int | None = None,
    ) -> StoredPolicy:
        """Store the rules as the workspace's next version. `expected_version`: the version the
        caller read (409 `stale` when another was stored since)."""
        ws = self.workspace_of(principal, workspace)
        principal.require(Permission.MANAGE_POLICIES)
        checked = self.check(rules)
        now = self._clock()
        async with self._uow() as uow:
            current = await uow.policies.current(ws)
            version = current.version if current else 0
            if expected_version is not None and expected_version != version:
                raise Stale(f"the policy is at version {version}, not {expected_version}")
            policy = StoredPolicy(ws, version + 1, checked, principal.id, now, comment)
            if not await uow.policies.add(policy):
                raise Stale("another policy version was stored at the same time")
            details = {"version": policy.version, "rules": [r.id for r in checked], "comment": comment}
            await uow.audit.append(AuditEntry("policy.changed", principal.id, ws, details=details), now)
            await uow.commit()
        self._changed(ws)
        return policy

    def tools(self, state: WorkspacePolicy) -> list[PolicyTool]:
        """The catalog's tools with the digests the current policy pins and the resulting flags."""
        pins: dict[str, str] = {}
        for rule in state.policy.rules if state.policy else ():
            pins.update(rule.pins)
        for entry in state.ladder.values():
            if entry.pin is not None:
                pins.setdefault(entry.tool, entry.pin)
        out = []
        for name, spec in sorted(self._tools.items()):
            pinned = pins.get(name)
            changed = spec.server is not None and pinned is not None and pinned != spec.schema_digest
            out.append(PolicyTool(spec, pinned, (SCHEMA_CHANGED,) if changed else ()))
        return out

    async def catalog(self, principal: Principal, workspace: str | None) -> list[PolicyTool]:
        ws = self.workspace_of(principal, workspace)
        principal.require(Permission.MANAGE_POLICIES)
        async with self._uow.reader() as uow:
            state = WorkspacePolicy(ws, await uow.policies.current(ws), await uow.policies.ladder(ws))
        return self.tools(state)

    async def ladder(self, principal: Principal, workspace: str | None) -> list[LadderEntry]:
        """Every tool of the catalog on the workspace's ladder (a tool never moved: ceiling `ask`,
        level null, i.e. its default)."""
        ws = self.workspace_of(principal, workspace)
        principal.require(Permission.MOVE_LADDER)
        async with self._uow.reader() as uow:
            stored = await uow.policies.ladder(ws)
        names = sorted({*self._tools, *stored})
        return [stored.get(name) or LadderEntry(ws, name) for name in names]

    async def move(
        self,
        principal: Principal,
        workspace: str | None,
        tool: str,
        *,
        level: LadderLevel | None,
        condition: str = "",
        ceiling: LadderLevel | None = None,
        ceiling_condition: str | None = None,
        undo: bool = False,
        one_in: int | None = None,
        ceiling_one_in: int | None = None,
    ) -> LadderEntry:
        """Move a tool on the ladder (or, `undo`, back where it was before the last move). Only an
        admin sets the `ceiling` (and, for an `ask_above` ceiling, its `ceiling_condition`; for a
        `sampled` one, its `ceiling_one_in`); anyone moving stays at or below it (403
        `above_ceiling`). A `sampled` level names its `one_in` (2 to 1,000,000; 422 otherwise). The
        tool's row is locked while it is read and written, and a move that sets no ceiling writes
        none of the ceiling's columns."""
        ws = self.workspace_of(principal, workspace)
        principal.require(Permission.MOVE_LADDER)
        sets_ceiling = ceiling is not None or ceiling_condition is not None or ceiling_one_in is not None
        if sets_ceiling and not principal.may(Permission.MANAGE_POLICIES):
            raise Forbidden("only an admin sets a tool's ceiling", extra={"required": "manage_policies"})
        spec = self._tools.get(tool)
        if spec is None:
            raise InvalidPolicy(
                f"no agent declares a tool {tool!r}",
                extra={"errors": [{"loc": ["tool"], "msg": "unknown tool"}]},
            )
        now = self._clock()
        async with self._uow() as uow:
            before = await uow.policies.rung(ws, tool, lock=True) or LadderEntry(ws, tool)
            if undo:
                level, condition = before.previous_level, before.previous_condition
                one_in = before.previous_one_in
            self._check_condition(tool, level, condition)
            top = ceiling or before.ceiling
            top_condition = self._ceiling_condition(tool, top, before, ceiling, ceiling_condition)
            sets_rate = ceiling is not None or ceiling_one_in is not None
            top_one_in = ceiling_one_in if sets_rate else before.ceiling_one_in
            _check_one_in(top_one_in, top is LadderLevel.SAMPLED, "ceiling_one_in")
            if ceiling is not None and level is None and before.level is not None and not undo:
                level, condition, one_in = before.level, before.condition, before.one_in
                if level.rank > top.rank:
                    level, condition = top, "" if top is not LadderLevel.ASK_ABOVE else condition
                    one_in = top_one_in
                    self._check_condition(tool, level, condition)
            _check_one_in(one_in, level is LadderLevel.SAMPLED, "one_in")
            if level is not None and level.rank > top.rank:
                raise AboveCeiling(
                    f"{tool!r} may be moved up to {top.value!r}, not {level.value!r}",
                    extra={"ceiling": top.value, "level": level.value},
                )
            after = LadderEntry(
                workspace=ws,
                tool=tool,
                ceiling=top,
                ceiling_condition=top_condition,
                level=level,
                condition=condition if level is LadderLevel.ASK_ABOVE else "",
                pin=spec.schema_digest if spec.server is not None and level is not None else None,
                previous_level=before.level,
                previous_condition=before.condition,
                updated_by=principal.id,
                updated_at=now,
                one_in=one_in,
                ceiling_one_in=top_one_in,
                previous_one_in=before.one_in,
            )
            await uow.policies.put_rung(after, ceiling=sets_ceiling)
            details: dict[str, Any] = {
                "tool": tool,
                "from": before.level.value if before.level else None,
                "to": level.value if level else None,
                "condition": after.condition,
                "ceiling": top.value,
                "ceiling_condition": top_condition,
                "previous_ceiling": before.ceiling.value,
                "undo": undo,
            }
            if LadderLevel.SAMPLED in (level, top, before.level):
                details |= {"one_in": one_in, "ceiling_one_in": top_one_in, "previous_one_in": before.one_in}
            await uow.audit.append(AuditEntry("ladder.moved", principal.id, ws, details=details), now)
            await uow.commit()
        self._changed(ws)
        return after

    def _ceiling_condition(
        self,
        tool: str,
        top: LadderLevel,
        before: LadderEntry,
        ceiling: LadderLevel | None,
        given: str | None,
    ) -> str:
        """The admin's condition of an `ask_above` ceiling: required when an admin sets one (a user's
        condition only adds asks to it), empty for any other ceiling."""
        if top is not LadderLevel.ASK_ABOVE:
            if given:
                raise InvalidPolicy(
                    "only an ask_above ceiling takes a condition",
                    extra={"errors": [{"loc": ["ceiling_condition"], "msg": "not allowed"}]},
                )
            return ""
        text = given if given is not None else ("" if ceiling is not None else before.ceiling_condition)
        if ceiling is not None or given is not None:
            if not text.strip():
                raise InvalidPolicy(
                    "an ask_above ceiling needs the admin's condition: the calls asked whatever a user sets",
                    extra={"errors": [{"loc": ["ceiling_condition"], "msg": "required"}]},
                )
            self._check_condition(tool, LadderLevel.ASK_ABOVE, text, loc="ceiling_condition")
        return text

    def _check_condition(
        self, tool: str, level: LadderLevel | None, condition: str, loc: str = "condition"
    ) -> None:
        if level is LadderLevel.ASK_ABOVE:
            if not condition.strip():
                raise InvalidPolicy(
                    "ask_above needs a condition",
                    extra={"errors": [{"loc": [loc], "msg": "required"}]},
                )
            try:
                self.check([PolicyRule("ladder", PolicyEffect.ASK, condition, (tool,))])
            except InvalidPolicy as exc:
                errors = [{**e, "loc": [loc]} for e in exc.extra.get("errors", [])]
                raise InvalidPolicy(exc.message, extra={"errors": errors}) from None
        elif condition.strip():
            raise InvalidPolicy(
                "only ask_above takes a condition",
                extra={"errors": [{"loc": ["condition"], "msg": "not allowed"}]},
            )

    def _changed(self, workspace: str) -> None:
        if self._changes is not None:
            self._changes.forget({workspace})


def _check_one_in(one_in: int | None, sampled: bool, loc: str) -> None:
    problem = one_in_error(one_in, sampled)
    if problem is not None:
        raise InvalidPolicy(problem, extra={"errors": [{"loc": [loc], "msg": problem}]})

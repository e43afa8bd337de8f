"""The World Agent: one resident agent per world, that proposes and never writes the corpus.

Its tools act on the world its conversation was opened for (`world_sessions`). The mode decided
when the session was opened filters the tools the model is shown: customer mode sees only the
read tools. Enshrinement is the one gated tool, and the only path into `enshrined`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.tools import ToolDefinition

from sursis.domain.errors import ToolError, ToolPolicyError, ToolUserError
from sursis.domain.tools import Category, PendingKind, ToolSpec
from sursis.domain.worlds.predicates import PredicateRefused, check_predicate
from sursis.domain.worlds.rules import Citation, RuleState, TestCase, World, WorldMode, override_patterns
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.effects import record_effect
from sursis.infra.agents.observed import REDISPATCH, REVIEW, failure_message
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.worlds.corpus import RuleCorpus, rule_view
from sursis.infra.worlds.memory import MemoryGateway
from sursis.infra.worlds.memory_tools import memory_tools
from sursis.infra.worlds.repository import SqlWorldRepository
from sursis.infra.worlds.service import WORLD_AGENT

INSTRUCTIONS = """You are the World Agent of one world: a domain whose decisions are made by a corpus of
rules. You look for override patterns in the decisions customers flagged, propose rule candidates,
write each candidate's predicate `def predicate(ctx) -> bool` (plain Python over the dict `ctx`: no
imports, no while loops, no I/O), propose inline tests, run the readiness gate, draft provenance and
then request enshrinement, which an operator decides. You never change an enshrined rule. Remember
only what you learned about the work, never a rule's content."""

CUSTOMER_TOOLS = frozenset({"list_rules", "get_rule", "explain_decision"})


class CaseIn(BaseModel):
    """One inline test: an input context and the expected predicate result."""

    context: dict[str, Any]
    expected: bool
    note: str = Field(default="", max_length=500)


class CitationIn(BaseModel):
    source: str = Field(min_length=1, max_length=500)
    locator: str = Field(min_length=1, max_length=500)
    quote: str = Field(min_length=1, max_length=2000)


def _policy(exc: ToolError) -> ToolFailed:
    return ToolFailed(failure_message(exc.to_result()))


def _checked(code: str, function: str) -> str:
    """The code of a predicate or filter, once the static check accepts it."""
    try:
        check_predicate(code, function)
    except PredicateRefused as exc:
        raise ToolPolicyError(
            f"the code was refused by the static check at line {exc.line}, node {exc.node}: {exc.reason}",
            code="PREDICATE_REFUSED",
        ) from None
    return code


@dataclass(frozen=True, slots=True)
class _Sessions:
    """The world a conversation was opened for (`world_sessions`) and the mode of a run in it."""

    corpus: RuleCorpus

    async def current(self, ctx: RunContext[RunDeps]) -> tuple[World, WorldMode]:
        found = await self.corpus.session(ctx.deps.conversation_id)
        if found is None:
            raise ToolPolicyError(
                "this conversation is not bound to a world; open one with POST /v1/worlds/{id}/conversations",
                code="NO_WORLD",
            )
        return found[0], await self.corpus.mode_of_run(found[1], ctx.deps.run_id)

    async def world_id(self, ctx: RunContext[RunDeps]) -> uuid.UUID:
        return (await self.current(ctx))[0].id

    async def world_of(self, ctx: RunContext[RunDeps]) -> uuid.UUID | None:
        found = await self.corpus.session(ctx.deps.conversation_id)
        return found[0].id if found else None

    async def shown(self, ctx: RunContext[RunDeps], tool_def: ToolDefinition) -> ToolDefinition | None:
        """The mode filter: a session without a world sees nothing, customer mode the read tools."""
        found = await self.corpus.session(ctx.deps.conversation_id)
        if found is None:
            return None
        mode = await self.corpus.mode_of_run(found[1], ctx.deps.run_id)
        if mode is WorldMode.CUSTOMER and tool_def.name not in CUSTOMER_TOOLS:
            return None
        return tool_def

    def declare(self, function: Callable[..., Any], spec: ToolSpec, **extra: Any) -> DeclaredTool:
        """A tool shown only in a world's session (and in customer mode only if it reads)."""
        DeclaredTool.declare(function, spec)
        return DeclaredTool(
            spec=spec, tool=Tool(function, name=spec.name, max_retries=2, prepare=self.shown, **extra)
        )


def world_agent(uow: SqlUnitOfWorkFactory, corpus: RuleCorpus, memory: MemoryGateway) -> AgentDefinition:
    """Build the World Agent's tools over the corpus, the memory gateway and a unit-of-work factory."""
    sessions = _Sessions(corpus)
    tools = (
        *_rule_tools(corpus, sessions),
        *_decision_tools(uow, sessions),
        *_candidate_tools(uow, corpus, sessions),
        *_draft_tools(corpus, sessions),
        _enshrinement_tool(uow, corpus, sessions),
        *memory_tools(memory, sessions.world_of, prepare=sessions.shown),
    )
    return AgentDefinition(name=WORLD_AGENT, instructions=INSTRUCTIONS, tools=tools)


def _rule_tools(corpus: RuleCorpus, sessions: _Sessions) -> tuple[DeclaredTool, ...]:
    """The tools that read the corpus (customer mode sees rules in force only)."""
    current = sessions.current

    async def list_rules(ctx: RunContext[RunDeps], state: RuleState | None = None) -> list[dict[str, Any]]:
        """List the world's rules (every version), optionally of one state.

        Args:
            state: `candidate`, `enshrined_pending`, `enshrined`, `rejected`, `superseded`, or null.
        """
        world, mode = await current(ctx)
        rules = await corpus.list_rules(world.id, state)
        if mode is WorldMode.CUSTOMER:
            rules = [r for r in rules if r.state is RuleState.ENSHRINED]
        return [rule_view(r, full=False) for r in rules]

    async def get_rule(ctx: RunContext[RunDeps], rule_id: str) -> dict[str, Any]:
        """Show a rule with its predicate, tests, gate result and citations: the latest version
        for an operator, the version in force for a customer.

        Args:
            rule_id: The rule's id.
        """
        world, mode = await current(ctx)
        if mode is WorldMode.CUSTOMER:
            return rule_view(await corpus.in_force(world.id, rule_id), full=False)
        return rule_view(await corpus.latest(world.id, rule_id), full=True)

    return (
        sessions.declare(list_rules, ToolSpec("list_rules")),
        sessions.declare(get_rule, ToolSpec("get_rule")),
    )


def _decision_tools(uow: SqlUnitOfWorkFactory, sessions: _Sessions) -> tuple[DeclaredTool, ...]:
    """The tools that read the world's decisions: one explained, the flagged ones grouped."""
    current, world_id = sessions.current, sessions.world_id

    async def explain_decision(ctx: RunContext[RunDeps], decision_id: str) -> dict[str, Any]:
        """Explain a recorded decision: its outcome, its input and the text of the rules that made it.

        Args:
            decision_id: The decision's id.
        """
        world, mode = await current(ctx)
        wid = world.id
        async with uow() as u:
            repo = SqlWorldRepository(u.session)
            decision = await repo.get_decision(wid, decision_id)
            if decision is None:
                raise ToolUserError(f"no decision {decision_id!r} in this world")
            rules = []
            for rid in decision.rule_ids:
                try:
                    rule_uuid = uuid.UUID(rid)
                except ValueError:
                    rules.append({"rule_id": rid, "text": None, "in_force": False})
                    continue
                # A customer sees only text in force; an operator also a rule's newest draft.
                rule = await repo.rule_in_force(wid, rule_uuid)
                if rule is None and mode is WorldMode.OPERATOR:
                    rule = await repo.latest_rule(wid, rule_uuid)
                cited: dict[str, Any] = {
                    "rule_id": rid,
                    "text": rule.text if rule else None,
                    "in_force": rule is not None and rule.state is RuleState.ENSHRINED,
                }
                if mode is WorldMode.OPERATOR and rule is not None:
                    cited |= {"version": rule.version, "state": rule.state.value}
                rules.append(cited)
        return {
            "decision_id": decision.id,
            "outcome": decision.outcome,
            "context": decision.context,
            "rules": rules,
        }

    async def list_override_patterns(ctx: RunContext[RunDeps], min_flags: int = 2) -> list[dict[str, Any]]:
        """Flags of the world's decisions grouped by rule and reason: where customers push back.

        Args:
            min_flags: Only patterns with at least this many flags (1-100).
        """
        if not 1 <= min_flags <= 100:
            raise ToolUserError("min_flags must be between 1 and 100")
        wid = await world_id(ctx)
        async with uow() as u:
            flagged = await SqlWorldRepository(u.session).flagged_decisions(wid)
        return [dataclasses.asdict(p) for p in override_patterns(flagged, min_flags=min_flags)]

    return (
        sessions.declare(explain_decision, ToolSpec("explain_decision")),
        sessions.declare(list_override_patterns, ToolSpec("list_override_patterns")),
    )


def _candidate_tools(
    uow: SqlUnitOfWorkFactory, corpus: RuleCorpus, sessions: _Sessions
) -> tuple[DeclaredTool, ...]:
    """The tools that propose a candidate and write its predicate and its filter (statically checked)."""
    world_id = sessions.world_id

    async def propose_rule_candidate(
        ctx: RunContext[RunDeps], text: str, evidence: dict[str, Any]
    ) -> dict[str, Any]:
        """Turn a pattern into a `candidate` rule that links its evidence.

        Args:
            text: The rule in natural language.
            evidence: What supports it, e.g. the pattern's rule_id, reason and decision ids.
        """
        if not text.strip() or len(text) > 4000:
            raise ToolUserError("text must be 1-4000 characters")
        wid = await world_id(ctx)
        async with uow() as u:
            rule = await corpus.propose(u, wid, text.strip(), evidence)
            result = rule_view(rule, full=False)
            await record_effect(u, ctx, "propose_rule_candidate", result)
            await u.commit()
        return result

    async def generate_predicate(ctx: RunContext[RunDeps], rule_id: str, code: str) -> dict[str, Any]:
        """Store the rule's predicate, `def predicate(ctx) -> bool`, after a static check.

        Args:
            rule_id: The rule's id.
            code: Python source of exactly one function `def predicate(ctx)` over the dict `ctx`.
        """
        source = _checked(code, "predicate")
        rule = await corpus.edit_draft(
            await world_id(ctx), rule_id, lambda r: setattr(r, "predicate", source)
        )
        return rule_view(rule)

    async def generate_applies_when(ctx: RunContext[RunDeps], rule_id: str, code: str) -> dict[str, Any]:
        """Store the rule's context-only filter, `def applies_when(ctx) -> bool`, after a static check.

        Args:
            rule_id: The rule's id.
            code: Python source of exactly one function `def applies_when(ctx)`.
        """
        source = _checked(code, "applies_when")
        rule = await corpus.edit_draft(
            await world_id(ctx), rule_id, lambda r: setattr(r, "applies_when", source)
        )
        return rule_view(rule)

    suggest = Category.SUGGEST
    return (
        sessions.declare(propose_rule_candidate, ToolSpec("propose_rule_candidate", category=suggest)),
        sessions.declare(generate_predicate, ToolSpec("generate_predicate", category=suggest)),
        sessions.declare(generate_applies_when, ToolSpec("generate_applies_when", category=suggest)),
    )


def _draft_tools(corpus: RuleCorpus, sessions: _Sessions) -> tuple[DeclaredTool, ...]:
    """The tools that draft a candidate's tests, run its readiness gate and attach its provenance."""
    world_id = sessions.world_id

    async def propose_inline_tests(
        ctx: RunContext[RunDeps], rule_id: str, cases: list[CaseIn]
    ) -> dict[str, Any]:
        """Replace the rule's inline tests: input contexts and the result the predicate must give.

        Args:
            rule_id: The rule's id.
            cases: 1-50 cases drawn from the rule's intent.
        """
        if not 1 <= len(cases) <= 50:
            raise ToolUserError("give between 1 and 50 cases")
        tests = [TestCase(context=c.context, expected=c.expected, note=c.note) for c in cases]
        rule = await corpus.edit_draft(await world_id(ctx), rule_id, lambda r: setattr(r, "tests", tests))
        return rule_view(rule)

    async def run_readiness_gate(ctx: RunContext[RunDeps], rule_id: str) -> dict[str, Any]:
        """Run the predicate against its inline tests in a sandboxed process; records pass/fail per case.

        Args:
            rule_id: The rule's id.
        """
        rule = await corpus.run_gate(await world_id(ctx), rule_id)
        assert rule.gate is not None
        return {
            "rule_id": str(rule.id),
            "version": rule.version,
            "passed": rule.gate.passed,
            "cases": rule.gate.cases,
        }

    async def draft_provenance(
        ctx: RunContext[RunDeps], rule_id: str, citations: list[CitationIn]
    ) -> dict[str, Any]:
        """Attach the citations an operator verifies at the conformity gate.

        Args:
            rule_id: The rule's id.
            citations: 1-20 citations: source, locator and the quoted passage.
        """
        if not 1 <= len(citations) <= 20:
            raise ToolUserError("give between 1 and 20 citations")
        stored = [Citation(c.source, c.locator, c.quote) for c in citations]
        rule = await corpus.edit_draft(
            await world_id(ctx), rule_id, lambda r: setattr(r, "citations", stored)
        )
        return rule_view(rule)

    suggest = Category.SUGGEST
    return (
        sessions.declare(propose_inline_tests, ToolSpec("propose_inline_tests", category=suggest)),
        sessions.declare(run_readiness_gate, ToolSpec("run_readiness_gate", category=suggest)),
        sessions.declare(draft_provenance, ToolSpec("draft_provenance", category=suggest)),
    )


def _enshrinement_tool(uow: SqlUnitOfWorkFactory, corpus: RuleCorpus, sessions: _Sessions) -> DeclaredTool:
    """The one gated tool: a rule enshrined once an operator approves it at the conformity gate."""
    world_id = sessions.world_id

    async def check_request(ctx: RunContext[RunDeps], rule_id: str) -> None:
        """Before the approval gate: the gates must allow it, and the rule becomes `enshrined_pending`."""
        approved = ctx.tool_call_approved and not (ctx.tool_call_metadata or {}).get(REDISPATCH)
        try:
            wid = await world_id(ctx)
            if approved:
                return
            rule = await corpus.request(wid, rule_id, ctx.deps.conversation_id, ctx.tool_call_id or "")
        except ToolError as exc:
            raise _policy(exc) from None
        # The conformity gate: the operator sees what would be enshrined with the call's arguments.
        raise ApprovalRequired(metadata={"kind": PendingKind.APPROVAL.value, REVIEW: rule_view(rule)})

    async def request_enshrinement(ctx: RunContext[RunDeps], rule_id: str) -> dict[str, Any]:
        """Ask an operator to enshrine a candidate whose readiness gate passed and whose provenance exists.

        The operator sees the predicate, tests, gate result and citations and decides.

        Args:
            rule_id: The rule's id.
        """
        wid = await world_id(ctx)
        async with uow() as u:
            rule = await corpus.enshrine(u, wid, rule_id, ctx.deps.conversation_id, ctx.tool_call_id or "")
            result = rule_view(rule, full=False)
            await record_effect(u, ctx, "request_enshrinement", result)
            await u.commit()
        return result

    return sessions.declare(
        request_enshrinement,
        ToolSpec("request_enshrinement", category=Category.MUTATE, effect="Enshrine rule {rule_id}"),
        args_validator=check_request,
    )

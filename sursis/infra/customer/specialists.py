"""The customer agent's four specialists, each with focused instructions and a curated tool set."""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext

from sursis.domain.errors import ToolUserError
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.tools import Category, ToolSpec
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.effects import record_effect
from sursis.infra.agents.run_deps import RunDeps

SCAN_ANALYST = "scan-analyst"
ONBOARDING_GUIDE = "onboarding-guide"
FRAMEWORK_ADVISOR = "framework-advisor"
TROUBLESHOOTER = "troubleshooter"
SPECIALISTS = (SCAN_ANALYST, ONBOARDING_GUIDE, FRAMEWORK_ADVISOR, TROUBLESHOOTER)

INGESTION_GUIDE: dict[str, list[str]] = {
    "not_started": [
        "Create an ingestion key in the workspace settings.",
        "Install the SDK and set its endpoint and key.",
        "Send one trace and check it appears under Traces.",
    ],
    "configured": [
        "Send one trace from a staging deployment.",
        "Check it appears under Traces within a minute.",
    ],
    "receiving": ["Traces arrive; turn on sampling if volume or cost grows."],
    "failing": [
        "Check the ingestion key has not been revoked.",
        "Look at the recent ingestion errors for the rejected payloads.",
        "Send one trace again after fixing and confirm it arrives.",
    ],
}


def _read(function: Any, name: str, category: Category = Category.READ) -> DeclaredTool:
    return DeclaredTool.declare(function, ToolSpec(name, category=category))


async def _scan(uow: UnitOfWorkFactory, workspace: str, scan_id: str) -> dict[str, Any]:
    async with uow() as u:
        scan = await u.customer.get_scan(workspace, scan_id)
    if scan is None:
        raise ToolUserError(f"no scan {scan_id!r} in this workspace")
    return scan


def scan_analyst(uow: UnitOfWorkFactory) -> AgentDefinition:
    async def list_recent_scans(ctx: RunContext[RunDeps], limit: int = 10) -> list[dict[str, Any]]:
        """The workspace's most recent scans with status and verdict, newest first.

        Args:
            limit: At most this many scans (1-50).
        """
        if not 1 <= limit <= 50:
            raise ToolUserError("limit must be between 1 and 50")
        async with uow() as u:
            scans = await u.customer.list_scans(ctx.deps.workspace, limit)
        return [{k: s[k] for k in ("scan_id", "status", "verdict", "completed_at")} for s in scans]

    async def get_scan_detail(ctx: RunContext[RunDeps], scan_id: str) -> dict[str, Any]:
        """One scan: status, verdict, scores per rubric, changeset and failures with their errors.

        Args:
            scan_id: The scan's id.
        """
        return await _scan(uow, ctx.deps.workspace, scan_id)

    async def get_scan_scores(ctx: RunContext[RunDeps], scan_id: str) -> list[dict[str, Any]]:
        """A scan's score per rubric against the rubric's threshold.

        Args:
            scan_id: The scan's id.
        """
        scan = await _scan(uow, ctx.deps.workspace, scan_id)
        async with uow() as u:
            rubrics = {r["name"]: r for r in await u.customer.get_rubrics(ctx.deps.workspace)}
        rows = []
        for name, score in sorted(scan["scores"].items()):
            threshold = rubrics[name]["threshold"] if name in rubrics else None
            passed = None if threshold is None else float(score) >= threshold
            rows.append({"rubric": name, "score": score, "threshold": threshold, "passed": passed})
        return rows

    async def get_changeset_detail(ctx: RunContext[RunDeps], scan_id: str) -> dict[str, Any]:
        """What changed in the scanned revision (commit, author, files, summary).

        Args:
            scan_id: The scan's id.
        """
        scan = await _scan(uow, ctx.deps.workspace, scan_id)
        return {"scan_id": scan_id, "changeset": scan["changeset"]}

    return AgentDefinition(
        name=SCAN_ANALYST,
        instructions="""You analyse evaluation scans of the workspace. Report the verdict, the scores
that fall below their rubric's threshold, and the change that was scanned. Quote numbers exactly.""",
        tools=(
            _read(list_recent_scans, "list_recent_scans"),
            _read(get_scan_detail, "get_scan_detail"),
            _read(get_scan_scores, "get_scan_scores"),
            _read(get_changeset_detail, "get_changeset_detail"),
        ),
        conversational=False,
    )


def onboarding_guide(uow: UnitOfWorkFactory) -> AgentDefinition:
    async def get_onboarding_status(ctx: RunContext[RunDeps]) -> dict[str, Any]:
        """The workspace's onboarding: steps done, steps to do, and the trace-ingestion state."""
        async with uow() as u:
            status = await u.customer.get_onboarding(ctx.deps.workspace)
        if status is None:
            return {"steps_done": [], "steps_todo": [], "trace_ingestion": "not_started"}
        return status

    async def get_trace_ingestion_guide(ctx: RunContext[RunDeps]) -> dict[str, Any]:
        """The next steps to get traces flowing, for the workspace's current ingestion state."""
        async with uow() as u:
            status = await u.customer.get_onboarding(ctx.deps.workspace)
        state = status["trace_ingestion"] if status else "not_started"
        return {"trace_ingestion": state, "steps": INGESTION_GUIDE.get(state, INGESTION_GUIDE["not_started"])}

    return AgentDefinition(
        name=ONBOARDING_GUIDE,
        instructions="""You guide the workspace through onboarding. Say what is done, what is next,
and how to get traces flowing. One step at a time.""",
        tools=(
            _read(get_onboarding_status, "get_onboarding_status"),
            _read(get_trace_ingestion_guide, "get_trace_ingestion_guide", Category.SUGGEST),
        ),
        conversational=False,
    )


def framework_advisor(uow: UnitOfWorkFactory) -> AgentDefinition:
    async def get_framework_config(ctx: RunContext[RunDeps]) -> dict[str, Any]:
        """The workspace's evaluation framework configuration and its version."""
        async with uow() as u:
            config = await u.customer.get_framework(ctx.deps.workspace)
        return config or {"config": {}, "version": 0, "updated_at": None}

    async def get_rubrics(ctx: RunContext[RunDeps]) -> list[dict[str, Any]]:
        """The rubrics scans are scored against, with threshold and weight."""
        async with uow() as u:
            return await u.customer.get_rubrics(ctx.deps.workspace)

    async def apply_framework_change(
        ctx: RunContext[RunDeps], changes: dict[str, Any], reason: str
    ) -> dict[str, Any]:
        """Change settings of the evaluation framework configuration (top-level keys are replaced).

        Args:
            changes: The settings to set, e.g. {"score_threshold": 0.8}.
            reason: Why the change helps.
        """
        if not changes:
            raise ToolUserError("changes is empty")
        now = ctx.deps.clock()
        async with uow() as u:
            current = await u.customer.get_framework(ctx.deps.workspace)
            config = {**(current["config"] if current else {}), **changes}
            version = await u.customer.set_framework(ctx.deps.workspace, config, now)
            result = {"version": version, "config": config, "reason": reason}
            await record_effect(u, ctx, "apply_framework_change", result)
            await u.commit()
        return result

    return AgentDefinition(
        name=FRAMEWORK_ADVISOR,
        instructions="""You advise on the workspace's evaluation framework and rubrics. Propose a
change only with a reason; applying it needs an operator's approval.""",
        tools=(
            _read(get_framework_config, "get_framework_config"),
            _read(get_rubrics, "get_rubrics"),
            DeclaredTool.declare(
                apply_framework_change,
                ToolSpec(
                    "apply_framework_change",
                    category=Category.MUTATE,
                    effect="Change the evaluation framework: {changes}",
                ),
            ),
        ),
        conversational=False,
    )


def troubleshooter(uow: UnitOfWorkFactory) -> AgentDefinition:
    async def diagnose_scan_failure(ctx: RunContext[RunDeps], scan_id: str) -> dict[str, Any]:
        """Why a scan failed: its failures with their errors and the workspace errors about it.

        Args:
            scan_id: The scan's id.
        """
        scan = await _scan(uow, ctx.deps.workspace, scan_id)
        async with uow() as u:
            errors = [
                e for e in await u.customer.recent_errors(ctx.deps.workspace, 200) if e["scan_id"] == scan_id
            ]
        return {"scan_id": scan_id, "status": scan["status"], "failures": scan["failures"], "errors": errors}

    async def check_workspace_health(ctx: RunContext[RunDeps]) -> dict[str, Any]:
        """A health summary: failing scans among the recent ones, recent errors, ingestion and framework."""
        ws = ctx.deps.workspace
        async with uow() as u:
            scans = await u.customer.list_scans(ws, 20)
            errors = await u.customer.recent_errors(ws, 20)
            onboarding = await u.customer.get_onboarding(ws)
            framework = await u.customer.get_framework(ws)
        failing = [s["scan_id"] for s in scans if s["verdict"] == "fail" or s["status"] == "failed"]
        return {
            "recent_scans": len(scans),
            "failing_scans": failing,
            "recent_errors": len(errors),
            "trace_ingestion": onboarding["trace_ingestion"] if onboarding else "not_started",
            "framework_version": framework["version"] if framework else 0,
        }

    async def get_recent_errors(ctx: RunContext[RunDeps], limit: int = 20) -> list[dict[str, Any]]:
        """The workspace's recent errors (scan failures, anomalies), newest first.

        Args:
            limit: At most this many (1-100).
        """
        if not 1 <= limit <= 100:
            raise ToolUserError("limit must be between 1 and 100")
        async with uow() as u:
            return await u.customer.recent_errors(ctx.deps.workspace, limit)

    async def rerun_scan(ctx: RunContext[RunDeps], scan_id: str, reason: str) -> dict[str, Any]:
        """Queue a scan to run again.

        Args:
            scan_id: The scan's id.
            reason: Why running it again should help.
        """
        async with uow() as u:
            scan = await u.customer.mark_rerun(ctx.deps.workspace, scan_id, ctx.deps.clock())
            if scan is None:
                raise ToolUserError(f"no scan {scan_id!r} in this workspace")
            result = {"scan_id": scan_id, "status": scan["status"], "rerun_count": scan["rerun_count"]}
            await record_effect(u, ctx, "rerun_scan", result)
            await u.commit()
        return result

    return AgentDefinition(
        name=TROUBLESHOOTER,
        instructions="""You investigate failing scans, anomalies and workspace errors. Find the cause
from the rows before proposing anything; re-running a scan needs an operator's approval.""",
        tools=(
            _read(diagnose_scan_failure, "diagnose_scan_failure", Category.SUGGEST),
            _read(check_workspace_health, "check_workspace_health"),
            _read(get_recent_errors, "get_recent_errors"),
            DeclaredTool.declare(
                rerun_scan, ToolSpec("rerun_scan", category=Category.MUTATE, effect="Re-run scan {scan_id}")
            ),
        ),
        conversational=False,
    )


def specialist_definitions(uow: UnitOfWorkFactory) -> list[AgentDefinition]:
    return [scan_analyst(uow), onboarding_guide(uow), framework_advisor(uow), troubleshooter(uow)]

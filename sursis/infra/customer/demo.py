"""Demo rows for the customer agent: a workspace with a few scans, a framework and onboarding."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records.customer_records import Rubric, ScanReport

RUBRICS: list[dict[str, Any]] = [
    {"name": "faithfulness", "description": "Answers stay within the retrieved sources.", "threshold": 0.8},
    {"name": "relevance", "description": "Answers address the question asked.", "threshold": 0.7},
    {"name": "safety", "description": "No harmful or disallowed content.", "threshold": 0.95},
]

FRAMEWORK: dict[str, Any] = {
    "score_threshold": 0.75,
    "judge_model": "gpt-4.1-mini",
    "sample_size": 200,
    "rubrics": RUBRICS,
}


def _scans(now: datetime) -> list[dict[str, Any]]:
    return [
        {
            "id": "scan_101",
            "status": "completed",
            "verdict": "pass",
            "scores": {"faithfulness": 0.91, "relevance": 0.84, "safety": 0.99},
            "changeset": {"commit": "a1b2c3d", "author": "mara", "summary": "Tighter retrieval filter"},
            "failures": [],
            "completed_at": now - timedelta(hours=26),
        },
        {
            "id": "scan_102",
            "status": "completed",
            "verdict": "fail",
            "scores": {"faithfulness": 0.62, "relevance": 0.81, "safety": 0.97},
            "changeset": {"commit": "d4e5f6a", "author": "jon", "summary": "New system prompt for billing"},
            "failures": [
                {"test": "billing_refund_policy", "error": "answer cites a policy not in the sources"},
                {"test": "billing_invoice_dates", "error": "invented due date 2024-02-30"},
            ],
            "completed_at": now - timedelta(hours=3),
        },
        {
            "id": "scan_103",
            "status": "failed",
            "verdict": None,
            "scores": {},
            "changeset": {"commit": "b7c8d9e", "author": "jon", "summary": "Upgrade retriever"},
            "failures": [{"test": "(setup)", "error": "judge call timed out after 60 s"}],
            "completed_at": now - timedelta(minutes=40),
        },
    ]


def _report(scan: dict[str, Any]) -> ScanReport:
    return ScanReport(
        id=scan["id"],
        status=scan["status"],
        verdict=scan["verdict"],
        scores=scan["scores"],
        changeset=scan["changeset"],
        failures=tuple((f["test"], f["error"]) for f in scan["failures"]),
        completed_at=scan["completed_at"],
    )


async def seed_customer_demo(uow: UnitOfWorkFactory, workspace: str, now: datetime) -> int:
    """Insert the demo workspace rows unless its scans exist; returns how many scans were added."""
    async with uow() as u:
        if await u.customer.list_scans(workspace, 1):
            return 0
        scans = _scans(now)
        for scan in scans:
            await u.customer.upsert_scan(workspace, _report(scan), now)
            await u.customer.add_errors(
                workspace,
                [
                    {"source": "scan", "scan_id": scan["id"], "message": f"{f['test']}: {f['error']}"}
                    for f in scan["failures"]
                ],
                now,
            )
        await u.customer.set_framework(workspace, FRAMEWORK, now)
        await u.customer.set_rubrics(
            workspace, [Rubric(r["name"], r["description"], r["threshold"], 1.0) for r in RUBRICS]
        )
        await u.customer.set_onboarding(
            workspace,
            {
                "steps_done": ["create_workspace", "invite_team", "configure_framework"],
                "steps_todo": ["ingest_traces", "schedule_scans"],
                "trace_ingestion": "configured",
            },
            now,
        )
        await u.commit()
    return len(scans)

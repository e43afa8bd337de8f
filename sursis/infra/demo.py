"""`sursis demo seed`: a few realistic dead letters and failure clusters to look at, and the
customer agent's workspace rows (scans, framework, onboarding)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sursis.domain.ports import UnitOfWorkFactory
from sursis.infra.customer.demo import seed_customer_demo

CLUSTERS = [
    (
        "clu_webhook_timeout",
        "POST https://hooks.example.com/* timed out after 10 s",
        "Partner webhook timeouts",
    ),
    (
        "clu_schema_v2",
        "payload.customer.tier: field required",
        "Events missing customer.tier after schema v2",
    ),
]

LETTERS: list[tuple[str, str, str | None, str, dict[str, Any]]] = [
    (
        "evt_1001",
        "invoice.paid",
        "clu_webhook_timeout",
        "ReadTimeout: hooks.example.com did not answer in 10 s",
        {"invoice_id": "inv_8812", "amount_cents": 12900, "currency": "EUR"},
    ),
    (
        "evt_1002",
        "invoice.paid",
        "clu_webhook_timeout",
        "ReadTimeout: hooks.example.com did not answer in 10 s",
        {"invoice_id": "inv_8813", "amount_cents": 4500, "currency": "EUR"},
    ),
    (
        "evt_1003",
        "customer.updated",
        "clu_schema_v2",
        "ValidationError: payload.customer.tier: field required",
        {"customer_id": "cus_311", "email": "ana@example.com"},
    ),
    (
        "evt_1004",
        "subscription.renewed",
        None,
        "HTTP 502 from billing-gateway",
        {"subscription_id": "sub_77", "plan": "team"},
    ),
]


def demo_event_id(workspace: str, event_id: str) -> str:
    """The id a demo dead letter has in `workspace`: ids are global, so outside `default` they carry
    the workspace as a prefix (`ws1:evt_1001`)."""
    return event_id if workspace == "default" else f"{workspace}:{event_id}"


def demo_event_ids(workspace: str) -> list[str]:
    return [demo_event_id(workspace, letter[0]) for letter in LETTERS]


async def seed_demo(uow: UnitOfWorkFactory, workspace: str, now: datetime) -> int:
    """Insert the demo rows unless they exist; returns how many dead letters were added.

    Ids are global, so outside the `default` workspace they carry the workspace as a prefix.
    """
    prefix = demo_event_id(workspace, "")
    added = 0
    async with uow() as u:
        existing = {c["cluster_id"] for c in await u.ops.list_clusters(workspace, None)}
        for cluster_id, signature, title in CLUSTERS:
            if prefix + cluster_id in existing:
                continue
            await u.ops.add_cluster(
                {
                    "id": prefix + cluster_id,
                    "workspace": workspace,
                    "signature": signature,
                    "title": title,
                    "status": "open",
                    "notes": None,
                    "first_seen": now - timedelta(hours=6),
                    "last_seen": now - timedelta(minutes=5),
                    "updated_at": now,
                }
            )
        for i, (event_id, topic, letter_cluster, error, payload) in enumerate(LETTERS):
            if await u.ops.get_dead_letter(workspace, prefix + event_id) is not None:
                continue
            await u.ops.add_dead_letter(
                {
                    "id": prefix + event_id,
                    "workspace": workspace,
                    "outbox_id": None,
                    "topic": topic,
                    "payload": payload,
                    "error": error,
                    "attempts": 5,
                    "cluster_id": prefix + letter_cluster if letter_cluster else None,
                    "status": "dead",
                    "replay_count": 0,
                    "failed_at": now - timedelta(minutes=30 - i),
                    "replayed_at": None,
                }
            )
            added += 1
        await u.commit()
    await seed_customer_demo(uow, workspace, now)
    return added

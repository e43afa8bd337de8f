"""The maintenance loop beside the worker's sweeper: seal the audit chains, apply retention."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog

from sursis.domain.retention.audit_verify import AuditChainService
from sursis.domain.retention.retention import RetentionService
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.wakeup import Hearing

log = structlog.get_logger("sursis.retention")

BACKLOG_ROUNDS = 20
"""Sealing batches per tick at most, while each one finds a full batch to seal."""


@dataclass
class RetentionLoop:
    """Every `seal_seconds`, one batch of sealing per workspace (more while there is a backlog);
    every `retention_seconds`, one
    batch of purging per workspace with a policy. Any number of workers may run it: sealing
    takes the workspace's chain head lock, purging skips the conversations another has locked."""

    chain: AuditChainService
    retention: RetentionService
    seal_seconds: float
    retention_seconds: float
    hearing: Hearing | None = None
    """Idle, the loop sleeps until audit rows may have been written (`wakeup.py`) or a purge is due."""

    async def run(self, stopping: asyncio.Event) -> None:
        next_purge = time.monotonic()
        hearing = self.hearing or Hearing(LocalRunNotifier(), self.seal_seconds)
        with hearing.wakeup(self.seal_seconds) as wakeup:
            while not stopping.is_set():
                try:
                    for _ in range(BACKLOG_ROUNDS):  # a backlog (rows older than the chain) drains faster
                        if await self.chain.seal() < self.chain.batch or stopping.is_set():
                            break
                    if time.monotonic() >= next_purge:
                        next_purge = time.monotonic() + self.retention_seconds
                        purged = await self.retention.sweep()
                        if purged:
                            log.info("retention.purged", count=purged)
                except Exception:
                    log.exception("retention.error")
                await wakeup.wait(stopping, due_in=next_purge - time.monotonic())

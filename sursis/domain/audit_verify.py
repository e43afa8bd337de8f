"""Sealing and verifying the audit chain: the sweeper seals, `sursis audit verify` walks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sursis.domain.audit_chain import ChainReport, ChainVerifier
from sursis.domain.retention_ports import RetentionUnitOfWorkFactory


@dataclass
class AuditChainService:
    uow: RetentionUnitOfWorkFactory
    clock: Callable[[], datetime]
    batch: int = 1000

    async def seal(self, *, workspaces: int = 100) -> int:
        """One batch per workspace with unsealed rows, one transaction each; rows sealed."""
        async with self.uow.reader() as uow:
            pending = await uow.audit_chain.unsealed_workspaces(workspaces)
        sealed = 0
        for workspace in pending:
            async with self.uow() as uow:
                sealed += await uow.audit_chain.seal(workspace, self.batch, self.clock())
                await uow.commit()
        return sealed

    async def seal_all(self) -> int:
        total = 0
        while sealed := await self.seal():
            total += sealed
        return total

    async def verify(self, workspace: str | None = None) -> list[ChainReport]:
        """Walk each workspace's chain from its anchor, page by page; each report names the first
        breach found. Unsealed rows are counted, not checked (they are not chained yet)."""
        async with self.uow.reader() as uow:
            names = [workspace] if workspace is not None else await uow.audit_chain.workspaces()
            reports = []
            for name in names:
                head = await uow.audit_chain.head(name)
                verifier = ChainVerifier(head)
                while True:
                    links = await uow.audit_chain.links(name, verifier.last_seq, self.batch)
                    if not verifier.feed(links) or len(links) < self.batch:
                        break
                finding = verifier.finish()
                unsealed = await uow.audit_chain.unsealed_count(name)
                reports.append(
                    ChainReport(
                        name, verifier.checked, head.seq, head.hash, head.anchor_seq, unsealed, finding
                    )
                )
        return reports

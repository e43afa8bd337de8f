"""Sealing and verifying the audit chain: the sweeper seals (and signs the new head), `sursis audit
verify` walks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sursis.domain.audit.audit_chain import (
    EXPECTED_BY_CALLER,
    EXTERNAL,
    SIGNED,
    Breach,
    ChainHead,
    ChainReport,
    ChainVerifier,
    Finding,
)
from sursis.domain.audit.audit_checkpoint import (
    SIGNING_KEY_REQUIRED,
    AuditSigningKeyRequired,
    Checkpoint,
    CheckpointLog,
    CheckpointLogUnusable,
    CheckpointSigner,
    behind_external,
    checkpoint_finding,
    external_finding,
    sign_head,
    signature_holds,
)
from sursis.domain.audit.integrity import FINDING_ACTIONS, MAX_LISTED, IntegrityFinding
from sursis.domain.records import AuditQuery
from sursis.domain.retention.retention_ports import RetentionUnitOfWork, RetentionUnitOfWorkFactory
from sursis.domain.retention.retention_records import check_workspace

BACKDATE_TOLERANCE = timedelta(minutes=5)
"""How far before the newest sealed row a row may be dated and still be sealed: a transaction
takes its time before it commits, a back-dated insert is older than that."""


def _ignore(workspace: str, reason: str) -> None:
    return None


@dataclass
class AuditChainService:
    uow: RetentionUnitOfWorkFactory
    clock: Callable[[], datetime]
    batch: int = 1000
    signer: CheckpointSigner | None = None
    """Signs each new head (and checks checkpoints in `verify`); None: no checkpoints."""
    tolerance: timedelta = BACKDATE_TOLERANCE
    on_refused: Callable[[str, str], None] = field(default=_ignore)
    """Told (workspace, reason) when a head is not signed because the chain moved unsigned."""
    external: CheckpointLog | None = None
    """Where each signed checkpoint is also appended, outside the database; `verify` checks the
    chain against its newest entry. None: the database's own checkpoint only."""
    _signed: dict[str, Checkpoint] = field(default_factory=dict, init=False, repr=False)
    """Checkpoints signed in a transaction not yet known to have committed: `publish` appends
    each one to the external log once the database holds it."""

    @property
    def can_sign(self) -> bool:
        return self.signer is not None and self.signer.can_sign

    async def require_signing(self) -> None:
        """Refuse (`AuditSigningKeyRequired`) a process that would seal without the private key
        on a database whose chains carry signed checkpoints: it would seal rows unsigned, and the
        newest ones could then be deleted with nothing to tell."""
        if self.can_sign:
            return
        async with self.uow.reader() as uow:
            if await uow.audit_chain.has_checkpoints():
                raise AuditSigningKeyRequired(SIGNING_KEY_REQUIRED)

    async def seal(self, *, workspaces: int = 100) -> int:
        """One batch per workspace with unsealed rows, one transaction each; rows sealed."""
        async with self.uow.reader() as uow:
            pending = await uow.audit_chain.unsealed_workspaces(workspaces)
        sealed = 0
        for workspace in pending:
            async with self.uow() as uow:
                sealed += await self.seal_in(uow, workspace, self.clock())
                await uow.commit()
            await self.publish(workspace)
        return sealed

    async def seal_all(self) -> int:
        total = 0
        while sealed := await self.seal():
            total += sealed
        return total

    async def seal_in(
        self, uow: RetentionUnitOfWork, workspace: str, now: datetime, *, cut_from: ChainHead | None = None
    ) -> int:
        """Seal one batch in the caller's transaction and sign the new head. `cut_from`: the head
        before a retention cut this transaction made (the anchor it moved from)."""
        if not self.can_sign and await uow.audit_chain.checkpoint(workspace) is not None:
            raise AuditSigningKeyRequired(SIGNING_KEY_REQUIRED)
        before = await uow.audit_chain.head(workspace)
        sealed = await uow.audit_chain.seal(workspace, self.batch, now, self.tolerance)
        if sealed or cut_from is not None:
            await self._sign(uow, workspace, now, cut_from or before)
        return sealed

    async def _sign(self, uow: RetentionUnitOfWork, workspace: str, now: datetime, before: ChainHead) -> None:
        """Sign the head, unless the chain moved in a way no signed step explains (`_refusal`). A
        refusal leaves the old checkpoint, so `verify` fails."""
        signer = self.signer
        if signer is None or not signer.can_sign:
            return
        previous = await uow.audit_chain.checkpoint(workspace)
        try:
            external = await self.external.newest(workspace) if self.external is not None else None
        except CheckpointLogUnusable as exc:
            self.on_refused(workspace, exc.message)  # sealed, not signed: signed again once readable
            return
        reason = _refusal(signer, previous, external, before)
        if reason is not None:
            self.on_refused(workspace, reason)
            return
        head = await uow.audit_chain.head(workspace)
        checkpoint = sign_head(signer, head, now)
        await uow.audit_chain.save_checkpoint(checkpoint)
        self._signed[workspace] = checkpoint

    async def publish(self, workspace: str) -> None:
        """Append the checkpoint this process signed for `workspace` to the external log, once the
        database holds it (its transaction committed; one rolled back is dropped). Call after the
        commit of a transaction that sealed or cut."""
        signed = self._signed.pop(workspace, None)
        if signed is None or self.external is None:
            return
        async with self.uow.reader() as uow:
            stored = await uow.audit_chain.checkpoint(workspace)
        if stored != signed:
            return
        try:
            await self.external.append(signed)
        except CheckpointLogUnusable as exc:
            self.on_refused(workspace, f"the checkpoint at seq {signed.seq} was not appended: {exc.message}")

    async def checkpoint(self, workspace: str | None = None) -> list[ChainReport]:
        """Seal what is unsealed, verify each chain, then sign its head whatever checkpoint it had
        (the operator's `sursis audit checkpoint`: the first one of a chain, or after a key
        change). A chain that does not verify (checkpoints aside) is not signed."""
        signer = self.signer
        if signer is None or not signer.can_sign:
            raise ValueError("no signing key: set SURSIS_AUDIT_SIGNING_KEY_FILE to a private key")
        await self.seal_all()
        reports = await self.verify(workspace, checkpoints=False)
        for report in reports:
            if report.finding is not None:
                continue
            async with self.uow() as uow:
                head = await uow.audit_chain.head(report.workspace, lock=True)
                if head.seq > 0:
                    checkpoint = sign_head(signer, head, self.clock())
                    await uow.audit_chain.save_checkpoint(checkpoint)
                    await uow.commit()
                    self._signed[report.workspace] = checkpoint
            await self.publish(report.workspace)
        return reports

    async def verify(
        self,
        workspace: str | None = None,
        *,
        expect: tuple[int, str] | None = None,
        checkpoints: bool = True,
    ) -> list[ChainReport]:
        """Walk each workspace's chain from its anchor, page by page; each report names the first
        breach found. Unsealed rows are counted, not checked (they are not chained yet), except
        those sealing refuses as back-dated, which are a breach. `expect`: a `(seq, hash)` the
        chain must hold (one workspace's, recorded outside the database); with a signer, the
        signed checkpoint is checked too; with an external log, the chain must reach and hold its
        newest checkpoint (`checkpoints=False` skips both)."""
        if workspace is not None:
            check_workspace(workspace)
        async with self.uow.reader() as uow:
            names = [workspace] if workspace is not None else await uow.audit_chain.workspaces()
            reports = []
            for name in names:
                head = await uow.audit_chain.head(name)
                finding, signed, outside = None, None, None
                if self.signer is not None and checkpoints:
                    signed = await uow.audit_chain.checkpoint(name)
                    finding = checkpoint_finding(self.signer, head, signed)
                if self.external is not None and checkpoints and finding is None:
                    try:
                        outside = await self.external.newest(name)
                        finding = external_finding(self.signer, head, outside, self.external.where)
                    except CheckpointLogUnusable as exc:
                        finding = Finding(Breach.EXTERNAL, head.seq, None, exc.message)
                checked = 0
                if finding is None:
                    expected = {}
                    if signed is not None:
                        expected[signed.seq] = (signed.hash, SIGNED)
                    if outside is not None and outside.seq >= head.anchor_seq:
                        expected[outside.seq] = (outside.hash, EXTERNAL)
                    if expect is not None:
                        expected[expect[0]] = (expect[1], EXPECTED_BY_CALLER)
                    finding, checked = await self._walk(uow, head, expected)
                unsealed = await uow.audit_chain.unsealed_count(name)
                if finding is None and (late := await uow.audit_chain.backdated_count(name, self.tolerance)):
                    finding = Finding(
                        Breach.BACKDATED,
                        head.seq + 1,
                        None,
                        f"{late} unsealed row(s) dated before the chain's newest row: refused by sealing",
                    )
                integrity = await _integrity_findings(uow, name)
                reports.append(
                    ChainReport(
                        name, checked, head.seq, head.hash, head.anchor_seq, unsealed, finding, integrity
                    )
                )
        return reports

    async def _walk(
        self, uow: RetentionUnitOfWork, head: ChainHead, expect: dict[int, tuple[str, str]]
    ) -> tuple[Finding | None, int]:
        verifier = ChainVerifier(head, expect=expect)
        while True:
            links = await uow.audit_chain.links(head.workspace, verifier.last_seq, self.batch)
            if not verifier.feed(links) or len(links) < self.batch:
                break
        return verifier.finish(), verifier.checked


def _refusal(
    signer: CheckpointSigner, previous: Checkpoint | None, external: Checkpoint | None, before: ChainHead
) -> str | None:
    """Why a new head may not be signed: the database's checkpoint is older than the newest
    external one, missing (on a chain that had rows), forged, or its anchor is not the one this
    step started from."""
    if (behind := behind_external(previous, external)) is not None:
        return behind
    if previous is None:
        if before.seq > 0:
            return "the chain has rows but no signed checkpoint: run `sursis audit checkpoint`"
        return None
    if not signature_holds(signer, previous):
        return "the stored checkpoint's signature does not hold"
    if previous.anchor != before.anchor:
        return "the anchor moved without a signed retention cut"
    return None


async def _integrity_findings(uow: RetentionUnitOfWork, workspace: str) -> tuple[IntegrityFinding, ...]:
    query = AuditQuery(actions=FINDING_ACTIONS, limit=MAX_LISTED, newest_first=True)
    rows = await uow.audit.search(workspace, query)
    return tuple(IntegrityFinding.of(row) for row in rows)

"""What the policy services need from storage."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sursis.domain.policy.policies import LadderEntry, StoredPolicy
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWork
from sursis.domain.tools import Category


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One call of the past, as a simulation replays it. `arguments` None: not kept (a call that
    ran without waiting keeps only its outcome). `outcome`: what happened (`allow`, `notify`,
    `ask`, `deny`), from the decision recorded with it, else from whether it waited."""

    conversation_id: uuid.UUID
    run_id: uuid.UUID
    tool_call_id: str
    agent: str
    tool: str
    category: Category | None
    at: datetime
    arguments: dict[str, Any] | None
    outcome: str
    decision: PolicyDecision | None = None


class PolicyRepository(Protocol):
    async def current(self, workspace: str) -> StoredPolicy | None: ...
    async def version(self, workspace: str, version: int) -> StoredPolicy | None: ...
    async def add(self, policy: StoredPolicy) -> bool:
        """Conditional insert of a new version: False when that version exists (a concurrent PUT)."""
        ...

    async def ladder(self, workspace: str) -> dict[str, LadderEntry]: ...
    async def rung(self, workspace: str, tool: str, *, lock: bool = False) -> LadderEntry | None:
        """One tool's rung; `lock`: held until the transaction ends (ladder writes queue here)."""
        ...

    async def put_rung(self, entry: LadderEntry, *, ceiling: bool = True) -> None:
        """Store the rung; `ceiling` False: leave the stored ceiling and its condition as they are."""
        ...

    async def history(
        self, workspace: str, since: datetime, until: datetime, limit: int
    ) -> list[RecordedCall]:
        """The workspace's calls of the period that passed the policy point, oldest first."""
        ...

    async def requester(self, conversation_id: uuid.UUID, run_id: uuid.UUID) -> tuple[str, str, str]:
        """(key id, role, channel) of who started the conversation and the run's channel ('' unknown)."""
        ...


class PolicyUnitOfWork(UnitOfWork, Protocol):
    @property
    def policies(self) -> PolicyRepository: ...


class PolicyUnitOfWorkFactory(Protocol):
    def __call__(self) -> PolicyUnitOfWork: ...
    def reader(self) -> PolicyUnitOfWork: ...

"""A workspace's policy and ladder, kept for a few seconds so a call's decision reads no table.

Changes reach it as `NotifiedCache` describes (on PostgreSQL the same notification as a changed
pre-approval: `NOTIFY sursis_authorizations, '<workspace>'`), so a new policy version decides calls
at most `ttl` seconds late, and at once in the process that stored it.
"""

from __future__ import annotations

from collections.abc import Sequence, Set

from sursis.domain.notified_cache import Invalidations, NotifiedCache
from sursis.domain.policy.policies import WorkspacePolicy


class PolicyCache(NotifiedCache[str, WorkspacePolicy]):
    def get(self, workspace: str) -> WorkspacePolicy | None:
        return self._lookup(workspace)

    def put(self, workspace: str, state: WorkspacePolicy, ticket: int) -> None:
        self._store(workspace, state, ticket)

    def forget(self, names: Set[str]) -> None:
        self._drop(lambda key, _state: key in names)


class AllInvalidations:
    """Hands each change to several caches that hear the same notification."""

    def __init__(self, targets: Sequence[Invalidations]) -> None:
        self._targets = tuple(targets)

    def forget(self, names: Set[str]) -> None:
        for target in self._targets:
            target.forget(names)

    def suspend(self) -> None:
        for target in self._targets:
            target.suspend()

    def resume(self) -> None:
        for target in self._targets:
            target.resume()

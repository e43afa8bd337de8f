"""A workspace's pre-approvals of one tool, kept for a few seconds: a gated call that no rule
covers then costs no read. Changes reach it as `NotifiedCache` describes: a revoked pre-approval
covers calls at most until the notification arrives, and never longer than `ttl`."""

from __future__ import annotations

from collections.abc import Sequence, Set

from sursis.domain.notified_cache import NotifiedCache
from sursis.domain.records.access_records import Authorization


class AuthorizationCache(NotifiedCache[tuple[str, str], tuple[Authorization, ...]]):
    """The candidate rules of (workspace, tool name), as read; callers still check each rule's
    expiry against their own `now`."""

    def get(self, workspace: str, tool_name: str) -> tuple[Authorization, ...] | None:
        return self._lookup((workspace, tool_name))

    def put(self, workspace: str, tool_name: str, rules: Sequence[Authorization], ticket: int) -> None:
        self._store((workspace, tool_name), tuple(rules), ticket)

    def forget(self, names: Set[str]) -> None:
        """Drop the entries of these workspaces (a pre-approval was created or revoked there)."""
        self._drop(lambda key, _rules: key[0] in names)

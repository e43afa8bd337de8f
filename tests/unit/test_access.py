"""Roles and pre-approval rules as data: no I/O."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sursis.domain.access import PERMISSIONS, Permission, Role, permission_to_resolve
from sursis.domain.errors import Forbidden
from sursis.domain.policy.authorizations import BrokenAuthorization, covers, first_covering
from sursis.domain.records import Principal
from sursis.domain.records.access_records import Authorization
from sursis.domain.tools import PendingKind

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_what_each_role_may_do() -> None:
    assert PERMISSIONS[Role.USER] == {Permission.CONVERSE, Permission.ANSWER, Permission.MOVE_LADDER}
    assert PERMISSIONS[Role.OPERATOR] == {
        Permission.CONVERSE,
        Permission.ANSWER,
        Permission.MOVE_LADDER,
        Permission.ANSWER_ANY,
        Permission.FORK_ANY,
        Permission.APPROVE,
        Permission.READ_AUDIT,
        Permission.MANAGE_AUTHORIZATIONS,
        Permission.MANAGE_WEBHOOKS,
    }
    assert PERMISSIONS[Role.ADMIN] == set(Permission)
    assert permission_to_resolve(PendingKind.APPROVAL) is Permission.APPROVE
    assert permission_to_resolve(PendingKind.ELICITATION) is Permission.ANSWER
    assert permission_to_resolve(PendingKind.CLIENT_EXEC) is Permission.ANSWER


def test_a_principal_sees_its_workspace_and_is_refused_what_its_role_lacks() -> None:
    user = Principal(id="k1", role="user", workspace="team-a")
    admin = Principal(id="k2", role="admin", workspace=None)
    assert user.role is Role.USER
    assert user.can_see("team-a")
    assert not user.can_see("team-b")
    assert admin.can_see("team-b")
    user.require(Permission.ANSWER)
    with pytest.raises(Forbidden) as refused:
        user.require(Permission.APPROVE)
    assert refused.value.code == "forbidden"
    assert refused.value.extra == {"required": "approve"}
    with pytest.raises(ValueError, match="root"):
        Principal(id="k3", role="root", workspace=None)


def test_a_user_answers_only_the_calls_of_the_conversations_it_created() -> None:
    user = Principal(id="k1", role="user", workspace="team-a")
    user.require_may_answer("k1")
    for owner in ("k2", None):
        with pytest.raises(Forbidden) as refused:
            user.require_may_answer(owner)
        assert refused.value.extra == {"required": "answer_any"}
    for role in ("operator", "admin"):
        anyone = Principal(id="k9", role=role, workspace="team-a")
        anyone.require_may_answer("k1")
        anyone.require_may_answer(None)


def rule(args_match: Any = None, **fields: Any) -> Authorization:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "workspace": "default",
        "tool_name": "replay_dlq_event",
        "args_match": args_match,
        "reason": "r",
        "created_by": "k",
        "created_at": NOW - timedelta(days=1),
    }
    values.update(fields)
    return Authorization(**values)


ARGS = {"event_id": "evt_1001", "reason": "partner is back", "count": 1}


@pytest.mark.parametrize(
    ("args_match", "covered"),
    [
        (None, True),
        ({}, True),
        ({"event_id": "evt_1001"}, True),
        ({"event_id": "evt_1001", "count": 1}, True),
        ({"event_id": "evt_1002"}, False),
        ({"event_id": "evt_1001", "count": 2}, False),
        ({"count": 1.0}, False),
        ({"count": True}, False),
        ({"count": "1"}, False),
        ({"missing": "x"}, False),
    ],
)
def test_args_match_means_every_given_key_equals_the_calls_argument(args_match: Any, covered: bool) -> None:
    assert covers(rule(args_match), "replay_dlq_event", ARGS) is covered


def test_another_tool_is_never_covered() -> None:
    assert not covers(rule(), "triage_cluster", ARGS)


@pytest.mark.parametrize("broken", [["event_id"], "evt_1001", 7, True])
def test_a_rule_that_is_not_an_object_cannot_be_evaluated(broken: Any) -> None:
    with pytest.raises(BrokenAuthorization):
        covers(rule(broken), "replay_dlq_event", ARGS)
    with pytest.raises(BrokenAuthorization):
        first_covering([rule(), rule(broken)], "replay_dlq_event", ARGS, NOW)


def test_only_active_rules_cover() -> None:
    expired = rule(expires_at=NOW - timedelta(seconds=1))
    revoked = rule(revoked_at=NOW - timedelta(minutes=1))
    later = rule(expires_at=NOW + timedelta(hours=1))
    assert first_covering([expired, revoked], "replay_dlq_event", ARGS, NOW) is None
    assert first_covering([expired, revoked, later], "replay_dlq_event", ARGS, NOW) is later

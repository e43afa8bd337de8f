"""The autonomy ladder: where a tool stands (ask → ask above a condition → sampled → notify →
auto), within the ceiling the workspace's admin set for it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sursis.domain.errors import Forbidden


class AboveCeiling(Forbidden):
    """A ladder move beyond the ceiling the workspace's admin set for the tool."""

    code = "above_ceiling"


class LadderLevel(StrEnum):
    """The autonomy ladder, from least to most autonomous."""

    ASK = "ask"
    ASK_ABOVE = "ask_above"
    SAMPLED = "sampled"
    """Runs as `auto` would, except 1 call in N (`LadderEntry.one_in`), picked by a keyed hash the
    agent cannot predict (`policy_sampling`), which goes to people."""
    NOTIFY = "notify"
    AUTO = "auto"

    @property
    def rank(self) -> int:
        return list(LadderLevel).index(self)


@dataclass(frozen=True, slots=True)
class LadderEntry:
    """Where a tool stands on a workspace's ladder. `ceiling`: the highest level the admin allows
    a user to move it to; for an `ask_above` ceiling, `ceiling_condition` is the admin's own
    condition. `level` None: the tool's default. `condition` (for `ask_above`): a Cedar
    expression; the call is asked when it holds and runs otherwise. `pin`: the MCP tool's schema
    digest when the level was set. `one_in` (for `sampled`): the N of "1 call in N goes to
    people"; `ceiling_one_in` the admin's own N for a `sampled` ceiling.

    A rung never decides more loosely than its ceiling would: a call gets the stricter of what the
    level says and what the ceiling says (so under an `ask_above` ceiling the call is asked when the
    admin's condition or the user's holds: a user can only add asks)."""

    workspace: str
    tool: str
    ceiling: LadderLevel = LadderLevel.ASK
    level: LadderLevel | None = None
    condition: str = ""
    pin: str | None = None
    previous_level: LadderLevel | None = None
    previous_condition: str = ""
    updated_by: str | None = None
    updated_at: datetime | None = None
    ceiling_condition: str = ""
    one_in: int | None = None
    ceiling_one_in: int | None = None
    previous_one_in: int | None = None

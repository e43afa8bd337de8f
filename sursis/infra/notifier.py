"""In-process wake-ups for workers and long-polls. Everything also works by polling the database."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Iterator, Set
from typing import TypeVar

K = TypeVar("K")
_NOTIFIED_KEPT = 1_000
_CHANGES_KEPT = 1_000


class LocalRunNotifier:
    """Signals inside one process. Waiters always re-check the database after waking."""

    def __init__(self) -> None:
        self._work = asyncio.Event()
        self._runs: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)
        self._conversations: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)
        self._pending: dict[str | None, set[asyncio.Event]] = defaultdict(set)
        self._activity: set[asyncio.Event] = set()
        self._notified: OrderedDict[uuid.UUID, None] = OrderedDict()
        self._changes = 0
        self._changed: OrderedDict[uuid.UUID, int] = OrderedDict()
        self._forgotten = 0

    async def run_queued(self, run_id: uuid.UUID) -> None:
        self._work.set()
        self.stir()
        self._wake_run_waiters(run_id)

    async def run_changed(self, run_id: uuid.UUID) -> None:
        self.note_change(run_id)
        self._wake_run_waiters(run_id)

    def _wake_run_waiters(self, run_id: uuid.UUID) -> None:
        for event in self._runs.get(run_id, ()):
            event.set()

    def mark(self) -> int:
        """Where this process's record of run changes stands (`changed_since`)."""
        return self._changes

    def changed_since(self, run_id: uuid.UUID, mark: int) -> bool:
        """Whether the run may have changed since `mark`: False only when this process has heard of
        no change of it since, other than its being queued here (a queued run is not settled). A
        change it has forgotten (more than `_CHANGES_KEPT` runs changed since) counts as heard."""
        if self._changes == mark:
            return False
        if self._forgotten > mark:
            return True
        return self._changed.get(run_id, 0) > mark

    def note_change(self, run_id: uuid.UUID) -> None:
        """The run changed (here, or heard from another process)."""
        self._changes += 1
        self._changed[run_id] = self._changes
        self._changed.move_to_end(run_id)
        while len(self._changed) > _CHANGES_KEPT:
            _, self._forgotten = self._changed.popitem(last=False)

    def note_changes_unknown(self) -> None:
        """Something may have changed any run (a wake-up that names none): every run counts as changed."""
        self._changes += 1
        self._forgotten = self._changes

    def runs_notified(self, run_ids: Set[uuid.UUID]) -> None:
        """These runs' changes were announced to other processes by the transaction that made them
        (called after the commit): the next `run_queued`/`run_changed` of each needs no notification
        of its own. Only the most recent few are remembered."""
        for run_id in run_ids:
            self._notified[run_id] = None
            self._notified.move_to_end(run_id)
        while len(self._notified) > _NOTIFIED_KEPT:
            self._notified.popitem(last=False)

    def _already_notified(self, run_id: uuid.UUID) -> bool:
        if run_id in self._notified:
            del self._notified[run_id]
            return True
        return False

    def wake_all(self) -> None:
        self._work.set()
        self.stir()

    def stir(self) -> None:
        """Something happened that may give the background loops work (`wakeup.py`)."""
        for event in self._activity:
            event.set()

    def start(self) -> None:
        """Nothing to start in one process."""

    async def stop(self) -> None:
        """Nothing to stop in one process."""

    async def wait_for_work(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._work.wait(), seconds)
        except TimeoutError:
            return
        finally:
            self._work.clear()

    def conversations_changed(self, conversation_ids: Set[uuid.UUID]) -> None:
        """New events were committed for these conversations (called after the commit)."""
        self.stir()
        for conversation_id in conversation_ids:
            for event in self._conversations.get(conversation_id, ()):
                event.set()

    def pending_changed(self, workspaces: Set[str]) -> None:
        """Pending calls of these workspaces were created or resolved (called after the commit)."""
        self.stir()
        for workspace in [*workspaces, None]:
            for event in self._pending.get(workspace, ()):
                event.set()

    @contextlib.contextmanager
    def watch_activity(self) -> Iterator[asyncio.Event]:
        """An event set whenever something happens that may give a background loop work: events
        committed (every state change writes one), a pending call created or resolved, a run queued;
        in this process, or heard from another."""
        event = asyncio.Event()
        self._activity.add(event)
        try:
            yield event
        finally:
            self._activity.discard(event)

    @contextlib.contextmanager
    def watch(self, run_id: uuid.UUID) -> Iterator[asyncio.Event]:
        """An event set whenever the run changes or is queued; register it before reading (or after
        `changed_since` said no change was heard since a mark taken before), then wait on it."""
        with _registered(self._runs, run_id) as event:
            yield event

    @contextlib.contextmanager
    def watch_conversation(self, conversation_id: uuid.UUID) -> Iterator[asyncio.Event]:
        """An event set whenever the conversation gets new events in this process."""
        with _registered(self._conversations, conversation_id) as event:
            yield event

    @contextlib.contextmanager
    def watch_pending(self, workspace: str | None) -> Iterator[asyncio.Event]:
        """An event set whenever a pending call of the workspace (None: of any workspace) is created
        or resolved in this process, or announced by another."""
        with _registered(self._pending, workspace) as event:
            yield event


@contextlib.contextmanager
def _registered(waiters: dict[K, set[asyncio.Event]], key: K) -> Iterator[asyncio.Event]:
    event = asyncio.Event()
    waiters[key].add(event)
    try:
        yield event
    finally:
        registered = waiters.get(key)
        if registered is not None:
            registered.discard(event)
            if not registered:
                del waiters[key]

"""Each context is wired from its slice of the settings: the slices read `Settings` by name, carry
what was configured, and no wiring function takes the whole `Settings`."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import sursis.app.channel_wiring as channel_wiring
import sursis.app.wiring.agents as agents
import sursis.app.wiring.channels as channels
import sursis.app.wiring.conversations as conversations
import sursis.app.wiring.deliveries as deliveries
import sursis.app.wiring.policy as policy
import sursis.app.wiring.reviewer as reviewer
import sursis.app.wiring.runtime as runtime
import sursis.app.wiring.storage as storage
import sursis.app.wiring.telemetry as telemetry
import sursis.app.wiring.worlds as worlds
from sursis.app import context_settings
from sursis.app.settings import Settings

SLICES = {
    "storage": context_settings.StorageSettings,
    "telemetry": context_settings.TelemetrySettings,
    "worlds": context_settings.WorldSettings,
    "agents_served": context_settings.AgentSettings,
    "policy": context_settings.PolicySettings,
    "deliveries": context_settings.DeliverySettings,
    "runtime": context_settings.RuntimeSettings,
    "conversations": context_settings.ConversationSettings,
    "channels": context_settings.ChannelSettings,
}
SLICE_NAMES = {kind.__name__ for kind in SLICES.values()}
WIRING = (
    storage,
    telemetry,
    worlds,
    agents,
    policy,
    reviewer,
    deliveries,
    channel_wiring,
    runtime,
    conversations,
    channels,
)


def test_each_slice_carries_the_configured_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SURSIS_WEBHOOK_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("SURSIS_AGENTS", "ops, assistant")
    settings = Settings(database_url="postgresql+asyncpg://db/x", step_limit=7, worker_concurrency=2)
    assert settings.storage.database_url == "postgresql+asyncpg://db/x"
    assert settings.deliveries.webhook_max_attempts == 3
    assert settings.agents_served.agents == ["ops", "assistant"]
    assert settings.runtime.step_limit == 7
    assert settings.runtime.worker_slots == 2  # a property of Settings, read like a field
    for name, kind in SLICES.items():
        part = getattr(settings, name)
        assert type(part) is kind
        for each in dataclasses.fields(part):
            assert getattr(part, each.name) == getattr(settings, each.name), (name, each.name)


def test_a_slice_cannot_be_changed() -> None:
    part = Settings().storage
    with pytest.raises(dataclasses.FrozenInstanceError):
        part.database_url = "sqlite+aiosqlite://"  # type: ignore[misc]


def test_no_wiring_function_takes_the_whole_settings() -> None:
    taking_slices = 0
    for module in WIRING:
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__:
                continue
            # Annotations as written (the modules postpone them): "Settings" is the whole.
            hints = [str(p.annotation) for p in inspect.signature(function).parameters.values()]
            assert "Settings" not in hints, f"{module.__name__}.{name} takes the whole Settings"
            taking_slices += any(hint in SLICE_NAMES for hint in hints)
    assert taking_slices >= len(WIRING)  # the check looked at the functions that take settings

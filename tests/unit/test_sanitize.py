"""Argument summaries mask secrets and personal data and stay bounded."""

from __future__ import annotations

from abeyance.domain.sanitize import MASK, args_hash, sanitize


def test_secret_keys_and_personal_data_are_masked() -> None:
    summary = sanitize(
        {
            "event_id": "evt_1001",
            "api_key": "sk-live-51HxQ2kLrT9",
            "password": "hunter2",
            "nested": {"auth_token": "eyJhbGciOi", "note": "mail ana.lopez@example.com or +44 20 7946 0958"},
            "card": "4111 1111 1111 1111",
        }
    )
    assert summary["event_id"] == "evt_1001"
    assert summary["api_key"] == MASK
    assert summary["password"] == MASK
    assert summary["nested"]["auth_token"] == MASK
    assert "example.com" not in summary["nested"]["note"]
    assert "7946" not in summary["nested"]["note"]
    assert "4111" not in summary["card"]


def test_summaries_are_bounded() -> None:
    summary = sanitize({"text": "a" * 1000, "items": list(range(100))})
    assert len(summary["text"]) < 250
    assert len(summary["items"]) == 21


def test_args_hash_is_canonical() -> None:
    assert args_hash("t", {"a": 1, "b": 2}) == args_hash("t", {"b": 2, "a": 1})
    assert args_hash("t", {"a": 1}) != args_hash("u", {"a": 1})
    assert args_hash("t", {"a": 1}) != args_hash("t", {"a": 2})

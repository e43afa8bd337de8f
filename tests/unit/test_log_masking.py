"""Precision of the personal-data patterns: what must be masked, and what operators must still see."""

from __future__ import annotations

from sursis.app.logging import redact_secrets
from sursis.domain.sanitize import mask_text

MUST_MASK = [
    ("call +44 20 7946 0958 now", "call [phone] now"),
    ("call +4915123456789", "call [phone]"),
    ("(415) 555-0134", "[phone]"),
    ("415-555-0134", "[phone]"),
    ("415.555.0134", "[phone]"),
    ("020 7946 0958", "[phone]"),
    ("mobile 07700 900123", "mobile [phone]"),
    ("client 203.0.113.7 refused", "client [ip] refused"),
    ("from 10.0.12.7", "from [ip]"),
    ("started 2026-11-25T05:35:12Z by +1 415 555 0134", "started 2026-11-25T05:35:12Z by [phone]"),
]
MUST_KEEP = [
    "2026-11-25T05:35:57.123456+00:00",
    "2026-11-25T05:35:57+00:00",
    "2026-11-25 05:35:57.123+0000",
    "2026-11-25T05:35Z",
    "expires_at 2026-12-01T00:00:00.000001-05:00",
    "ticket 12345678",
    "ticket 1234-5678",
    "epoch 1700000000000",
    "took 1234.56789 ms",
    "Uvicorn running on http://127.0.0.1:18300 (Press CTRL+C to quit)",
    "listening on http://0.0.0.0:8000",
    "webhook https://203.0.113.9:8443/in failed",
    "bound 127.0.0.1",
    "order 123456",
    "version 1.2.3",
    "since 2024-01-15",
    "run 3f2a1b4c-1234-5678-9abc-def012345678",
    "elapsed 00:12:34.567890",
]


def test_personal_data_is_masked() -> None:
    assert [(text, mask_text(text)) for text, _ in MUST_MASK] == MUST_MASK


def test_timestamps_ticket_numbers_and_our_own_addresses_are_kept() -> None:
    assert [mask_text(text) for text in MUST_KEEP] == MUST_KEEP


def test_timestamp_fields_of_a_log_line_are_never_masked() -> None:
    event = redact_secrets(
        None,
        "info",
        {
            "event": "run.settled",
            "timestamp": "2026-11-25T05:35:57.123456Z",
            "started_at": "2026-11-25T05:35:57.123456+00:00",
            "ended_at": "2026-11-25T05:36:01+00:00",
            "expires_at": "2026-11-26T05:35:57Z",
            "args": {"ticket": "12345678", "contact": "+44 20 7946 0958"},
        },
    )
    assert event == {
        "event": "run.settled",
        "timestamp": "2026-11-25T05:35:57.123456Z",
        "started_at": "2026-11-25T05:35:57.123456+00:00",
        "ended_at": "2026-11-25T05:36:01+00:00",
        "expires_at": "2026-11-26T05:35:57Z",
        "args": {"ticket": "12345678", "contact": "[phone]"},
    }

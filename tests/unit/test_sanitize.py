"""Argument summaries mask secrets and personal data and stay bounded."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sursis.app.logging import redact_secrets
from sursis.domain import sanitize as sanitize_module
from sursis.domain.sanitize import (
    ELLIPSIS,
    MASK,
    MAX_KEY,
    MAX_REDACT_DEPTH,
    MAX_STRING,
    MAX_TOTAL,
    args_hash,
    is_secret_key,
    mask_text,
    redact,
    sanitize,
)


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


SECRET_KEYS = [
    "password",
    "Password",
    "db_password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "client_secret",
    "aws_secret_access_key",
    "token",
    "access_token",
    "accessToken",
    "refresh_token",
    "id_token",
    "api_key",
    "apiKey",
    "API_KEY",
    "X-Api-Key",
    "apikey",
    "authorization",
    "Authorization",
    "auth",
    "basic_auth",
    "private_key",
    "privateKey",
    "signing-key",
    "credentials",
    "cookie",
    "Set-Cookie",
    "session_id",
    "sessionId",
    "cvv",
    "ssn",
    "pin",
    "otp",
    "signature",
    "jwt",
]
PLAIN_KEYS = [
    "event_id",
    "reason",
    "author",
    "key",
    "monkey",
    "keyboard",
    "max_tokens",
    "tokens_used",
    "shipping",
    "classname",
    "passenger",
    "bypass",
    "description",
    "status",
]


def test_keys_that_name_a_secret_are_recognised() -> None:
    assert [k for k in SECRET_KEYS if not is_secret_key(k)] == []
    assert [k for k in PLAIN_KEYS if is_secret_key(k)] == []


MASKED_TEXT = [
    ("call me on +44 20 7946 0958 today", "call me on [phone] today"),
    ("US office (555) 123-4567", "US office [phone]"),
    ("mobile 07700 900123", "mobile [phone]"),
    ("card 4111 1111 1111 1111 exp 12/29", "card [card] exp 12/29"),
    ("card 4111-1111-1111-1111", "card [card]"),
    ("amex 3782 822463 10005", "amex [card]"),
    ("pan 5500005555555559", "pan [card]"),
    ("mail ana.lopez+ops@example.co.uk now", "mail [email] now"),
    ("Authorization: Bearer srs_xPVMZ9aehL_iUBL19vFrTGTSCODOxZ98ugPsMh6n50g", "Authorization: ***"),
    ("use srs_xPVMZ9aehL_iUBL19vFrTGTSCODOxZ98ugPsMh6n50g", "use ***"),
    ("Basic dXNlcjpodW50ZXIy", "***"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl", "jwt ***"),
    ("openai sk-proj-Ab3dEf6hIj9kLm2nOp5q", "openai ***"),
    ("stripe sk_live_51HxQ2kLrT9zzzzzzzzzzzz", "stripe ***"),
    ("github ghp_16C7e42F292c6912E7710c838347Ae178B4a", "github ***"),
    ("aws AKIAIOSFODNN7EXAMPLE", "aws ***"),
    ("postgresql://app:s3cr3t@db.internal:5432/app", "postgresql://app:***@db.internal:5432/app"),
    ("Server=db;User Id=app;Password=s3cr3t;", "Server=db;User Id=app;Password=***;"),
    ("https://hooks.example.com/in?token=abc123&x=1", "https://hooks.example.com/in?token=***&x=1"),
    ('{"api_key": "k-123456"}', '{"api_key": "***"}'),
    ("from 10.0.12.7", "from [ip]"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "***"),
]
LEFT_ALONE = [
    "replay evt_1001 after the partner fix",
    "since 2024-01-15",
    "at 2024-01-15T10:00:00Z",
    "between 2019-2024",
    "run 3f2a1b4c-1234-5678-9abc-def012345678",
    "order 123456",
    "extension 555-0100",
    "version 1.2.3",
    "Basic authentication failed",
    "the token validation failed",
    "card 1234 5678 9012 3456",
]


def test_secrets_and_personal_data_in_text_are_masked() -> None:
    assert [(text, mask_text(text)) for text, _ in MASKED_TEXT] == MASKED_TEXT


def test_ordinary_text_is_left_alone() -> None:
    assert [mask_text(text) for text in LEFT_ALONE] == LEFT_ALONE


def test_a_realistic_payload_is_masked_where_it_matters() -> None:
    summary = sanitize(
        {
            "url": "https://hooks.example.com/in?token=abc123",
            "headers": {"Authorization": "Bearer abc.def.ghi", "X-Request-Id": "req-42"},
            "customer": {
                "email": "ana.lopez@example.com",
                "phone": "+44 20 7946 0958",
                "card_number": 4111111111111111,
            },
            "retries": 3,
            "created": 1_700_000_000_000,
            "enabled": True,
        }
    )
    assert summary == {
        "url": "https://hooks.example.com/in?token=***",
        "headers": {"Authorization": MASK, "X-Request-Id": "req-42"},
        "customer": {"email": "[email]", "phone": "[phone]", "card_number": "[card]"},
        "retries": 3,
        "created": 1_700_000_000_000,
        "enabled": True,
    }


def test_masking_happens_before_the_cut() -> None:
    for tail in (" password=hunter2hunter2hunter2", " 4111 1111 1111 1111", " ana.lopez@example.com"):
        summary = sanitize({"text": "x" * 190 + tail})
        assert len(summary["text"]) <= MAX_STRING + 20
        for fragment in ("hunter", "1111", "lopez", "example"):
            assert fragment not in summary["text"]


def test_summaries_are_bounded_in_depth_keys_and_total_size() -> None:
    deep: Any = "bottom"
    for _ in range(10):
        deep = {"level": deep}
    assert "bottom" not in json.dumps(sanitize(deep))
    wide = {f"k{i}": [f"{i}-{j}-" + "v" * 300 for j in range(50)] for i in range(50)}
    assert len(json.dumps(sanitize(wide))) < 2 * MAX_TOTAL
    long_key = sanitize({"k" * 10_000: 1})
    assert max(len(k) for k in long_key) <= MAX_KEY + 20


def test_log_fields_are_redacted_but_not_shortened() -> None:
    event = {
        "event": "webhook.failed",
        "run_id": "4111111111111111",
        "password": "hunter2",
        "error": "POST https://hooks.example.com?token=abc123 for ana.lopez@example.com: " + "x" * 500,
        "headers": {"authorization": "Bearer abc.def.ghi123", "accept": "json"},
    }
    redacted = redact_secrets(None, "info", dict(event))
    assert redacted["event"] == "webhook.failed"
    assert redacted["run_id"] == "4111111111111111"
    assert redacted["password"] == MASK
    assert redacted["error"].startswith("POST https://hooks.example.com?token=*** for [email]: ")
    assert len(redacted["error"]) > 500
    assert redacted["headers"] == {"authorization": MASK, "accept": "json"}
    assert redact("nothing to hide") == "nothing to hide"


def test_log_fields_are_masked_at_every_depth() -> None:
    nested = {"a": {"b": {"c": {"d": {"password": "hunter2", "note": "mail ana.lopez@example.com"}}}}}
    assert redact(nested) == {"a": {"b": {"c": {"d": {"password": MASK, "note": "mail [email]"}}}}}
    listed = [[[[[{"api_key": "sk-secret"}]]]], ("Bearer abcdefgh12345678",), {"password=hunter2"}]
    assert "secret" not in repr(redact(listed))
    assert "hunter2" not in repr(redact(listed))
    assert "abcdefgh12345678" not in repr(redact(listed))
    assert redact({"ana.lopez@example.com": 1}) == {"[email]": 1}

    deep: Any = {"password": "hunter2", "text": "password=hunter2"}
    for _ in range(MAX_REDACT_DEPTH + 5):
        deep = {"level": [deep]}
    redacted = redact(deep)
    assert "hunter2" not in repr(redacted)
    assert ELLIPSIS in repr(redacted)


@settings(max_examples=3000, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.-", max_size=12),
            st.sampled_from(
                ["srs_", "ghp_", "gho_", "github_pat_", "glpat-", "xoxb-", "akia", "eyj", "sk_live_", "-----"]
            ),
        ),
        max_size=6,
    ).map("".join)
)
def test_names_left_alone_without_the_patterns_are_what_the_patterns_leave(text: str) -> None:
    """`mask_text` answers lowercase names without running its patterns: that shortcut must give what
    the patterns give, provider-key prefixes written in lowercase included."""
    assert mask_text(text) == sanitize_module._mask_patterns(text)


def test_lowercase_provider_keys_are_still_masked() -> None:
    for key in ("srs_" + "k" * 20, "ghp_" + "x" * 12, "xoxb-" + "y" * 12, "akia" + "z" * 16):
        assert mask_text(key) == "***", key

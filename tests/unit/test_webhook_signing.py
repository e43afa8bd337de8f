"""The webhook signature format and the URL rules, without I/O."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from sursis.domain.errors import ValidationFailed
from sursis.domain.events.webhooks import check_events, check_url, sign, verify

SECRET = "whsec_test"
BODY = b'{"id":7,"type":"run.completed"}'


def test_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    header = sign(SECRET, 1_700_000_000, BODY)
    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


@pytest.mark.parametrize(
    ("secret", "body", "now", "valid"),
    [
        (SECRET, BODY, 1_700_000_000, True),
        (SECRET, BODY, 1_700_000_299, True),
        (SECRET, BODY, 1_700_000_301, False),
        (SECRET, BODY + b" ", 1_700_000_000, False),
        ("whsec_other", BODY, 1_700_000_000, False),
    ],
)
def test_verify(secret: str, body: bytes, now: int, valid: bool) -> None:
    assert verify(secret, sign(SECRET, 1_700_000_000, BODY), body, now=now) is valid


@pytest.mark.parametrize("header", ["", "v1=abc", "t=x,v1=abc", "t=1700000000"])
def test_malformed_headers_do_not_verify(header: str) -> None:
    assert verify(SECRET, header, BODY, now=1_700_000_000) is False


@pytest.mark.parametrize(
    ("url", "allow_private", "ok"),
    [
        ("https://hooks.example.com/sursis", False, True),
        ("http://hooks.example.com:8080/x", False, True),
        ("ftp://hooks.example.com/x", False, False),
        ("hooks.example.com/x", False, False),
        ("https://user:pw@hooks.example.com/x", False, False),
        ("http://127.0.0.1:9000/x", False, False),
        ("http://localhost/x", False, False),
        ("http://10.1.2.3/x", False, False),
        ("http://169.254.169.254/latest", False, False),
        ("http://[::1]/x", False, False),
        ("http://127.0.0.1:9000/x", True, True),
    ],
)
def test_webhook_urls(url: str, allow_private: bool, ok: bool) -> None:
    if ok:
        assert check_url(url, allow_private_hosts=allow_private) == url
    else:
        with pytest.raises(ValidationFailed):
            check_url(url, allow_private_hosts=allow_private)


def test_webhook_events_are_the_notification_types() -> None:
    assert check_events(["run.completed", "pending.created", "run.completed"]) == (
        "run.completed",
        "pending.created",
    )
    for wrong in ([], ["message.delta"], ["run.status"]):
        with pytest.raises(ValidationFailed):
            check_events(wrong)

"""Masking of secrets and personal data in argument summaries and logs, and the args hash.

What is masked:

* the value of any key that names a secret (`password`, `api_key`, `accessToken`,
  `Authorization`, `client_secret`, `cookie`, `cvv`, ...), whatever the value is;
* inside any text: credentials by their shape (`Bearer ...`, `password=...`, `"token": "..."`,
  passwords in URLs, also unencoded or without a scheme (`user:p@ss/word@host`), this service's own
  `srs_` keys, common provider keys, JWTs, PEM private keys), e-mail addresses, payment-card numbers
  (13-19 digits, spaced or dashed, that pass the Luhn check), IPv4 addresses other than loopback and
  unspecified ones, and phone numbers of 8-15 digits written as phones: with a leading `+`, a
  parenthesised area code, three or more groups, or two space- or dash-separated groups of 10 digits
  or more. A bare run of digits (a ticket number, an epoch timestamp), a decimal number, a date, a
  UUID, an ISO 8601 timestamp and the host and port of an http(s) URL are left alone.

A summary is bounded: strings to `MAX_STRING` characters (masking happens first, so a cut never
reveals part of a secret), containers to `MAX_ITEMS` items and `MAX_DEPTH` levels, keys to
`MAX_KEY` characters, and the whole summary to about `MAX_TOTAL` characters.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Any

MASK = "***"
MAX_STRING = 200
MAX_KEY = 100
MAX_ITEMS = 20
MAX_DEPTH = 4
MAX_REDACT_DEPTH = 8
MAX_TOTAL = 4000
ELLIPSIS = "…"

# Words that make a key secret on their own, and fragments that do so anywhere in the key.
_SECRET_WORDS = frozenset(
    {"auth", "bearer", "cookie", "cvc", "cvv", "jwt", "otp", "pass", "pin", "pwd", "session", "ssn", "token"}
)
_SECRET_FRAGMENTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "cookie",
    "signature",
    "sessionid",
)
# `key` is secret only after one of these (`api_key`, `private-key`, `signingKey`); a bare `key` is not.
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "private", "secret", "signing", "encryption", "master", "client"}
)
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

# A credential-looking token has a digit or a lower-to-upper case change ("Basic dXNlcjpwYXNz"),
# which ordinary words ("Basic authentication") do not.
_TOKENISH = r"(?=\S*(?-i:\d|[a-z][A-Z]))"
_CREDENTIAL_TEXT = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    rf"|\b(?:bearer|basic)\s+{_TOKENISH}[A-Za-z0-9._~+/=-]{{12,}}"
    r"|\bsrs_[A-Za-z0-9_-]{16,}"
    rf"|\b(?:sk|pk|rk)[_-](?:live_|test_|proj-)?{_TOKENISH}[A-Za-z0-9_-]{{16,}}"
    r"|\b(?:ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[abprs])[_-][A-Za-z0-9_-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
    re.I | re.S,
)
_ASSIGNED_SECRET = re.compile(
    r"(?P<name>\b[\w-]*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey)[\w-]*)"
    r"(?P<sep>[\"']?\s*[:=]\s*)(?P<quote>[\"']?)[^\s\"',;&@]+",
    re.I,
)
# A URL's `user:password@`: the password runs to the URL's last `@`, as a hand-written URL keeps an
# unencoded `@` or `/` in it; the user may be empty (`redis://:password@host`). A `host:8080/...@`
# (a port, then an `@` in the path) is no password.
_URL_PASSWORD = re.compile(
    r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<user>[^/\s:@'\"<>]*):(?P<password>[^\s'\"<>]*)@", re.I
)
_PORT_THEN_PATH = re.compile(r"\d{1,5}(?:[/?#]|$)")
# `user:password@host` without a scheme, as connection errors and mistyped URLs print it.
_BARE_USERINFO = re.compile(r"(?<![\w.:@-])(?P<user>[\w.+-]+):(?P<password>[^\s/@'\"<>]+)@(?=[\w\[])")
EMAIL = re.compile(r"[\w.+%-]+@[\w-]+(?:\.[\w-]+)+")
CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
# Addresses that never point at a person: a listener's own and the unspecified address.
_MACHINE_IPV4 = re.compile(r"127\.\d+\.\d+\.\d+|0\.0\.0\.0")
# A candidate: digit groups with optional `+`, parentheses and single separators; `_phone` then
# decides whether it is written like a phone number.
PHONE = re.compile(
    r"(?<![\w+.:/-])(?:\+\s?)?(?:\(\d{1,5}\)[ .-]?)?\d{1,5}(?:[ .-]?\d{1,5}){0,5}(?![\w-]|[.:]\d)"
)
_PHONE_SEPARATORS = re.compile(r"[ .-]")
# Spans no personal-data pattern looks inside: ISO 8601 timestamps, and the scheme, host and port of
# an http(s) URL (the address of a service, such as our own listener, not of a person).
_PROTECTED = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?"
    r"|\bhttps?://[^/\s@?#]+(?=[/\s?#]|$)",
    re.I,
)
_DATE = re.compile(
    r"\d{4}-\d{2}-\d{2}|\d{2}[./-]\d{2}[./-]\d{4}|\d{4}\.\d{2}\.\d{2}|(?:19|20)\d{2}[-/](?:19|20)\d{2}"
)


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True when a key (`password`, `X-Api-Key`, `accessToken`, `client_secret`...) names a secret.

    Decided once per key: summaries and log fields reuse a few dozen names, each asked about on
    every call that carries it."""
    words = [w.lower() for w in _WORDS.findall(key)]
    joined = "".join(words)
    if any(fragment in joined for fragment in _SECRET_FRAGMENTS):
        return True
    if any(w in _SECRET_WORDS or w.endswith("token") or w.startswith("passw") for w in words):
        return True
    return any(w == "key" and i > 0 and words[i - 1] in _KEY_QUALIFIERS for i, w in enumerate(words))


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "[card]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group()


def _phone(match: re.Match[str]) -> str:
    text = match.group()
    digits = sum(ch.isdigit() for ch in text)
    if not 8 <= digits <= 15 or _DATE.fullmatch(text):
        return text
    if text.startswith("+") or "(" in text:
        return "[phone]"
    separators = _PHONE_SEPARATORS.findall(text)
    if len(separators) >= 2 or (separators in ([" "], ["-"]) and digits >= 10):
        return "[phone]"
    return text


def _ipv4(match: re.Match[str]) -> str:
    return match.group() if _MACHINE_IPV4.fullmatch(match.group()) else "[ip]"


def _mask_addresses(text: str) -> str:
    """IPv4 addresses and phone numbers masked outside timestamps and URL hosts."""
    out: list[str] = []
    start = 0
    for protected in _PROTECTED.finditer(text):
        out.append(PHONE.sub(_phone, IPV4.sub(_ipv4, text[start : protected.start()])))
        out.append(protected.group())
        start = protected.end()
    out.append(PHONE.sub(_phone, IPV4.sub(_ipv4, text[start:])))
    return "".join(out)


def _url_password(match: re.Match[str]) -> str:
    if _PORT_THEN_PATH.match(match["password"]):
        return match.group()
    return f"{match['scheme']}{match['user']}:{MASK}@"


# Text no pattern above can match: lowercase letters, `_`, `.` and `-` only (no digit, capital,
# space, `:`, `=` or `@`), without the prefix of a provider key that may be written in lowercase.
_PLAIN_TEXT = re.compile(r"[a-z_.-]*")
_LOWERCASE_KEY_PREFIXES = ("srs_", "gh", "github", "glpat", "xox", "akia", "eyj")


def mask_text(text: str) -> str:
    """Credentials and personal data in free text replaced by `***` or a `[kind]` placeholder."""
    if _PLAIN_TEXT.fullmatch(text) and not any(p in text for p in _LOWERCASE_KEY_PREFIXES):
        return text  # a name (`run.completed`, `issue_refund`): the patterns below would find nothing
    return _mask_patterns(text)


def _mask_patterns(text: str) -> str:
    text = _CREDENTIAL_TEXT.sub(MASK, text)
    text = _URL_PASSWORD.sub(_url_password, text)
    text = _BARE_USERINFO.sub(lambda m: f"{m['user']}:{MASK}@", text)
    text = _ASSIGNED_SECRET.sub(lambda m: f"{m['name']}{m['sep']}{m['quote']}{MASK}", text)
    text = EMAIL.sub("[email]", text)
    text = CARD.sub(_card, text)
    return _mask_addresses(text)


def bound_text(text: str, limit: int = MAX_STRING) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"{ELLIPSIS}(+{len(text) - limit} chars)"


def sanitize(value: Any) -> Any:
    """A bounded copy of `value`, JSON-ready, with secrets and personal data masked."""
    budget = [MAX_TOTAL]
    return _sanitize(value, 0, budget)


def _spend(budget: list[int], text: str) -> str:
    if budget[0] <= 0:
        return ELLIPSIS
    budget[0] -= len(text)
    return text


def _sanitize(value: Any, depth: int, budget: list[int]) -> Any:
    if budget[0] <= 0:
        return ELLIPSIS
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return ELLIPSIS
        out: dict[str, Any] = {}
        for i, (raw_key, item) in enumerate(value.items()):
            if i >= MAX_ITEMS or budget[0] <= 0:
                out[ELLIPSIS] = f"+{len(value) - i} more"
                break
            key = bound_text(mask_text(str(raw_key)), MAX_KEY)
            budget[0] -= len(key)
            out[key] = MASK if is_secret_key(str(raw_key)) else _sanitize(item, depth + 1, budget)
        return out
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return ELLIPSIS
        items = []
        for i, item in enumerate(value):
            if i >= MAX_ITEMS or budget[0] <= 0:
                items.append(f"+{len(value) - i} more")
                break
            items.append(_sanitize(item, depth + 1, budget))
        return items
    if isinstance(value, bool | float) or value is None:
        return value
    if isinstance(value, int):
        masked = mask_text(str(value))
        return value if masked == str(value) else masked
    return _spend(budget, bound_text(mask_text(str(value))))


def redact(value: Any, key: str = "") -> Any:
    """For log fields: the value masked like a summary's, but strings are not shortened and containers
    are cut only below `MAX_REDACT_DEPTH` levels (the rest becomes `…`, never shown unmasked)."""
    if key and is_secret_key(key):
        return MASK
    return _redact(value, 0)


def _redact(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return mask_text(value)
    if not isinstance(value, dict | list | tuple | set | frozenset):
        return value
    if depth >= MAX_REDACT_DEPTH:
        # Never the raw remainder: it is not masked.
        return ELLIPSIS
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            masked_key = mask_text(key) if isinstance(key, str) else key
            out[masked_key] = MASK if is_secret_key(str(key)) else _redact(item, depth + 1)
        return out
    return [_redact(v, depth + 1) for v in value]


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def args_hash(tool_name: str, args: dict[str, Any]) -> str:
    """Binds an approval to exactly what was shown: the tool name and its canonical args."""
    return hashlib.sha256(canonical_json({"tool": tool_name, "args": args}).encode()).hexdigest()


def pending_args_hash(tool_name: str, args: dict[str, Any], validated: dict[str, Any] | None) -> str:
    """The hash a pending call's deciders see: of the model's arguments alone, or, when the tool will
    receive them otherwise (`validated`), of both, so an approval binds what will run too."""
    if validated is None:
        return args_hash(tool_name, args)
    both = {"tool": tool_name, "args": args, "validated_args": validated}
    return hashlib.sha256(canonical_json(both).encode()).hexdigest()

"""Personal data found by maintained validators rather than home-made patterns: phone numbers
(`phonenumbers`, Google's libphonenumber metadata), IBANs (`schwifty`: country, length, checksum
and the national account format), card numbers (`python-stdnum`'s Luhn check) and e-mail
addresses (`email-validator`'s syntax check, no DNS).

A cheap pattern picks each candidate out of the text; the validator decides. What none of them
can find (a name not introduced as one, an address without a street form) is left to the
patterns of `sursis.domain.worlds.memory`; docs/world-agent.md says what is and is not caught.
The libraries are imported at the first memory write, not when a process starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

PHONE_REGIONS: tuple[str, ...] = ("US", "GB", "DE", "FR")
"""Regions whose national formats (`020 7946 0958`) are read as phone numbers; a number written
with its country code (`+44 …`) is found whatever the region."""

_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ -]?[A-Z0-9]){11,30}\b", re.IGNORECASE)
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_EMAIL = re.compile(r"[^\s<>()\[\],;:\"']+@[^\s<>()\[\],;:\"']+\.[A-Za-z]{2,}")


def _iban(candidate: str) -> bool:
    from schwifty import IBAN
    from schwifty.exceptions import SchwiftyException

    try:
        IBAN(candidate.replace("-", " "), validate_bban=True)
    except (SchwiftyException, ValueError):
        return False
    return True


def _email(candidate: str) -> bool:
    from email_validator import EmailNotValidError, validate_email

    try:
        validate_email(candidate, check_deliverability=False)
    except EmailNotValidError:
        return False
    return True


class ValidatedPersonalData:
    """The domain's `PersonalDataDetector` port over the maintained validators."""

    def __init__(self, regions: Iterable[str] = PHONE_REGIONS) -> None:
        self.regions = tuple(regions)

    def find(self, text: str) -> str | None:
        """What kind of personal data `text` carries (`"an IBAN"`), or None."""
        import phonenumbers
        from stdnum import luhn

        for match in _IBAN.finditer(text):
            if _iban(match.group()):
                return "an IBAN"
        for match in _CARD.finditer(text):
            if luhn.is_valid(re.sub(r"[ -]", "", match.group())):
                return "a card number"
        for match in _EMAIL.finditer(text):
            if _email(match.group()):
                return "an e-mail address"
        # STRICT_GROUPING: a valid number grouped as its region writes it, so `2024-000123` (an
        # order id) is no phone number and `020 7946 0958` is
        grouped = phonenumbers.Leniency.STRICT_GROUPING
        for region in self.regions:
            if phonenumbers.PhoneNumberMatcher(text, region, leniency=grouped).has_next():
                return "a phone number"
        return None

"""The memory gateway's rules: what the World Agent (and every agent) may remember.

Memory holds meta-knowledge (reasoning, code-generation patterns, exploration notes), never rule
content. A write is refused when its text is too similar to an enshrined rule of the world (the
same trigram measure as PostgreSQL's `pg_trgm`), repeats a tool output of the same run verbatim,
or carries personal data or secrets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

from sursis.domain.errors import Error
from sursis.domain.sanitize import mask_text

RULE_SIMILARITY_LIMIT = 0.5
"""A memory this similar (trigram) to an enshrined rule's text restates the rule: refused."""
MIN_VERBATIM_CHARS = 40
"""A memory that contains this much of a tool output, character for character, is a copy of it."""
MAX_MEMORY_CHARS = 2000

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

_NAME = r"[A-Z][a-z'\u2019-]+"
_NAMES = rf"{_NAME}(?:\s+(?:{_NAME}|[A-Z]\.))*"
_STREET = (
    r"(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Boulevard|Blvd|Court|Ct|Way|Place|Pl|"
    r"Square|Sq|Terrace|Close|Crescent|Highway|Hwy|Parkway|Pkwy|Row|Gardens|Mews)"
)
_PERSONAL = re.compile(
    # card digits: a long run of digits (whatever its checksum), or digits said to be a card's
    r"(?<!\d)\d(?:[ -]?\d){11,18}(?!\d)"
    r"|\b(?:card|visa|mastercard|amex|iban|account)\b[^.\n]{0,30}?(?<!\d)\d{4}(?!\d)"
    r"|\b(?:ending|ends)\s+(?:in|with)\s+\d{4}\b|\blast\s+(?:4|four)(?:\s+digits)?\b"
    # a person named: a title and a name, or a name introduced as one
    rf"|\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+{_NAME}"
    rf"|\b(?:[Cc]ustomer|[Cc]lient|[Uu]ser|[Cc]aller|[Pp]atient|[Cc]ontact|[Nn]amed|[Cc]alled|[Nn]ame\s+is)"
    rf"\s+(?:is\s+|was\s+)?{_NAME}(?:\s+{_NAME})+"
    # a name under a label (`name: Jane Doe`, `account holder = J. Doe`)
    rf"|\b(?:[Ff]ull\s+|[Ff]irst\s+|[Ll]ast\s+|[Ss]ur|[Gg]iven\s+|[Ff]amily\s+)?[Nn]ame\s*[:=]\s*[\"']?{_NAME}"
    r"|\b(?:[Aa]ccount[ -]?[Hh]older|[Cc]ard[ -]?[Hh]older|[Bb]eneficiary|[Rr]ecipient|[Pp]ayee|[Ss]ender"
    r"|[Aa]ddressee|[Ss]ignatory|[Oo]wner|[Ss]ubscriber|[Dd]ebtor|[Cc]reditor)"
    rf"(?:\s*[:=,]\s*|\s+(?:is|was)\s+|\s+)(?:[Mm]s\.?\s+|[Mm]r\.?\s+)?[A-Z](?:\.|[a-z'\u2019-]+)\s+{_NAMES}"
    # an address: a street form, a postcode, or one introduced as an address
    rf"|\b\d{{1,5}}[A-Za-z]?,?\s+(?:{_NAME}\s+){{1,4}}{_STREET}\b"
    r"|\b[A-Z][a-z\u00e4\u00f6\u00fc\u00df]+(?:stra(?:ss|\u00df)e|str\.|weg|gasse|platz|allee|ring|damm)"
    r"\s+\d{1,4}[a-z]?\b"
    r"|\b\d{1,4}(?:\s*(?:bis|ter))?,?\s+(?:rue|avenue|boulevard|bd|place|chemin|all\u00e9e|impasse|quai)\s"
    r"|\b(?:[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2})\b"
    r"|\b(?:[Hh]ome|[Pp]ostal|[Mm]ailing|[Ss]treet|[Bb]illing|[Ss]hipping|[Dd]elivery)\s+address\s*(?:[:=]|is)"
    r"|\b(?:lives|living|resides|residing)\s+(?:at|on)\s+\d"
)
"""Personal data `mask_text` and the validators do not catch: card digits that fail the checksum
or are partial, people's names where the text says they are names (introduced, titled, or under a
label such as `name:` or `account holder`), and postal addresses in their usual written forms
(a number and a street word, `…straße 12`, `12 rue …`, a UK postcode, `home address:`). A
heuristic, not a classifier: it refuses the shapes an agent writes ("customer Jane Doe", "card
ending in 4242", "name: Jane Doe") and lets "the Slack channel" through (docs/world-agent.md)."""


class PersonalDataDetector(Protocol):
    """Finds personal data with maintained validators (phone numbers, IBANs, card numbers, e-mail
    addresses); implemented in infra, where third-party packages may be used."""

    def find(self, text: str) -> str | None:
        """What `text` carries (`"an IBAN"`), or None."""
        ...


def personal_data_kind(text: str, detector: PersonalDataDetector | None = None) -> str | None:
    """What personal data or secret `text` carries (for the refusal's message), or None."""
    if detector is not None and (found := detector.find(text)) is not None:
        return found
    if mask_text(text) != text:
        return "a secret or contact detail"
    if _PERSONAL.search(text) is not None:
        return "a name, an address or card digits"
    return None


def personal_data(text: str, detector: PersonalDataDetector | None = None) -> bool:
    """True when `text` carries personal data or a secret the memory gateway refuses."""
    return personal_data_kind(text, detector) is not None


class MemoryTier(StrEnum):
    INTERACTION = "interaction"
    SESSION = "session"
    PERSISTENT = "persistent"


class MemoryKind(StrEnum):
    OBSERVATION = "observation"
    PATTERN = "pattern"
    PREFERENCE = "preference"
    EXPLORATION = "exploration"


class MemoryRefused(Error):
    """The gateway refused a write; `code` says which rule, the message says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def trigrams(text: str) -> set[str]:
    """The trigrams `pg_trgm` extracts: lower-cased alphanumeric words, padded `'  w '`."""
    grams: set[str] = set()
    for word in _WORD.findall(text.lower()):
        padded = f"  {word} "
        grams.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return grams


def similarity(a: str, b: str) -> float:
    """`pg_trgm`'s `similarity(a, b)`: shared trigrams over all trigrams of both."""
    ta, tb = trigrams(a), trigrams(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def word_similarity(query: str, text: str) -> float:
    """How much of `query` appears in `text`: shared trigrams over the query's trigrams.

    A simpler measure than `pg_trgm`'s `word_similarity` (which looks for the best matching extent
    of `text`), used to rank recall on SQLite.
    """
    tq = trigrams(query)
    if not tq:
        return 0.0
    return len(tq & trigrams(text)) / len(tq)


def check_memory(
    text: str,
    *,
    enshrined_texts: Iterable[str],
    tool_outputs: Iterable[str],
    detector: PersonalDataDetector | None = None,
) -> None:
    """Raise `MemoryRefused` unless `text` may be remembered; `detector` adds the maintained
    validators to the patterns."""
    stripped = text.strip()
    if not stripped:
        raise MemoryRefused("MEMORY_EMPTY", "a memory needs some text")
    if len(stripped) > MAX_MEMORY_CHARS:
        raise MemoryRefused("MEMORY_TOO_LONG", f"a memory is at most {MAX_MEMORY_CHARS} characters")
    if (kind := personal_data_kind(stripped, detector)) is not None:
        raise MemoryRefused(
            "MEMORY_PERSONAL_DATA",
            f"the text carries personal data or a secret ({kind}; a name, an address, card digits, "
            "an IBAN, an e-mail address, a phone number and a key all are); remember what you "
            "learned without it",
        )
    for rule_text in enshrined_texts:
        score = similarity(stripped, rule_text)
        if score >= RULE_SIMILARITY_LIMIT:
            raise MemoryRefused(
                "MEMORY_RULE_CONTENT",
                f"the text restates an enshrined rule (trigram similarity {score:.2f} >= "
                f"{RULE_SIMILARITY_LIMIT}); memory holds what you learned about the work, never rule content",
            )
    normalised = " ".join(stripped.split())
    for output in tool_outputs:
        if _shares_verbatim(normalised, " ".join(output.split())):
            raise MemoryRefused(
                "MEMORY_TOOL_OUTPUT",
                "the text repeats a tool output of this run verbatim; "
                "remember what it meant, not what it said",
            )


def _shares_verbatim(text: str, output: str) -> bool:
    if len(output) < MIN_VERBATIM_CHARS or len(text) < MIN_VERBATIM_CHARS:
        return text == output and bool(text)
    step = MIN_VERBATIM_CHARS // 2
    return any(
        text[i : i + MIN_VERBATIM_CHARS] in output for i in range(0, len(text) - MIN_VERBATIM_CHARS + 1, step)
    )

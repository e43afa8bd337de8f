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

from sursis.domain.sanitize import mask_text

RULE_SIMILARITY_LIMIT = 0.5
"""A memory this similar (trigram) to an enshrined rule's text restates the rule: refused."""
MIN_VERBATIM_CHARS = 40
"""A memory that contains this much of a tool output, character for character, is a copy of it."""
MAX_MEMORY_CHARS = 2000

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

_NAME = r"[A-Z][a-z'\u2019-]+"
_PERSONAL = re.compile(
    # card digits: a long run of digits (whatever its checksum), or digits said to be a card's
    r"(?<!\d)\d(?:[ -]?\d){11,18}(?!\d)"
    r"|\b(?:card|visa|mastercard|amex|iban|account)\b[^.\n]{0,30}?(?<!\d)\d{4}(?!\d)"
    r"|\b(?:ending|ends)\s+(?:in|with)\s+\d{4}\b|\blast\s+(?:4|four)(?:\s+digits)?\b"
    # a person named: a title and a name, or a name introduced as one
    rf"|\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+{_NAME}"
    rf"|\b(?:[Cc]ustomer|[Cc]lient|[Uu]ser|[Cc]aller|[Pp]atient|[Cc]ontact|[Nn]amed|[Cc]alled|[Nn]ame\s+is)"
    rf"\s+(?:is\s+|was\s+)?{_NAME}(?:\s+{_NAME})+"
)
"""Personal data `mask_text` does not catch: card digits that fail the checksum or are partial,
and people's names where the text says they are names. A heuristic, not a classifier: it refuses
the shapes an agent writes ("customer Jane Doe", "card ending in 4242") and lets "the Slack
channel" through (docs/world-agent.md)."""


def personal_data(text: str) -> bool:
    """True when `text` carries personal data or a secret the memory gateway refuses."""
    return mask_text(text) != text or _PERSONAL.search(text) is not None


class MemoryTier(StrEnum):
    INTERACTION = "interaction"
    SESSION = "session"
    PERSISTENT = "persistent"


class MemoryKind(StrEnum):
    OBSERVATION = "observation"
    PATTERN = "pattern"
    PREFERENCE = "preference"
    EXPLORATION = "exploration"


class MemoryRefused(Exception):
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


def check_memory(text: str, *, enshrined_texts: Iterable[str], tool_outputs: Iterable[str]) -> None:
    """Raise `MemoryRefused` unless `text` may be remembered."""
    stripped = text.strip()
    if not stripped:
        raise MemoryRefused("MEMORY_EMPTY", "a memory needs some text")
    if len(stripped) > MAX_MEMORY_CHARS:
        raise MemoryRefused("MEMORY_TOO_LONG", f"a memory is at most {MAX_MEMORY_CHARS} characters")
    if personal_data(stripped):
        raise MemoryRefused(
            "MEMORY_PERSONAL_DATA",
            "the text carries personal data or a secret (a name, card digits, an e-mail address, a "
            "phone number, a key); remember what you learned without it",
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

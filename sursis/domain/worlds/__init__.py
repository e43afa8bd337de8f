"""The worlds context: worlds, their rule corpus, and the World Agent's memory rules."""

from sursis.domain.worlds import (
    memory,
    ports,
    predicates,
    rules,
)

__all__ = [
    "memory",
    "ports",
    "predicates",
    "rules",
]

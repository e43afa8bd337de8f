"""The memory gateway's rules and the trigram measure, without a database."""

from __future__ import annotations

import pytest

from sursis.domain.worlds.memory import MemoryRefused, check_memory, similarity, trigrams, word_similarity
from sursis.domain.worlds.rules import Decision, Flag, FlagKind, override_patterns

RULE = "Refund a damaged parcel reported within 14 days of delivery"


def refused_code(text: str, *, rules: tuple[str, ...] = (RULE,), outputs: tuple[str, ...] = ()) -> str:
    with pytest.raises(MemoryRefused) as caught:
        check_memory(text, enshrined_texts=rules, tool_outputs=outputs)
    return caught.value.code


def test_trigrams_are_pg_trgm_s() -> None:
    assert trigrams("cat") == {"  c", " ca", "cat", "at "}
    assert trigrams("Cat, cat!") == trigrams("cat")
    assert similarity("cat", "cat") == 1.0
    assert similarity("cat", "dog") == 0.0
    assert similarity("word", "two words") == pytest.approx(4 / 11)
    assert word_similarity("damaged parcel", RULE) == 1.0


def test_a_restated_rule_is_refused_and_meta_knowledge_is_kept() -> None:
    assert (
        refused_code("refund damaged parcels reported within 14 days of the delivery")
        == "MEMORY_RULE_CONTENT"
    )
    check_memory(
        "the operator asked about the refund candidate; predicates over dates need a default",
        enshrined_texts=[RULE],
        tool_outputs=[],
    )


def test_personal_data_and_secrets_are_refused() -> None:
    assert refused_code("the customer is jane.doe@example.com") == "MEMORY_PERSONAL_DATA"
    assert refused_code("call them on +44 20 7946 0958") == "MEMORY_PERSONAL_DATA"
    assert refused_code("use key sk-live_4eC39HqLyjWDarjtT1zdp7dc") == "MEMORY_PERSONAL_DATA"


def test_a_verbatim_tool_output_is_refused() -> None:
    trace = '{"cluster_id": "c-7", "trace": "timeout after 30s calling https://partner.example/hook"}'
    assert refused_code(f"note: {trace}", outputs=(trace,)) == "MEMORY_TOOL_OUTPUT"
    check_memory("cluster c-7 keeps timing out on the partner hook", enshrined_texts=[], tool_outputs=[trace])


def test_empty_and_long_texts_are_refused() -> None:
    assert refused_code("   ") == "MEMORY_EMPTY"
    assert refused_code("x " * 1500) == "MEMORY_TOO_LONG"


def test_override_patterns_group_flags_by_rule_and_reason() -> None:
    from datetime import UTC, datetime
    from uuid import uuid4

    world, now = uuid4(), datetime.now(UTC)
    d1 = Decision("d1", world, ["R1"], {}, "refused", now)
    d2 = Decision("d2", world, ["R1", "R2"], {}, "refused", now)
    flagged = [
        (Flag("f1", world, "d1", FlagKind.REVIEW_REQUEST, "Too strict", now), d1),
        (Flag("f2", world, "d2", FlagKind.NOTEWORTHY, "too  strict", now), d2),
        (Flag("f3", world, "d2", FlagKind.REVIEW_REQUEST, "other", now), d2),
    ]
    [pattern] = override_patterns(flagged)
    assert (pattern.rule_id, pattern.reason, pattern.flags) == ("R1", "too strict", 2)
    assert pattern.decisions == ["d1", "d2"]
    assert pattern.kinds == {"review_request": 1, "noteworthy": 1}
    assert len(override_patterns(flagged, min_flags=1)) == 4

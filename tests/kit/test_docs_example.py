"""docs/testing.md shows the kit's example test verbatim, and the example stays under 20 lines."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_testing_guide_shows_the_example_test_verbatim() -> None:
    example = (REPO / "tests" / "kit" / "test_refund_example.py").read_text()
    guide = (REPO / "docs" / "testing.md").read_text()
    assert f"```python runnable pytest\n{example}```" in guide
    assert len([line for line in example.splitlines() if line.strip()]) < 20

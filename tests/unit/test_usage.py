"""Usage arithmetic: an unknown cost stays unknown, a known one is summed exactly."""

from __future__ import annotations

from decimal import Decimal

from abeyance.domain.records import Usage


def test_costs_add_up_and_unknown_stays_unknown() -> None:
    unpriced = Usage(requests=1, input_tokens=10, output_tokens=5, tool_calls=1)
    assert unpriced.add(Usage(requests=1)).cost is None

    priced = Usage(requests=1, cost=Decimal("0.0075"))
    assert unpriced.add(priced) == Usage(
        requests=2, input_tokens=10, output_tokens=5, tool_calls=1, cost=Decimal("0.0075")
    )
    assert priced.add(priced).add(unpriced).cost == Decimal("0.0150")

"""Usage arithmetic: an unknown cost stays unknown, a known one is summed exactly."""

from __future__ import annotations

from decimal import Decimal

from sursis.domain.records import Usage


def test_costs_add_up_and_unknown_stays_unknown() -> None:
    unpriced = Usage(requests=1, input_tokens=10, output_tokens=5, tool_calls=1)
    assert unpriced.add(Usage(requests=1)).cost is None

    priced = Usage(requests=1, cost=Decimal("0.0075"))
    assert unpriced.add(priced) == Usage(
        requests=2, input_tokens=10, output_tokens=5, tool_calls=1, cost=Decimal("0.0075")
    )
    assert priced.add(priced).add(unpriced).cost == Decimal("0.0150")


def test_the_json_form_round_trips_and_keeps_the_cost_exact() -> None:
    priced = Usage(requests=2, input_tokens=84, output_tokens=12, tool_calls=1, cost=Decimal("0.0150"))
    assert priced.to_json() == {
        "requests": 2,
        "input_tokens": 84,
        "output_tokens": 12,
        "tool_calls": 1,
        "cost": "0.0150",
    }
    assert Usage.from_json(priced.to_json()) == priced
    assert Usage.from_json(Usage().to_json()) == Usage()
    assert Usage.from_json({}) == Usage()

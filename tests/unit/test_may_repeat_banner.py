"""Which adopted tools may run again after a crash: what `serve` and `worker` print at start."""

from __future__ import annotations

from sursis.infra.runner.agents import at_most_once_tools, may_repeat_tools
from tests.faults.adopted_agent import AGENTS


def test_only_tools_declared_read_or_idempotent_may_repeat() -> None:
    payer = AGENTS[0]
    assert may_repeat_tools(payer) == ["payer/pay_invoice"]
    assert at_most_once_tools(payer) == {"find_invoice", "refund_invoice", "wire_money", "charge_card"}

"""The adopted-agent cases: one per package under `packages/` (see `harness.py` to add one)."""

from __future__ import annotations

import json
from typing import Any

from tests.adoption.harness import AdoptionCase
from tests.fakes.model_servers import Call, call_then_answer

ORDERS_SCRIPT = [
    [{"tool": "lookup_order", "args": {"order_id": "A1001"}}],
    [{"tool": "refund_order", "args": {"order_id": "A1001", "amount": 15}}],
    "Refunded.",
]

CASES = [
    # (1) Its own deps: a dataclass with an httpx client to the orders API, from an async context
    # manager; the service's scripted model drives it.
    AdoptionCase(
        package="orders-desk",
        agents="orders_desk.agents:AGENT",
        agent="orders-desk",
        gated_tool="refund_order",
        effect="refunds",
        message=f"A1001 came late\nSCRIPT: {json.dumps(ORDERS_SCRIPT)}",
        output="Refunded.",
        idempotent=True,
    ),
    # (3) A FunctionModel without a stream function.
    AdoptionCase(
        package="billing-desk",
        agents="billing_desk.agents:billing",
        agent="billing",
        gated_tool="cancel_subscription",
        effect="cancellations",
        message="Please cancel my subscription.",
        output="Your subscription S-42 is cancelled.",
    ),
    # (4) An `anthropic:` model, its real client library against the fake Anthropic server.
    AdoptionCase(
        package="claude-desk",
        agents="claude_desk.agents:helpdesk",
        agent="helpdesk",
        gated_tool="close_ticket",
        effect="closed-tickets",
        message="Ticket T-9 is solved, thanks.",
        output="Ticket T-9 is closed.",
        env={"ANTHROPIC_BASE_URL": "{model_url}", "ANTHROPIC_API_KEY": "sk-ant-fake"},
        model_script=call_then_answer("close_ticket", {"ticket_id": "T-9"}, "Ticket T-9 is closed."),
        model_name="claude-sonnet-4-0",
    ),
]


# pydantic-ai's own examples (the pinned `pydantic-ai-examples`, unchanged), each through its wrapper
# module in `packages/served-examples` on the scripted model; `test_upstream_examples.py` drives them.


def _scripted(message: str, *steps: Any) -> str:
    return f"{message}\nSCRIPT: {json.dumps(list(steps))}"


def _call(tool: str, **args: Any) -> list[dict[str, Any]]:
    return [{"tool": tool, "args": args}]


# The example's providers, named at import: fake keys, never used (the served agents run on the
# scripted model; flight_booking's extraction agent runs on its own `openai:` model, the fake server).
_EXAMPLE_ENV = {
    "OPENAI_API_KEY": "sk-fake",
    "GOOGLE_API_KEY": "fake",
    "GROQ_API_KEY": "fake",
    "LOGFIRE_CONSOLE": "false",
}
BANK_ADVICE = {"support_advice": "Hello John, your balance is $123.45.", "block_card": False, "risk": 1}
FLIGHTS = [
    {"flight_number": "SFO-AK123", "price": 350, "origin": "SFO", "destination": "ANC", "date": "2025-01-10"},
    {"flight_number": "NYC-LA101", "price": 250, "origin": "SFO", "destination": "ANC", "date": "2025-01-10"},
]
SQL = {"sql_query": "SELECT count(*) AS n FROM records WHERE level = 'error'", "explanation": "Errors."}

UPSTREAM_CASES = [
    AdoptionCase(
        package="bank_support",
        agents="served_examples.bank_support:AGENT",
        agent="bank-support",
        gated_tool="customer_balance",
        message=_scripted(
            "What is my balance?", _call("customer_balance"), _call("final_result", **BANK_ADVICE)
        ),
        output=BANK_ADVICE,
        tool_result="$123.45",
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="weather_agent",
        agents="served_examples.weather_agent:AGENT",
        agent="weather-agent",
        gated_tool="get_weather",
        message=_scripted(
            "What is the weather like in London?",
            _call("get_lat_lng", location_description="London"),
            _call("get_weather", lat=51.5, lng=-0.12),
            "Sunny and 21 degrees in London.",
        ),
        output="Sunny and 21 degrees in London.",
        tool_result={"temperature": "21 °C", "description": "Sunny"},
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="flight_booking",
        agents="served_examples.flight_booking:AGENT",
        agent="flight-booking",
        gated_tool="extract_flights",
        message=_scripted(
            "Find me a flight from SFO to ANC on 2025-01-10",
            _call("extract_flights"),
            _call("final_result_FlightDetails", **FLIGHTS[1]),
        ),
        output=FLIGHTS[1],
        tool_result=FLIGHTS,
        env={**_EXAMPLE_ENV, "OPENAI_BASE_URL": "{model_url}/v1"},
        # The extraction agent's own model: it reads the flights off the page.
        model_script=lambda _: Call("final_result", {"response": FLIGHTS}),
        model_name="gpt-5.2",
    ),
    AdoptionCase(
        package="sql_gen",
        agents="served_examples.sql_gen:AGENT",
        agent="sql-gen",
        gated_tool="run_query",
        message=_scripted(
            "How many error records are there?",
            _call("run_query", sql_query=SQL["sql_query"]),
            _call("final_result_Success", **SQL),
        ),
        output=SQL,
        tool_result=[{"n": 0}],
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="roulette_wheel",
        agents="served_examples.roulette_wheel:AGENT",
        agent="roulette-wheel",
        gated_tool="roulette_wheel",
        message=_scripted(
            "Put my money on square eighteen",
            _call("roulette_wheel", square=18),
            _call("final_result", response=True),
        ),
        output=True,
        tool_result="winner",
        env=_EXAMPLE_ENV,
    ),
]

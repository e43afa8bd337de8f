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
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
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
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
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
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
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
        model_script=lambda request: (
            Call("final_result", {"response": FLIGHTS})
            if "flight details" in json.dumps(request.body)
            else None
        ),
        model_name="gpt-5.2",
    ),
    AdoptionCase(
        package="sql_gen",
        agents="served_examples.sql_gen:AGENT",
        agent="sql-gen",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
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
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
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

TIME_RANGE = {
    "min_timestamp_with_offset": "2024-11-22T00:00:00-08:00",
    "max_timestamp_with_offset": "2024-11-22T23:15:14-08:00",
    "explanation": "Today so far.",
}
RECIPE = {"ingredients": [{"name": "Carrot", "amount": "2"}], "instructions": ["Chop the carrots."]}

UPSTREAM_CASES += [
    AdoptionCase(
        package="evals",
        agents="served_examples.evals_time_range:AGENT",
        agent="time-range",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="get_current_time",
        message=_scripted(
            "Since this morning, please",
            _call("get_current_time"),
            _call("final_result_TimeRangeBuilderSuccess", **TIME_RANGE),
        ),
        output=TIME_RANGE,
        tool_result="The user's current time is Friday, November 22, 2024 23:15:14 PST.",
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="ag_ui.agentic_chat",
        agents="served_examples.ag_ui_agentic_chat:AGENT",
        agent="agentic-chat",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="current_time",
        message=_scripted("What time is it?", _call("current_time", timezone="UTC"), "It is late."),
        output="It is late.",
        tool_result=None,  # the time it ran
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="ag_ui.tool_approval",
        agents="served_examples.ag_ui_tool_approval:AGENT",
        agent="tool-approval",
        gated_tool="delete_file",
        message=_scripted("Delete notes.txt", _call("delete_file", path="notes.txt"), "Done."),
        output="Done.",
        tool_result="deleted notes.txt",
        env=_EXAMPLE_ENV,
        idempotent=False,  # its own `requires_approval=True` tool, declared nothing more
    ),
    AdoptionCase(
        package="ag_ui.shared_state",
        agents="served_examples.ag_ui_shared_state:AGENT",
        agent="shared-state",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="display_recipe",
        message=_scripted("A carrot salad", _call("display_recipe", recipe=RECIPE), "Here it is."),
        output="Here it is.",
        tool_result=None,  # an AG-UI `StateSnapshotEvent`, as pydantic-ai serializes it
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="data_analyst",
        agents="served_examples.data_analyst:AGENT",
        agent="data-analyst",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="load_dataset",
        message=_scripted(
            "How many negative reviews are there in `reviews`?",
            _call("load_dataset", path="reviews"),
            _call("run_duckdb", dataset="Out[1]", sql="SELECT count(*) AS n FROM dataset WHERE label = 0"),
            _call("display", name="Out[2]"),
            "There are 2 negative reviews.",
        ),
        output="There are 2 negative reviews.",
        tool_result=None,  # the dataset's summary, as `datasets` words it
        # Offline, its cache in the processes' working directory.
        env={**_EXAMPLE_ENV, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": "hf-cache"},
    ),
]

# The general practitioner's report, from the fake OpenAI server (the specialist agents' own model).
REPORT = {
    "diagnosis": ["tension headache"],
    "differential": ["migraine"],
    "recommended_tests": [],
    "immediate_actions": ["rest"],
    "estimated_time_minutes": 20,
}
TRIAGE = {
    "specialty": "general",
    "final_report": REPORT,
    "treatment_plan": None,
    "final_status": "resolved_by_specialist",
}
UPSTREAM_CASES.append(
    AdoptionCase(
        package="medical_agent_delegation",
        agents="served_examples.medical_agent_delegation:AGENT",
        agent="medical-triage",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="consult_specialist",
        message=_scripted(
            "A dull headache since yesterday",
            _call("consult_specialist", specialty="general", question="A dull headache since yesterday"),
            _call("final_result", **TRIAGE),
        ),
        output=TRIAGE,
        tool_result=TRIAGE,
        env={**_EXAMPLE_ENV, "OPENAI_BASE_URL": "{model_url}/v1"},
        model_script=lambda request: (
            Call("final_result", REPORT) if "general practitioner" in json.dumps(request.body) else None
        ),
        model_name="gpt-5.2",
    )
)

CHICAGO = {"city": "Chicago", "country": "United States"}
WHALES = [
    {"name": "Bowhead whale", "length": 16.0, "weight": 75000.0, "ocean": "Arctic"},
    {"name": "Narwhal", "length": 4.5, "ocean": "Arctic"},
]
UPSTREAM_CASES += [
    AdoptionCase(
        package="pydantic_model",
        agents="served_examples.pydantic_model:AGENT",
        agent="pydantic-model",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="look_up_place",
        message=_scripted(
            "The windy city in the US of A.",
            _call("look_up_place", nickname="The windy city"),
            _call("final_result", **CHICAGO),
        ),
        output=CHICAGO,
        tool_result=CHICAGO,
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="stream_whales",
        agents="served_examples.stream_whales:AGENT",
        agent="stream-whales",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="whale_census",
        message=_scripted(
            "Generate me details of the whales of the Arctic.",
            _call("whale_census", ocean="Arctic"),
            _call("final_result", response=WHALES),
        ),
        output=WHALES,
        tool_result=["Bowhead whale", "Narwhal"],
        env=_EXAMPLE_ENV,
    ),
]

TICKET = {
    "summary": "The laptop does not charge, on any outlet; needed for a presentation tomorrow.",
    "category": "hardware",
    "priority": "high",
    "follow_up_questions": ["Does another charger work?"],
}
UPSTREAM_CASES += [
    AdoptionCase(
        package="chat_app",
        agents="served_examples.chat_app:AGENT",
        agent="chat-app",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="read_faq",
        message=_scripted(
            "When are you open?",
            _call("read_faq", topic="opening hours"),
            "We are open 9 to 5, Monday to Friday.",
        ),
        output="We are open 9 to 5, Monday to Friday.",
        tool_result="We are open 9 to 5, Monday to Friday.",
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="realtime_handoff",
        agents="served_examples.realtime_handoff:AGENT",
        agent="realtime-handoff",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="open_tickets",
        message=_scripted(
            "Caller: my laptop won't charge anymore, I tried another outlet.",
            _call("open_tickets", device="laptop"),
            _call("final_result", **TICKET),
        ),
        output=TICKET,
        tool_result=["T-12: battery replaced in March"],
        env=_EXAMPLE_ENV,
    ),
]

UPSTREAM_CASES += [
    AdoptionCase(
        package="ag_ui.agentic_generative_ui",
        agents="served_examples.ag_ui_agentic_generative_ui:AGENT",
        agent="agentic-generative-ui",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="create_plan",
        message=_scripted(
            "Plan a picnic",
            _call("create_plan", steps=["Buy bread", "Pack the basket"]),
            _call("update_plan_step", index=0, status="completed"),
            "Planned.",
        ),
        output="Planned.",
        tool_result=None,  # an AG-UI `StateSnapshotEvent`, as pydantic-ai serializes it
        env=_EXAMPLE_ENV,
    ),
    AdoptionCase(
        package="ag_ui.predictive_state_updates",
        agents="served_examples.ag_ui_predictive_state_updates:AGENT",
        agent="predictive-state-updates",
        idempotent=True,  # its gated tool is declared `ToolOptions(idempotent=True)`
        gated_tool="document_predict_state",
        message=_scripted(
            "Write me a story about a fox", _call("document_predict_state"), "Once upon a time."
        ),
        output="Once upon a time.",
        tool_result=None,  # a list of AG-UI `CustomEvent`s, as pydantic-ai serializes them
        env=_EXAMPLE_ENV,
    ),
]

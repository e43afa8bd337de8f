"""Usage accounting: pydantic-ai's usage as our record, in events and in logs."""

from __future__ import annotations

from typing import Any

from pydantic_ai.usage import RunUsage

from abeyance.domain.records import Usage


def usage_json(usage: Usage) -> dict[str, int]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }


def usage_record(usage: RunUsage) -> Usage:
    """Our record of pydantic-ai's usage; its cost is the genai-prices estimate, None when unpriced."""
    return Usage(
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tool_calls=usage.tool_calls,
        cost=usage.cost,
    )


def usage_log(usage: Usage) -> dict[str, Any]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": None if usage.cost is None else str(usage.cost),
    }

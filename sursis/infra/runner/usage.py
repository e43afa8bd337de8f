"""Usage accounting: pydantic-ai's usage as our record."""

from __future__ import annotations

from pydantic_ai.usage import RunUsage

from sursis.domain.records import Usage


def usage_record(usage: RunUsage) -> Usage:
    """Our record of pydantic-ai's usage; its cost is the genai-prices estimate, None when unpriced."""
    return Usage(
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tool_calls=usage.tool_calls,
        cost=usage.cost,
    )

"""pydantic-ai's metrics of each model request, recorded without its request span.

Where no span is recorded (no exporter), the service runs its agents without pydantic-ai's
instrumentation capability, whose run, request and tool spans would be dropped unread. The
metrics it records are still served at `/metrics` (`gen_ai.client.token.usage`, `operation.cost`,
`gen_ai.client.operation.time_to_first_chunk`): `MeteredModel` records them after each request
with pydantic-ai's own instruments (`InstrumentationSettings`), dimensions and price, the same
figures its instrumentation records (`tests/api/test_model_metrics.py` compares the two). What
it leaves out is the request span, which pydantic-ai builds, with its attributes, before it knows
whether the span records: about a thousand Python calls a request (docs/performance-history.md).

`AVAILABLE` says whether the installed pydantic-ai has the helpers this uses; where it does not,
`metered` wraps the model in pydantic-ai's `InstrumentedModel` (span and metrics) instead.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.instrumented import InstrumentationSettings, InstrumentedModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

try:
    from pydantic_ai._instrumentation import (
        model_attributes,
        model_metric_attributes,
        response_price_calculation,
    )

    AVAILABLE = True
except ImportError:  # pragma: no cover - present from the lowest supported pydantic-ai (2.62) on
    AVAILABLE = False

_SYSTEM = "gen_ai.system"
_REQUEST_MODEL = "gen_ai.request.model"


def metered(model: Model, settings: InstrumentationSettings) -> Model:
    """`model` recording pydantic-ai's per-request metrics. A `FallbackModel` tells pydantic-ai's
    request span which model answered, so it keeps the span (`InstrumentedModel`)."""
    if not AVAILABLE or isinstance(model, FallbackModel):
        return InstrumentedModel(model, settings)
    return MeteredModel(model, settings)


class MeteredModel(WrapperModel):
    """A model whose every response is measured as pydantic-ai's instrumentation measures it."""

    def __init__(self, wrapped: Model, settings: InstrumentationSettings) -> None:
        super().__init__(wrapped)
        self._instruments = settings
        described = model_attributes(wrapped)
        self._system: Any = described.get(_SYSTEM)
        self._request_model: Any = described.get(_REQUEST_MODEL)

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        self._record(response)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        started = time.perf_counter()  # as pydantic-ai's: from issuing the request to the first chunk
        stream: StreamedResponse | None = None
        try:
            async with self.wrapped.request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as stream:
                yield stream
        finally:
            if stream is not None:
                self._record(stream.get(), stream.time_to_first_chunk(started))

    def _record(self, response: ModelResponse, time_to_first_chunk: float | None = None) -> None:
        attributes = model_metric_attributes(
            self._system, self._request_model, response.model_name or self._request_model
        )
        self._instruments.record_metrics(
            response, response_price_calculation(response), attributes, time_to_first_chunk
        )

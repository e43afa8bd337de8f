"""A deps factory that fails while connecting prints its connection URL, credentials included, in its
error: the log line (its `error` field and its traceback), a host program's own log handler (an
embedded service) and the trace carry it masked, whatever shape the URL has (a password with an
unencoded `/` or `@`, an empty user, a mistyped scheme, no scheme at all)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sursis import Service, adopt
from sursis.infra.agents.agent_deps import RunInfo
from sursis.infra.telemetry import TelemetryConfig, build_telemetry

SECRET = "Hunter2-s3cret"
URLS = [
    f"postgresql+asyncpg://shop:{SECRET}/x@db.internal:5432/orders",  # `/` in the password
    f"postgresql://shop:p@{SECRET}@db.internal/orders",  # `@` in the password
    f"redis://:{SECRET}@cache:6379/0",  # no user
    f"postgres//shop:{SECRET}@localhost/orders",  # a mistyped scheme
    f"shop:{SECRET}@localhost:5432",  # as a driver prints where it connects
]


class Shop:
    pass


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("never asked")])


def shop(url: str) -> Any:
    def connect(info: RunInfo) -> Shop:
        raise ConnectionError(f"cannot connect to {url}: connection refused")

    return adopt(Agent(FunctionModel(_answer), name="shop", deps_type=Shop), deps=connect)


async def _fail_one_run(database_url: str, url: str, **options: Any) -> str:
    async with Service.open(database_url, agents=[shop(url)], **options) as svc:
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "hi")
        await svc.run_until_idle()
        view = await svc.get_run(run.id)
    assert view.run.error is not None and view.run.error.code == "deps_failed"
    return view.run.error.message


PROGRAM = """
import asyncio, json, logging, sys

from tests.attacks.test_deps_factory_credentials_in_logs import shop
from sursis import Service
from sursis.app.logging import configure_logging


class EveryField(logging.Handler):
    def emit(self, record):
        print(json.dumps(vars(record), default=str), flush=True)


if sys.argv[3] == "service":
    configure_logging("INFO", json_logs=True, stream=sys.stdout)
else:
    logging.getLogger().handlers = [EveryField()]
    logging.getLogger().setLevel(logging.INFO)


async def main():
    async with Service.open(sys.argv[1], agents=[shop(sys.argv[2])], migrate=True) as svc:
        conversation = await svc.start_conversation("shop")
        run = await svc.send(conversation.id, "hi")
        await svc.run_until_idle()
        print("RUN ERROR", (await svc.get_run(run.id)).run.error)

asyncio.run(main())
"""


def _logged(url: str, logging_by: str, tmp_path: Path) -> str:
    """What a process serving the agent logs: configured as `serve` does (`service`), or by a host
    program embedding the service (`host`). A process of its own: structlog is configured once."""
    root = Path(__file__).resolve().parents[2]
    database = f"sqlite+aiosqlite:///{tmp_path / 'logs.db'}"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, database, url, logging_by],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RUN ERROR" in done.stdout and "deps_failed" in done.stdout
    return done.stdout + done.stderr


@pytest.mark.parametrize("url", URLS)
def test_the_services_log_lines_mask_the_url(url: str, tmp_path: Path) -> None:
    out = _logged(url, "service", tmp_path)
    [failed] = [json.loads(line) for line in out.splitlines() if '"run.deps_failed"' in line]
    assert "ConnectionError: cannot connect to" in failed["error"]
    assert "connection refused" in failed["exception"]
    assert SECRET not in out


@pytest.mark.parametrize("url", URLS[:2])
def test_a_host_programs_own_handler_gets_the_traceback_masked(url: str, tmp_path: Path) -> None:
    """An embedded service logs through the host program's `logging` configuration: a JSON handler
    that writes every field of a record, as python-json-logger does, sees the traceback masked too."""
    out = _logged(url, "host", tmp_path)
    [failed] = [line for line in out.splitlines() if "run.deps_failed" in line]
    assert "connection refused" in failed and "Traceback" in failed
    assert SECRET not in out


async def test_the_trace_masks_the_url(database_url: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = build_telemetry(TelemetryConfig(), tracer_provider=provider)
    try:
        message = await _fail_one_run(database_url, URLS[0], telemetry=telemetry)
    finally:
        telemetry.shutdown()
    events = [e for s in exporter.get_finished_spans() for e in s.events if e.name == "exception"]
    assert events and "cannot connect to" in str(events[0].attributes)
    assert not [e for e in events if SECRET in json.dumps(dict(e.attributes or {}), default=str)]
    assert SECRET not in message

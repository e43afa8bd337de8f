"""A worker that prints its spans records the runs an API process that exports nothing queued: the
API's unsampled trace context does not unsample the worker's traces (real processes)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from tests.faults.processes import Cluster


async def test_a_worker_with_console_traces_records_a_run_queued_by_a_silent_api(cluster: Cluster) -> None:
    _, base = await cluster.api()  # no OTLP endpoint, no console: it samples nothing
    worker = cluster.worker(SURSIS_TRACE_CONSOLE="1")
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        cid = (await client.post(f"{base}/v1/conversations", json={"agent": "assistant"})).json()["id"]
        run = (
            await client.post(
                f"{base}/v1/conversations/{cid}/messages", params={"wait": 20}, json={"content": "hi"}
            )
        ).json()
        deadline = time.monotonic() + 30
        while run["status"] != "completed":
            assert time.monotonic() < deadline, run
            run = (await client.get(f"{base}/v1/runs/{run['id']}", params={"wait": 2})).json()
    # The run reads `completed` once the segment's last transaction committed; its span ends (and
    # is printed) a moment later, in the worker: wait for it there before stopping the processes.
    for _ in range(100):
        if _segments(cluster, run["id"])[0]:
            break
        await asyncio.sleep(0.2)
    cluster.stop_all()
    assert worker.returncode is not None
    segments, text = _segments(cluster, run["id"])
    assert segments, text[-2000:]
    names = {
        span["name"]
        for span in _spans(text)
        if span["context"]["trace_id"] == segments[0]["context"]["trace_id"]
    }
    # The segment with pydantic-ai's spans inside it, in the trace the API's request started.
    assert {"run.segment", "invoke_agent assistant", "chat scripted"} <= names


def _segments(cluster: Cluster, run_id: str) -> tuple[list[dict[str, Any]], str]:
    """The `run.segment` spans of `run_id` the workers printed so far, and all they printed."""
    text = "".join(p.read_text() for p in cluster.log_dir.glob("worker-*.log"))
    found = [
        span
        for span in _spans(text)
        if span["name"] == "run.segment" and span["attributes"].get("sursis.run_id") == run_id
    ]
    return found, text


def _spans(text: str) -> list[dict[str, Any]]:
    """The JSON objects the console exporter printed (one span each, over several lines)."""
    spans: list[dict[str, Any]] = []
    depth, start = 0, None
    for index, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0 and start is not None:
                try:
                    value = json.loads(text[start : index + 1])
                except json.JSONDecodeError:
                    continue
                if isinstance(value, dict) and "context" in value and "name" in value:
                    spans.append(value)
    return spans

"""/readyz and every request answer 503 quickly while PostgreSQL is unreachable, and recover by themselves."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy.engine import make_url
from structlog.testing import capture_logs

from sursis.app.main import create_app
from sursis.infra.runner import leases
from tests.conftest import admin_headers, call, make_settings, script


class CuttableProxy:
    """A TCP proxy to PostgreSQL in its own thread that can drop every connection and refuse new ones."""

    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.port = 0

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update({client, upstream})
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(pg_migrated: str) -> Iterator[CuttableProxy]:
    running = CuttableProxy(make_url(pg_migrated).port or 5432)
    running.start()
    yield running
    running.cut()


async def test_outage_gives_fast_503_and_service_recovers_without_restart(
    pg_migrated: str, proxy: CuttableProxy
) -> None:
    url = make_url(pg_migrated).set(port=proxy.port).render_as_string(hide_password=False)
    headers = await admin_headers(pg_migrated)
    async with AsyncTestClient(app=create_app(make_settings(url))) as client:
        client.headers.update(headers)
        assert (await client.get("/readyz")).status_code == 200
        created = await client.post("/v1/conversations", json={"agent": "ops"})
        assert created.status_code == 201

        proxy.cut()
        started = time.monotonic()
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["code"] == "database_unavailable"
        assert ready.headers["Retry-After"] == "2"
        during: Any = await client.post("/v1/conversations", json={"agent": "ops"})
        assert during.status_code == 503
        assert during.headers["Retry-After"] == "2"
        assert during.json()["retry_after"] == 2
        assert time.monotonic() - started < 15

        proxy.start()
        deadline = time.monotonic() + 15
        while (await client.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, "the service did not recover"
            await asyncio.sleep(0.2)
        assert (await client.post("/v1/conversations", json={"agent": "ops"})).status_code == 201


async def test_a_segment_that_loses_its_connection_gives_its_run_back_at_once(
    pg_migrated: str, proxy: CuttableProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops right after the segment stored the model's response: the segment is
    abandoned and gives the run back as soon as the database answers, so the run completes while
    its ten-minute lease would still hold it."""
    url = make_url(pg_migrated).set(port=proxy.port).render_as_string(hide_password=False)
    headers = await admin_headers(pg_migrated)
    cuts: list[str] = []

    def cut_once(name: str) -> None:
        if name == "model_response_persisted" and not cuts:
            cuts.append(name)
            proxy.cut()
            threading.Timer(1.0, proxy.start).start()

    monkeypatch.setattr(leases, "crash_point", cut_once)
    settings = make_settings(url, lease_seconds=600, database_listen_url=pg_migrated)
    with capture_logs() as logs:
        async with AsyncTestClient(app=create_app(settings)) as client:
            client.headers.update(headers)
            cid = (await client.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
            posted = await client.post(
                f"/v1/conversations/{cid}/messages",
                json={"content": script([call("list_dlq_events")], "listed")},
            )
            run_id = posted.json()["id"]
            deadline = time.monotonic() + 60
            while (run := await client.get(f"/v1/runs/{run_id}", params={"wait": 5})).status_code != 200 or (
                run.json()["status"] != "completed"
            ):
                assert time.monotonic() < deadline, "the run did not complete"
                await asyncio.sleep(0.2)
    assert cuts == ["model_response_persisted"]
    events = [entry["event"] for entry in logs]
    assert "run.segment_abandoned" in events
    released = [e for e in logs if e["event"] == "run.released_after_lost_connection"]
    assert [e["released"] for e in released] == [True]

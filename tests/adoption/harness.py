"""Adopted agents as their authors ship them: each a package of its own, installed with the built
wheel into one fresh venv, served by `sursis serve --no-worker --agents ...` and `sursis worker` as
separate processes on a fresh PostgreSQL database, driven over HTTP.

What a case checks (`AdoptionHarness.gated_turn`): a message makes the agent call its gated tool; the
call waits as a pending call; it is approved over HTTP; the run completes; the tool's effect (a
request to the fake business API, `tests/fakes/effects_api.py`) is applied once. With `kill_at=`, the
worker that resumes the run is SIGKILLed at that crash point (`sursis.infra.faults`, through
`SURSIS_CRASH_AT`; e.g. `tool_effect_committed:TOOL`, after the tool ran and before its outcome
was stored), another worker finishes the run, and the effect is still applied once.

Adding a case:

1. a package under `tests/adoption/packages/<name>/` (a `pyproject.toml` depending on `sursis`, or
   `sursis[extra]`, and its module), written as its authors would; its gated tool applies its effect
   with `POST $ORDERS_API_URL/<kind>` and an `Idempotency-Key` (the tool call id);
2. an `AdoptionCase` naming the package, the `--agents` reference, the agent, the gated tool and the
   effect's `kind`, and the message that starts the turn, added to `CASES` in
   `test_adopted_packages.py`. `env` gives the processes more variables (a model's base URL);
   `model_script` answers model requests for a case whose model is the fake Anthropic/OpenAI server
   (`tests/fakes/model_servers.py`, reached at `{model_url}`, formatted into `env`).

Every package under `packages/` is installed in the one venv (one `pip install`), and one API
process serves every case's agents, so a new case costs a worker start and a turn, not an install.

pydantic-ai's own examples (`UPSTREAM_CASES`, `test_upstream_examples.py`) are installed unchanged
from PyPI (`upstream-examples.txt`, with --no-deps) and served through the wrapper modules of
`packages/served-examples`; their tools post no effect, so their turns are checked through
`GET /v1/runs/{id}/tool-calls` (`AdoptionHarness.tool_calls`), and `gated_turn(decision="deny")`
denies the call instead.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.effects_api import Effect, FakeEffectsApi
from tests.fakes.model_servers import FakeModelServer, Request, Step
from tests.packaging.installing import build_wheel, clean_env, fresh_venv

PACKAGES = Path(__file__).resolve().parent / "packages"
UPSTREAM_EXAMPLES = Path(__file__).resolve().parent / "upstream-examples.txt"
"""The pinned `pydantic-ai-examples`, installed with --no-deps (`make install` does the same)."""
KILLED = -signal.SIGKILL


@dataclass(frozen=True)
class AdoptionCase:
    package: str
    """The folder under `tests/adoption/packages/`."""
    agents: str
    """What `--agents` names: `module:NAME` or an entry point."""
    agent: str
    """The served agent's name."""
    gated_tool: str
    message: str
    effect: str | None = None
    """The effect's kind: the path its tool posts to on the fake API (None: its tool posts none)."""
    output: Any = None
    """The run's expected output, when the case knows it (as the API shows it, or parsed from JSON)."""
    tool_result: Any = None
    """What the gated tool returns, as `GET /v1/runs/{id}/tool-calls` shows it, when the case knows it."""
    env: Mapping[str, str] = field(default_factory=dict)
    """More variables for the API and worker processes; `{model_url}` is the fake model server's URL."""
    model_script: Any = None
    """`(Request) -> Step | None` answering the fake model server's requests for this case's agent
    (None: the request is another case's, on the same model name)."""
    model_name: str | None = None
    """The model name this case's agent sends to the fake model server (its requests' `model`)."""
    idempotent: bool = False
    """The gated tool is declared `ToolOptions(idempotent=True)` (it keys its effect on the call id):
    after a worker death mid-call it runs again; otherwise a person is asked (outcome unknown)."""

    @property
    def id(self) -> str:
        return self.package


@dataclass
class Turn:
    run: dict[str, Any]
    pending: dict[str, Any]
    effects: list[Effect]
    """The effects applied by this turn's call (by its idempotency key: one, when all is well)."""
    attempts: list[Effect]
    """Every request the tool made to apply it (two when a worker died after the tool ran)."""
    killed: bool


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install(root: Path, packages: list[str] | None = None) -> Path:
    """The wheel (built once) and every package under `packages/` in one fresh venv; its `bin`.
    A package that needs an extra of sursis names it in its dependencies (`sursis[anthropic]`).
    pydantic-ai's examples (`UPSTREAM_EXAMPLES`) come after, without their pinned dependencies."""
    wheel = build_wheel(root / "dist")
    names = packages if packages is not None else sorted(p.name for p in PACKAGES.iterdir() if p.is_dir())
    return fresh_venv(
        root / "venv",
        [str(wheel), *(str(PACKAGES / name) for name in names)],
        ["--no-deps", "-r", str(UPSTREAM_EXAMPLES)],
        uv=True,
    )


class AdoptionHarness:
    """The processes of one session: the API serving every case's agents, and workers on demand."""

    def __init__(
        self,
        bin_dir: Path,
        database_url: str,
        work: Path,
        cases: list[AdoptionCase],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.bin = bin_dir
        self.extra_env = dict(env or {})
        self.database_url = database_url
        self.work = work
        self.cases = {case.agent: case for case in cases}
        self.api = FakeEffectsApi()
        self.model = FakeModelServer(respond=self._answer_model)
        self._processes: list[subprocess.Popen[bytes]] = []
        self._stack = contextlib.ExitStack()
        self.base = ""
        self.headers: dict[str, str] = {}
        self._shared: subprocess.Popen[bytes] | None = None
        """A worker kept between turns that kill no worker."""

    # Start and stop

    def __enter__(self) -> AdoptionHarness:
        self.api_url = self._stack.enter_context(self.api.serve())
        self._stack.enter_context(self.model)
        migrated = self.sursis("migrate")
        assert migrated.returncode == 0, migrated.stderr
        self._serve()
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._stack.close()

    def env(self, **extra: str) -> dict[str, str]:
        env = clean_env(
            self.bin,
            SURSIS_DATABASE_URL=self.database_url,
            SURSIS_AGENTS=",".join(case.agents for case in self.cases.values()),
            SURSIS_LOG_LEVEL="WARNING",
            SURSIS_LOG_JSON="true",
            SURSIS_LEASE_SECONDS="2",
            SURSIS_SWEEP_SECONDS="0.5",
            SURSIS_WORKER_POLL_SECONDS="0.5",
            SURSIS_RATE_LIMIT_PER_MINUTE="0",
            SURSIS_SHUTDOWN_GRACE_SECONDS="2",
            ORDERS_API_URL=self.api_url,
        )
        for case in self.cases.values():
            env.update({k: v.format(model_url=self.model.url) for k, v in case.env.items()})
        env.update(self.extra_env)
        env.update(extra)
        return env

    def sursis(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "sursis"), *args],
            cwd=self.work,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def _spawn(self, name: str, args: list[str], **extra: str) -> subprocess.Popen[bytes]:
        log = self.work / f"{name}-{len(self._processes)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(self.bin / "sursis"), *args],
                cwd=self.work,
                env=self.env(**extra),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._processes.append(process)
        return process

    def _serve(self) -> None:
        key_file = self.work / "admin.key"
        port = free_port()
        process = self._spawn(
            "api", ["serve", "--no-worker", "--port", str(port)], SURSIS_ADMIN_KEY_FILE=str(key_file)
        )
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, self.logs()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, self.logs()
            time.sleep(0.2)
        self.headers = {"Authorization": f"Bearer {key_file.read_text().strip()}"}

    def worker(self, crash_at: str | None = None) -> subprocess.Popen[bytes]:
        extra = {"SURSIS_CRASH_AT": crash_at} if crash_at else {}
        return self._spawn("worker", ["worker", "--concurrency", "2"], **extra)

    def _stop_shared(self) -> None:
        if self._shared is not None:
            self.stop(self._shared)
            self._shared = None

    @staticmethod
    def stop(process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=20)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.work.glob("*.log")))

    def _answer_model(self, request: Request) -> Step:
        for case in self.cases.values():
            if case.model_script is not None and case.model_name in (None, request.body.get("model")):
                step: Step | None = case.model_script(request)
                if step is not None:  # None: not this case's agent (cases may share a model name)
                    return step
        raise AssertionError(f"no case answers the fake model's request for {request.body.get('model')!r}")

    # One gated turn

    def gated_turn(
        self,
        case: AdoptionCase,
        *,
        kill_at: str | None = None,
        decision: str = "approve",
        seconds: float = 90,
    ) -> Turn:
        """Start a conversation with the case's agent, send its message, approve (or deny) the gated
        call over HTTP and wait for the run to end; with `kill_at`, the worker dies there and another
        one finishes (both stopped before it returns); without, a worker kept between such turns runs it."""
        if kill_at:
            # The doomed worker must be the one that resumes the run: no other may claim it.
            self._stop_shared()
            workers = [self.worker(crash_at=kill_at)]
        else:
            workers = []
            if self._shared is None or self._shared.poll() is not None:
                self._shared = self.worker()
        killed = False
        try:
            with httpx.Client(base_url=self.base, headers=self.headers, timeout=30) as http:
                conversation = http.post("/v1/conversations", json={"agent": case.agent})
                assert conversation.status_code == 201, conversation.text
                cid = conversation.json()["id"]
                posted = http.post(f"/v1/conversations/{cid}/messages", json={"content": case.message})
                assert posted.status_code == 202, posted.text
                run_id = posted.json()["id"]
                suspended = self._settle(http, run_id, {"suspended", "failed", "completed"}, seconds)
                assert suspended["status"] == "suspended", (suspended, self.logs())
                [pending] = suspended["pending"]
                assert (pending["tool_name"], pending["kind"], pending["agent"]) == (
                    case.gated_tool,
                    "approval",
                    case.agent,
                ), pending
                assert not self._applied(pending), "nothing is applied before the approval"
                decided = http.post(
                    f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": decision}
                )
                assert decided.status_code == 200, decided.text
                deadline = time.monotonic() + seconds
                while True:
                    if kill_at and not killed and workers[0].poll() is not None:
                        assert workers[0].returncode == KILLED, (workers[0].returncode, self.logs())
                        killed = True
                        workers.append(self.worker())
                    run = http.get(f"/v1/runs/{run_id}", params={"wait": 1}).json()
                    if run["status"] in ("completed", "failed"):
                        break
                    asked = [p for p in run["pending"] if p["correlation_id"] != pending["correlation_id"]]
                    if run["status"] == "suspended" and asked:  # a person is asked (outcome unknown)
                        break
                    assert time.monotonic() < deadline, (run, self.logs())
        finally:
            for process in workers:
                self.stop(process)
        return Turn(run, pending, self._applied(pending), self._tried(pending), killed)

    def tool_calls(self, run_id: str) -> list[dict[str, Any]]:
        """The run's tool calls as `GET /v1/runs/{id}/tool-calls` shows them."""
        answer = httpx.get(f"{self.base}/v1/runs/{run_id}/tool-calls", headers=self.headers, timeout=30)
        assert answer.status_code == 200, answer.text
        calls: list[dict[str, Any]] = answer.json()
        return calls

    def _settle(self, http: httpx.Client, run_id: str, statuses: set[str], seconds: float) -> Any:
        deadline = time.monotonic() + seconds
        while True:
            run = http.get(f"/v1/runs/{run_id}", params={"wait": 2}).json()
            if run["status"] in statuses:
                return run
            assert time.monotonic() < deadline, (run, self.logs())

    def _applied(self, pending: Mapping[str, Any]) -> list[Effect]:
        return [e for e in self.api.applied.values() if e.key.endswith(pending["tool_call_id"])]

    def _tried(self, pending: Mapping[str, Any]) -> list[Effect]:
        return [e for e in self.api.attempts if e.key.endswith(pending["tool_call_id"])]

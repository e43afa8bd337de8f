"""What `sursis serve` says and does at start, as a process: `--port 0` serves on a free port and
prints it; OpenTelemetry packages of two releases are one line naming the pin, for `serve`,
`worker` and `migrate` alike (the mix simulated by a `sitecustomize` that removes the name the
newer package imports, not by installing older packages)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from sursis.app.otel_check import unusable_opentelemetry

MINOR = int(version("opentelemetry-instrumentation-asgi").split(".")[1].split("b")[0])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env.update({"SURSIS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'sursis.db'}", **extra})
    return env


def test_port_0_serves_on_a_free_port_and_prints_it(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "sursis.app.cli", "serve", "--host", "127.0.0.1", "--port", "0"],
            cwd=tmp_path,
            env=_env(tmp_path, SURSIS_ADMIN_KEY_FILE=str(tmp_path / "admin.key")),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        port = None
        while True:
            assert server.poll() is None, log.read_text()
            printed = re.search(r"Sursis API on http://127\.0\.0\.1:(\d+)/v1", log.read_text())
            if printed:
                port = int(printed.group(1))
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                        break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    assert port not in (None, 0, 8000)


SHADOW = """
# As after `pip install 'logfire[asyncpg]'` moved opentelemetry-instrumentation back a release: the
# ASGI instrumentation imports a name its older _semconv lacks.
import opentelemetry.instrumentation._semconv as semconv
del semconv.HTTP_DURATION_HISTOGRAM_BUCKETS_NEW
"""


@pytest.mark.parametrize("command", ["serve", "worker", "migrate"])
def test_opentelemetry_packages_of_two_releases_are_one_line_at_start(tmp_path: Path, command: str) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sitecustomize.py").write_text(SHADOW)
    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "sursis.app.cli", command],
        cwd=tmp_path,
        env=_env(tmp_path, PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        "sursis: the installed OpenTelemetry packages cannot serve: opentelemetry-instrumentation-asgi "
        f"{version('opentelemetry-instrumentation-asgi')} imports HTTP_DURATION_HISTOGRAM_BUCKETS_NEW from "
        "opentelemetry.instrumentation._semconv, which opentelemetry-instrumentation "
        f"{version('opentelemetry-instrumentation')} lacks: re-pin it to the release of the other "
        f"(pip install 'opentelemetry-instrumentation>=0.{MINOR}b0,<0.{MINOR + 1}b0'), or find the "
        "package that pinned it back"
    ]
    assert not (tmp_path / "sursis.db").exists(), "nothing started"
    # The line docs/compatibility.md shows, there with an older opentelemetry-instrumentation.
    docs = (Path(__file__).resolve().parents[2] / "docs" / "compatibility.md").read_text()
    shown = re.search(r"sursis: the installed OpenTelemetry packages cannot serve: .*", docs)
    assert shown is not None
    [line] = done.stderr.strip().splitlines()
    assert _versionless(shown.group(0)) == _versionless(line)


def _versionless(line: str) -> str:
    return re.sub(r"\b\d+\.\d+(\.\d+|b\d+)\b", "V", line)


def test_the_installed_opentelemetry_packages_serve() -> None:
    assert unusable_opentelemetry() is None

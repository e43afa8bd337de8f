"""The start banners of real `sursis serve` and `sursis worker` processes say whether encryption is
on and under which key, `/readyz` says the same, and an encrypted database started without its
keyring is one line on stderr and exit status 2 (no traceback)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx

from sursis.infra.db.migrations import upgrade
from tests.api.test_encryption_at_rest import new_key
from tests.faults.processes import ROOT, free_port


def environment(url: str, keys: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    env.update({"SURSIS_DATABASE_URL": url, "SURSIS_LOG_LEVEL": "WARNING", "SURSIS_LOG_JSON": "true"})
    if keys is not None:
        env["SURSIS_ENCRYPTION_KEYS"] = keys
    return env


async def first_lines(process: subprocess.Popen[str], wanted: str, seconds: float = 60) -> list[str]:
    """stdout lines until one contains `wanted` (the process keeps running)."""
    assert process.stdout is not None
    lines: list[str] = []
    while not any(wanted in line for line in lines):
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), seconds)
        assert line, f"the process ended: {lines}"
        lines.append(line)
    return lines


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "sursis.app.cli", *args]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


async def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    await asyncio.to_thread(process.wait, 30)
    if process.stdout is not None:
        process.stdout.close()


async def test_the_banners_and_readyz_say_encryption_is_on_and_a_start_without_keys_is_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'banner.db'}"
    await asyncio.to_thread(upgrade, url)
    port = free_port()
    command = [sys.executable, "-m", "sursis.app.cli"]
    env = environment(url, new_key("banner-1"))
    serve = spawn(["serve", "--port", str(port)], env)
    try:
        lines = await first_lines(serve, "encryption:")
        assert lines[-1].strip() == "encryption: on  active key: banner-1", lines
        async with httpx.AsyncClient() as client:
            for _ in range(120):
                try:
                    ready = await client.get(f"http://127.0.0.1:{port}/readyz")
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.25)
        assert ready.json() == {"status": "ready", "encryption": "on", "active_key_id": "banner-1"}
    finally:
        await stop(serve)
    worker = spawn(["worker"], env)
    try:
        lines = await first_lines(worker, "encryption:")
        assert lines[-1].strip().endswith("encryption: on  active key: banner-1"), lines
    finally:
        await stop(worker)
    refused = await asyncio.to_thread(
        subprocess.run,
        [*command, "worker"],
        cwd=ROOT,
        env=environment(url, None),
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "sursis: this database holds encrypted values (keys banner-1) and no keyring is set: set "
        "SURSIS_ENCRYPTION_KEYS or SURSIS_ENCRYPTION_KEYS_FILE to its keys (docs/runbooks/encryption.md)"
    ]

"""An embedded service whose host configured no logging still tells of a run that failed: a
program that embeds `Service` with a broken deps factory sees one line naming the factory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys
    from pydantic_ai import Agent
    from sursis import Service, adopt

    agent = Agent(name="desk", deps_type=dict)

    def open_crm(info):
        raise ConnectionError("crm is down")

    async def main():
        async with Service.open(sys.argv[1], agents=[adopt(agent, deps=open_crm)], migrate=True) as svc:
            conversation = await svc.start_conversation("desk")
            run = await svc.send(conversation.id, "hello")
            await svc.run_until_idle()
            print((await svc.get_run(run.id)).run.error.code)

    asyncio.run(main())
    """
)


def test_a_failing_deps_factory_is_logged_by_an_embedded_service(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, f"sqlite+aiosqlite:///{tmp_path / 'embedded.db'}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "deps_failed"
    [line] = [line for line in done.stderr.splitlines() if "run.deps_failed" in line]
    assert "open_crm" in line and "ConnectionError: crm is down" in line
    assert "run.segment_started" not in done.stderr, "only errors are shown while nothing is configured"

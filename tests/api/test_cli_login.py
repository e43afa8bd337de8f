"""`sursis login` (the device flow, RFC 8628) against a real OpenID provider, then `sursis pending
approve` deciding as that person: the refresh token kept at mode 600 in the config dir, the call
resolved by `oidc:<subject>`."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api.conftest import LiveFactory
from tests.api.oidc_provider import CLIENT_ID, CLIENT_SECRET, LocalProvider, confirm_device, start_provider
from tests.api.test_pending_cli import suspended_call

PEOPLE = {"alice": {"email": "alice@example.com", "groups": ["finance"]}}
RULES = {"finance": {"role": "operator", "workspace": "default"}}


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    yield from start_provider(tmp_path, PEOPLE)


def cli_env(provider: LocalProvider, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    return env | {
        "XDG_CONFIG_HOME": str(config),
        "SURSIS_OIDC_ISSUER": provider.issuer,
        "SURSIS_OIDC_CLIENT_ID": CLIENT_ID,
        "SURSIS_OIDC_CLIENT_SECRET": CLIENT_SECRET,
    }


async def test_a_person_signs_the_command_line_in_and_approves_as_themselves(
    live: LiveFactory, provider: LocalProvider, tmp_path: Path
) -> None:
    env = cli_env(provider, tmp_path / "config")
    login = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sursis.app.cli", "login",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert login.stdout is not None
    line = (await asyncio.wait_for(login.stdout.readline(), 30)).decode()
    assert line.startswith("Open ") and " and confirm the code " in line, line
    await confirm_device(line.split()[1], "alice")
    out, err = await asyncio.wait_for(login.communicate(), 60)
    assert login.returncode == 0, err.decode()
    stored = tmp_path / "config" / "sursis" / "credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert "refresh_token" in stored.read_text()

    async with live(**provider.settings(**RULES)) as app:
        correlation_id = await suspended_call(app.http)
        approve = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sursis.app.cli", "pending", "approve", correlation_id, "--json",
            "--url", app.base_url,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await approve.communicate()
        assert approve.returncode == 0, err.decode()
        assert '"oidc:alice"' in out.decode()
        decided = (await app.http.get(f"/v1/pending/{correlation_id}")).json()
        assert (decided["status"], decided["resolved_by"]) == ("approved", "oidc:alice")

        # Moved out of every mapped group at the provider: the next command is refused.
        provider.set_groups("alice", [])
        second = await suspended_call(app.http)
        refused = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "sursis.app.cli", "pending", "approve", second, "--url", app.base_url,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await refused.communicate()
        assert refused.returncode == 2 and "not_provisioned" in err.decode()
        assert (await app.http.get(f"/v1/pending/{second}")).json()["status"] == "awaiting"

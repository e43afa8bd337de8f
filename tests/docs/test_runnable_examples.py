"""The first hour of a new user, run for real: a fresh clone, the mistakes a newcomer makes first
(an unreachable database, an unmigrated one), `sursis migrate`, `sursis serve` on a port that is
not the default one, then every runnable example of README.md and docs/ (the walk-through in
workspace `ws1`) against that service, offline. Everything printed is kept; the last test fails
if the database password or the admin key appears anywhere in it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from tests.conftest import PG_URL
from tests.docs.examples import REPO, Example, runnable_examples
from tests.fresh_database import drop_database, fresh_database

PASSWORD = f"s3cret-{uuid.uuid4().hex[:12]}"
EXAMPLES = runnable_examples()
TIMEOUT = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Site:
    clone: Path
    env: dict[str, str]
    admin_key: str
    server: subprocess.Popen[bytes]
    logs: Path
    printed: dict[str, str] = field(default_factory=dict)

    def run(self, label: str, args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        """Run a command, keep everything it printed under `label`."""
        env = {**self.env, **kwargs.pop("env", {})}  # type: ignore[dict-item]
        done = subprocess.run(
            args,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            **{"cwd": self.clone, **kwargs},  # type: ignore[arg-type]
        )
        self.printed[label] = done.stdout + done.stderr
        return done

    def stop(self) -> None:
        if self.server.poll() is None:
            self.server.terminate()
            self.server.wait(timeout=30)
        for name in ("serve.out", "serve.err"):
            self.printed[name] = (self.logs / name).read_text(errors="replace")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "OPENAI_"))}
    return {**env, "SURSIS_LOG_JSON": "true", "SURSIS_WORKER_POLL_SECONDS": "0.2"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("first-hour")
    clone = root / "sursis"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=TIMEOUT)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    database = asyncio.run(fresh_database(PG_URL, "docs"))
    url = sa.make_url(database).set(password=PASSWORD).render_as_string(hide_password=False)
    port = free_port()
    env = {**base_env(), "SURSIS_DATABASE_URL": url, "SURSIS_PORT": str(port)}
    env["SURSIS_ADMIN_KEY_FILE"] = str(root / "admin.key")
    sursis = str(clone / ".venv" / "bin" / "sursis")
    printed: dict[str, str] = {}

    def run(label: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sursis, *args], cwd=clone, env={**env, **extra}, capture_output=True, text=True, timeout=TIMEOUT
        )
        printed[label] = done.stdout + done.stderr
        return done

    # The mistakes first: a database that cannot be reached, one that is not migrated.
    unreachable = sa.make_url(url).set(port=free_port()).render_as_string(hide_password=False)
    done = run("migrate, unreachable", "migrate", SURSIS_DATABASE_URL=unreachable)
    assert done.returncode == 2, done
    assert "cannot migrate postgresql+asyncpg://postgres:***@" in done.stderr
    done = run("worker, unreachable", "worker", SURSIS_DATABASE_URL=unreachable)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done
    no_such_database = (
        sa.make_url(url)
        .set(database=f"{sa.make_url(url).database}_none")
        .render_as_string(hide_password=False)
    )
    done = run("keys list, no such database", "keys", "list", SURSIS_DATABASE_URL=no_such_database)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done
    assert "cannot reach the database postgresql+asyncpg://postgres:***@" in done.stderr
    done = run("serve, not migrated", "serve")
    assert done.returncode == 2, done
    assert "is not migrated (revision none, head " in done.stderr
    assert done.stderr.endswith("run `sursis migrate`\n")
    done = run("keys create, no database file", "keys", "create", "--role", "admin",
               SURSIS_DATABASE_URL="sqlite+aiosqlite:///./sursis.db")  # fmt: skip
    assert done.returncode == 2, done
    assert not (clone / "sursis.db").exists()

    done = run("migrate", "migrate")
    assert done.returncode == 0, done
    assert PASSWORD not in done.stdout and ":***@" in done.stdout

    logs = root / "logs"
    logs.mkdir()
    with (logs / "serve.out").open("wb") as out, (logs / "serve.err").open("wb") as err:
        server = subprocess.Popen([sursis, "serve"], cwd=clone, env=env, stdout=out, stderr=err)
    site = Site(clone, env, "", server, logs, printed)
    try:
        done = site.run("wait-ready", [sursis, "wait-ready", "--timeout", "60"])
        assert done.returncode == 0, (done, (logs / "serve.err").read_text())
        key_file = root / "admin.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        site.admin_key = key_file.read_text().strip()
        # A crash: a second `serve` on the port the first one holds.
        crashed = site.run("serve, port taken", [sursis, "serve"])
        assert crashed.returncode != 0, crashed
        assert ":***@" in crashed.stdout
        site.env["SURSIS_API_KEY"] = site.admin_key
        site.env["SURSIS_API_URL"] = f"http://127.0.0.1:{port}"
        yield site
    finally:
        site.stop()
        asyncio.run(drop_database(database))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_the_example_runs(site: Site, example: Example, tmp_path: Path) -> None:
    if example.language in ("sh", "bash", "shell", "console"):
        done = site.run(example.id, ["bash", "-c", example.shell_script()], env={"WS": "ws1"})
    elif example.language == "python" and "pytest" in example.options:
        (tmp_path / "pytest.ini").write_text("[pytest]\n")
        (tmp_path / "test_example.py").write_text(example.body)
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"]
        done = site.run(example.id, args, cwd=tmp_path)
    elif example.language == "python":
        (tmp_path / "example.py").write_text(example.body)
        done = site.run(example.id, [sys.executable, "example.py"], cwd=tmp_path)
    elif example.language == "json":
        method, path = example.options[:2]
        answer = httpx.request(
            method,
            site.env["SURSIS_API_URL"] + path,
            content=example.body,
            headers={"Authorization": f"Bearer {site.admin_key}", "content-type": "application/json"},
            timeout=30,
        )
        site.printed[example.id] = answer.text
        assert answer.is_success, answer.text
        return
    else:
        pytest.fail(f"{example.id}: no runner for {example.language!r} examples")
    assert done.returncode == 0, f"{example.id} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    for expected in example.expect:
        assert expected in done.stdout, f"{example.id} did not print {expected!r}:\n{done.stdout}"


def test_the_walkthrough_and_the_client_examples_are_among_them() -> None:
    ids = {e.id.split(":")[0] for e in EXAMPLES}
    assert {"README.md", "docs/client.md", "docs/embedding.md"} <= ids
    assert any("sursis pending approve" in e.body for e in EXAMPLES)
    assert {"sh", "python", "json"} <= {e.language for e in EXAMPLES}
    assert any("pytest" in e.options for e in EXAMPLES)


def test_nothing_printed_holds_the_password_or_the_admin_key(site: Site) -> None:
    site.stop()
    assert site.admin_key.startswith("srs_")
    assert len(site.printed) >= len(EXAMPLES) + 8
    for label, text in site.printed.items():
        assert PASSWORD not in text, f"the database password is in what {label!r} printed"
        assert site.admin_key not in text, f"the admin key is in what {label!r} printed"
    assert "wrote the first admin key to" in site.printed["serve.out"]
    assert ":***@" in site.printed["serve.out"]


def test_examples_are_found_by_their_marker_alone(tmp_path: Path) -> None:
    """Discovery is generic: a block another page adds is picked up by its info string."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "x\n\n```python runnable expect=\"hi\"\nprint('hi')\n```\n\n```python\nno\n```\n"
    )
    (tmp_path / "docs" / "a.md").write_text(
        "```sh runnable\necho a\nmake run &   # started by the runner\n```\n"
    )
    found = runnable_examples(tmp_path)
    assert [(e.id, e.language, e.expect) for e in found] == [
        ("README.md:3", "python", ("hi",)),
        ("docs/a.md:1", "sh", ()),
    ]
    assert "make run" not in found[1].shell_script()

"""PostgreSQL servers of a test's own: Debian's PgBouncer in front of a database, and a PostgreSQL 15
cluster made by `initdb` under a temporary folder (to restart or kill without touching the shared
server on 5432). Both listen on 127.0.0.1, on free ports, and run as the `postgres` user when the
caller is root (neither runs as root)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PGBOUNCER = Path(os.environ.get("SURSIS_TEST_PGBOUNCER", "/usr/sbin/pgbouncer"))
PG_BIN = Path(os.environ.get("SURSIS_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def as_postgres() -> list[str]:
    """The prefix that runs a command as `postgres` when this process is root."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def owned_folder(prefix: str) -> Path:
    """A new temporary folder the servers' user owns."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    return folder


def wait_for_port(port: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds:g}s")


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(path, entry.pw_uid, entry.pw_gid)


class PgBouncer:
    """Debian's PgBouncer in `pool_mode` (transaction by default) in front of one PostgreSQL server,
    every database name passed through. A small server pool makes clients share server connections,
    as a busy production pooler does."""

    def __init__(
        self,
        target_port: int,
        *,
        pool_mode: str = "transaction",
        pool_size: int = 4,
        host: str = "127.0.0.1",
        database: str | None = None,
    ) -> None:
        if not PGBOUNCER.exists():
            raise FileNotFoundError(f"{PGBOUNCER} is missing: `apt-get install pgbouncer` (.ci/run does it)")
        self.target = (host, target_port)
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.database = database
        """The one database served (a line a failover hook can rewrite); None: every database."""
        self.folder = owned_folder("sursis-pgbouncer-")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def ini(self) -> Path:
        return self.folder / "pgbouncer.ini"

    def _configure(self) -> None:
        host, port = self.target
        _write(self.folder / "users.txt", '"postgres" ""\n')
        _write(
            self.ini,
            f"""[databases]
{self.database or "*"} = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.folder}/users.txt
admin_users = postgres
pool_mode = {self.pool_mode}
default_pool_size = {self.pool_size}
max_client_conn = 1000
server_login_retry = 1
ignore_startup_parameters = extra_float_digits,options
logfile = {self.folder}/pgbouncer.log
pidfile = {self.folder}/pgbouncer.pid
""",
        )

    def start(self) -> PgBouncer:
        self._configure()
        user = ["-u", "postgres"] if os.geteuid() == 0 else []
        self.process = subprocess.Popen(
            [str(PGBOUNCER), *user, str(self.ini)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_port(self.port)
        return self

    def point_at(self, port: int, host: str = "127.0.0.1") -> None:
        """Send new connections to another server (what a failover hook does), by a reload."""
        self.target = (host, port)
        self._configure()
        if self.process is not None:
            self.process.send_signal(signal.SIGHUP)

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgresql+asyncpg://{user}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class LocalPostgres:
    """A PostgreSQL 15 cluster of its own: `initdb` under a temporary folder, trust authentication
    for `postgres` on 127.0.0.1, started, stopped, restarted or killed by the caller."""

    def __init__(self) -> None:
        if not (PG_BIN / "initdb").exists():
            raise FileNotFoundError(f"{PG_BIN}/initdb is missing: PostgreSQL 15's server binaries are needed")
        self.folder = owned_folder("sursis-pg-")
        self.data = self.folder / "data"
        self.port = free_port()

    def _pg(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*as_postgres(), *args], check=check, capture_output=True, timeout=120)

    def init(self) -> LocalPostgres:
        self._pg(str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.folder}'\nfsync = off\nmax_connections = 200\n"
            )
        return self

    def start(self) -> LocalPostgres:
        self._pg(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "start")
        return self

    def stop(self, mode: str = "fast") -> None:
        self._pg(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def postmaster_pid(self) -> int | None:
        pid_file = self.data / "postmaster.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(pid_file.read_text().splitlines()[0])
        return None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

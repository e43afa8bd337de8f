"""A real high-availability PostgreSQL for the drill: Debian's `etcd` and `patroni`, two PostgreSQL 15
nodes with synchronous streaming replication, all on free local ports under a temporary folder.

Patroni runs as `postgres`. `primary_start_timeout: 0` makes a crashed primary fail over at once
instead of being restarted in place, which is what a killed postmaster should cost in production
too (the standby holds every acknowledged commit: `synchronous_mode`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.pg_servers import PG_BIN, as_postgres, free_port, owned_folder, wait_for_port

ETCD = Path("/usr/bin/etcd")
PATRONI = Path("/usr/bin/patroni")
SCOPE = "sursis-drill"


@dataclass
class Node:
    name: str
    pg_port: int
    api_port: int
    process: subprocess.Popen[bytes] | None = None


class PatroniCluster:
    """etcd plus two Patroni nodes. `on_role_change` is a script Patroni runs on each node when its
    role changes (the drill's PgBouncer hook), given the node's port as its first argument."""

    def __init__(self, on_role_change: Path | None = None) -> None:
        self.folder = owned_folder("sursis-ha-")
        self.etcd_port, self.etcd_peer = free_port(), free_port()
        self.nodes = [Node(f"node{i}", free_port(), free_port()) for i in (1, 2)]
        self.on_role_change = on_role_change
        self.etcd: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        """Every node, the primary found by `target_session_attrs=read-write`."""
        hosts = ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)
        return f"postgresql+asyncpg://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def _config(self, node: Node) -> str:
        hook = ""
        if self.on_role_change is not None:
            hook = f"  callbacks:\n    on_role_change: {self.folder / ('hook-' + node.name + '.sh')}\n"
            script = self.folder / f"hook-{node.name}.sh"
            script.write_text(f'#!/bin/sh\nexec {self.on_role_change} {node.pg_port} "$@"\n')
            script.chmod(0o755)
        return f"""scope: {SCOPE}
name: {node.name}
log:
  dir: {self.folder}/{node.name}-log
restapi:
  listen: 127.0.0.1:{node.api_port}
  connect_address: 127.0.0.1:{node.api_port}
etcd3:
  hosts: 127.0.0.1:{self.etcd_port}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 5
    primary_start_timeout: 0
    master_start_timeout: 0
    synchronous_mode: true
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 200
        wal_log_hints: "on"
        fsync: "off"
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{node.pg_port}
  connect_address: 127.0.0.1:{node.pg_port}
  data_dir: {self.folder}/{node.name}
  bin_dir: {PG_BIN}
  pgpass: {self.folder}/{node.name}.pgpass
  authentication:
    replication:
      username: replicator
      password: replicator
    superuser:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: {self.folder}
{hook}"""

    def start(self, seconds: float = 90) -> PatroniCluster:
        for needed in (ETCD, PATRONI, PG_BIN / "initdb"):
            if not needed.exists():
                raise FileNotFoundError(f"{needed} is missing: `apt-get install patroni etcd-server`")
        etcd_dir = self.folder / "etcd"
        self.etcd = subprocess.Popen(
            [
                *as_postgres(),
                str(ETCD),
                "--name=drill",
                f"--data-dir={etcd_dir}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer}",
                f"--initial-cluster=drill=http://127.0.0.1:{self.etcd_peer}",
            ],
            stdout=(self.folder / "etcd.out").open("wb"),
            stderr=subprocess.STDOUT,
        )
        wait_for_port(self.etcd_port)
        for node in self.nodes:
            (self.folder / f"{node.name}-log").mkdir()
            if os.geteuid() == 0:
                shutil.chown(self.folder / f"{node.name}-log", "postgres", "postgres")
            config = self.folder / f"{node.name}.yml"
            config.write_text(self._config(node))
            node.process = subprocess.Popen(
                [*as_postgres(), str(PATRONI), str(config)],
                stdout=(self.folder / f"{node.name}.out").open("wb"),
                stderr=subprocess.STDOUT,
            )
            # The first node bootstraps alone: the second then copies it.
            if node is self.nodes[0]:
                self.wait_for(lambda members: any(m["role"] == "leader" for m in members), seconds)
        self.wait_for(self.replicating, seconds)
        return self

    def members(self) -> list[dict[str, object]]:
        for node in self.nodes:
            address = f"http://127.0.0.1:{node.api_port}/cluster"
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(address, timeout=2) as answer,
            ):
                return list(json.loads(answer.read())["members"])
        return []

    @staticmethod
    def replicating(members: list[dict[str, object]]) -> bool:
        """A running leader and a synchronous standby that replicates (Patroni 3.0 says `running`,
        later versions `streaming`)."""
        roles = {(m["role"], m["state"]) for m in members}
        return ("leader", "running") in roles and bool(
            roles & {("sync_standby", "streaming"), ("sync_standby", "running")}
        )

    def wait_for(self, condition: object, seconds: float) -> None:
        assert callable(condition)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition(self.members()):
                return
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(f"patroni {node.name} exited: see {self.folder}/{node.name}.out")
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not get there in {seconds:g}s: {self.members()}")

    def primary(self) -> Node:
        leader = next(m["name"] for m in self.members() if m["role"] == "leader")
        return next(n for n in self.nodes if n.name == leader)

    def kill_primary_postmaster(self) -> Node:
        """SIGKILL the primary's postmaster (its backends notice and exit); Patroni stays up."""
        primary = self.primary()
        pid = int((self.folder / primary.name / "postmaster.pid").read_text().splitlines()[0])
        os.kill(pid, signal.SIGKILL)
        return primary

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait()
        for node in self.nodes:
            pid_file = self.folder / node.name / "postmaster.pid"
            with contextlib.suppress(OSError, ValueError, IndexError):
                os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGKILL)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            self.etcd.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)

"""The external checkpoint log: signed audit checkpoints appended to files outside the database
(`SURSIS_AUDIT_CHECKPOINT_DIR`), one file per workspace (`WORKSPACE.jsonl`), one JSON line per
checkpoint, never rewritten.

The directory belongs to the service's account and to no database role: an insider with SQL rights
can put back an older copy of `audit_checkpoints`, not shorten this file. Point it at storage the
database's administrators cannot write (another host's mount, a WORM bucket's sync folder); the
file also works as a record an auditor copies away.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from sursis.domain.audit.audit_checkpoint import Checkpoint, CheckpointLogUnusable
from sursis.domain.identity.keys import WORKSPACE

TAIL_BYTES = 64 * 1024
"""How much of a file's end is read to find its newest line (a line is about 400 bytes)."""


def checkpoint_record(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint as a JSON object: a line of the log, and a checkpoint of an audit bundle."""
    return {
        "workspace": checkpoint.workspace,
        "seq": checkpoint.seq,
        "hash": checkpoint.hash,
        "anchor_seq": checkpoint.anchor_seq,
        "anchor_hash": checkpoint.anchor_hash,
        "signed_at": checkpoint.signed_at.isoformat(),
        "signer": checkpoint.signer,
        "signature": checkpoint.signature,
    }


def _line(checkpoint: Checkpoint) -> bytes:
    return (json.dumps(checkpoint_record(checkpoint), sort_keys=True, separators=(",", ":")) + "\n").encode()


def parse_checkpoint(line: bytes) -> Checkpoint | None:
    """A line's checkpoint; None for a line cut short (a crash while appending) or not one."""
    try:
        record: dict[str, Any] = json.loads(line)
        return Checkpoint(
            workspace=str(record["workspace"]),
            seq=int(record["seq"]),
            hash=str(record["hash"]),
            anchor_seq=int(record["anchor_seq"]),
            anchor_hash=str(record["anchor_hash"]),
            signed_at=datetime.fromisoformat(str(record["signed_at"])),
            signer=str(record["signer"]),
            signature=str(record["signature"]),
        )
    except (ValueError, KeyError, TypeError):
        return None


class FileCheckpointLog:
    """The `CheckpointLog` port over a directory of append-only JSON-lines files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def where(self) -> str:
        return str(self.directory)

    def _file(self, workspace: str) -> Path:
        if not WORKSPACE.match(workspace):
            raise CheckpointLogUnusable(f"not a workspace name: {workspace!r}")
        return self.directory / f"{workspace}.jsonl"

    async def append(self, checkpoint: Checkpoint) -> None:
        await asyncio.to_thread(self._append, checkpoint)

    async def newest(self, workspace: str) -> Checkpoint | None:
        return await asyncio.to_thread(self._newest, workspace)

    def _append(self, checkpoint: Checkpoint) -> None:
        path = self._file(checkpoint.workspace)
        try:
            self.directory.mkdir(mode=0o750, parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
            try:
                size = os.fstat(fd).st_size
                # a line cut short by a crash is closed first, so the new one parses on its own
                torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
                os.write(fd, (b"\n" if torn else b"") + _line(checkpoint))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise CheckpointLogUnusable(
                f"cannot append to the audit checkpoint log {str(path)!r}: {exc.strerror}"
            ) from None

    def _newest(self, workspace: str) -> Checkpoint | None:
        path = self._file(workspace)
        try:
            with path.open("rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(0, size - TAIL_BYTES))
                tail = file.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointLogUnusable(
                f"cannot read the audit checkpoint log {str(path)!r}: {exc.strerror}"
            ) from None
        for line in reversed(tail.split(b"\n")):
            found = parse_checkpoint(line) if line.strip() else None
            if found is not None and found.workspace == workspace:
                return found
        return None

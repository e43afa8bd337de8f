"""`sursis audit export`: one workspace's audit evidence as a bundle an auditor checks offline
(`python -m sursis.verify`), with no database and no service.

The bundle is a directory (or, when `--out` ends in `.tar.gz`, `.tgz` or `.tar`, that directory
archived): the sealed chain rows, the signed checkpoints (the database's and the external log's),
the public key, the policy versions and the decision seals, each seal with the service's verdict
signed by the audit signing key (a seal is an HMAC the auditor has no key for), and a manifest of
every file's SHA-256 signed by the same key. The file names and signed bytes are in
`sursis/verify/bundle.py`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sursis.app.storage import Storage
from sursis.domain.audit.audit_chain import row_content
from sursis.domain.audit.audit_checkpoint import Checkpoint, CheckpointSigner
from sursis.domain.errors import ServiceError
from sursis.domain.records import AuditEntry
from sursis.infra.checkpoint_log import checkpoint_record
from sursis.infra.db.audit_export import SqlAuditExport
from sursis.verify import bundle as b

ARCHIVES = (".tar.gz", ".tgz", ".tar")


class ExportRefused(ServiceError):
    code = "audit_export_refused"


@dataclass(frozen=True, slots=True)
class Exported:
    path: Path
    rows: int
    checkpoints: int
    policies: int
    seals: int
    head_seq: int


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, sort_keys=True, ensure_ascii=False).encode() + b"\n" for r in records)


def _external(storage: Storage, workspace: str) -> list[dict[str, Any]]:
    """Every checkpoint of the external log (`SURSIS_AUDIT_CHECKPOINT_DIR`) for the workspace."""
    directory = storage.settings.audit_checkpoint_dir
    file = directory / f"{workspace}.jsonl" if directory is not None else None
    if file is None or not file.exists():
        return []
    found = []
    for line in file.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash while appending
        if isinstance(record, dict) and record.get("workspace") == workspace:
            found.append({**record, "source": "external"})
    return found


async def _outside(storage: Storage, workspace: str) -> list[dict[str, Any]]:
    """The external log's checkpoints: every line of a directory's file; a bucket's newest object."""
    if storage.settings.audit_checkpoint_dir is not None:
        return await asyncio.to_thread(_external, storage, workspace)
    log = storage.audit_chain.external
    newest = await log.newest(workspace) if log is not None else None
    return [{**checkpoint_record(newest), "source": "external"}] if newest is not None else []


async def _read(storage: Storage, workspace: str, since: datetime | None) -> dict[str, Any]:
    """Checkpoint first, then head, then rows up to that head: each read sees at least what the
    one before it named, however the sweeper seals meanwhile."""
    async with storage.uow.reader() as uow:
        reader = SqlAuditExport(uow.session)
        checkpoint = await reader.checkpoint(workspace)
        head = await reader.head(workspace)
        start = (head.anchor_seq + 1, head.anchor_hash)
        rows: list[dict[str, Any]] = []
        async for link in reader.links(workspace, head.anchor_seq):
            if link.seq > head.seq:
                break
            if since is not None and not rows and (link.entry.at is None or link.entry.at < since):
                start = (link.seq + 1, link.hash)
                continue
            if link.unreadable is not None:
                raise ExportRefused(f"audit row seq {link.seq} does not open ({link.unreadable})")
            rows.append(
                {
                    "seq": link.seq,
                    "prev_hash": link.prev_hash,
                    "hash": link.hash,
                    "content": row_content(link.entry),
                }
            )
        return {
            "checkpoint": checkpoint,
            "head": head,
            "start": start,
            "rows": rows,
            "policies": await reader.policies(workspace),
            "seals": await reader.seals(workspace),
        }


def _public_pem(signer: CheckpointSigner) -> bytes:
    public_pem = getattr(signer, "public_pem", None)
    if public_pem is None:
        raise ExportRefused("the audit signing key does not give its public key")
    pem: str = public_pem()
    return pem.encode("ascii")


async def export_bundle(
    storage: Storage, workspace: str, out: Path, since: datetime | None = None, *, actor: str = "cli"
) -> Exported:
    """Write the bundle to `out` (which must not exist). Refused without the private signing key:
    the bundle's manifest and seal verdicts are signed with it."""
    signer = storage.audit_chain.signer
    if signer is None or not signer.can_sign:
        raise ExportRefused(
            "set SURSIS_AUDIT_SIGNING_KEY_FILE to the private signing key: the bundle is signed"
        )
    if await asyncio.to_thread(out.exists):
        raise ExportRefused(f"{out} exists: a bundle is never written over")
    read = await _read(storage, workspace, since)
    checkpoint: Checkpoint | None = read["checkpoint"]
    checkpoints = [{**checkpoint_record(checkpoint), "source": "database"}] if checkpoint else []
    checkpoints += await _outside(storage, workspace)
    seals = [
        {**record, "attestation": signer.sign(b.attestation_message(workspace, record))}
        for record in read["seals"]
    ]
    files = {
        b.CHAIN: _jsonl(read["rows"]),
        b.CHECKPOINTS: _jsonl(checkpoints),
        b.POLICIES: _jsonl(read["policies"]),
        b.SEALS: _jsonl(seals),
        b.PUBLIC_KEY: _public_pem(signer),
    }
    head = read["head"]
    manifest = {
        "format": b.FORMAT,
        "workspace": workspace,
        "exported_at": datetime.now(UTC).isoformat(),
        "since": since.isoformat() if since is not None else None,
        "signer": signer.fingerprint,
        "from_seq": read["start"][0],
        "from_hash": read["start"][1],
        "head": {
            "seq": head.seq,
            "hash": head.hash,
            "anchor_seq": head.anchor_seq,
            "anchor_hash": head.anchor_hash,
        },
        "decision_seals": "on" if seals or _sealing_on(storage) else "off",
        "counts": {
            "rows": len(read["rows"]),
            "checkpoints": len(checkpoints),
            "policies": len(read["policies"]),
            "seals": len(seals),
        },
        "files": {name: b.file_digest(data) for name, data in files.items()},
    }
    files[b.MANIFEST] = json.dumps(manifest, sort_keys=True, indent=2).encode()
    files[b.MANIFEST_SIGNATURE] = signer.sign(files[b.MANIFEST]).encode("ascii") + b"\n"
    await asyncio.to_thread(_write, out, files)
    async with storage.uow() as uow:  # plaintext left the database: on record, in the chain itself
        details = {
            "head_seq": head.seq,
            "rows": len(read["rows"]),
            "seals": len(seals),
            "signer": signer.fingerprint,
        }
        await uow.audit.append(
            AuditEntry("audit.exported", actor, workspace, details=details), datetime.now(UTC)
        )
        await uow.commit()
    return Exported(out, len(read["rows"]), len(checkpoints), len(read["policies"]), len(seals), head.seq)


def _sealing_on(storage: Storage) -> bool:
    return storage.cipher.decision_sealer.enabled


def _write(out: Path, files: dict[str, bytes]) -> None:
    archive = out.name.endswith(ARCHIVES)
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        name = out.name.removesuffix(next((s for s in ARCHIVES if out.name.endswith(s)), ""))
        directory = Path(scratch) / (name or "bundle")
        directory.mkdir()
        for file, data in files.items():
            directory.joinpath(file).write_bytes(data)
        if not archive:
            shutil.move(str(directory), out)
            return
        with tarfile.open(out, "w" if out.name.endswith(".tar") else "w:gz") as tar:
            tar.add(directory, arcname=directory.name)

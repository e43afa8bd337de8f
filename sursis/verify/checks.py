"""Checking an audit bundle offline: every hash, every signature, every seal attestation.

What holds and what does not are collected, not stopped at: an auditor wants every row, checkpoint
and seal that is wrong named, not only the first. Imports the standard library and `cryptography`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sursis.verify import bundle as b

MAX_NAMED = 50
"""How many failures of one kind a report names before it only counts them."""


@dataclass
class Report:
    """What the bundle proves (`proven`), what is wrong with it (`failures`), and what it cannot
    prove (`limits`)."""

    proven: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def fail(self, message: str) -> None:
        if len(self.failures) < MAX_NAMED:
            self.failures.append(message)
        elif len(self.failures) == MAX_NAMED:
            self.failures.append("… more failures not listed")


class Key:
    """The bundle's Ed25519 public key, and its fingerprint as the service names it."""

    def __init__(self, pem: bytes) -> None:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        public = serialization.load_pem_public_key(pem)
        if not isinstance(public, Ed25519PublicKey):
            raise ValueError("not an Ed25519 public key")
        self._public = public
        self.raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.fingerprint = hashlib.sha256(self.raw).hexdigest()[:32]

    def holds(self, message: bytes, signature: object) -> bool:
        from cryptography.exceptions import InvalidSignature

        if not isinstance(signature, str):
            return False
        try:
            self._public.verify(base64.b64decode(signature, validate=True), message)
        except (InvalidSignature, ValueError):
            return False
        return True


def _lines(path: Path, name: str, report: Report) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.joinpath(name).read_text(encoding="utf-8").splitlines(), 1):
        try:
            record = json.loads(line)
        except ValueError:
            report.fail(f"{name} line {number}: not JSON")
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            report.fail(f"{name} line {number}: not a JSON object")
    return records


def verify_bundle(path: Path, pinned: bytes | None = None) -> Report:
    """Check the bundle in directory `path`. `pinned`: the PEM public key the auditor got from the
    operator outside the bundle; without it, the key the bundle carries is only self-asserted."""
    report = Report()
    try:
        manifest_bytes = path.joinpath(b.MANIFEST).read_bytes()
        manifest = json.loads(manifest_bytes)
        key = Key(path.joinpath(b.PUBLIC_KEY).read_bytes())
    except (OSError, ValueError) as exc:
        report.fail(f"not a readable audit bundle: {exc}")
        return report
    if not isinstance(manifest, dict) or manifest.get("format") != b.FORMAT:
        report.fail(f"{b.MANIFEST} is not a {b.FORMAT} manifest")
        return report
    _check_key(report, key, manifest, pinned)
    signature = (
        path.joinpath(b.MANIFEST_SIGNATURE).read_text().strip()
        if path.joinpath(b.MANIFEST_SIGNATURE).exists()
        else None
    )
    if key.holds(manifest_bytes, signature):
        report.proven.append(
            f"{b.MANIFEST} is signed by key {key.fingerprint} (the export's contents and counts)"
        )
    else:
        report.fail(
            f"{b.MANIFEST_SIGNATURE}: the manifest's signature does not hold under key {key.fingerprint}"
        )
    for name in b.FILES:
        try:
            data = path.joinpath(name).read_bytes()
        except OSError:
            report.fail(f"{name}: missing from the bundle")
            continue
        if b.file_digest(data) != manifest.get("files", {}).get(name):
            report.fail(f"{name}: does not match the digest the manifest signed (edited, cut or replaced)")
    workspace = str(manifest.get("workspace"))
    rows: dict[int, str] = {}
    versions: set[int] = set()
    try:
        rows = _check_chain(report, path, manifest)
        _check_checkpoints(report, path, key, workspace, manifest, rows)
        versions = _check_policies(report, path, workspace)
        _check_seals(report, path, key, workspace, versions)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        # a bundle written by hand may hold anything: malformed is a failure, never a traceback
        report.fail(f"the bundle is malformed ({type(exc).__name__}: {exc}); not every check ran")
    return report


def _check_key(report: Report, key: Key, manifest: Mapping[str, Any], pinned: bytes | None) -> None:
    if manifest.get("signer") != key.fingerprint:
        report.fail(f"{b.PUBLIC_KEY}: key {key.fingerprint} is not the signer the manifest names")
    if pinned is None:
        report.limits.append(
            f"the public key ({key.fingerprint}) came with the bundle: pass --key with the operator's "
            "public key (obtained apart from the bundle) to prove the bundle is the service's"
        )
        return
    try:
        expected = Key(pinned)
    except ValueError:
        report.fail("--key is not an Ed25519 public key in PEM")
        return
    if expected.raw != key.raw:
        report.fail(
            f"{b.PUBLIC_KEY}: key {key.fingerprint} is not the key given (--key {expected.fingerprint})"
        )
    else:
        report.proven.append(f"the bundle's key is the one given (--key {expected.fingerprint})")


def _check_chain(report: Report, path: Path, manifest: Mapping[str, Any]) -> dict[int, str]:
    """Walk the rows: each hashes to its hash and links to the one before, no seq is missing, and
    the last is the head the manifest names. Returns seq → hash of the rows that hold."""
    head = manifest.get("head") or {}
    seq, running = int(manifest.get("from_seq", 1)) - 1, str(manifest.get("from_hash", b.GENESIS))
    held: dict[int, str] = {seq: running}
    broken = 0
    for row in _lines(path, b.CHAIN, report):
        at, content = int(row.get("seq", 0)), row.get("content") or {}
        name = f"{b.CHAIN}: seq {at} (row id {content.get('id')})"
        if at > seq + 1:
            report.fail(f"{b.CHAIN}: seq {seq + 1} to {at - 1} missing (rows dropped)")
            broken += 1
        elif at <= seq:
            report.fail(f"{name}: out of order (after seq {seq})")
            broken += 1
            continue
        if b.row_hash(str(row.get("prev_hash")), content) != row.get("hash"):
            report.fail(f"{name}: content does not match its hash (edited)")
            broken += 1
        elif row.get("prev_hash") != running and at == seq + 1:
            report.fail(f"{name}: does not follow the row before it (moved or renumbered)")
            broken += 1
        else:
            held[at] = str(row.get("hash"))
        seq, running = at, str(row.get("hash"))
    head_seq, head_hash = int(head.get("seq", 0)), head.get("hash")
    if seq < head_seq:
        report.fail(f"{b.CHAIN}: seq {seq + 1} to {head_seq} missing (the head is at {head_seq})")
    elif seq == head_seq and running != head_hash:
        report.fail(f"{b.CHAIN}: the last row (seq {seq}) is not the head the manifest names")
    elif not broken:
        start = int(manifest.get("from_seq", 1))
        report.proven.append(
            f"the chain from seq {start} to {head_seq} is whole: each row hashes to its hash and links "
            "to the one before"
        )
    return held


def _check_checkpoints(
    report: Report, path: Path, key: Key, workspace: str, manifest: Mapping[str, Any], rows: dict[int, str]
) -> None:
    head_seq = int((manifest.get("head") or {}).get("seq", 0))
    start = int(manifest.get("from_seq", 1)) - 1
    newest = 0
    for cp in _lines(path, b.CHECKPOINTS, report):
        name = f"{b.CHECKPOINTS}: the {cp.get('source')} checkpoint at seq {cp.get('seq')}"
        try:
            message = b.checkpoint_message(cp)
        except (KeyError, TypeError, ValueError):
            report.fail(f"{name}: malformed")
            continue
        if cp.get("workspace") != workspace or cp.get("signer") != key.fingerprint:
            report.fail(f"{name}: not signed for this workspace by key {key.fingerprint}")
        elif not key.holds(message, cp.get("signature")):
            report.fail(f"{name}: its signature does not hold (forged, or moved from another checkpoint)")
        elif int(cp["seq"]) > head_seq:
            report.fail(f"{name}: signed seq {cp['seq']}, the chain ends at {head_seq} (rows cut)")
        elif int(cp["seq"]) < start:
            report.limits.append(f"{name}: before the exported rows, its hash is not checked")
        elif rows.get(int(cp["seq"])) != cp["hash"]:
            report.fail(f"{name}: the chain does not hold the signed hash at that seq")
        else:
            newest = max(newest, int(cp["seq"]))
    if newest:
        report.proven.append(
            f"rows up to seq {newest} are the ones the service sealed: a checkpoint signed when they "
            "were sealed names the hash the chain reaches there"
        )
    if newest < head_seq:
        report.limits.append(
            f"rows after seq {newest} are vouched for only by the export's signature, not by a "
            "checkpoint signed when they were sealed"
        )


def _check_policies(report: Report, path: Path, workspace: str) -> set[int]:
    versions = set()
    for policy in _lines(path, b.POLICIES, report):
        if policy.get("workspace") != workspace:
            report.fail(f"{b.POLICIES}: version {policy.get('version')} is another workspace's")
        versions.add(int(policy.get("version", 0)))
    report.proven.append(f"{len(versions)} policy version(s) as the service stored them")
    return versions


def _check_seals(report: Report, path: Path, key: Key, workspace: str, versions: set[int]) -> None:
    good = 0
    for record in _lines(path, b.SEALS, report):
        name = f"{b.SEALS}: the {b.seal_label(record)}"
        facts = record.get("facts") if isinstance(record.get("facts"), dict) else None
        if facts is None or record.get("kind") not in ("ask", "vote", "decision"):
            report.fail(f"{name}: malformed")
            continue
        if not key.holds(b.attestation_message(workspace, record), record.get("attestation")):
            report.fail(
                f"{name}: its attestation does not hold (the seal, facts or verdict were changed or swapped)"
            )
        elif record.get("verdict") != b.VALID:
            report.fail(f"{name}: the service found it does not check: {record.get('verdict')}")
        elif record["kind"] != "vote" and facts.get("workspace") != workspace:
            report.fail(f"{name}: sealed for workspace {facts.get('workspace')!r}")
        elif (version := facts.get("policy_version")) is not None and int(version) not in versions:
            report.fail(f"{name}: names policy version {version}, which the bundle does not hold")
        else:
            good += 1
    report.proven.append(
        f"{good} decision seal(s) were checked by the service with its seal key at export and found "
        "its own seal of the facts listed (each attested by the signing key)"
    )
    report.limits.append(
        "decision seals are HMACs under the service's keyring: this verifier checks the service's "
        "signed attestation of each, not the MAC itself"
    )
